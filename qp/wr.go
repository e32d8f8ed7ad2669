package qp

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/goroce/goroce/internal/errs"
	"github.com/goroce/goroce/mr"
)

// Errors of the verbs. They are sentinels checked with errors.Is; the
// messages wrapping them say which limit or state was hit. ErrInvalidAttr
// and ErrInvalidConfig also match ErrInvalidArg.
var (
	// ErrInvalidArg is goroce's one invalid-argument sentinel, the value
	// roce, mr and cq export too.
	ErrInvalidArg        = errs.ErrInvalidArg
	ErrInvalidTransition = errors.New("qp: invalid state transition")
	ErrInvalidAttr       = errs.Narrow("qp: invalid attribute", errs.ErrInvalidArg)
	ErrInvalidState      = errors.New("qp: operation not allowed in this state")
	ErrQueueFull         = errors.New("qp: work queue full")
	ErrTooManySGE        = errors.New("qp: too many scatter/gather elements")
	ErrInlineTooLong     = errors.New("qp: inline data too long")
	ErrUnsupportedOp     = errors.New("qp: unsupported work request opcode")
	ErrInvalidConfig     = errs.Narrow("qp: invalid configuration", errs.ErrInvalidArg)
	ErrMessageTooLong    = errors.New("qp: message longer than 2^31 bytes")
)

// WROpcode is a send work request opcode, numbered like ibv_wr_opcode.
type WROpcode uint8

// Send work request opcodes.
const (
	WRRDMAWrite        WROpcode = 0 // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm WROpcode = 1 // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend             WROpcode = 2 // IBV_WR_SEND
	WRSendWithImm      WROpcode = 3 // IBV_WR_SEND_WITH_IMM
	WRRDMARead         WROpcode = 4 // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp  WROpcode = 5 // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAdd   WROpcode = 6 // IBV_WR_ATOMIC_FETCH_AND_ADD
)

var wrNames = [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM",
	"RDMA_READ", "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD"}

// String returns the ibv name of the opcode without its prefix.
func (o WROpcode) String() string {
	if int(o) < len(wrNames) {
		return wrNames[o]
	}
	return fmt.Sprintf("WROpcode(%d)", uint8(o))
}

func (o WROpcode) isReadOrAtomic() bool {
	return o == WRRDMARead || o == WRAtomicCmpAndSwp || o == WRAtomicFetchAdd
}

func (o WROpcode) isAtomic() bool { return o == WRAtomicCmpAndSwp || o == WRAtomicFetchAdd }

func (o WROpcode) isSend() bool { return o == WRSend || o == WRSendWithImm }

func (o WROpcode) hasImm() bool { return o == WRSendWithImm || o == WRRDMAWriteWithImm }

// SendFlags are the flags of a send work request (ibv_send_flags values).
type SendFlags uint8

// Send flags.
const (
	SendFence     SendFlags = 1 << 0 // IBV_SEND_FENCE
	SendSignaled  SendFlags = 1 << 1 // IBV_SEND_SIGNALED: complete with a CQE on success
	SendSolicited SendFlags = 1 << 2 // IBV_SEND_SOLICITED: set the BTH SE bit
	SendInline    SendFlags = 1 << 3 // IBV_SEND_INLINE: data copied at post time
)

// SGE is a scatter/gather element: Length bytes at Addr within the memory
// region whose local key is LKey (ibv_sge). It is mr.SGE, so that
// (*mr.Region).SGE builds one.
type SGE = mr.SGE

// SendWR is a send work request (ibv_send_wr). PostSend copies it; the
// caller may reuse it and its SGL at once.
type SendWR struct {
	WRID       uint64
	Opcode     WROpcode
	Flags      SendFlags
	SGL        []SGE
	Imm        uint32 // immediate data in wire (big-endian) order
	RemoteAddr uint64 // RDMA and atomics
	RKey       mr.Key // RDMA and atomics
	CompareAdd uint64 // CMP_AND_SWP: compare value; FETCH_AND_ADD: addend
	Swap       uint64 // CMP_AND_SWP: swap value
}

