package qp

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/mr"
)

// State is a QP state (IBA 10.3.1), numbered like ibv_qp_state.
type State uint8

// QP states.
const (
	StateReset State = iota // IBV_QPS_RESET
	StateInit               // IBV_QPS_INIT
	StateRTR                // IBV_QPS_RTR: ready to receive
	StateRTS                // IBV_QPS_RTS: ready to send
	StateSQD                // IBV_QPS_SQD: send queue drained
	StateSQE                // IBV_QPS_SQE: send queue error (UC/UD only)
	StateErr                // IBV_QPS_ERR
	numStates
)

var stateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String returns the ibv name of the state without its prefix.
func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// The predicates below name what each state allows (IBA 10.3.1, Table 91;
// rxe checks the same in rxe_requester, rxe_completer, check_type_state and
// rxe_post_send/rxe_post_recv). Every state check of the engine is one of
// them.

// sends reports whether the requester may put requests on the wire and the
// completer takes responses: RTS, and SQD, which finishes the WRs it has
// started (IBA 10.3.1.4).
func (s State) sends() bool { return s == StateRTS || s == StateSQD }

// receives reports whether the responder takes requests: from RTR on, until
// ERR (IBA 10.3.1.3).
func (s State) receives() bool { return s == StateRTR || s.sends() }

// takesSendWR reports whether PostSend accepts a WR: in RTS and SQD to
// send, in ERR to flush it (IBA 10.8.3.3); earlier states refuse it.
func (s State) takesSendWR() bool { return s.sends() || s == StateErr }

// takesRecvWR reports whether PostRecv accepts a WR: in every state but
// RESET (IBA 10.3.1.1).
func (s State) takesRecvWR() bool { return s != StateReset }

// Type is the QP transport service type, numbered like ibv_qp_type.
type Type uint8

// QP types. Only RC is implemented by the engine; the constants exist so
// attribute checks follow the IBTA table per type.
const (
	TypeRC Type = 2 // IBV_QPT_RC
	TypeUC Type = 3 // IBV_QPT_UC
	TypeUD Type = 4 // IBV_QPT_UD
)

// String names the type.
func (t Type) String() string {
	switch t {
	case TypeRC:
		return "RC"
	case TypeUC:
		return "UC"
	case TypeUD:
		return "UD"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// MTU is a path MTU, numbered like ibv_mtu (1 = 256 … 5 = 4096).
type MTU uint8

// Path MTUs (IBA 9.6.1.2).
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes returns the MTU for 256, 512, 1024, 2048 or 4096 bytes.
func MTUFromBytes(n int) (MTU, bool) {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m, true
		}
	}
	return 0, false
}

// String formats the MTU in bytes.
func (m MTU) String() string { return fmt.Sprintf("%d", m.Bytes()) }

// AddressVector names the remote end of a connected QP: its IP address and
// the GID-derived fields a RoCEv2 path needs (IBA 17.4; rxe's rxe_av).
type AddressVector struct {
	// Remote is the peer's IP address (from its GID: IPv4-mapped GIDs carry
	// an IPv4 address).
	Remote netip.Addr
	// TrafficClass is the IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN).
	TrafficClass uint8
	// HopLimit is the IP TTL; 0 means 64.
	HopLimit uint8
	// FlowLabel is the IPv6 flow label; rxe derives the UDP source port
	// from it (rdma_get_udp_sport).
	FlowLabel uint32
	// SGIDIndex is kept for callers that mirror ibv_ah_attr; unused here.
	SGIDIndex uint8
}

