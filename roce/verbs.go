package roce

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
)

// QPConfig configures a QP created by Device.CreateQP. The zero value is
// usable: the QP gets the device's default PD and one CQ of its own for
// both queues.
type QPConfig struct {
	// PD is the QP's protection domain; nil means the device's (Device.PD).
	PD *PD
	// SendCQ and RecvCQ receive the QP's completions; they may be the same
	// CQ, shared with other QPs. If either is nil, the QP makes one CQ of
	// its own, sized to hold a completion for every WR of both queues
	// (MaxSendWR + MaxRecvWR), and uses it for each queue left nil; the QP
	// closes it on Destroy, the device on Close. QP.SendCQ and QP.RecvCQ
	// return them.
	SendCQ *CQ
	RecvCQ *CQ
	// MaxSendWR, MaxRecvWR, MaxSGE and MaxInline bound the queues (zero
	// picks the defaults: 1024 WRs, 32 SGEs, 256 bytes inline).
	MaxSendWR, MaxRecvWR, MaxSGE, MaxInline int
	// SigAll completes every send WR with a CQE.
	SigAll bool
	// Type is the transport service: RC (the zero value picks it), UC or
	// UD. An RC or UC QP is connected with Connect, a UD QP made ready
	// with Ready and given a destination per WR (SendWR.UD, AH.Dest).
	Type QPType
	// MTU is a UD QP's largest message, the port MTU (rxe's get_mtu for
	// UD); 0 means MTU1024, rxe's on a 1500-byte link. RC and UC QPs get
	// their path MTU from Connect.
	MTU MTU
	// SRQ, if set, is the shared receive queue of this device the QP takes
	// its receive WQEs from (ibv_qp_init_attr.srq): MaxRecvWR is ignored
	// and QP.PostRecv returns ErrInvalidArg. An own CQ is then sized for
	// MaxSendWR plus the SRQ's MaxWR.
	SRQ *SRQ
	// Eager transmits what PostSend and PostSendBatch post from the
	// caller's goroutine at once, also while the QP waits for a reply to
	// what it sent before. By default such WRs leave with the receive
	// goroutine's next transmit pass, together with the others posted
	// meanwhile (fewer system calls, see QP.PostSend), which costs a
	// small message up to a round trip when the reply is an ACK still on
	// its way: a latency-bound protocol that posts a request right after
	// an unrelated one (a collective's data after its clear-to-send) sets
	// Eager.
	Eager bool
}

// QPType is a QP's transport service type (ibv_qp_type), qp.Type.
type QPType = qp.Type

// QP types.
const (
	RC = qp.TypeRC // IBV_QPT_RC: reliable connected
	UC = qp.TypeUC // IBV_QPT_UC: unreliable connected
	UD = qp.TypeUD // IBV_QPT_UD: unreliable datagram
)

// AH is an address handle with the rest of a UD destination
// (ibv_ah_attr plus ibv_send_wr.wr.ud): the peer's IP address, its QP
// and the Q_Key to send. A QKey with the high bit set (ControlledQKey)
// sends the local QP's own Q_Key instead (IBA 10.2.5).
//
// The datagram leaves with the QP's source address, UDP source port and
// ECN codepoint; a per-AH traffic class and hop limit are not applied.
type AH struct {
	Addr netip.Addr
	QPN  QPN
	QKey uint32
}

// Dest returns the UD destination of a send WR to a (its SendWR.UD).
func (a AH) Dest() UDDest {
	return qp.UDDest{AH: qp.AddressVector{Remote: a.Addr}, RemoteQPN: a.QPN, RemoteQKey: a.QKey}
}

// QP is a queue pair of a Device: reliable connected (RC, the default),
// unreliable connected (UC) or unreliable datagram (UD). Its methods may be
// called from any goroutine: they take the engine lock of the QP's shard,
// which serializes them with the packets and timers of the QP.
type QP struct {
	dev       *Device
	sh        *shard // the engine that owns the QP: shardOf(QPN)
	q         *qp.QP
	cfg       QPConfig
	ownCQ     *cq.CQ  // the CQ the QP made for a nil SendCQ or RecvCQ; closed on Destroy
	psn       bth.PSN // initial send PSN, from crypto/rand
	src, dst  netip.AddrPort
	ecn       uint8
	ecnFixed  bool    // ConnectOptions chose the ECN codepoint, Not-ECT included
	dscp      uint8   // the DSCP of the QP's packets (its traffic class's)
	prio      uint8   // the 802.1Q PCP of the QP's packets (raw links that tag)
	avFlow    uint32  // the address vector's flow label (0: none)
	sportOpt  uint16  // ConnectOptions.SourcePort (0: the kernel rule)
	flow      uint32  // the flow label the source port derives from; IPv6 packets carry it
	outer     int     // IP and UDP header bytes of each packet
	destQPN   bth.QPN // the peer's QP: the DestQP of our CNPs
	peer      netip.Addr
	active    bool
	destroyed bool
	timerAt   time.Time
	paceAt    time.Time     // waiting for the pacer until then (zero: not waiting)
	paceLead  time.Duration // arm the timer this much before paceAt
	cc        qpCC
	ud        bool // a UD QP: each packet goes to its WR's address handle
}

