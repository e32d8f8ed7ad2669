package roce

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// QPConfig configures a QP created by Device.CreateQP.
type QPConfig struct {
	PD     *mr.PD
	SendCQ *cq.CQ
	RecvCQ *cq.CQ
	// MaxSendWR, MaxRecvWR, MaxSGE and MaxInline bound the queues (see
	// qp.Config; zero picks the defaults).
	MaxSendWR, MaxRecvWR, MaxSGE, MaxInline int
	// SigAll completes every send WR with a CQE.
	SigAll bool
}

// QP is a reliable-connected queue pair of a Device. Its methods may be
// called from any goroutine: they take the device's engine lock, which
// serializes them with the engine goroutine that owns the transport state.
type QP struct {
	dev       *Device
	q         *qp.QP
	cfg       QPConfig
	psn       bth.PSN // initial send PSN, from crypto/rand
	src, dst  netip.AddrPort
	ecn       uint8
	ecnFixed  bool    // ConnectOptions chose the ECN codepoint, Not-ECT included
	outer     int     // IP and UDP header bytes of each packet
	destQPN   bth.QPN // the peer's QP: the DestQP of our CNPs
	peer      netip.Addr
	active    bool
	destroyed bool
	timerAt   time.Time
	paceAt    time.Time     // waiting for the pacer until then (zero: not waiting)
	paceLead  time.Duration // arm the timer this much before paceAt
	cc        qpCC
}

