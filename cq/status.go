package cq

import "strconv"

//go:generate stringer -type=Status,Opcode -linecomment -output=enum_string.go

// Status is the outcome of a work request. Names and numbers are those of
// enum ibv_wc_status in rdma-core's libibverbs/verbs.h, so a Status converts
// to and from the C value unchanged. String returns the ibv name (for example
// "IBV_WC_REM_ACCESS_ERR"), which is what logs and test tables quote
// (doc/matrix.md drops the IBV_WC_ prefix); Description returns
// ibv_wc_status_str's text.
type Status uint8

const (
	// StatusSuccess reports that the operation completed successfully.
	StatusSuccess Status = iota // IBV_WC_SUCCESS
	// StatusLocLenErr reports a local length error, for example a received
	// message larger than the receive buffer.
	StatusLocLenErr // IBV_WC_LOC_LEN_ERR
	// StatusLocQPOpErr reports an internal QP consistency error, for example a
	// malformed work request.
	StatusLocQPOpErr // IBV_WC_LOC_QP_OP_ERR
	// StatusLocEECOpErr reports a local EE context operation error (RD only).
	StatusLocEECOpErr // IBV_WC_LOC_EEC_OP_ERR
	// StatusLocProtErr reports a local protection error: a scatter/gather
	// entry's lkey or range is not valid for the operation.
	StatusLocProtErr // IBV_WC_LOC_PROT_ERR
	// StatusWRFlushErr reports that the work request was flushed because the QP
	// entered the Error state.
	StatusWRFlushErr // IBV_WC_WR_FLUSH_ERR
	// StatusMWBindErr reports that a memory window bind failed.
	StatusMWBindErr // IBV_WC_MW_BIND_ERR
	// StatusBadRespErr reports that an unexpected transport opcode arrived at
	// the requester.
	StatusBadRespErr // IBV_WC_BAD_RESP_ERR
	// StatusLocAccessErr reports a local access error while writing response
	// data, for example READ data into a buffer without LocalWrite.
	StatusLocAccessErr // IBV_WC_LOC_ACCESS_ERR
	// StatusRemInvReqErr reports that the responder found the request invalid
	// (NAK Invalid Request).
	StatusRemInvReqErr // IBV_WC_REM_INV_REQ_ERR
	// StatusRemAccessErr reports that the responder refused a remote access:
	// bad rkey, PD, rights or range (NAK Remote Access Error).
	StatusRemAccessErr // IBV_WC_REM_ACCESS_ERR
	// StatusRemOpErr reports that the responder could not complete the
	// operation (NAK Remote Operational Error).
	StatusRemOpErr // IBV_WC_REM_OP_ERR
	// StatusRetryExcErr reports that the transport retry counter was exhausted.
	StatusRetryExcErr // IBV_WC_RETRY_EXC_ERR
	// StatusRNRRetryExcErr reports that the RNR NAK retry counter was
	// exhausted.
	StatusRNRRetryExcErr // IBV_WC_RNR_RETRY_EXC_ERR
	// StatusLocRDDViolErr reports a local RDD violation (RD only).
	StatusLocRDDViolErr // IBV_WC_LOC_RDD_VIOL_ERR
	// StatusRemInvRDReqErr reports that the remote side received an invalid RD
	// request.
	StatusRemInvRDReqErr // IBV_WC_REM_INV_RD_REQ_ERR
	// StatusRemAbortErr reports that the remote side aborted the operation.
	StatusRemAbortErr // IBV_WC_REM_ABORT_ERR
	// StatusInvEECNErr reports an invalid EE context number (RD only).
	StatusInvEECNErr // IBV_WC_INV_EECN_ERR
	// StatusInvEECStateErr reports an invalid EE context state (RD only).
	StatusInvEECStateErr // IBV_WC_INV_EEC_STATE_ERR
	// StatusFatalErr reports a fatal device error.
	StatusFatalErr // IBV_WC_FATAL_ERR
	// StatusRespTimeoutErr reports that a response timed out.
	StatusRespTimeoutErr // IBV_WC_RESP_TIMEOUT_ERR
	// StatusGeneralErr reports any other error.
	StatusGeneralErr // IBV_WC_GENERAL_ERR
)