// CreateQP creates a QP (RC unless cfg.Type says otherwise) in the RESET
// state with a random QPN and a random initial PSN (crypto/rand, as
// rdma_cm does; ReDMArk M1/M2). QPNs 0 and 1 (SMI, GSI) and the others
// below 16 are never given out: QP1 belongs to the connection manager. It
// returns ErrClosed after Close.
func (d *Device) CreateQP(cfg QPConfig) (*QP, error) { return d.createQP(cfg, 0) }

// rcvBufPerPacket is what one packet a peer has in flight to the device
// takes of its receive buffer, at the largest path MTU: payload and
// transport headers (the kernel doubles the buffer asked for, to cover
// its own bookkeeping). maxRcvBuf caps what growRcvBuf asks for.
const (
	rcvBufPerPacket = 4096 + 64
	maxRcvBuf       = 256 << 20
)

// growRcvBuf grows the link's receive buffer (link.RcvBufGrower) to what
// the peers of nqps QPs may have in flight to the device: a peer's
// requester keeps at most qp.MaxUnackedPSNs packets unacknowledged per QP
// (rxe's RXE_MAX_UNACKED_PSNS, 128), so 64 QPs at MTU 4096 may have 32
// MiB on the way, more than link/udp's default buffer holds (16 MiB asked,
// 32 MiB of the kernel's accounting, which charges each datagram more
// than its bytes). Overrun, the socket drops what the peers then
// retransmit (doc/engine.md, Receive). It is called with no lock held
// (a system call), never shrinks the buffer, and logs a failure: a
// smaller buffer costs retransmissions, not correctness. READ responses
// are not covered: the responder's rate is bounded only by the
// requester's outstanding READs.
func (d *Device) growRcvBuf(nqps int64) {
	g, ok := d.link.(link.RcvBufGrower)
	if !ok {
		return
	}
	want := min(nqps*qp.MaxUnackedPSNs*rcvBufPerPacket, maxRcvBuf)
	if want <= d.rcvWant.Load() {
		return
	}
	d.rcvWant.Store(want) // a racing grower may ask for less: GrowRcvBuf keeps the larger
	if _, err := g.GrowRcvBuf(int(want)); err != nil {
		d.log.Warn("could not grow the receive buffer", "bytes", want, "err", err)
	}
}

