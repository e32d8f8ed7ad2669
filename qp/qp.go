package qp

import (
	"fmt"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
)

// Limits of the engine, after rxe (rxe_param.h).
const (
	// MaxUnackedPSNs bounds the PSNs a requester has outstanding
	// (RXE_MAX_UNACKED_PSNS).
	MaxUnackedPSNs = 128
	// MaxPktsPerAck is the longest run of packets without the AckReq bit
	// (RXE_MAX_PKT_PER_ACK).
	MaxPktsPerAck = 64
	// MaxMessageLen is the longest message (rxe's WR length limit, 2^31).
	MaxMessageLen = 1 << 31
	// MaxSGE is the largest SGL (rxe max_sge).
	MaxSGE = 32
	// DefaultMaxWR is the default depth of each work queue.
	DefaultMaxWR = 1024
	// MaxWR is the largest queue depth (rxe max_qp_wr).
	MaxWR = 0x4000
	// outputQueueLen bounds the responder's queued replies.
	outputQueueLen = 1024
	// defaultMaxInline is the default inline data limit.
	defaultMaxInline = 256
)

// CompletionQueue is where a QP puts its completions; *cq.CQ implements it.
// Push returns an error wrapping cq.ErrOverflow when the queue is full: the
// QP then moves to ERR, as rxe does on CQ overflow (class G).
type CompletionQueue interface {
	// Push adds c to the queue.
	Push(c cq.Completion) error
}

var _ CompletionQueue = (*cq.CQ)(nil)

// Config configures a QP. MRs, PD, SendCQ and RecvCQ are required.
type Config struct {
	// QPN is the QP number: not 0 (SMI) or the multicast QPN, and 1 (GSI)
	// only for a UD QP (the device's connection manager makes QP1).
	QPN bth.QPN
	// Type is the transport service: TypeRC (the default), TypeUC or
	// TypeUD.
	Type   Type
	MRs    *mr.Table
	PD     *mr.PD
	SendCQ CompletionQueue
	RecvCQ CompletionQueue
	// MaxSendWR and MaxRecvWR bound the queues (default DefaultMaxWR).
	MaxSendWR int
	MaxRecvWR int
	// MaxSGE bounds the SGL of one WR (default and maximum MaxSGE).
	MaxSGE int
	// MaxInline bounds inline data (default 256 bytes).
	MaxInline int
	// SigAll completes every send WR with a CQE (ibv sq_sig_all).
	SigAll bool
	// PKey is the QP's partition key (default 0xFFFF, the only entry of
	// rxe's P_Key table).
	PKey uint16
	// PortMTU is the port's active MTU, which bounds a UD QP's messages:
	// a UD QP has no path MTU attribute (IBA 10.2.4's attribute table),
	// and rxe's get_mtu gives it the port's. The default is MTU1024, rxe's
	// on a 1500-byte link. RC and UC QPs use their path MTU.
	PortMTU MTU
	// SRQ, if set, is the shared receive queue the QP takes its receive
	// WQEs from instead of a receive queue of its own (IBA 10.2.9): PostRecv
	// then returns ErrInvalidArg and MaxRecvWR is ignored, as with
	// ibv_qp_init_attr.srq. The QP counts as a user of the SRQ until
	// Destroy.
	SRQ *SRQ
	// OnEvent, if set, receives the QP's affiliated asynchronous events:
	// EventQPLastWQEReached when a QP with an SRQ enters ERR. It runs on
	// the QP's goroutine, inside the method that caused the event (Modify,
	// HandlePacket, OnTimeout, Destroy), and must not call the QP's
	// methods or block.
	OnEvent func(EventType)
}