// Attr mirrors ibv_qp_attr: the attributes Modify sets and Query returns.
type Attr struct {
	State           State
	CurState        State
	PathMTU         MTU
	DestQPN         bth.QPN
	SQPSN           bth.PSN // first PSN the requester sends
	RQPSN           bth.PSN // first PSN the responder expects
	QKey            uint32
	AccessFlags     mr.AccessFlags // remote access the responder allows
	PKeyIndex       uint16
	Port            uint8
	Timeout         uint8 // local ACK timeout: 4.096 µs × 2^Timeout; 0 = off
	RetryCnt        uint8 // 0–7 transport retries
	RNRRetry        uint8 // 0–7 RNR retries; 7 = infinite (IBA 9.7.5.2.8)
	MinRNRTimer     uint8 // RNR NAK timer code the responder sends (aeth.RNRDelay)
	MaxRdAtomic     uint8 // outstanding READ/ATOMIC as requester
	MaxDestRdAtomic uint8 // READ/ATOMIC resources as responder
	AV              AddressVector
	SQDrainNotify   bool
}

// AttrMask selects the attributes of a Modify, with ibv_qp_attr_mask's bit
// values.
type AttrMask uint32

// Attribute mask bits (ibv_qp_attr_mask).
const (
	AttrState           AttrMask = 1 << 0
	AttrCurState        AttrMask = 1 << 1
	AttrEnSQDAsyncNtfy  AttrMask = 1 << 2
	AttrAccessFlags     AttrMask = 1 << 3
	AttrPKeyIndex       AttrMask = 1 << 4
	AttrPort            AttrMask = 1 << 5
	AttrQKey            AttrMask = 1 << 6
	AttrAV              AttrMask = 1 << 7
	AttrPathMTU         AttrMask = 1 << 8
	AttrTimeout         AttrMask = 1 << 9
	AttrRetryCnt        AttrMask = 1 << 10
	AttrRNRRetry        AttrMask = 1 << 11
	AttrRQPSN           AttrMask = 1 << 12
	AttrMaxQPRdAtomic   AttrMask = 1 << 13
	AttrAltPath         AttrMask = 1 << 14
	AttrMinRNRTimer     AttrMask = 1 << 15
	AttrSQPSN           AttrMask = 1 << 16
	AttrMaxDestRdAtomic AttrMask = 1 << 17
	AttrPathMigState    AttrMask = 1 << 18
	AttrCap             AttrMask = 1 << 19
	AttrDestQPN         AttrMask = 1 << 20
)

// transition is one cell of the IBTA QP state table: whether the move is
// valid and, per QP type, which attributes it requires and which it allows.
type transition struct {
	valid bool
	req   map[Type]AttrMask
	opt   map[Type]AttrMask
}

func forTypes(rc, uc, ud AttrMask) map[Type]AttrMask {
	return map[Type]AttrMask{TypeRC: rc, TypeUC: uc, TypeUD: ud}
}