// createQP is CreateQP with QPN qpn, or a random one for 0 (cm.go makes
// QP1 with it).
func (d *Device) createQP(cfg QPConfig, qpn bth.QPN) (*QP, error) {
	if cfg.PD == nil {
		cfg.PD = d.pd
	}
	srq, err := cfg.SRQ.check(d)
	if err != nil {
		return nil, err
	}
	var own *cq.CQ
	if cfg.SendCQ == nil || cfg.RecvCQ == nil {
		n := func(wr int) int {
			if wr == 0 {
				return qp.DefaultMaxWR
			}
			return min(max(wr, 0), qp.MaxWR) // qp.New refuses the others
		}
		recvWR := n(cfg.MaxRecvWR)
		if srq != nil {
			recvWR = srq.Query().MaxWR
		}
		var err error
		if own, err = cq.New(cq.Config{Capacity: max(n(cfg.MaxSendWR)+recvWR, 1), Hook: d.hook}); err != nil {
			return nil, err
		}
		if cfg.SendCQ == nil {
			cfg.SendCQ = own
		}
		if cfg.RecvCQ == nil {
			cfg.RecvCQ = own
		}
	}
	if d.closed.Load() {
		return nil, ErrClosed
	}
	n := d.nqps.Add(1)
	if n > int64(d.cfg.MaxQPs) {
		d.nqps.Add(-1)
		return nil, fmt.Errorf("%w: %d", ErrTooManyQPs, d.cfg.MaxQPs)
	}
	d.growRcvBuf(n)
	qpn, s, err := d.lockQPN(qpn)
	if err != nil {
		d.nqps.Add(-1)
		return nil, err
	}
	added := false
	defer func() {
		if !added {
			d.nqps.Add(-1)
		}
		s.unlock()
	}()
	if d.closed.Load() { // Close swept this shard before it was locked
		return nil, ErrClosed
	}
	var h *QP
	var onEvent func(qp.EventType)
	if srq != nil {
		// Last WQE Reached when the QP enters ERR: raised under the
		// shard's engine lock, as every call into the qp engine is; not for a QP
		// CreateQP failed to return (h nil).
		onEvent = func(t qp.EventType) {
			if h != nil {
				d.raise(Event{Type: t, QP: h, SRQ: cfg.SRQ})
			}
		}
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	q, err := qp.New(qp.Config{
		QPN: qpn, Type: cfg.Type, MRs: d.mrs, PD: cfg.PD,
		SendCQ: cfg.SendCQ, RecvCQ: cfg.RecvCQ,
		MaxSendWR: cfg.MaxSendWR, MaxRecvWR: cfg.MaxRecvWR, MaxSGE: cfg.MaxSGE, MaxInline: cfg.MaxInline,
		SigAll: cfg.SigAll, PortMTU: cfg.MTU, SRQ: srq, OnEvent: onEvent,
	})
	if err != nil {
		return nil, err
	}
	h = &QP{dev: d, sh: s, q: q, cfg: cfg, ownCQ: own, psn: bth.PSN(binary.LittleEndian.Uint32(b[:]) & bth.PSNMask), src: d.local}
	if err := h.cc.init(&d.cfg.CC); err != nil {
		h = nil
		q.Destroy() // detach from the SRQ
		return nil, err
	}
	h.outer = outerLen(d.local)
	h.ud = q.Type() == qp.TypeUD
	h.cc.setPath(qp.MTU256, d.local)
	s.qps[qpn] = h
	added = true
	if own != nil {
		d.keepCQ(own)
	}
	d.snapPut(h)
	return h, nil
}

// SendCQ returns the CQ of the QP's send queue: QPConfig.SendCQ, or the
// QP's own CQ if that was nil.
func (h *QP) SendCQ() *CQ { return h.cfg.SendCQ }

// RecvCQ returns the CQ of the QP's receive queue: QPConfig.RecvCQ, or the
// QP's own CQ if that was nil.
func (h *QP) RecvCQ() *CQ { return h.cfg.RecvCQ }

// check returns ErrClosed once the device is closed and ErrNoSuchQP once
// the QP is destroyed; the caller holds the engine lock.
func (h *QP) check() error {
	if h.dev.closed.Load() {
		return ErrClosed
	}
	if h.destroyed {
		return ErrNoSuchQP
	}
	return nil
}

// QPN returns the QP number.
func (h *QP) QPN() QPN { return h.q.QPN() }

// Counters returns the QP's counters (rxe's names); readable any time.
func (h *QP) Counters() *Counters { return h.q.Counters() }

// State returns the QP state.
func (h *QP) State() QPState {
	h.sh.lock()
	defer h.sh.unlock()
	return h.q.State()
}

// Info is what a peer needs to connect to this QP: the small struct two
// programs exchange out of band (perftest and ibv_rc_pingpong send the same
// fields over TCP).
type Info struct {
	Addr netip.Addr // the IP the peer sends to (its GID's address)
	QPN  QPN
	PSN  PSN // first PSN this QP sends
	// RKey and VA describe a memory region the peer may access (optional;
	// the application fills them).
	RKey Key
	VA   uint64
	MTU  MTU // the path MTU this side wants (0: let the connector choose)
}

// Info returns this QP's connection information. It takes the engine
// lock: Modify (and so Connect) may set the PSN from another goroutine.
func (h *QP) Info() Info {
	h.sh.lock()
	psn := h.psn
	h.sh.unlock()
	return Info{Addr: h.dev.local.Addr(), QPN: h.q.QPN(), PSN: psn}
}

// ConnectOptions tune Connect; the zero value gives rdma-core's test
// defaults (tests/base.py): MTU 1024, timeout 14 (67.1 ms), retry_cnt 7,
// rnr_retry 7, min_rnr_timer 12, max_rd_atomic / max_dest_rd_atomic 16.
// Where zero is a meaningful setting (no ACK timeout, no retries, Not-ECT),
// a named constant asks for it: NoTimeout, NoRetries, NotECT.
type ConnectOptions struct {
	// MTU is the path MTU; 0 means the peer's Info.MTU, else 1024.
	MTU MTU
	// Timeout is the local ACK timeout (IBA 9.7.6.1.3): how long the
	// requester waits for an ACK before it retransmits. IBA encodes it as
	// 4.096 µs × 2^n, n = 1…31, so Timeout is rounded up to the next such
	// value (DefaultTimeout, n = 14, is 67.108864 ms; 1 ms becomes n = 8,
	// 1.048576 ms). 0 means DefaultTimeout; NoTimeout turns the timer off
	// (n = 0), so a lost packet is never retransmitted. A value above
	// MaxTimeout (n = 31, about 2.4 hours) or negative other than NoTimeout
	// is ErrInvalidArg.
	Timeout time.Duration
	// RetryCnt is the number of transport retries after a timeout or a NAK
	// sequence error before the WR fails with StatusRetryExcErr: 1–7, 0 for
	// DefaultRetries (7), NoRetries for none.
	RetryCnt Retries
	// RNRRetry is the number of retries after a receiver-not-ready NAK:
	// 1–6, InfiniteRNRRetries (7, IBA 9.7.5.2.8) to retry forever, 0 for
	// DefaultRetries (7: forever), NoRetries for none.
	RNRRetry        Retries
	MinRNRTimer     uint8 // the RNR NAK timer code this QP sends (aeth.RNRDelay); 0 means 12
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	// Access is the remote access the QP grants its peer (ibv's
	// qp_access_flags: RemoteWrite, RemoteRead, RemoteAtomic); the zero
	// value grants all three, NoRemoteAccess none. Grant only what the
	// peer's operations need: anything else is NAKed as an invalid request
	// (rxe check_op_valid) and ends the connection.
	Access       AccessFlags
	TrafficClass uint8 // IP TOS (DSCP << 2 | ECN)
	// ECN is the IP ECN codepoint of the QP's packets. ECNDefault (0)
	// means the ECN bits of TrafficClass if set, else the device's default
	// (ECT(0) unless Config.NotECT); NotECT, ECT0, ECT1 and CE fix it.
	ECN ECN
	// CC overrides the device's congestion control for this QP (nil:
	// Config.CC).
	CC *CCConfig
	// MaxRate paces the QP at no more than this rate on the wire (IP
	// header and up), whatever its congestion control says; 0 means no
	// ceiling. Not negative, NaN or infinite.
	MaxRate cc.Bitrate
	// FlowLabel is the address vector's flow label (20 bits; ibv_ah_attr's
	// grh.flow_label). The QP's UDP source port derives from it, and IPv6
	// packets carry it; 0 means rdma_calc_flow_label(lqpn, rqpn), Linux's
	// default (see SourcePort).
	FlowLabel uint32
	// SourcePort fixes the UDP source port of the QP's packets, as
	// mlx5dv_modify_qp_udp_sport does. 0 means the kernel's rule
	// (rocev2.ConnSourcePort(FlowLabel, local QPN, remote QPN),
	// rdma_get_udp_sport), so a goroce QP picks the port an rxe or mlx5 QP
	// with the same QPNs and flow label picks; both ends of a connection
	// then send from the same port. The link may map the port to another
	// (link.SourcePorter; link/udp past its socket bound): QP.SourcePort
	// reports the port in use.
	SourcePort uint16
	// Priority is the 802.1Q PCP (0–7) of the QP's frames on raw links
	// that tag them (link/afpacket, link/afxdp with a VLAN); the lossless
	// class of a PFC fabric is commonly 3. Others ignore it.
	Priority uint8
}

// Local ACK timeouts of ConnectOptions.
const (
	// DefaultTimeout is the timeout of ConnectOptions' zero value: code 14,
	// 4.096 µs × 2^14, rdma-core's test default.
	DefaultTimeout = 4096 * time.Nanosecond << 14
	// MaxTimeout is the longest timeout IBA can express: code 31,
	// 4.096 µs × 2^31.
	MaxTimeout = 4096 * time.Nanosecond << 31
	// NoTimeout turns the local ACK timer off (code 0): the requester then
	// waits for an ACK forever.
	NoTimeout time.Duration = -1
)

// timeoutCode returns the IBA code n of the shortest 4.096 µs × 2^n
// (n = 1…31) not shorter than t, 14 for 0 and 0 for NoTimeout.
func timeoutCode(t time.Duration) (uint8, error) {
	switch {
	case t == 0:
		return 14, nil
	case t == NoTimeout:
		return 0, nil
	case t < 0 || t > MaxTimeout:
		return 0, fmt.Errorf("%w: timeout %v is neither NoTimeout nor in (0, %v]", ErrInvalidArg, t, MaxTimeout)
	}
	n := uint8(1)
	for 4096*time.Nanosecond<<n < t {
		n++
	}
	return n, nil
}

// Retries is a retry count of ConnectOptions: 1 to 7 retries as given, 0
// for DefaultRetries and NoRetries for none, so that the zero value of
// ConnectOptions keeps rdma-core's default.
type Retries int8

// Retry counts.
const (
	// DefaultRetries (the zero value) means 7: seven transport retries, or
	// for RNRRetry, retrying forever.
	DefaultRetries Retries = 0
	// NoRetries means zero retries: the first timeout, NAK sequence error
	// or RNR NAK fails the WR.
	NoRetries Retries = -1
	// InfiniteRNRRetries is the RNRRetry that retries forever (IBA
	// 9.7.5.2.8: the 3-bit value 7).
	InfiniteRNRRetries Retries = 7
)

// count returns the 3-bit IBA value of r.
func (r Retries) count() (uint8, error) {
	switch {
	case r == DefaultRetries:
		return 7, nil
	case r == NoRetries:
		return 0, nil
	case r < 0 || r > 7:
		return 0, fmt.Errorf("%w: retry count %d is neither NoRetries nor 0 to 7", ErrInvalidArg, int8(r))
	}
	return uint8(r), nil
}

// ECN is the IP ECN codepoint ConnectOptions asks for, or ECNDefault. Its
// values are not the codepoints: ECNDefault is 0 so that the zero
// ConnectOptions keeps the device's choice, and NotECT, the codepoint 00,
// has a value of its own.
type ECN uint8

// ECN choices.
const (
	ECNDefault ECN = iota // the ECN bits of TrafficClass if set, else the device's default
	NotECT                // 00: not ECN-capable (link.NotECT)
	ECT1                  // 01: ECN-capable transport (1) (link.ECT1)
	ECT0                  // 10: ECN-capable transport (0) (link.ECT0)
	CE                    // 11: congestion experienced (link.CE)
)

// Codepoint returns the 2-bit IP ECN codepoint of e (link.NotECT, …,
// link.CE), and false for ECNDefault or an invalid value.
func (e ECN) Codepoint() (uint8, bool) {
	if e == ECNDefault || e > CE {
		return 0, false
	}
	return uint8(e - 1), true
}

// String returns the codepoint's name: "default", "Not-ECT", "ECT(1)",
// "ECT(0)" or "CE".
func (e ECN) String() string {
	switch e {
	case ECNDefault:
		return "default"
	case NotECT:
		return "Not-ECT"
	case ECT1:
		return "ECT(1)"
	case ECT0:
		return "ECT(0)"
	case CE:
		return "CE"
	}
	return "ECN(" + strconv.Itoa(int(e)) + ")"
}

// Connect moves the QP RESET → INIT → RTR → RTS towards the remote QP,
// as ibv_modify_qp three times. It returns ErrInvalidArg for an option out
// of range and ErrClosed after the device's Close.
//
// Connect is for RC and UC QPs; a UD QP is made ready with Ready. A UC QP
// takes the options UC has (IBA 10.2.4's attribute table: MTU, Access,
// TrafficClass, ECN, CC, MaxRate); the ACK timeout, retry counts and
// READ/ATOMIC depths are RC's and ignored.
func (h *QP) Connect(remote Info, o ConnectOptions) error {
	if h.ud {
		return fmt.Errorf("%w: Connect on a UD QP (use Ready)", ErrInvalidArg)
	}
	if o.MTU == 0 {
		o.MTU = remote.MTU
		if o.MTU == 0 {
			o.MTU = qp.MTU1024
		}
	}
	timeout, err := timeoutCode(o.Timeout)
	if err != nil {
		return err
	}
	retryCnt, err := o.RetryCnt.count()
	if err != nil {
		return err
	}
	rnrRetry, err := o.RNRRetry.count()
	if err != nil {
		return err
	}
	if o.MinRNRTimer == 0 {
		o.MinRNRTimer = 12
	}
	if o.MaxRdAtomic == 0 {
		o.MaxRdAtomic = 16
	}
	if o.MaxDestRdAtomic == 0 {
		o.MaxDestRdAtomic = 16
	}
	if o.Access == 0 {
		o.Access = mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic
	}
	if !remote.Addr.IsValid() {
		return fmt.Errorf("%w: remote address", ErrInvalidArg)
	}
	if o.ECN > CE {
		return fmt.Errorf("%w: ECN %v", ErrInvalidArg, o.ECN)
	}
	if o.FlowLabel > rocev2.FlowLabelMask || o.Priority > 7 {
		return fmt.Errorf("%w: flow label %#x or priority %d out of range", ErrInvalidArg, o.FlowLabel, o.Priority)
	}
	if !validRate(o.MaxRate) {
		return fmt.Errorf("%w: MaxRate %v", ErrInvalidArg, float64(o.MaxRate))
	}
	if o.CC != nil {
		if err := o.CC.validate(); err != nil {
			return err
		}
	}
	ecn, ecnFixed := o.ECN.Codepoint()
	if ecnFixed {
		o.TrafficClass = o.TrafficClass&^3 | ecn
	}
	// Connect walks RESET → INIT → RTR → RTS: on a QP past RESET it would
	// fail at the first step, after setCC had changed a live QP's pacing.
	h.sh.lock()
	err = h.check() // closed and destroyed come first
	st := h.q.State()
	h.sh.unlock()
	if err != nil {
		return err
	}
	if st != qp.StateReset {
		return fmt.Errorf("%w: Connect needs a QP in RESET, this one is %v", qp.ErrInvalidTransition, st)
	}
	if err := h.setCC(&o, ecnFixed); err != nil {
		return err
	}
	psn := h.Info().PSN // under the engine lock: a concurrent Modify may set it
	steps := []struct {
		a    qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, AccessFlags: o.Access},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, PathMTU: o.MTU, DestQPN: remote.QPN, RQPSN: remote.PSN,
			MaxDestRdAtomic: o.MaxDestRdAtomic, MinRNRTimer: o.MinRNRTimer,
			AV: qp.AddressVector{Remote: remote.Addr, TrafficClass: o.TrafficClass, FlowLabel: o.FlowLabel}},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN |
				qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{qp.Attr{State: qp.StateRTS, SQPSN: psn, Timeout: timeout, RetryCnt: retryCnt,
			RNRRetry: rnrRetry, MaxRdAtomic: o.MaxRdAtomic},
			qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
	}
	if h.q.Type() == qp.TypeUC {
		// UC: no RC-only attributes (IBA 10.2.4; ib_modify_qp_is_ok).
		steps[1].mask &^= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
		steps[2].mask = qp.AttrState | qp.AttrSQPSN
		steps[0].a.AccessFlags &^= mr.RemoteRead | mr.RemoteAtomic
	}
	for _, s := range steps {
		if err := h.Modify(&s.a, s.mask); err != nil {
			return err
		}
	}
	return nil
}