// QP is the sans-IO RC transport engine of one queue pair: requester
// (rxe_req.c), completer (rxe_comp.c) and responder (rxe_resp.c). It never
// blocks, sleeps, starts goroutines or touches sockets: the driver feeds it
// packets (HandlePacket), work requests (PostSend, PostRecv), time
// (OnTimeout, at Deadline) and pulls packets to send (NextPacket).
//
// A QP is owned by one goroutine: every method except Counters, QPN and
// the methods of the returned Counters must be called from it.
type QP struct {
	cfg  Config
	qpn  bth.QPN
	attr Attr
	mtu  int

	sq ring[sendWQE]
	rq ring[recvWQE]

	req  requester
	comp completer
	resp responder

	counters Counters

	destroyed bool // Destroy ran: the SRQ, if any, is detached

	// atomicBuf stages an ATOMIC ACK's original value for its local SGE.
	atomicBuf [8]byte

	// gathering is set during NextPacketGather, which wants a payload left
	// in its region described in pay (NextPacket copies). pay is copied
	// out and cleared before that call returns, so the caller's
	// TxPayload does not escape.
	gathering bool
	pay       TxPayload

	// lastLocal and lastRemote are the regions the last lkey and rkey
	// lookups found (localRegion, remoteRegion): a stream of WRs names
	// one region again and again, and mr.Region.Usable checks it without
	// the table's lock.
	lastLocal, lastRemote *mr.Region
}

// New creates a QP in the RESET state.
func New(cfg Config) (*QP, error) {
	if cfg.Type == 0 {
		cfg.Type = TypeRC
	}
	if cfg.Type != TypeRC && cfg.Type != TypeUC && cfg.Type != TypeUD {
		return nil, fmt.Errorf("%w: QP type %v is not supported", ErrInvalidConfig, cfg.Type)
	}
	if cfg.PortMTU == 0 {
		cfg.PortMTU = MTU1024
	}
	if cfg.PortMTU.Bytes() == 0 {
		return nil, fmt.Errorf("%w: port MTU %d", ErrInvalidConfig, cfg.PortMTU)
	}
	if cfg.MRs == nil || cfg.PD == nil || cfg.SendCQ == nil || cfg.RecvCQ == nil {
		return nil, fmt.Errorf("%w: MRs, PD, SendCQ and RecvCQ are required", ErrInvalidConfig)
	}
	if !cfg.QPN.Valid() || cfg.QPN == bth.QPNSMI || cfg.QPN == bth.QPNGSI && cfg.Type != TypeUD ||
		cfg.QPN == bth.QPNMulticast {
		return nil, fmt.Errorf("%w: QPN %v", ErrInvalidConfig, cfg.QPN)
	}
	if cfg.MaxSendWR == 0 {
		cfg.MaxSendWR = DefaultMaxWR
	}
	if cfg.MaxRecvWR == 0 {
		cfg.MaxRecvWR = DefaultMaxWR
	}
	if cfg.MaxSendWR < 0 || cfg.MaxSendWR > MaxWR || cfg.MaxRecvWR < 0 || cfg.MaxRecvWR > MaxWR {
		return nil, fmt.Errorf("%w: queue depth above %d", ErrInvalidConfig, MaxWR)
	}
	if cfg.MaxSGE == 0 {
		cfg.MaxSGE = MaxSGE
	}
	if cfg.MaxSGE < 0 || cfg.MaxSGE > MaxSGE {
		return nil, fmt.Errorf("%w: max SGE above %d", ErrInvalidConfig, MaxSGE)
	}
	if cfg.MaxInline == 0 {
		cfg.MaxInline = defaultMaxInline
	}
	if cfg.PKey == 0 {
		cfg.PKey = 0xffff
	}
	q := &QP{cfg: cfg, qpn: cfg.QPN}
	q.sq.max = cfg.MaxSendWR
	q.rq.max = cfg.MaxRecvWR
	if s := cfg.SRQ; s != nil {
		if err := s.attach(); err != nil {
			return nil, err
		}
		// The RQ becomes one slot holding the SRQ WQE of the message in
		// progress (rxe's qp->resp.srq_wqe), allocated here so that taking
		// a WQE does not allocate.
		q.rq.max = 1
		q.rq.buf = []recvWQE{{sgl: make([]SGE, 0, s.maxSGE)}}
	}
	q.attr.PathMTU = MTU256 // rxe: a new QP's path MTU is 256 until modify_qp
	q.mtu = MTU256.Bytes()
	if cfg.Type == TypeUD {
		q.mtu = cfg.PortMTU.Bytes()
	}
	return q, nil
}

// QPN returns the QP number.
func (q *QP) QPN() bth.QPN { return q.qpn }

// State returns the current state.
func (q *QP) State() State { return q.attr.State }

// Type returns the QP's transport service type.
func (q *QP) Type() Type { return q.cfg.Type }

// Query returns a copy of the attributes.
func (q *QP) Query() Attr { return q.attr }

