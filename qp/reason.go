package qp

import (
	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/cq"
)

//go:generate stringer -type=Reason -trimprefix=Reason -output=reason_string.go

// Reason is why the responder refused a request: the error states of
// rxe_resp.c (RESPST_ERR_*), one value per cause. Each has one row in the
// responder error table, which gives the NAK syndrome sent, the status of
// the receive WQE the error ends, the counter it increments and the
// VendorErr of that completion.
//
// A Reason is also what cq.Completion.VendorErr holds on a receive
// completion that a responder error ended: Reason(wc.VendorErr) names it.
// Values start at 1, so VendorErr 0 means no reason was recorded (success,
// flushes and requester-side errors); they are stable, new reasons are
// added at the end.
type Reason uint8

// Responder error reasons.
const (
	// ReasonPSNSequence: a request ahead of the expected PSN (IBA
	// 9.7.5.1.2; rxe RESPST_ERR_PSN_OUT_OF_SEQ). One NAK per gap; the QP
	// stays in its state.
	ReasonPSNSequence Reason = iota + 1
	// ReasonRNR: a SEND or WRITE with immediate and no receive WQE (IBA
	// 9.7.5.2.8; rxe RESPST_ERR_RNR). RNR NAK; the QP stays in its state.
	ReasonRNR
	// ReasonOpSequence: a MIDDLE or LAST without a message in progress, or
	// a packet that does not continue the one in progress (IBA 9.8.3.1;
	// rxe RESPST_ERR_MISSING_OPCODE_FIRST / _LAST_C).
	ReasonOpSequence
	// ReasonOpNotEnabled: a WRITE, READ or ATOMIC the QP's access flags do
	// not allow (rxe check_op_valid answers it as an unsupported opcode;
	// it is told apart here).
	ReasonOpNotEnabled
	// ReasonUnsupportedOpcode: FLUSH or ATOMIC WRITE, which this
	// responder does not implement (rxe
	// RESPST_ERR_UNSUPPORTED_OPCODE).
	ReasonUnsupportedOpcode
	// ReasonNoResources: a READ or ATOMIC with no responder resources
	// (max_dest_rd_atomic 0; rxe RESPST_ERR_TOO_MANY_RDMA_ATM_REQ).
	ReasonNoResources
	// ReasonLength: a payload whose length does not fit its opcode's
	// position, the MTU or the RETH's DMA length (IBA 9.7.4.1.6; rxe
	// check_length and check_rkey, RESPST_ERR_LENGTH).
	ReasonLength
	// ReasonRecvLength: a SEND longer than its receive WQE (rxe
	// send_data_in, -ENOSPC). The WQE completes with LOC_LEN_ERR, as
	// hardware reports it; rxe reports REM_INV_REQ_ERR there.
	ReasonRecvLength
	// ReasonRecvSGE: the receive WQE's SGL cannot take the data (bad lkey,
	// range or access; rxe RESPST_ERR_MALFORMED_WQE).
	ReasonRecvSGE
	// ReasonMisalignedAtomic: an ATOMIC whose VA is not 8-byte aligned
	// (IBA 9.4.5; rxe RESPST_ERR_MISALIGNED_ATOMIC).
	ReasonMisalignedAtomic
	// ReasonRKeyViolation: the rkey, range or access check of a WRITE,
	// READ or ATOMIC failed, or its MR went away (rxe check_rkey,
	// RESPST_ERR_RKEY_VIOLATION).
	ReasonRKeyViolation
	// ReasonInvalidateRKey: the IETH rkey of a SEND with invalidate names
	// nothing that may be invalidated here — an unknown key, a type 1
	// window, a region not invalidatable or with windows bound, a window
	// not bound (IBA 9.4.1.1, 10.6.7.2.4; rxe invalidate_rkey,
	// RESPST_ERR_INVALIDATE_RKEY). rxe's class J: no NAK (the request is
	// ACKed as executed), the receive WQE completes with REM_INV_REQ_ERR
	// and the QP moves to ERR.
	ReasonInvalidateRKey
)

// numReasons is one past the last Reason.
const numReasons = int(ReasonInvalidateRKey) + 1

// reasonInfo is one row of the responder error table.
type reasonInfo struct {
	syn     aeth.Syndrome // NAK sent (RNR: the timer code is the QP's; class J: an ACK)
	status  cq.Status     // status of the receive WQE in use, when fatal
	counter Counter       // incremented on every occurrence
	fatal   bool          // class C/A: the QP moves to ERR (rxe do_class_ac_error)
}

// reasons is the responder error table (the mapping rxe_responder's error
// states spell out case by case). The requester that gets the NAK reports
// nakStatus(syn) on its own WQE.
var reasons = [numReasons]reasonInfo{
	ReasonPSNSequence:       {aeth.NAKPSNSequenceError, cq.StatusSuccess, CounterOutOfSeqRequest, false},
	ReasonRNR:               {aeth.RNR(0), cq.StatusSuccess, CounterSendRNRErr, false},
	ReasonOpSequence:        {aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, CounterRespOpSeqErr, true},
	ReasonOpNotEnabled:      {aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, CounterRespOpNotEnabledErr, true},
	ReasonUnsupportedOpcode: {aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, CounterRespUnsupportedOpcodeErr, true},
	ReasonNoResources:       {aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, CounterRespNoResourcesErr, true},
	ReasonLength:            {aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, CounterRespLengthErr, true},
	ReasonRecvLength:        {aeth.NAKInvalidRequest, cq.StatusLocLenErr, CounterRespRecvLengthErr, true},
	ReasonRecvSGE:           {aeth.NAKRemoteOperationalError, cq.StatusLocQPOpErr, CounterRespRecvSGEErr, true},
	ReasonMisalignedAtomic:  {aeth.NAKInvalidRequest, cq.StatusRemInvReqErr, CounterRespMisalignedAtomicErr, true},
	ReasonRKeyViolation:     {aeth.NAKRemoteAccessError, cq.StatusRemAccessErr, CounterRkeyViolation, true},
	ReasonInvalidateRKey:    {aeth.ACKUnlimited, cq.StatusRemInvReqErr, CounterRespInvalidateErr, true},
}

// info returns r's row; an invalid r (0 or out of range) gets the zero row.
func (r Reason) info() reasonInfo {
	if int(r) < numReasons {
		return reasons[r]
	}
	return reasonInfo{}
}

// Syndrome returns the NAK syndrome the responder sends for r. For
// ReasonRNR it is the RNR NAK with timer code 0; the QP sends its
// MinRNRTimer there.
func (r Reason) Syndrome() aeth.Syndrome { return r.info().syn }

// Status returns the status of the receive WQE in use when r ends it, and
// StatusSuccess for the reasons that end nothing (PSN sequence, RNR).
func (r Reason) Status() cq.Status { return r.info().status }

// Counter returns the counter r increments.
func (r Reason) Counter() Counter { return r.info().counter }

// Fatal reports whether r moves the QP to ERR (a class C/A error in rxe's
// terms; PSN sequence and RNR errors leave the state as it is).
func (r Reason) Fatal() bool { return r.info().fatal }

// VendorErr returns the cq.Completion.VendorErr of a completion that r
// ended: uint32(r).
func (r Reason) VendorErr() uint32 { return uint32(r) }