// Ready moves a UD QP RESET → INIT → RTR → RTS with Q_Key qkey, as
// ibv_ud_pingpong does: a UD QP needs its Q_Key and port at INIT, nothing
// at RTR and its send PSN at RTS (IBA 10.2.4). Datagrams to it must carry
// qkey; others are dropped and counted (CounterQKeyViolation). It
// returns ErrInvalidArg on a QP that is not UD.
func (h *QP) Ready(qkey uint32) error {
	if !h.ud {
		return fmt.Errorf("%w: Ready on a %v QP (use Connect)", ErrInvalidArg, h.q.Type())
	}
	h.sh.lock()
	if !h.ecnFixed && !h.dev.cfg.NotECT {
		h.ecn = link.ECT0 // doc/dcqcn.md §7.1, as Modify does for a connected QP
	}
	psn := h.psn // under the engine lock: a concurrent Modify may set it
	h.sh.unlock()
	steps := []struct {
		a    qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, QKey: qkey, Port: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey},
		{qp.Attr{State: qp.StateRTR}, qp.AttrState},
		{qp.Attr{State: qp.StateRTS, SQPSN: psn}, qp.AttrState | qp.AttrSQPSN},
	}
	for _, s := range steps {
		if err := h.Modify(&s.a, s.mask); err != nil {
			return err
		}
	}
	return nil
}