// Counters returns the QP's counters; they may be read from any goroutine.
func (q *QP) Counters() *Counters { return &q.counters }

// Modify changes attributes and state, checked against the IBTA transition
// table (ib_modify_qp_is_ok). An invalid move returns an error wrapping
// ErrInvalidTransition, a missing or extra attribute ErrInvalidAttr.
func (q *QP) Modify(a *Attr, mask AttrMask) error {
	cur := q.attr.State
	next := cur
	if mask&AttrState != 0 {
		next = a.State
	}
	if mask&AttrCurState != 0 && a.CurState != cur {
		return fmt.Errorf("%w: CUR_STATE %v but the QP is %v", ErrInvalidAttr, a.CurState, cur)
	}
	if err := checkTransition(cur, next, q.cfg.Type, mask); err != nil {
		return err
	}
	if mask&AttrPathMTU != 0 && a.PathMTU.Bytes() == 0 {
		return fmt.Errorf("%w: path MTU %d", ErrInvalidAttr, a.PathMTU)
	}
	if mask&AttrDestQPN != 0 && !a.DestQPN.Valid() {
		return fmt.Errorf("%w: dest QPN %#x", ErrInvalidAttr, uint32(a.DestQPN))
	}
	if mask&(AttrRetryCnt|AttrRNRRetry) != 0 && (a.RetryCnt > 7 || a.RNRRetry > 7) {
		return fmt.Errorf("%w: retry counts are 3-bit (0-7)", ErrInvalidAttr)
	}
	if mask&AttrTimeout != 0 && a.Timeout > 31 {
		return fmt.Errorf("%w: timeout exponent %d above 31", ErrInvalidAttr, a.Timeout)
	}
	if mask&AttrMinRNRTimer != 0 && a.MinRNRTimer > 31 {
		return fmt.Errorf("%w: RNR timer code %d above 31", ErrInvalidAttr, a.MinRNRTimer)
	}
	if mask&AttrPKeyIndex != 0 && a.PKeyIndex != 0 {
		return fmt.Errorf("%w: P_Key index %d (only index 0 = 0xFFFF exists)", ErrInvalidAttr, a.PKeyIndex)
	}
	at := &q.attr
	if mask&AttrAccessFlags != 0 {
		at.AccessFlags = a.AccessFlags
	}
	if mask&AttrPKeyIndex != 0 {
		at.PKeyIndex = a.PKeyIndex
	}
	if mask&AttrPort != 0 {
		at.Port = a.Port
	}
	if mask&AttrQKey != 0 {
		at.QKey = a.QKey
	}
	if mask&AttrAV != 0 {
		at.AV = a.AV
	}
	if mask&AttrPathMTU != 0 {
		at.PathMTU = a.PathMTU
		q.mtu = a.PathMTU.Bytes()
	}
	if mask&AttrTimeout != 0 {
		at.Timeout = a.Timeout
	}
	if mask&AttrRetryCnt != 0 {
		at.RetryCnt = a.RetryCnt
		q.comp.retryLeft = a.RetryCnt
	}
	if mask&AttrRNRRetry != 0 {
		at.RNRRetry = a.RNRRetry
		q.comp.rnrLeft = a.RNRRetry
	}
	if mask&AttrRQPSN != 0 {
		at.RQPSN = a.RQPSN & bth.PSNMask
		q.resp.epsn = at.RQPSN
	}
	if mask&AttrMaxQPRdAtomic != 0 {
		at.MaxRdAtomic = a.MaxRdAtomic
	}
	if mask&AttrMinRNRTimer != 0 {
		at.MinRNRTimer = a.MinRNRTimer
	}
	if mask&AttrSQPSN != 0 {
		at.SQPSN = a.SQPSN & bth.PSNMask
		q.req.psn = at.SQPSN
		q.req.highPSN = at.SQPSN
		q.comp.psn = at.SQPSN
	}
	if mask&AttrMaxDestRdAtomic != 0 {
		at.MaxDestRdAtomic = a.MaxDestRdAtomic
		q.resp.initResources(a.MaxDestRdAtomic)
	}
	if mask&AttrDestQPN != 0 {
		at.DestQPN = a.DestQPN
	}
	if mask&AttrEnSQDAsyncNtfy != 0 {
		at.SQDrainNotify = a.SQDrainNotify
	}
	if mask&AttrState != 0 {
		q.setState(next)
	}
	return nil
}

