package cq

// Completion is one work completion, the Go form of struct ibv_wc. It holds
// no pointers, so a queue of them costs the garbage collector nothing.
//
// When Status is not StatusSuccess only WRID, Status, QPN and VendorErr are
// meaningful, as for ibv_wc.
type Completion struct {
	// WRID is the work request's caller-chosen identifier.
	WRID uint64
	// Status is the outcome.
	Status Status
	// Opcode is the kind of work completed.
	Opcode Opcode
	// ByteLen is the number of bytes transferred: received for OpRecv and
	// OpRecvRDMAWithImm, read for OpRDMARead, 8 for the atomics.
	ByteLen uint32
	// QPN is the number of the local QP the work request belonged to.
	QPN uint32
	// SrcQP is the remote QP number of a UD receive.
	SrcQP uint32
	// Imm is the immediate data, valid when Flags has FlagWithImm: the
	// number the sender put in SendWR.Imm, read from the wire most
	// significant byte first (ImmDt, IBA 9.3.6), so bytes 01 02 03 04 give
	// 0x01020304. (It is ntohl of a C program's ibv_wc.imm_data.)
	Imm uint32
	// InvalidatedRKey is the rkey invalidated by a received SEND with
	// invalidate, valid when Flags has FlagWithInv. (ibv_wc keeps it in a
	// union with imm_data.)
	InvalidatedRKey uint32
	// Flags qualifies the completion.
	Flags Flags
	// VendorErr is an implementation-specific error code (ibv_wc.vendor_err).
	// goroce sets it on a receive completion that a responder error ended
	// (LOC_LEN_ERR, LOC_QP_OP_ERR, REM_*_ERR at the responder): the value is
	// a qp.Reason, stable across releases, and qp.Reason(VendorErr).String()
	// names it ("RecvLength", "RKeyViolation", …). It is zero everywhere
	// else: on success, on WR_FLUSH_ERR, and on the requester's completions,
	// whose NAK carries only a syndrome.
	VendorErr uint32
}

// Err returns nil for a successful completion and otherwise a *StatusError
// carrying Status, WRID, QPN and VendorErr, which matches
// c.Status.Err() under errors.Is. Err allocates only on failure.
func (c *Completion) Err() error {
	if c.Status == StatusSuccess {
		return nil
	}
	return &StatusError{Status: c.Status, WRID: c.WRID, QPN: c.QPN, VendorErr: c.VendorErr}
}
