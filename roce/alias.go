package roce

import (
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// The names a verbs program touches, so that it imports roce alone (as
// quic-go re-exports its internals). They are aliases and re-declared
// constants of the packages that define them (qp, mr, cq): a roce.SendWR
// is a qp.SendWR, and values pass between the two without conversion.

// SendWR is a send work request (ibv_send_wr), qp.SendWR.
type SendWR = qp.SendWR

// RecvWR is a receive work request (ibv_recv_wr), qp.RecvWR.
type RecvWR = qp.RecvWR

// SGE is a scatter/gather element (ibv_sge), mr.SGE; MR.SGE builds one.
type SGE = mr.SGE

// WROpcode is a send work request opcode (ibv_wr_opcode), qp.WROpcode.
type WROpcode = qp.WROpcode

// Send work request opcodes.
const (
	WRRDMAWrite        = qp.WRRDMAWrite        // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm = qp.WRRDMAWriteWithImm // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend             = qp.WRSend             // IBV_WR_SEND
	WRSendWithImm      = qp.WRSendWithImm      // IBV_WR_SEND_WITH_IMM
	WRRDMARead         = qp.WRRDMARead         // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp  = qp.WRAtomicCmpAndSwp  // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAdd   = qp.WRAtomicFetchAdd   // IBV_WR_ATOMIC_FETCH_AND_ADD
)

// SendFlags are the flags of a send work request (ibv_send_flags),
// qp.SendFlags.
type SendFlags = qp.SendFlags

// Send flags.
const (
	SendFence     = qp.SendFence     // IBV_SEND_FENCE
	SendSignaled  = qp.SendSignaled  // IBV_SEND_SIGNALED: complete with a CQE on success
	SendSolicited = qp.SendSolicited // IBV_SEND_SOLICITED: set the BTH SE bit
	SendInline    = qp.SendInline    // IBV_SEND_INLINE: data copied at post time
)

// MTU is a path MTU (ibv_mtu), qp.MTU.
type MTU = qp.MTU

// Path MTUs (IBA 9.6.1.2).
const (
	MTU256  = qp.MTU256
	MTU512  = qp.MTU512
	MTU1024 = qp.MTU1024
	MTU2048 = qp.MTU2048
	MTU4096 = qp.MTU4096
)

// MR is a registered memory region, mr.Region.
type MR = mr.Region

// PD is a protection domain, mr.PD.
type PD = mr.PD

// Key is a memory key (an lkey or rkey), mr.Key.
type Key = mr.Key

// AccessFlags is a set of access rights on a memory region
// (ibv_access_flags), mr.AccessFlags.
type AccessFlags = mr.AccessFlags

// Access rights.
const (
	LocalWrite   = mr.LocalWrite   // IBV_ACCESS_LOCAL_WRITE
	RemoteWrite  = mr.RemoteWrite  // IBV_ACCESS_REMOTE_WRITE
	RemoteRead   = mr.RemoteRead   // IBV_ACCESS_REMOTE_READ
	RemoteAtomic = mr.RemoteAtomic // IBV_ACCESS_REMOTE_ATOMIC
)

// CQ is a completion queue, cq.CQ.
type CQ = cq.CQ

// Completion is a work completion (ibv_wc), cq.Completion.
type Completion = cq.Completion

// WCOpcode is the kind of work a completion reports (ibv_wc_opcode),
// cq.Opcode.
type WCOpcode = cq.Opcode

// Completion opcodes.
const (
	WCSend            = cq.OpSend            // IBV_WC_SEND
	WCRDMAWrite       = cq.OpRDMAWrite       // IBV_WC_RDMA_WRITE
	WCRDMARead        = cq.OpRDMARead        // IBV_WC_RDMA_READ
	WCCompSwap        = cq.OpCompSwap        // IBV_WC_COMP_SWAP
	WCFetchAdd        = cq.OpFetchAdd        // IBV_WC_FETCH_ADD
	WCRecv            = cq.OpRecv            // IBV_WC_RECV
	WCRecvRDMAWithImm = cq.OpRecvRDMAWithImm // IBV_WC_RECV_RDMA_WITH_IMM
)

// WCFlags are the flags of a completion (ibv_wc_flags), cq.Flags.
type WCFlags = cq.Flags

// Completion flags.
const (
	WCWithImm = cq.FlagWithImm // IBV_WC_WITH_IMM: Completion.Imm holds immediate data
	WCWithInv = cq.FlagWithInv // IBV_WC_WITH_INV: Completion.InvalidatedRKey is set
)

// Status is the outcome of a work request (ibv_wc_status), cq.Status. A
// Status is an errors.Is target: errors.Is(wc.Err(), roce.StatusRemAccessErr).
type Status = cq.Status

// Completion statuses.
const (
	// StatusSuccess reports that the operation completed successfully.
	StatusSuccess = cq.StatusSuccess
	// StatusLocLenErr reports a local length error, for example a received
	// message larger than the receive buffer.
	StatusLocLenErr = cq.StatusLocLenErr
	// StatusLocQPOpErr reports an internal QP consistency error, for example a
	// malformed work request.
	StatusLocQPOpErr = cq.StatusLocQPOpErr
	// StatusLocEECOpErr reports a local EE context operation error (RD only).
	StatusLocEECOpErr = cq.StatusLocEECOpErr
	// StatusLocProtErr reports a local protection error: a scatter/gather
	// entry's lkey or range is not valid for the operation.
	StatusLocProtErr = cq.StatusLocProtErr
	// StatusWRFlushErr reports that the work request was flushed because the QP
	// entered the Error state.
	StatusWRFlushErr = cq.StatusWRFlushErr
	// StatusMWBindErr reports that a memory window bind failed.
	StatusMWBindErr = cq.StatusMWBindErr
	// StatusBadRespErr reports that an unexpected transport opcode arrived at
	// the requester.
	StatusBadRespErr = cq.StatusBadRespErr
	// StatusLocAccessErr reports a local access error while writing response
	// data, for example READ data into a buffer without LocalWrite.
	StatusLocAccessErr = cq.StatusLocAccessErr
	// StatusRemInvReqErr reports that the responder found the request invalid
	// (NAK Invalid Request).
	StatusRemInvReqErr = cq.StatusRemInvReqErr
	// StatusRemAccessErr reports that the responder refused a remote access:
	// bad rkey, PD, rights or range (NAK Remote Access Error).
	StatusRemAccessErr = cq.StatusRemAccessErr
	// StatusRemOpErr reports that the responder could not complete the
	// operation (NAK Remote Operational Error).
	StatusRemOpErr = cq.StatusRemOpErr
	// StatusRetryExcErr reports that the transport retry counter was exhausted.
	StatusRetryExcErr = cq.StatusRetryExcErr
	// StatusRNRRetryExcErr reports that the RNR NAK retry counter was
	// exhausted.
	StatusRNRRetryExcErr = cq.StatusRNRRetryExcErr
	// StatusLocRDDViolErr reports a local RDD violation (RD only).
	StatusLocRDDViolErr = cq.StatusLocRDDViolErr
	// StatusRemInvRDReqErr reports that the remote side received an invalid RD
	// request.
	StatusRemInvRDReqErr = cq.StatusRemInvRDReqErr
	// StatusRemAbortErr reports that the remote side aborted the operation.
	StatusRemAbortErr = cq.StatusRemAbortErr
	// StatusInvEECNErr reports an invalid EE context number (RD only).
	StatusInvEECNErr = cq.StatusInvEECNErr
	// StatusInvEECStateErr reports an invalid EE context state (RD only).
	StatusInvEECStateErr = cq.StatusInvEECStateErr
	// StatusFatalErr reports a fatal device error.
	StatusFatalErr = cq.StatusFatalErr
	// StatusRespTimeoutErr reports that a response timed out.
	StatusRespTimeoutErr = cq.StatusRespTimeoutErr
	// StatusGeneralErr reports any other error.
	StatusGeneralErr = cq.StatusGeneralErr
)

// NoRemoteAccess is a ConnectOptions.Access that grants the peer no remote
// operation (WRITE, READ or atomic): a QP that only sends, or only receives
// SENDs. It is LocalWrite, which a QP's access flags ignore (they enable
// only remote operations, as ibv_modify_qp's qp_access_flags), because the
// zero Access grants all.
const NoRemoteAccess = LocalWrite

// SRQAttr are the attributes of a shared receive queue (ibv_srq_attr),
// qp.SRQAttr.
type SRQAttr = qp.SRQAttr

// EventType is the type of an asynchronous event (ibv_event_type),
// qp.EventType.
type EventType = qp.EventType

// Asynchronous event types.
const (
	// EventSRQLimitReached is IBV_EVENT_SRQ_LIMIT_REACHED: an SRQ's WQE
	// count fell below its armed limit; the limit is now disarmed.
	EventSRQLimitReached = qp.EventSRQLimitReached
	// EventQPLastWQEReached is IBV_EVENT_QP_LAST_WQE_REACHED: a QP with an
	// SRQ entered ERR (Modify, an error, Destroy) and takes no more WQEs
	// from the SRQ; the one it held is flushed.
	EventQPLastWQEReached = qp.EventQPLastWQEReached
)

// ErrBusy is returned by SRQ.Destroy while QPs use the SRQ (EBUSY),
// qp.ErrBusy.
var ErrBusy = qp.ErrBusy