// Modify changes the QP's attributes and state (ibv_modify_qp), checked
// against the IBTA transition table. Setting the address vector fixes the
// peer: packets for this QP from any other IP are dropped (rxe check_addr).
func (h *QP) Modify(a *QPAttr, mask QPAttrMask) error {
	d, s := h.dev, h.sh
	s.lock()
	defer s.unlock()
	if err := h.check(); err != nil {
		return err
	}
	if err := h.q.Modify(a, mask); err != nil {
		return err
	}
	if mask&qp.AttrAV != 0 {
		h.peer = a.AV.Remote.Unmap()
		h.dst = netip.AddrPortFrom(a.AV.Remote, d.cfg.DestPort)
		h.outer = outerLen(h.dst)
		h.ecn = a.AV.TrafficClass & 3
		if h.ecn == link.NotECT && !h.ecnFixed && !d.cfg.NotECT {
			h.ecn = link.ECT0 // doc/dcqcn.md §7.1
		}
		h.dscp = a.AV.TrafficClass >> 2
		h.avFlow = a.AV.FlowLabel & rocev2.FlowLabelMask
	}
	if mask&qp.AttrDestQPN != 0 {
		h.destQPN = a.DestQPN
	}
	if mask&(qp.AttrAV|qp.AttrDestQPN) != 0 && h.dst.IsValid() {
		h.setSourcePort()
	}
	if mask&(qp.AttrAV|qp.AttrDestQPN) != 0 {
		d.snapPut(h)
	}
	if mask&(qp.AttrAV|qp.AttrPathMTU) != 0 {
		h.cc.setPath(h.q.Query().PathMTU, h.dst)
	}
	if mask&qp.AttrSQPSN != 0 {
		h.psn = a.SQPSN
	}
	s.activate(h)
	s.service(time.Now())
	return nil
}

