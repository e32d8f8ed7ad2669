package qp

// Table tests of the engine's internal tables: the state predicates, the
// opcode-by-position choice and the responder error table.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
)

func TestStatePredicates(t *testing.T) {
	tests := []struct {
		s                                         State
		sends, receives, takesSendWR, takesRecvWR bool
	}{
		{StateReset, false, false, false, false},
		{StateInit, false, false, false, true},
		{StateRTR, false, true, false, true},
		{StateRTS, true, true, true, true},
		{StateSQD, true, true, true, true},
		{StateSQE, false, false, false, true},
		{StateErr, false, false, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.s.String(), func(t *testing.T) {
			assert.Equal(t, tc.sends, tc.s.sends(), "sends")
			assert.Equal(t, tc.receives, tc.s.receives(), "receives")
			assert.Equal(t, tc.takesSendWR, tc.s.takesSendWR(), "takesSendWR")
			assert.Equal(t, tc.takesRecvWR, tc.s.takesRecvWR(), "takesRecvWR")
		})
	}
}

// oldRequestOpcode is the hand-written switch requestOpcode replaced.
func oldRequestOpcode(op WROpcode, first, last bool) bth.Opcode {
	switch op {
	case WRSend, WRSendWithImm:
		switch {
		case first && last:
			if op == WRSendWithImm {
				return bth.RCSendOnlyWithImmediate
			}
			return bth.RCSendOnly
		case first:
			return bth.RCSendFirst
		case last:
			if op == WRSendWithImm {
				return bth.RCSendLastWithImmediate
			}
			return bth.RCSendLast
		}
		return bth.RCSendMiddle
	default:
		switch {
		case first && last:
			if op == WRRDMAWriteWithImm {
				return bth.RCRDMAWriteOnlyWithImmediate
			}
			return bth.RCRDMAWriteOnly
		case first:
			return bth.RCRDMAWriteFirst
		case last:
			if op == WRRDMAWriteWithImm {
				return bth.RCRDMAWriteLastWithImmediate
			}
			return bth.RCRDMAWriteLast
		}
		return bth.RCRDMAWriteMiddle
	}
}

// oldReadResponseOpcode is the hand-written switch that the responder's
// read_reply and the completer's READ response check each carried.
func oldReadResponseOpcode(first, last bool) bth.Opcode {
	switch {
	case first && last:
		return bth.RCRDMAReadResponseOnly
	case first:
		return bth.RCRDMAReadResponseFirst
	case last:
		return bth.RCRDMAReadResponseLast
	}
	return bth.RCRDMAReadResponseMiddle
}

func TestOpcodeByPositionMatchesOldSwitches(t *testing.T) {
	for _, first := range []bool{false, true} {
		for _, last := range []bool{false, true} {
			pos := bth.PositionOf(first, last)
			for _, op := range []WROpcode{WRSend, WRSendWithImm, WRRDMAWrite, WRRDMAWriteWithImm} {
				assert.Equal(t, oldRequestOpcode(op, first, last), requestOpcode(TypeRC, op, pos), "%v at %v", op, pos)
			}
			assert.Equal(t, oldReadResponseOpcode(first, last), readResponseOpcode(pos), "READ response at %v", pos)
		}
	}
	// Every SEND/WRITE request and READ response opcode of RC is the
	// derivation of its own position, and no other opcode is produced.
	produced := map[bth.Opcode]bool{}
	for pos := bth.PositionFirst; pos <= bth.PositionOnly; pos++ {
		for _, op := range []WROpcode{WRSend, WRSendWithImm, WRSendWithInv, WRRDMAWrite, WRRDMAWriteWithImm} {
			produced[requestOpcode(TypeRC, op, pos)] = true
		}
		produced[readResponseOpcode(pos)] = true
	}
	for _, op := range bth.Opcodes() {
		m := op.Mask()
		want := op.Transport() == bth.TransportRC &&
			(m&(bth.MaskSend|bth.MaskWrite) != 0 || m&bth.MaskRead != 0 && m&bth.MaskResponse != 0)
		assert.Equal(t, want, produced[op], "%v", op)
	}
}