func (q *QP) setState(s State) {
	switch s {
	case StateReset:
		q.reset()
	case StateErr:
		q.enterError()
		return
	}
	q.attr.State = s
}

// reset returns the QP to RESET: queues emptied without completions (as
// ibv_modify_qp to RESET), transport state cleared, attributes kept.
func (q *QP) reset() {
	q.sq.clear()
	q.rq.clear()
	q.req = requester{}
	q.comp = completer{}
	res := q.resp.res
	q.resp = responder{}
	q.resp.res = res
	for i := range q.resp.res {
		q.resp.res[i] = resource{}
	}
	q.attr.State = StateReset
}

// PostSend queues a send work request. In ERR it completes at once with
// WR_FLUSH_ERR (IBA 10.8.3.3); in RESET, INIT and RTR it is refused with
// ErrInvalidState. Local keys are checked when the WR starts, so a bad lkey
// completes with LOC_PROT_ERR and puts no packet on the wire.
func (q *QP) PostSend(wr *SendWR) error {
	if !q.attr.State.takesSendWR() {
		return fmt.Errorf("%w: post_send in %v", ErrInvalidState, q.attr.State)
	}
	if len(wr.SGL) > q.cfg.MaxSGE {
		return fmt.Errorf("%w: %d > %d", ErrTooManySGE, len(wr.SGL), q.cfg.MaxSGE)
	}
	if wr.Opcode > WRSendWithInv {
		return fmt.Errorf("%w: %v", ErrUnsupportedOp, wr.Opcode)
	}
	if err := q.checkOpType(wr); err != nil {
		return err
	}
	var total uint64
	for _, s := range wr.SGL {
		total += uint64(s.Length)
	}
	if total > MaxMessageLen {
		return ErrMessageTooLong
	}
	if q.cfg.Type == TypeUD && total > uint64(q.mtu) {
		return fmt.Errorf("%w: %d bytes, MTU %d", ErrMessageOverMTU, total, q.mtu)
	}
	if wr.Opcode.isLocal() {
		total = 0 // LOCAL_INV and BIND_MW move no data; an SGL is ignored
	}
	inline := wr.Flags&SendInline != 0 && !wr.Opcode.isReadOrAtomic() && !wr.Opcode.isLocal()
	if inline && total > uint64(q.cfg.MaxInline) {
		return fmt.Errorf("%w: %d > %d", ErrInlineTooLong, total, q.cfg.MaxInline)
	}
	if q.sq.full() {
		return fmt.Errorf("%w: %d send WRs outstanding", ErrQueueFull, q.sq.max)
	}
	w := q.sq.push()
	w.reset(wr)
	w.length = uint32(total)
	if wr.Opcode.isAtomic() {
		w.length = 8
	}
	if inline {
		w.inline = w.inline[:0]
		for _, s := range wr.SGL {
			var err error
			w.inline, err = q.appendLocal(w.inline, s)
			if err != nil {
				// The data cannot be read: complete with LOC_PROT_ERR when the
				// WR reaches the head, putting nothing on the wire.
				w.localErr = true
				break
			}
		}
		w.isInline = true
	}
	if q.attr.State == StateErr {
		q.flushSend()
	}
	return nil
}

// PostRecv queues a receive work request. It is allowed in every state but
// RESET; in ERR it completes at once with WR_FLUSH_ERR. A QP with an SRQ
// has no receive queue of its own: PostRecv returns ErrInvalidArg (post to
// the SRQ instead), as ibv_post_recv fails on such a QP.
func (q *QP) PostRecv(wr *RecvWR) error {
	if q.cfg.SRQ != nil {
		return fmt.Errorf("%w: post_recv on a QP with an SRQ", ErrInvalidArg)
	}
	if !q.attr.State.takesRecvWR() {
		return fmt.Errorf("%w: post_recv in %v", ErrInvalidState, q.attr.State)
	}
	if len(wr.SGL) > q.cfg.MaxSGE {
		return fmt.Errorf("%w: %d > %d", ErrTooManySGE, len(wr.SGL), q.cfg.MaxSGE)
	}
	if q.rq.full() {
		return fmt.Errorf("%w: %d receive WRs outstanding", ErrQueueFull, q.rq.max)
	}
	r := q.rq.push()
	r.wrid = wr.WRID
	r.sgl = append(r.sgl[:0], wr.SGL...)
	var total uint64
	for _, s := range wr.SGL {
		total += uint64(s.Length)
	}
	r.length = total
	if q.attr.State == StateErr {
		q.flushRecv()
	}
	return nil
}