// setCC applies Connect's congestion-control and path options under the
// engine lock; o.CC (nil: the device's) has been validated.
func (h *QP) setCC(o *ConnectOptions, ecnFixed bool) error {
	h.sh.lock()
	defer h.sh.unlock()
	if err := h.check(); err != nil {
		return err
	}
	if o.CC != nil {
		if err := h.cc.init(o.CC); err != nil {
			return err
		}
	}
	h.cc.maxRate = o.MaxRate
	h.ecnFixed = ecnFixed
	h.sportOpt, h.prio = o.SourcePort, o.Priority
	return nil
}

// setSourcePort picks the QP's UDP source port (RoCEv2 Annex A17.3: the
// sender's choice, for ECMP entropy) as Linux does, rdma_get_udp_sport:
// from the address vector's flow label, or rdma_calc_flow_label(lqpn,
// rqpn) when it is 0, unless ConnectOptions.SourcePort fixed it. The port
// is the same at both ends of a connection, and ACKs, READ responses and
// CNPs leave from it too. A link that implements link.SourcePorter says
// which port the packets will really carry (the ICRC covers it); the
// others send from the device's port. The caller holds the engine lock.
func (h *QP) setSourcePort() {
	d := h.dev
	h.flow = h.avFlow
	if h.flow == 0 {
		h.flow = rocev2.FlowLabel(h.q.QPN(), h.destQPN)
	}
	want := h.sportOpt
	if want == 0 {
		want = rocev2.SourcePort(h.flow)
	}
	port := d.local.Port()
	if d.sporter != nil {
		port = d.sporter.SourcePort(want)
	}
	h.src = netip.AddrPortFrom(d.local.Addr(), port)
}