// RecvWR is a receive work request (ibv_recv_wr). PostRecv copies it.
type RecvWR struct {
	WRID uint64
	SGL  []SGE
}

// Counters are a QP's packet and error counters, with the names of rxe's
// hw_counters (rxe_hw_counters.c) plus four of this project. They are
// updated by the QP's owner goroutine and may be read from any goroutine.
type Counters struct {
	SentPkts            atomic.Uint64 // sent_pkts
	RcvdPkts            atomic.Uint64 // rcvd_pkts
	DuplicateRequest    atomic.Uint64 // duplicate_request
	OutOfSeqRequest     atomic.Uint64 // out_of_seq_request
	RcvdRNRErr          atomic.Uint64 // rcvd_rnr_err: RNR NAKs received
	SendRNRErr          atomic.Uint64 // send_rnr_err: RNR NAKs sent
	RcvdSeqErr          atomic.Uint64 // rcvd_seq_err: NAK PSN sequence errors received
	AckDeferred         atomic.Uint64 // ack_deferred: ACKs coalesced into a later one
	RetryExceededErr    atomic.Uint64 // retry_exceeded_err
	RetryRNRExceededErr atomic.Uint64 // retry_rnr_exceeded_err
	CompleterRetryErr   atomic.Uint64 // completer_retry_err: Go-Back-N retries started
	BadICRC             atomic.Uint64 // bad_icrc (counted by the device)
	BadHdr              atomic.Uint64 // bad_hdr: intake checks failed
	DroppedNoQP         atomic.Uint64 // dropped_no_qp (counted by the device)
	RkeyViolation       atomic.Uint64 // rkey_violation: NAK remote access error sent

	// Counters of this project beyond rxe's.
	RetransmittedPkts atomic.Uint64 // requester packets sent again by Go-Back-N
	ReadReplays       atomic.Uint64 // duplicate READs answered from a responder resource
	ReplayedPkts      atomic.Uint64 // READ response packets sent again for those
	AtomicReplays     atomic.Uint64 // duplicate atomics answered from the saved value
	DroppedResponses  atomic.Uint64 // responses that matched no outstanding request
	OutputOverflow    atomic.Uint64 // responder replies dropped because the queue was full
}

// Snapshot is a plain copy of Counters, for printing and comparison.
type Snapshot struct {
	SentPkts, RcvdPkts, DuplicateRequest, OutOfSeqRequest, RcvdRNRErr, SendRNRErr,
	RcvdSeqErr, AckDeferred, RetryExceededErr, RetryRNRExceededErr, CompleterRetryErr,
	BadICRC, BadHdr, DroppedNoQP, RkeyViolation, RetransmittedPkts, ReadReplays,
	ReplayedPkts, AtomicReplays, DroppedResponses, OutputOverflow uint64
}

// Snapshot copies the counters.
func (c *Counters) Snapshot() Snapshot {
	return Snapshot{
		SentPkts: c.SentPkts.Load(), RcvdPkts: c.RcvdPkts.Load(),
		DuplicateRequest: c.DuplicateRequest.Load(), OutOfSeqRequest: c.OutOfSeqRequest.Load(),
		RcvdRNRErr: c.RcvdRNRErr.Load(), SendRNRErr: c.SendRNRErr.Load(),
		RcvdSeqErr: c.RcvdSeqErr.Load(), AckDeferred: c.AckDeferred.Load(),
		RetryExceededErr: c.RetryExceededErr.Load(), RetryRNRExceededErr: c.RetryRNRExceededErr.Load(),
		CompleterRetryErr: c.CompleterRetryErr.Load(), BadICRC: c.BadICRC.Load(),
		BadHdr: c.BadHdr.Load(), DroppedNoQP: c.DroppedNoQP.Load(),
		RkeyViolation: c.RkeyViolation.Load(), RetransmittedPkts: c.RetransmittedPkts.Load(),
		ReadReplays: c.ReadReplays.Load(), ReplayedPkts: c.ReplayedPkts.Load(), AtomicReplays: c.AtomicReplays.Load(),
		DroppedResponses: c.DroppedResponses.Load(), OutputOverflow: c.OutputOverflow.Load(),
	}
}