// AwaitingReply reports whether the oldest send WQE has gone on the wire
// and waits for its ACK or response with a timer armed (the retransmit
// timer, or the RNR wait): a packet from the peer or that timer will run
// the requester again, so a driver may leave newly posted WQEs to that
// moment and send them together. With Timeout 0 (no retransmit timer,
// IBA 9.7.6.1.3: an infinite timeout) it is false, since only new packets
// revealing a loss to the responder may then recover from it.
func (q *QP) AwaitingReply() bool {
	return q.sq.len() > 0 && q.sq.at(0).state != wqePosted && (q.comp.timerArmed || q.req.rnrWait)
}

// SRQ returns the QP's shared receive queue, or nil.
func (q *QP) SRQ() *SRQ { return q.cfg.SRQ }

// Destroy moves the QP to ERR, flushing its work requests (see Modify),
// and detaches it from its SRQ, which may then be destroyed once no other
// QP uses it. The QP must not be used afterwards; a second Destroy does
// nothing.
func (q *QP) Destroy() {
	if q.destroyed {
		return
	}
	q.destroyed = true
	q.setState(StateErr)
	if q.cfg.SRQ != nil {
		q.cfg.SRQ.detach()
	}
}

// acquireRecv makes sure a receive WQE is at the head of q.rq for a
// message that consumes one, and reports whether there is one. It is the
// one place the responder gets receive WQEs from, whatever the QP type: a
// QP's own RQ, or its SRQ, from which it moves the oldest WQE into the
// QP's one-slot RQ (rxe check_resource → get_srq_wqe). From there on the
// WQE is the QP's: it completes on the QP's receive CQ with the QP's
// number, or is flushed with WR_FLUSH_ERR if the QP enters ERR first.
func (q *QP) acquireRecv() bool {
	if q.rq.len() > 0 {
		return true
	}
	return q.cfg.SRQ != nil && q.cfg.SRQ.take(&q.rq)
}

// Deadline returns the earliest time at which OnTimeout must run, and false
// when no timer is armed.
func (q *QP) Deadline() (time.Time, bool) {
	var d time.Time
	ok := false
	if q.comp.timerArmed {
		d, ok = q.comp.timerAt, true
	}
	if q.req.rnrWait && (!ok || q.req.rnrAt.Before(d)) {
		d, ok = q.req.rnrAt, true
	}
	return d, ok
}

// OnTimeout runs the timers that are due at now: the RNR wait and the
// retransmit timer (rxe's rnr_nak_timer and retransmit_timer).
func (q *QP) OnTimeout(now time.Time) {
	if q.req.rnrWait && !now.Before(q.req.rnrAt) {
		q.req.rnrWait = false
		q.req.needRetry = true
	}
	if q.comp.timerArmed && !now.Before(q.comp.timerAt) {
		q.comp.timerArmed = false
		q.retransmitTimeout()
	}
}

// push puts a completion on cq; an overflow moves the QP to ERR (class G).
func (q *QP) push(c CompletionQueue, wc cq.Completion) {
	wc.QPN = uint32(q.qpn)
	if err := c.Push(wc); err != nil && q.attr.State != StateErr {
		q.enterError()
	}
}

// enterError moves the QP to ERR and flushes both queues in post order with
// WR_FLUSH_ERR (IBA 10.7.3.1, rxe_drain_resp_pkts / flush): every WR gets a
// completion, signaled or not. Queued NAKs are still sent.
func (q *QP) enterError() {
	if q.attr.State == StateErr {
		return
	}
	q.attr.State = StateErr
	q.comp.timerArmed = false
	q.req.rnrWait = false
	q.flushSend()
	q.flushRecv()
	if q.cfg.SRQ != nil && q.cfg.OnEvent != nil {
		// The held SRQ WQE, if any, is flushed: no more will be taken.
		q.cfg.OnEvent(EventQPLastWQEReached)
	}
}

func (q *QP) flushSend() {
	for q.sq.len() > 0 {
		w := q.sq.at(0)
		q.push(q.cfg.SendCQ, cq.Completion{
			WRID: w.wr.WRID, Status: cq.StatusWRFlushErr, Opcode: w.cqOpcode(),
		})
		q.sq.pop()
	}
	q.req.off = 0
}