// CreateQP creates an RC QP in the RESET state with a random QPN and a
// random initial PSN (crypto/rand, as rdma_cm does; ReDMArk M1/M2).
func (d *Device) CreateQP(cfg QPConfig) (*QP, error) {
	if cfg.PD == nil || cfg.SendCQ == nil || cfg.RecvCQ == nil {
		return nil, fmt.Errorf("%w: PD, SendCQ and RecvCQ are required", ErrInvalidArg)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	if len(d.qps) >= d.cfg.MaxQPs {
		return nil, fmt.Errorf("%w: %d", ErrTooManyQPs, d.cfg.MaxQPs)
	}
	qpn, err := d.newQPN()
	if err != nil {
		return nil, err
	}
	q, err := qp.New(qp.Config{
		QPN: qpn, Type: qp.TypeRC, MRs: d.mrs, PD: cfg.PD, SendCQ: cfg.SendCQ, RecvCQ: cfg.RecvCQ,
		MaxSendWR: cfg.MaxSendWR, MaxRecvWR: cfg.MaxRecvWR, MaxSGE: cfg.MaxSGE, MaxInline: cfg.MaxInline,
		SigAll: cfg.SigAll,
	})
	if err != nil {
		return nil, err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	h := &QP{dev: d, q: q, cfg: cfg, psn: bth.PSN(binary.LittleEndian.Uint32(b[:]) & bth.PSNMask), src: d.local}
	if err := h.cc.init(&d.cfg.CC); err != nil {
		return nil, err
	}
	h.outer = outerLen(d.local)
	h.cc.setPath(qp.MTU256, d.local)
	d.qps[qpn] = h
	return h, nil
}

// QPN returns the QP number.
func (h *QP) QPN() bth.QPN { return h.q.QPN() }

// Counters returns the QP's counters (rxe's names); readable any time.
func (h *QP) Counters() *qp.Counters { return h.q.Counters() }

// State returns the QP state.
func (h *QP) State() qp.State {
	h.dev.mu.Lock()
	defer h.dev.mu.Unlock()
	return h.q.State()
}

// Info is what a peer needs to connect to this QP: the small struct two
// programs exchange out of band (perftest and ibv_rc_pingpong send the same
// fields over TCP).
type Info struct {
	Addr netip.Addr // the IP the peer sends to (its GID's address)
	QPN  bth.QPN
	PSN  bth.PSN // first PSN this QP sends
	// RKey and VA describe a memory region the peer may access (optional;
	// the application fills them).
	RKey mr.Key
	VA   uint64
	MTU  qp.MTU // the path MTU this side wants (0: let the connector choose)
}

// Info returns this QP's connection information.
func (h *QP) Info() Info {
	return Info{Addr: h.dev.local.Addr(), QPN: h.q.QPN(), PSN: h.psn}
}

// ConnectOptions tune Connect; the zero value gives rdma-core's test
// defaults (tests/base.py): MTU 1024, timeout 14, retry_cnt 7, rnr_retry 7,
// min_rnr_timer 12, max_rd_atomic / max_dest_rd_atomic 16.
type ConnectOptions struct {
	MTU             qp.MTU
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
	MinRNRTimer     uint8
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	Access          mr.AccessFlags // remote access granted; default all
	TrafficClass    uint8          // IP TOS (DSCP << 2 | ECN)
	// ECN is the IP ECN codepoint of the QP's packets (link.NotECT,
	// link.ECT1, link.ECT0 or link.CE); 0 without SetECN means the ECN
	// bits of TrafficClass if set, else the device's default (ECT(0)
	// unless Config.NotECT).
	ECN uint8
	// CC overrides the device's congestion control for this QP (nil:
	// Config.CC).
	CC *CCConfig
	// MaxRate paces the QP at no more than this rate on the wire (IP
	// header and up), whatever its congestion control says; 0 means no
	// ceiling. Not negative, NaN or infinite.
	MaxRate cc.Bitrate
	// Set* force a zero value of the field above (0 is a meaningful
	// timeout, retry count, ECN codepoint, …).
	SetTimeout, SetRetryCnt, SetRNRRetry, SetECN bool
}

// Connect moves the QP RESET → INIT → RTR → RTS towards the remote QP,
// as ibv_modify_qp three times.
func (h *QP) Connect(remote Info, o ConnectOptions) error {
	if o.MTU == 0 {
		o.MTU = remote.MTU
		if o.MTU == 0 {
			o.MTU = qp.MTU1024
		}
	}
	if o.Timeout == 0 && !o.SetTimeout {
		o.Timeout = 14
	}
	if o.RetryCnt == 0 && !o.SetRetryCnt {
		o.RetryCnt = 7
	}
	if o.RNRRetry == 0 && !o.SetRNRRetry {
		o.RNRRetry = 7
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
	if o.ECN > link.CE {
		return fmt.Errorf("%w: ECN codepoint %d", ErrInvalidArg, o.ECN)
	}
	if !validRate(o.MaxRate) {
		return fmt.Errorf("%w: MaxRate %v", ErrInvalidArg, float64(o.MaxRate))
	}
	if o.CC != nil {
		if err := o.CC.validate(); err != nil {
			return err
		}
	}
	ecnFixed := o.SetECN || o.ECN != 0
	if ecnFixed {
		o.TrafficClass = o.TrafficClass&^3 | o.ECN
	}
	if err := h.setCC(o.CC, o.MaxRate, ecnFixed); err != nil {
		return err
	}
	steps := []struct {
		a    qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, AccessFlags: o.Access},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, PathMTU: o.MTU, DestQPN: remote.QPN, RQPSN: remote.PSN,
			MaxDestRdAtomic: o.MaxDestRdAtomic, MinRNRTimer: o.MinRNRTimer,
			AV: qp.AddressVector{Remote: remote.Addr, TrafficClass: o.TrafficClass}},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN |
				qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{qp.Attr{State: qp.StateRTS, SQPSN: h.psn, Timeout: o.Timeout, RetryCnt: o.RetryCnt,
			RNRRetry: o.RNRRetry, MaxRdAtomic: o.MaxRdAtomic},
			qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
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
func (h *QP) Modify(a *qp.Attr, mask qp.AttrMask) error {
	d := h.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if h.destroyed {
		return ErrNoSuchQP
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
	}
	if mask&qp.AttrDestQPN != 0 {
		h.destQPN = a.DestQPN
	}
	if mask&(qp.AttrAV|qp.AttrPathMTU) != 0 {
		h.cc.setPath(h.q.Query().PathMTU, h.dst)
	}
	if mask&qp.AttrSQPSN != 0 {
		h.psn = a.SQPSN
	}
	d.activate(h)
	d.service(time.Now())
	return nil
}

// setCC applies Connect's congestion-control options under the engine
// lock; cfg (nil: the device's) has been validated.
func (h *QP) setCC(cfg *CCConfig, maxRate cc.Bitrate, ecnFixed bool) error {
	d := h.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if h.destroyed {
		return ErrNoSuchQP
	}
	if cfg != nil {
		if err := h.cc.init(cfg); err != nil {
			return err
		}
	}
	h.cc.maxRate = maxRate
	h.ecnFixed = ecnFixed
	return nil
}

// acceptsFrom is rxe's check_addr: a connected QP takes packets only from
// its peer's IP.
func (h *QP) acceptsFrom(src netip.AddrPort) bool {
	return h.peer.IsValid() && src.Addr().Unmap() == h.peer
}

// PostSend posts a send work request (ibv_post_send). Errors are the verbs
// misuse sentinels of package qp; a WR that fails later completes with an
// error status on the send CQ.
func (h *QP) PostSend(wr *qp.SendWR) error {
	d := h.dev
	d.mu.Lock()
	if h.destroyed {
		d.mu.Unlock()
		return ErrNoSuchQP
	}
	clocked := h.q.AwaitingReply()
	err := h.q.PostSend(wr)
	h.kick(clocked)
	d.mu.Unlock()
	return err
}

// kick gets a QP's newly posted WQEs on their way; the caller holds the
// engine lock. An idle QP transmits from the caller's goroutine: no
// hand-over to the engine on the way to the wire (latency). A QP whose
// oldest WQE waits for its ACK or response (clocked) leaves them to that
// reply: the receive path transmits for every batch it processes, so
// the WQEs posted meanwhile — by one caller's loop of PostSend, or on
// many QPs to one peer — leave together in one link Send (one syscall,
// GSO runs of equal-length packets) instead of one syscall each. Should
// the reply be lost, the retransmit timer sends them with the retry.
func (h *QP) kick(clocked bool) {
	d := h.dev
	d.activate(h)
	if !clocked {
		d.service(time.Now())
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
func (h *QP) PostSendBatch(wrs []qp.SendWR) (int, error) {
	d := h.dev
	d.mu.Lock()
	if h.destroyed {
		d.mu.Unlock()
		return 0, ErrNoSuchQP
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
	d.mu.Unlock()
	return n, err
}

// PostRecv posts a receive work request (ibv_post_recv).
func (h *QP) PostRecv(wr *qp.RecvWR) error {
	d := h.dev
	d.mu.Lock()
	if h.destroyed {
		d.mu.Unlock()
		return ErrNoSuchQP
	}
	err := h.q.PostRecv(wr)
	d.activate(h)
	d.service(time.Now())
	d.mu.Unlock()
	return err
}

// PostRecvBatch posts wrs in order as one call (ibv_post_recv with a
// list). Like PostSendBatch it returns how many it posted; on an error
// wrs[n] is the WR that failed (bad_wr) and wrs[n:] are not posted.
func (h *QP) PostRecvBatch(wrs []qp.RecvWR) (int, error) {
	d := h.dev
	d.mu.Lock()
	if h.destroyed {
		d.mu.Unlock()
		return 0, ErrNoSuchQP
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
		d.activate(h)
		d.service(time.Now())
	}
	d.mu.Unlock()
	return n, err
}

// Destroy moves the QP to ERR (its outstanding WRs complete with
// WR_FLUSH_ERR) and removes it from the device.
func (h *QP) Destroy() error {
	d := h.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if h.destroyed {
		return ErrNoSuchQP
	}
	h.q.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState)
	h.destroyed = true
	d.endPaceWait(h)
	delete(d.qps, h.q.QPN())
	return nil
}