// TestReasonTable pins every row of the responder error table: the NAK the
// responder sends, the status of the receive WQE it ends, the status the
// requester reports on the NAK, the counter and VendorErr.
func TestReasonTable(t *testing.T) {
	tests := []struct {
		r          Reason
		name       string
		syn        aeth.Syndrome
		recvStatus cq.Status
		reqStatus  cq.Status // nakStatus(syn) at the requester; 0 for class B
		counter    Counter
		fatal      bool
	}{
		{ReasonPSNSequence, "PSNSequence", aeth.NAKPSNSequenceError, cq.StatusSuccess, 0, CounterOutOfSeqRequest, false},
		{ReasonRNR, "RNR", aeth.RNR(0), cq.StatusSuccess, 0, CounterSendRNRErr, false},
		{ReasonOpSequence, "OpSequence", aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, cq.StatusRemInvReqErr, CounterRespOpSeqErr, true},
		{ReasonOpNotEnabled, "OpNotEnabled", aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, cq.StatusRemInvReqErr, CounterRespOpNotEnabledErr, true},
		{ReasonUnsupportedOpcode, "UnsupportedOpcode", aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, cq.StatusRemInvReqErr, CounterRespUnsupportedOpcodeErr, true},
		{ReasonNoResources, "NoResources", aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, cq.StatusRemInvReqErr, CounterRespNoResourcesErr, true},
		{ReasonLength, "Length", aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, cq.StatusRemInvReqErr, CounterRespLengthErr, true},
		{ReasonRecvLength, "RecvLength", aeth.NAKInvalidRequest, cq.StatusLocLenErr, cq.StatusRemInvReqErr, CounterRespRecvLengthErr, true},
		{ReasonRecvSGE, "RecvSGE", aeth.NAKRemoteOperationalError, cq.StatusLocQPOpErr, cq.StatusRemOpErr, CounterRespRecvSGEErr, true},
		{ReasonMisalignedAtomic, "MisalignedAtomic", aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, cq.StatusRemInvReqErr, CounterRespMisalignedAtomicErr, true},
		{ReasonRKeyViolation, "RKeyViolation", aeth.NAKRemoteAccessError, cq.StatusRemAccessErr, cq.StatusRemAccessErr, CounterRkeyViolation, true},
		// rxe's class J: the request is ACKed, the requester succeeds.
		{ReasonInvalidateRKey, "InvalidateRKey", aeth.ACKUnlimited, cq.StatusRemInvReqErr, cq.StatusSuccess, CounterRespInvalidateErr, true},
	}
	require.Len(t, tests, numReasons-1, "a reason without a row here")
	counters := map[Counter]Reason{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			assert.Equal(t, tc.name, r.String())
			assert.Equal(t, tc.syn, r.Syndrome())
			assert.Equal(t, tc.recvStatus, r.Status())
			assert.Equal(t, tc.counter, r.Counter())
			assert.Equal(t, tc.fatal, r.Fatal())
			assert.Equal(t, uint32(r), r.VendorErr())
			assert.NotZero(t, r.VendorErr(), "VendorErr 0 means no reason")
			if tc.fatal && r != ReasonInvalidateRKey {
				assert.True(t, r.Syndrome().IsNAK())
				assert.Equal(t, tc.reqStatus, nakStatus(r.Syndrome()), "requester status")
				assert.NotEqual(t, cq.StatusSuccess, r.Status())
			}
			// Counters tell the reasons apart.
			if prev, dup := counters[r.Counter()]; dup {
				t.Errorf("%v and %v share counter %v", prev, r, r.Counter())
			}
			counters[r.Counter()] = r
		})
	}
	// Out-of-range reasons read as the zero row.
	for _, r := range []Reason{0, Reason(numReasons), 255} {
		assert.Zero(t, r.info(), "%v", r)
	}
}