func (q *QP) flushRecv() {
	for q.rq.len() > 0 {
		r := q.rq.at(0)
		q.push(q.cfg.RecvCQ, cq.Completion{WRID: r.wrid, Status: cq.StatusWRFlushErr, Opcode: cq.OpRecv})
		q.rq.pop()
	}
	q.resp.recvActive = false
}

// localAccess resolves Length bytes at off within SGE s to a region,
// checking the lkey, PD, range and access (IBA 10.6.3.2; rxe copy_data).
func (q *QP) localRegion(s SGE, off, n uint64, need mr.AccessFlags) (*mr.Region, error) {
	if r := q.lastLocal; r != nil && r.Usable(q.cfg.PD, s.LKey, need) && r.CheckRange(s.Addr+off, n) == nil {
		return r, nil
	}
	r, err := q.cfg.MRs.LookupLocal(q.cfg.PD, s.LKey, s.Addr+off, n, need)
	if err == nil {
		q.lastLocal = r
	}
	return r, err
}

// remoteRegion resolves a request's rkey, va and length for an access that
// needs need, as mr.Table.ResolveRemote does: the region (or the window's
// region) and the address in it. The last region an rkey named is checked
// again first, without the table (mr.Region.Usable): a window's rkey never
// names a region, so it always goes to the table.
func (q *QP) remoteRegion(rkey mr.Key, va, n uint64, need mr.AccessFlags) (*mr.Region, uint64, error) {
	if r := q.lastRemote; r != nil && r.Usable(q.cfg.PD, rkey, need) && r.CheckRange(va, n) == nil {
		return r, va, nil
	}
	r, xva, err := q.cfg.MRs.ResolveRemote(q.cfg.PD, q.qpn, rkey, va, n, need)
	if err == nil && r.RKey() == rkey {
		q.lastRemote = r
	}
	return r, xva, err
}

// appendLocal appends the bytes of SGE s to dst.
func (q *QP) appendLocal(dst []byte, s SGE) ([]byte, error) {
	r, err := q.localRegion(s, 0, uint64(s.Length), 0)
	if err != nil {
		return dst, err
	}
	n := len(dst)
	dst = append(dst, make([]byte, s.Length)...)
	return dst, r.ReadAt(dst[n:], s.Addr)
}

// gather copies len(dst) bytes of the message described by sgl, starting
// at message offset off, into dst.
func (q *QP) gather(dst []byte, sgl []SGE, off uint64) error {
	for _, s := range sgl {
		if len(dst) == 0 {
			return nil
		}
		l := uint64(s.Length)
		if off >= l {
			off -= l
			continue
		}
		n := min(uint64(len(dst)), l-off)
		r, err := q.localRegion(s, off, n, 0)
		if err != nil {
			return err
		}
		if err := r.ReadAt(dst[:n], s.Addr+off); err != nil {
			return err
		}
		dst = dst[n:]
		off = 0
	}
	if len(dst) != 0 {
		return errSGLShort
	}
	return nil
}

// scatter copies src into the buffers of sgl starting at message offset
// off; the regions need LOCAL_WRITE.
func (q *QP) scatter(src []byte, sgl []SGE, off uint64) error {
	for _, s := range sgl {
		if len(src) == 0 {
			return nil
		}
		l := uint64(s.Length)
		if off >= l {
			off -= l
			continue
		}
		n := min(uint64(len(src)), l-off)
		r, err := q.localRegion(s, off, n, mr.LocalWrite)
		if err != nil {
			return err
		}
		if err := r.WriteAt(src[:n], s.Addr+off); err != nil {
			return err
		}
		src = src[n:]
		off = 0
	}
	if len(src) != 0 {
		return errSGLShort
	}
	return nil
}

// checkSGL validates every SGE of a WR before its first packet, so a bad
// lkey puts nothing on the wire (matrix C10, cf. CVE-2021-47076).
func (q *QP) checkSGL(sgl []SGE, need mr.AccessFlags) error {
	for _, s := range sgl {
		if s.Length == 0 {
			continue
		}
		if _, err := q.localRegion(s, 0, uint64(s.Length), need); err != nil {
			return err
		}
	}
	return nil
}