// SourcePort returns the UDP source port the QP's packets carry (the
// device's port until Connect).
func (h *QP) SourcePort() uint16 {
	h.sh.lock()
	defer h.sh.unlock()
	return h.src.Port()
}

// acceptsFrom is rxe's check_addr: a connected QP takes packets only from
// its peer's IP; a UD QP from anyone (its Q_Key is checked instead).
func (h *QP) acceptsFrom(src netip.AddrPort) bool {
	return h.ud || h.peer.IsValid() && src.Addr().Unmap() == h.peer
}

// PostSend posts a send work request (ibv_post_send). It returns
// ErrQueueFull when the send queue holds QPConfig.MaxSendWR WRs (the
// back-pressure: poll the CQ, then post again), ErrInvalidState before
// RTS, ErrTooManySGE, ErrInlineTooLong, ErrUnsupportedOp,
// ErrMessageTooLong or ErrMessageOverMTU for a malformed WR, ErrNoSuchQP
// after Destroy and ErrClosed after the device's Close; a WR that fails
// later completes with an error status on the send CQ.
//
// PostSend copies wr and its SGL, not the bytes the SGL names (unless the
// WR is SendInline): those are read from the memory region when each
// packet is built, at send time and again on every retransmission. The
// buffer must stay untouched until the WR's completion, or a retransmitted
// packet carries other bytes than the first (and than its peer expects).
func (h *QP) PostSend(wr *SendWR) error {
	s := h.sh
	s.lock()
	if err := h.check(); err != nil {
		s.unlock()
		return err
	}
	clocked := h.q.AwaitingReply()
	err := h.q.PostSend(wr)
	h.kick(clocked)
	s.unlock()
	return err
}

