package qp

// Table tests of the engine's internal tables: the state predicates, the
// opcode-by-position choice and the responder error table.

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/bth"
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
				assert.Equal(t, oldRequestOpcode(op, first, last), requestOpcode(op, pos), "%v at %v", op, pos)
			}
			assert.Equal(t, oldReadResponseOpcode(first, last), readResponseOpcode(pos), "READ response at %v", pos)
		}
	}
	// Every SEND/WRITE request and READ response opcode of RC is the
	// derivation of its own position, and no other opcode is produced.
	produced := map[bth.Opcode]bool{}
	for pos := bth.PositionFirst; pos <= bth.PositionOnly; pos++ {
		for _, op := range []WROpcode{WRSend, WRSendWithImm, WRRDMAWrite, WRRDMAWriteWithImm} {
			produced[requestOpcode(op, pos)] = true
		}
		produced[readResponseOpcode(pos)] = true
	}
	for _, op := range bth.Opcodes() {
		m := op.Mask()
		want := op.Transport() == bth.TransportRC && m&bth.MaskIETH == 0 &&
			(m&(bth.MaskSend|bth.MaskWrite) != 0 || m&bth.MaskRead != 0 && m&bth.MaskResponse != 0)
		assert.Equal(t, want, produced[op], "%v", op)
	}
}