// stateTable mirrors the kernel's qp_state_table used by ib_modify_qp_is_ok
// (drivers/infiniband/core/verbs.c), which implements IBA 10.3.1 Table 91
// (required and optional attributes per transition). It is built once and
// never written.
var stateTable = func() [numStates][numStates]transition {
	var t [numStates][numStates]transition
	all := func(m AttrMask) map[Type]AttrMask { return forTypes(m, m, m) }
	for s := StateReset; s < numStates; s++ {
		t[s][StateReset] = transition{valid: true}
		t[s][StateErr] = transition{valid: true}
	}
	t[StateReset][StateInit] = transition{valid: true, req: forTypes(
		AttrPKeyIndex|AttrPort|AttrAccessFlags,
		AttrPKeyIndex|AttrPort|AttrAccessFlags,
		AttrPKeyIndex|AttrPort|AttrQKey)}
	t[StateInit][StateInit] = transition{valid: true, opt: forTypes(
		AttrPKeyIndex|AttrPort|AttrAccessFlags,
		AttrPKeyIndex|AttrPort|AttrAccessFlags,
		AttrPKeyIndex|AttrPort|AttrQKey)}
	t[StateInit][StateRTR] = transition{valid: true,
		req: forTypes(
			AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer,
			AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN,
			0),
		opt: forTypes(
			AttrAltPath|AttrAccessFlags|AttrPKeyIndex,
			AttrAltPath|AttrAccessFlags|AttrPKeyIndex,
			AttrPKeyIndex|AttrQKey)}
	t[StateRTR][StateRTS] = transition{valid: true,
		req: forTypes(
			AttrSQPSN|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic,
			AttrSQPSN,
			AttrSQPSN),
		opt: forTypes(
			AttrCurState|AttrAltPath|AttrAccessFlags|AttrMinRNRTimer|AttrPathMigState,
			AttrCurState|AttrAltPath|AttrAccessFlags|AttrPathMigState,
			AttrCurState|AttrQKey)}
	rtsOpt := forTypes(
		AttrCurState|AttrAccessFlags|AttrAltPath|AttrPathMigState|AttrMinRNRTimer,
		AttrCurState|AttrAccessFlags|AttrAltPath|AttrPathMigState,
		AttrCurState|AttrQKey)
	t[StateRTS][StateRTS] = transition{valid: true, opt: rtsOpt}
	t[StateRTS][StateSQD] = transition{valid: true, opt: all(AttrEnSQDAsyncNtfy)}
	t[StateSQD][StateRTS] = transition{valid: true, opt: rtsOpt}
	t[StateSQD][StateSQD] = transition{valid: true, opt: forTypes(
		AttrAV|AttrAltPath|AttrAccessFlags|AttrPKeyIndex|AttrMinRNRTimer|AttrPathMigState|
			AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic|AttrMaxDestRdAtomic,
		AttrAV|AttrAltPath|AttrAccessFlags|AttrPKeyIndex|AttrPathMigState,
		AttrPKeyIndex|AttrQKey)}
	// SQE exists for UC and UD only: an RC QP goes straight to ERR.
	t[StateSQE][StateRTS] = transition{valid: true, opt: map[Type]AttrMask{
		TypeUC: AttrCurState | AttrAccessFlags,
		TypeUD: AttrCurState | AttrQKey,
	}}
	return t
}()

// checkTransition implements ib_modify_qp_is_ok: the move cur → next must be
// in the table, every required attribute present and no attribute outside
// required ∪ optional ∪ {STATE}.
func checkTransition(cur, next State, typ Type, mask AttrMask) error {
	if cur >= numStates || next >= numStates {
		return fmt.Errorf("%w: state %d", ErrInvalidTransition, next)
	}
	if mask&AttrCurState != 0 && mask&AttrState == 0 {
		return fmt.Errorf("%w: CUR_STATE without STATE", ErrInvalidAttr)
	}
	tr := stateTable[cur][next]
	if !tr.valid {
		return fmt.Errorf("%w: %v -> %v", ErrInvalidTransition, cur, next)
	}
	if cur == StateSQE && typ == TypeRC && next == StateRTS {
		return fmt.Errorf("%w: %v -> %v on an RC QP", ErrInvalidTransition, cur, next)
	}
	req, opt := tr.req[typ], tr.opt[typ]
	if missing := req &^ mask; missing != 0 {
		return fmt.Errorf("%w: %v -> %v needs attributes %#x", ErrInvalidAttr, cur, next, uint32(missing))
	}
	if extra := mask &^ (req | opt | AttrState); extra != 0 {
		return fmt.Errorf("%w: %v -> %v does not take attributes %#x", ErrInvalidAttr, cur, next, uint32(extra))
	}
	return nil
}

// AckTimeout returns the local ACK timeout for the exponent t: 4.096 µs ×
// 2^t (IBA 9.7.6.1.3, rxe_qp.c), and false for t = 0, which disables the
// timer. Exponents above 31 are clamped to 31.
func AckTimeout(t uint8) (time.Duration, bool) {
	if t == 0 {
		return 0, false
	}
	if t > 31 {
		t = 31
	}
	return time.Duration(4096<<t) * time.Nanosecond, true
}