// kick gets a QP's newly posted WQEs on their way; the caller holds the
// engine lock. An idle (or Eager) QP transmits from the caller's goroutine: no
// hand-over to the engine on the way to the wire (latency). A QP whose
// oldest WQE waits for its ACK or response (clocked) leaves them to that
// reply: the receive path transmits for every batch it processes, so
// the WQEs posted meanwhile — by one caller's loop of PostSend, or on
// many QPs to one peer — leave together in one link Send (one syscall,
// GSO runs of equal-length packets) instead of one syscall each. Should
// the reply be lost, the retransmit timer sends them with the retry.
// While the device's OnBatch function runs, every post is left to the
// transmit pass that follows it (sendDeferred), clocked or not: the
// requests the function posts on all its QPs leave together, and none
// waits for the next reply.
func (h *QP) kick(clocked bool) {
	s := h.sh
	s.activate(h)
	if (!clocked || h.cfg.Eager) && !h.dev.inBatch.Load() {
		s.service(time.Now())
	} else {
		s.deferred = true
	}
}

// PostSendBatch posts wrs in order as one call, as ibv_post_send posts a
// linked list of WRs: one engine-lock hand-over and one transmit pass for
// the whole list, so the packets of all its WRs reach the link together
// (one send syscall, GSO runs of equal-length packets) instead of one
// syscall per WR. It returns how many WRs it posted; on an error, wrs[n]
// is the WR that failed (ibv_post_send's bad_wr): wrs[:n] are posted and
// will complete, wrs[n:] are not. The errors are PostSend's. The caller may
// reuse wrs and their SGLs when it returns.
func (h *QP) PostSendBatch(wrs []SendWR) (int, error) {
	s := h.sh
	s.lock()
	if err := h.check(); err != nil { // ErrNoSuchQP, ErrClosed
		s.unlock()
		return 0, err
	}
	clocked := h.q.AwaitingReply()
	n := 0
	var err error
	for n < len(wrs) {
		if err = h.q.PostSend(&wrs[n]); err != nil {
			break
		}
		n++
	}
	if n > 0 {
		h.kick(clocked)
	}
	s.unlock()
	return n, err
}

// PostRecv posts a receive work request (ibv_post_recv). It returns
// ErrQueueFull when the receive queue is full, ErrInvalidState in RESET,
// ErrTooManySGE, ErrInvalidArg for a QP with an SRQ (post to the SRQ
// instead), ErrNoSuchQP after Destroy and ErrClosed after the device's
// Close.
func (h *QP) PostRecv(wr *RecvWR) error {
	s := h.sh
	s.lock()
	if err := h.check(); err != nil {
		s.unlock()
		return err
	}
	err := h.q.PostRecv(wr)
	s.activate(h)
	s.service(time.Now())
	s.unlock()
	return err
}

// PostRecvBatch posts wrs in order as one call (ibv_post_recv with a
// list). Like PostSendBatch it returns how many it posted; on an error
// wrs[n] is the WR that failed (bad_wr) and wrs[n:] are not posted.
func (h *QP) PostRecvBatch(wrs []RecvWR) (int, error) {
	s := h.sh
	s.lock()
	if err := h.check(); err != nil { // ErrNoSuchQP, ErrClosed
		s.unlock()
		return 0, err
	}
	n := 0
	var err error
	for n < len(wrs) {
		if err = h.q.PostRecv(&wrs[n]); err != nil {
			break
		}
		n++
	}
	if n > 0 {
		s.activate(h)
		s.service(time.Now())
	}
	s.unlock()
	return n, err
}

// Destroy moves the QP to ERR (its outstanding WRs complete with
// WR_FLUSH_ERR), detaches it from its SRQ, if any, and removes it from the
// device. The QP's own CQ, if it made
// one, is closed: its completions can still be polled, and a blocked Wait
// returns them and then ErrClosed. Destroy returns ErrClosed after the
// device's Close, which destroyed the QP already.
func (h *QP) Destroy() error {
	d, s := h.dev, h.sh
	s.lock()
	defer s.unlock()
	if err := h.check(); err != nil {
		return err
	}
	h.q.Destroy()
	// The ACKs h owes for requests it executed leave before it goes (qp's
	// nextReply in ERR; rxe acknowledges in the pass that completes), in
	// a full pass as Modify's: the timer is re-armed for what the pass
	// sent of other active QPs.
	s.activate(h)
	s.service(time.Now())
	h.destroyed = true
	endPaceWait(h)
	delete(s.qps, h.q.QPN())
	if s.lastRx == h {
		s.lastRx = nil
	}
	d.nqps.Add(-1)
	if h.ownCQ != nil {
		h.ownCQ.Close()
		d.forgetCQ(h.ownCQ)
	}
	d.snapGone(h)
	return nil
}
