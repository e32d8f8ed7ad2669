package qp

import (
	"errors"
	"fmt"

	"github.com/goroce/goroce/bth"
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
	// ErrMessageOverMTU refuses a UD send longer than the MTU: a datagram
	// is one packet (IBA 11.4, Post Send; ibv_post_send returns EINVAL,
	// as rxe's validate_send_wr does).
	ErrMessageOverMTU = errs.Narrow("qp: UD message longer than the MTU", errs.ErrInvalidArg)
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
	// WRLocalInv invalidates the region or type 2 memory window that
	// SendWR.InvalidateRKey names (IBA 10.6.6, 10.6.7.2.4). It is a local
	// operation: no packet; it completes with cq.OpLocalInv, or
	// LOC_QP_OP_ERR and the QP in ERR if the key cannot be invalidated
	// (rxe_do_local_ops).
	WRLocalInv WROpcode = 7 // IBV_WR_LOCAL_INV
	// WRBindMW binds the memory window SendWR.BindMW names (IBA 10.6.7.2.3;
	// rxe_bind_mw). A local operation: it completes with cq.OpBindMW, or
	// MW_BIND_ERR and the QP in ERR.
	WRBindMW WROpcode = 8 // IBV_WR_BIND_MW
	// WRSendWithInv is a SEND whose last packet carries SendWR.InvalidateRKey
	// in an IETH: the responder invalidates that rkey when the message
	// completes (IBA 9.4.1.1, SEND with invalidate).
	WRSendWithInv WROpcode = 9 // IBV_WR_SEND_WITH_INV
)

var wrNames = [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM",
	"RDMA_READ", "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD", "LOCAL_INV", "BIND_MW", "SEND_WITH_INV"}

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

func (o WROpcode) isSend() bool { return o == WRSend || o == WRSendWithImm || o == WRSendWithInv }

// isLocal reports a local operation: executed by the requester when it
// reaches it, without a packet (rxe WR_LOCAL_OP_MASK).
func (o WROpcode) isLocal() bool { return o == WRLocalInv || o == WRBindMW }

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
//
// Imm is the immediate data of the *WithImm opcodes, as a number: it goes
// on the wire most significant byte first (ImmDt, IBA 9.3.6), so 0x01020304
// travels as 01 02 03 04, and the receiver's cq.Completion.Imm is the same
// number. (A C program puts htonl(Imm) in ibv_send_wr.imm_data.)
type SendWR struct {
	WRID       uint64
	Opcode     WROpcode
	Flags      SendFlags
	SGL        []SGE
	Imm        uint32 // immediate data, a number sent big-endian (see above)
	RemoteAddr uint64 // RDMA and atomics
	RKey       mr.Key // RDMA and atomics
	CompareAdd uint64 // CMP_AND_SWP: compare value; FETCH_AND_ADD: addend
	Swap       uint64 // CMP_AND_SWP: swap value
	// InvalidateRKey is the key WRLocalInv invalidates here and
	// WRSendWithInv has the peer invalidate (ibv_send_wr.invalidate_rkey).
	InvalidateRKey mr.Key
	// BindMW is the bind of WRBindMW (ibv_send_wr.bind_mw).
	BindMW BindMW
	// UD is the destination of a send on a UD QP (ibv_send_wr.wr.ud);
	// connected QPs ignore it.
	UD UDDest
}

// UDDest is the destination of a UD send (ibv_send_wr.wr.ud): the address
// handle, the remote QP and its Q_Key.
type UDDest struct {
	// AH is the address handle: where the datagram goes (ibv_ah_attr). Its
	// Remote address must be valid.
	AH AddressVector
	// RemoteQPN is the destination QP: the BTH DestQP.
	RemoteQPN bth.QPN
	// RemoteQKey is the Q_Key put in the DETH. A controlled Q_Key (the high
	// bit set, IBA 10.2.5) means the sending QP's own Q_Key instead.
	RemoteQKey uint32
}

// ControlledQKey is the high-order bit of a Q_Key. A send WR whose
// RemoteQKey has it set sends the QP's own Q_Key instead (IBA 10.2.5, the
// rule ibv_post_send documents for wr.ud.remote_qkey).
const ControlledQKey uint32 = 1 << 31

// BindMW describes the bind of a BIND_MW work request: the window and how
// to bind it (ibv_send_wr.bind_mw: mw, rkey and bind_info). BindConfig.RKey
// is the window's new rkey; only its low byte may change.
type BindMW struct {
	Window *mr.Window
	mr.BindConfig
}

// RecvWR is a receive work request (ibv_recv_wr). PostRecv copies it.
type RecvWR struct {
	WRID uint64
	SGL  []SGE
}