// Description returns the text ibv_wc_status_str (rdma-core
// libibverbs/enum_strs.c) gives for s, for example "remote access error", or
// "unknown" for a value outside the enum.
func (s Status) Description() string {
	switch s {
	case StatusSuccess:
		return "success"
	case StatusLocLenErr:
		return "local length error"
	case StatusLocQPOpErr:
		return "local QP operation error"
	case StatusLocEECOpErr:
		return "local EE context operation error"
	case StatusLocProtErr:
		return "local protection error"
	case StatusWRFlushErr:
		return "Work Request Flushed Error"
	case StatusMWBindErr:
		return "memory management operation error"
	case StatusBadRespErr:
		return "bad response error"
	case StatusLocAccessErr:
		return "local access error"
	case StatusRemInvReqErr:
		return "remote invalid request error"
	case StatusRemAccessErr:
		return "remote access error"
	case StatusRemOpErr:
		return "remote operation error"
	case StatusRetryExcErr:
		return "transport retry counter exceeded"
	case StatusRNRRetryExcErr:
		return "RNR retry counter exceeded"
	case StatusLocRDDViolErr:
		return "local RDD violation error"
	case StatusRemInvRDReqErr:
		return "remote invalid RD request"
	case StatusRemAbortErr:
		return "aborted error"
	case StatusInvEECNErr:
		return "invalid EE context number"
	case StatusInvEECStateErr:
		return "invalid EE context state"
	case StatusFatalErr:
		return "fatal error"
	case StatusRespTimeoutErr:
		return "response timeout error"
	case StatusGeneralErr:
		return "general error"
	}
	return "unknown"
}

var _ error = StatusRemAccessErr

// Error returns the ibv name of s, as String does (so fmt prints a Status
// the same either way). Status implements error so that a Status is an
// errors.Is target that matches any error carrying the same status, without
// allocating:
//
//	errors.Is(err, cq.StatusRemAccessErr)
//
// StatusSuccess is an error value too but means no failure; use Err to turn
// a status into a nil-or-error result, whose message also has the
// Description.
func (s Status) Error() string { return s.String() }

// Is reports whether target is a *StatusError holding s, so that a bare
// Status and the error Err makes from it match each other.
func (s Status) Is(target error) bool {
	t, ok := target.(*StatusError)
	return ok && t != nil && t.Status == s
}

// Err returns nil for StatusSuccess and otherwise a *StatusError holding s.
// The result works as an errors.Is target for any error carrying the same
// status, as s itself does:
//
//	errors.Is(err, cq.StatusRemAccessErr.Err())
//
// Err allocates; it is meant for callers turning completions into errors,
// not for the data path.
func (s Status) Err() error {
	if s == StatusSuccess {
		return nil
	}
	return &StatusError{Status: s}
}

// StatusError is an unsuccessful completion as a Go error. Only Status takes
// part in errors.Is; the other fields are context, filled in by
// Completion.Err.
type StatusError struct {
	// Status is the completion status; never StatusSuccess.
	Status Status
	// WRID is the failed work request's identifier, if known.
	WRID uint64
	// QPN is the number of the QP the work request belonged to, if known.
	QPN uint32
	// VendorErr is Completion.VendorErr.
	VendorErr uint32
}

var _ error = (*StatusError)(nil)

// Error describes the failure, for example "cq: remote access error
// (IBV_WC_REM_ACCESS_ERR) wr_id 0x7 qpn 0x11".
func (e *StatusError) Error() string {
	b := make([]byte, 0, 96)
	b = append(b, "cq: "...)
	b = append(b, e.Status.Description()...)
	b = append(b, " ("...)
	b = append(b, e.Status.String()...)
	b = append(b, ')')
	if e.WRID != 0 || e.QPN != 0 {
		b = append(b, " wr_id 0x"...)
		b = strconv.AppendUint(b, e.WRID, 16)
		b = append(b, " qpn 0x"...)
		b = strconv.AppendUint(b, uint64(e.QPN), 16)
	}
	if e.VendorErr != 0 {
		b = append(b, " vendor_err 0x"...)
		b = strconv.AppendUint(b, uint64(e.VendorErr), 16)
	}
	return string(b)
}

// Is reports whether target is a Status or a *StatusError with the same
// Status, so that errors.Is(err, cq.StatusWRFlushErr) matches a flush error
// from any work request. It does not allocate.
func (e *StatusError) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return t == e.Status
	case *StatusError:
		return t != nil && t.Status == e.Status
	}
	return false
}
