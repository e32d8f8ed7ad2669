package roce

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// The connection manager's binding to the device: QP1 and the goroutine
// that owns the cm.Manager.
//
// QP1 (the GSI QP, IBA 13.4.2) is an ordinary UD QP of the device with QPN
// 1 and Q_Key IB_QP1_QKEY, made when Listen or Dial first needs it. Its
// datagrams take the device's normal receive path, so the CM adds nothing
// to the data path; the CM goroutine reads QP1's completions and hands
// each MAD, with the source address of its GRH area, to the Manager.
//
// Locking: the CM lock (cmState.mu) guards the Manager, the listeners and
// the connections. It is taken by the CM goroutine (received MADs, the
// Manager's timers) and by the API (Listen, Dial, Accept, Close), and is
// always taken before the engine lock, never while holding it: applying an
// event modifies QPs and sending a MAD posts to QP1, both of which take the
// engine lock. The Manager's one timer is a time.Timer owned by the CM
// goroutine, re-armed to Manager.Deadline after every call (the style's
// Deadline/OnTimeout); API calls poke the goroutine to re-arm it.

// GSI constants (IBA 13.4.2; rdma_cm's RoCE values).
const (
	gsiQPN  = bth.QPN(1)
	gsiQKey = 0x80010000 // IB_QP1_QKEY
	gsiPKey = 0xFFFF     // the default P_Key, which the QPs send

	gsiRecvs = 64                     // receive WRs posted on QP1
	gsiSlot  = qp.GRHLen + cm.MADSize // one receive buffer: GRH area + MAD
)

// rdma_cm's connection defaults (librdmacm and drivers/infiniband/core/cma.c).
const (
	cmRetryCount  = 7  // retry_cnt rping and ucmatose ask for
	cmRNRRetry    = 7  // rnr_retry_count: infinite
	cmRdAtomic    = 16 // responder resources / initiator depth offered
	cmMinRNRTimer = 0  // cm_init_qp_rtr_attr: min_rnr_timer 0 (655.36 ms)
	// cmMRAServiceTimeout is the service timeout of rdma_cm's delayed MRA
	// (CMA_CM_MRA_SETTING without the delay flag): 4.096 µs·2^24 ≈ 69 s.
	cmMRAServiceTimeout = 24
)

// cmState is the device's connection manager.
type cmState struct {
	d    *Device
	mu   sync.Mutex // the CM lock, see above
	m    *cm.Manager
	guid cm.GUID // the node GUID the Manager sends (NodeGUID)
	gsi  *QP
	rx   []byte // gsiRecvs receive slots
	rxr  *mr.Region
	tx   []byte // the MAD being posted (SendInline copies it)
	txr  *mr.Region
	wc   []cq.Completion

	listeners map[cm.ServiceID]*Listener
	conns     map[cm.CommID]*Conn
	closed    bool

	// The UDP port space (sidr.go).
	udListeners map[cm.ServiceID]*UDListener
	udDials     map[cm.CommID]*udDial

	poke chan struct{} // re-arm the timer (capacity 1)
	done chan struct{} // closed by close
	wg   sync.WaitGroup
}

// cmStart returns the device's connection manager, starting it (QP1 and
// its goroutine) on first use.
func (d *Device) cmStart() (*cmState, error) {
	d.cmMu.Lock()
	defer d.cmMu.Unlock()
	if d.cms != nil {
		return d.cms, nil
	}
	if d.isClosed() || d.cmClosed {
		return nil, ErrClosed // cmClosed: closeCM ran, with nothing to stop
	}
	cmc := d.cfg.CM
	guid := d.deriveGUID()
	cmc.LocalCAGUID = uint64(guid)
	m, err := cm.New(cmc)
	if err != nil {
		return nil, err
	}
	s := &cmState{d: d, m: m, guid: guid, rx: make([]byte, gsiRecvs*gsiSlot), tx: make([]byte, cm.MADSize),
		wc: make([]cq.Completion, 16), listeners: map[cm.ServiceID]*Listener{}, conns: map[cm.CommID]*Conn{},
		udListeners: map[cm.ServiceID]*UDListener{}, udDials: map[cm.CommID]*udDial{},
		poke: make(chan struct{}, 1), done: make(chan struct{})}
	gsi, err := d.createQP(QPConfig{Type: UD, MaxRecvWR: gsiRecvs, MaxInline: cm.MADSize, MTU: qp.MTU256}, gsiQPN)
	if err != nil {
		return nil, err
	}
	s.gsi = gsi
	fail := func(err error) (*cmState, error) {
		gsi.Destroy()
		for _, r := range []*mr.Region{s.rxr, s.txr} {
			if r != nil {
				d.DeregisterMR(r)
			}
		}
		return nil, err
	}
	if s.rxr, err = d.RegisterMR(nil, s.rx, mr.LocalWrite); err != nil {
		return fail(err)
	}
	if s.txr, err = d.RegisterMR(nil, s.tx, 0); err != nil {
		return fail(err)
	}
	if err := gsi.Ready(gsiQKey); err != nil {
		return fail(err)
	}
	for i := range gsiRecvs {
		if err := s.postRecv(i); err != nil {
			return fail(err)
		}
	}
	d.cms = s
	s.wg.Add(1)
	go s.run()
	return s, nil
}

// NodeGUID returns the device's node GUID: the Local CA GUID its
// connection manager puts in every REQ and REP, and the ARI of the REJ a
// canceled Dial sends (reason Timeout), as the kernel's CM puts the
// device's node_guid there (cm_format_req, cm_format_rep, cm_destroy_id).
// It is, in order:
//
//   - Config.CM.LocalCAGUID, if not zero;
//   - for a raw binding (link/afpacket, link/afxdp), the modified EUI-64
//     of its interface's MAC, as rxe derives node_guid from its netdev's
//     (cm.GUIDFromMAC);
//   - otherwise (link/udp, or any link whose address a host interface
//     owns), the EUI-64 of the MAC of the interface that owns the local
//     address;
//   - for the loopback interface, an interface without a MAC, or an
//     address no interface owns (link/mem), cm.GUIDFromAddr of the local
//     address and port: stable, non-zero, locally administered, and
//     different for devices on 127.0.0.1 and 127.0.0.2.
//
// doc/cm.md §1 has the derivation. The GUID never changes while the
// device is open; the CM reads it once, when Listen or Dial starts it.
func (d *Device) NodeGUID() GUID {
	d.cmMu.Lock()
	s := d.cms
	d.cmMu.Unlock()
	if s != nil {
		return s.guid
	}
	return d.deriveGUID()
}

// deriveGUID is NodeGUID's derivation; it takes no lock.
func (d *Device) deriveGUID() cm.GUID {
	if g := d.cfg.CM.LocalCAGUID; g != 0 {
		return cm.GUID(g)
	}
	if l, ok := d.link.(interface{ MAC() [6]byte }); ok {
		mac := l.MAC()
		if g, ok := cm.GUIDFromMAC(mac[:]); ok {
			return g
		}
	}
	if g, ok := cm.GUIDFromMAC(interfaceMAC(d.local.Addr())); ok {
		return g
	}
	return cm.GUIDFromAddr(d.local)
}

// interfaceMAC returns the hardware address of the host interface that
// owns addr, or nil (no interface owns it, or it is unspecified).
func interfaceMAC(addr netip.Addr) []byte {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsUnspecified() {
		return nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for _, ifc := range ifs {
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
				return ifc.HardwareAddr
			}
		}
	}
	return nil
}

// closeCM stops the connection manager, if it was started: every
// connection's peer is told (a DREQ, not waited for, or a REJ, as the
// kernel's cm_destroy_id), the MADs leave before it returns, waiting Dials
// and Accepts return ErrClosed, and the CM goroutine has returned.
func (d *Device) closeCM() {
	d.cmMu.Lock()
	s := d.cms
	d.cmClosed = true // a Listen or Dial racing Close starts no manager after this
	d.cmMu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	// Tell each connection's peer, as the kernel does for a program that
	// ends (doc/cm.md §3); a SIDR_REQ out is dropped.
	now := time.Now()
	var bye []cm.Datagram
	for _, c := range s.conns {
		if out, err := s.m.Destroy(now, c.id); err == nil {
			bye = append(bye, out.Send...)
		}
		c.finish(ErrClosed)
	}
	for id := range s.udDials {
		s.m.CancelResolve(id)
	}
	for _, l := range s.listeners {
		l.shut()
	}
	for _, l := range s.udListeners {
		l.shut()
	}
	close(s.done)
	s.mu.Unlock()
	s.wg.Wait()
	s.sendLast(bye)
}

// cmCloseWait bounds how long closeCM waits for QP1 to have sent its
// last MADs (the engine builds them within microseconds).
const cmCloseWait = time.Second

// gsiLastWRID is the WRID of the signaled last send of closeCM; receive
// slots have WRIDs below gsiRecvs.
const gsiLastWRID = gsiRecvs + 1

// sendLast posts the MADs closeCM owes the peers, the last one signaled,
// and waits (at most cmCloseWait) for its completion: QP1 completes its
// sends in order as it builds their packets, so they are all queued for
// the link before the device's Close moves QP1 to ERR, which would flush
// what is still posted. The CM goroutine has returned.
func (s *cmState) sendLast(dgs []cm.Datagram) {
	if len(dgs) == 0 {
		return
	}
	s.send(dgs[:len(dgs)-1])
	dg := dgs[len(dgs)-1]
	n := copy(s.tx, dg.MAD)
	ah := AH{Addr: dg.Peer, QPN: gsiQPN, QKey: gsiQKey}
	if err := s.gsi.PostSend(&qp.SendWR{WRID: gsiLastWRID, Opcode: qp.WRSend, Flags: qp.SendInline | qp.SendSignaled,
		SGL: []qp.SGE{s.txr.SGE(0, n)}, UD: ah.Dest()}); err != nil {
		s.d.log.Debug("cm: MAD not sent", "peer", dg.Peer, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmCloseWait)
	defer cancel()
	for {
		n, err := s.gsi.SendCQ().Wait(ctx, s.wc)
		if err != nil {
			s.d.log.Debug("cm: last MADs not confirmed sent", "err", err)
			return
		}
		for i := range n {
			if s.wc[i].WRID == gsiLastWRID && !s.wc[i].Opcode.IsRecv() {
				return
			}
		}
	}
}

// postRecv posts receive slot i on QP1.
func (s *cmState) postRecv(i int) error {
	return s.gsi.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{s.rxr.SGE(i*gsiSlot, gsiSlot)}})
}

// kick makes the CM goroutine re-arm its timer; the caller holds the CM lock.
func (s *cmState) kick() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// run is the CM goroutine: QP1's receive completions and the Manager's
// timer.
func (s *cmState) run() {
	defer s.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	notify := s.gsi.RecvCQ().Notify()
	for {
		select {
		case <-s.done:
			return
		case <-notify:
		case <-s.poke:
		case <-t.C:
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		now := time.Now()
		for {
			n := s.gsi.RecvCQ().Poll(s.wc)
			for i := range n {
				s.onCompletion(now, &s.wc[i])
			}
			if n < len(s.wc) {
				break
			}
		}
		if dl, ok := s.m.Deadline(); ok && !dl.After(now) {
			s.apply(now, s.m.OnTimeout(now))
		}
		if dl, ok := s.m.Deadline(); ok {
			t.Reset(dl.Sub(now))
		} else {
			t.Stop()
		}
		s.mu.Unlock()
	}
}

// onCompletion hands a MAD received on QP1 to the Manager and reposts its
// buffer. The source address is the GRH area's (the IP header the
// datagram came in).
func (s *cmState) onCompletion(now time.Time, wc *cq.Completion) {
	if wc.Status != cq.StatusSuccess || !wc.Opcode.IsRecv() || wc.WRID >= gsiRecvs {
		return // flushed by Close, or a send's
	}
	i := int(wc.WRID)
	slot := s.rx[i*gsiSlot : (i+1)*gsiSlot]
	n := min(int(wc.ByteLen), gsiSlot)
	if src, ok := qp.GRHSource(slot[:qp.GRHLen]); ok && n >= qp.GRHLen {
		s.apply(now, s.m.Receive(now, src, slot[qp.GRHLen:n]))
	}
	clear(slot)
	s.postRecv(i) // fails only once the device closes
}

// apply delivers the Manager's events, then sends its MADs: QP
// transitions come before the message that tells the peer (cm.Output).
func (s *cmState) apply(now time.Time, out cm.Output) {
	for i := range out.Events {
		s.event(now, &out.Events[i])
	}
	s.send(out.Send)
}

// send posts MADs on QP1 as UD SEND ONLY to the peers' QP1 (DETH Q_Key
// IB_QP1_QKEY, SrcQP 1, the default P_Key).
func (s *cmState) send(dgs []cm.Datagram) {
	for _, dg := range dgs {
		n := copy(s.tx, dg.MAD)
		ah := AH{Addr: dg.Peer, QPN: gsiQPN, QKey: gsiQKey}
		err := s.gsi.PostSend(&qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendInline,
			SGL: []qp.SGE{s.txr.SGE(0, n)}, UD: ah.Dest()})
		if err != nil {
			s.d.log.Debug("cm: MAD not sent", "peer", dg.Peer, "err", err)
		}
	}
}

// event applies one Manager event to its connection.
func (s *cmState) event(now time.Time, e *cm.Event) {
	switch {
	case e.Kind == cm.EventConnectRequest:
		s.onRequest(now, e)
		return
	case e.Kind == cm.EventSIDRRequest:
		s.onSIDRRequest(now, e)
		return
	case e.Kind == cm.EventSIDRReply || s.udDials[e.ID] != nil:
		s.onSIDRReply(e) // a reply, or a SIDR_REQ unanswered (EventUnreachable)
		return
	}
	c := s.conns[e.ID]
	if c == nil {
		return
	}
	switch e.Kind {
	case cm.EventEstablished:
		if c.passive {
			c.l.pending--
			c.state = connEstablished
			if !c.l.closed {
				c.l.ready <- c // pending+len(ready) ≤ backlog
				return
			}
			// The listener closed while this one waited for its RTU:
			// nobody will Accept it, so its QP goes with the disconnect.
			c.abandoned, c.closed = true, true
			s.disconnect(now, c)
			return
		}
		c.pd = e.PrivateData
		if err := c.qp.connectCM(&e.QP, c.raddr.Addr()); err != nil {
			// The RTU is on its way; take the connection down again.
			// Dial returns err and never hands out the Conn, so its QP
			// goes with the disconnect.
			s.d.log.Debug("cm: QP transition failed", "err", err)
			c.abandoned = true
			s.disconnect(now, c)
			c.finish(err)
			return
		}
		c.state = connEstablished
		if c.abandoned {
			s.disconnect(now, c)
			return
		}
		c.finish(nil)
	case cm.EventRejected:
		s.fail(c, &RejectError{Reason: e.Reason, PrivateData: e.PrivateData})
	case cm.EventUnreachable:
		s.fail(c, fmt.Errorf("%w: %v", ErrUnreachable, c.raddr))
	case cm.EventDisconnected:
		c.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState) // flush (rdma_disconnect)
		c.state = connDisconnected
		if c.abandoned {
			c.qp.Destroy() // nobody holds this Conn
		}
		if c.closed {
			c.finish(ErrClosed) // our DREQ, answered or timed out
		} else {
			c.finish(ErrDisconnected)
		}
	case cm.EventTimewaitExit:
		delete(s.conns, e.ID)
	}
}

// fail ends a connection that was never established (or was rejected
// after): its QP is destroyed and a waiting Dial returns err.
func (s *cmState) fail(c *Conn, err error) {
	if c.passive && c.state == connPending {
		c.l.pending--
	}
	if c.state != connEstablished || c.abandoned {
		delete(s.conns, c.id)
		c.qp.Destroy()
	} else {
		c.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState) // a REJ after the RTU
	}
	c.state = connDisconnected
	c.finish(err)
}

// disconnect sends a DREQ for an established connection and moves its QP
// to ERR; the caller holds the CM lock.
func (s *cmState) disconnect(now time.Time, c *Conn) {
	c.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState)
	out, err := s.m.Disconnect(now, c.id, nil)
	if err != nil {
		return
	}
	s.apply(now, out)
	s.kick()
}

// onRequest answers a REQ for a listened-on service: the listener's
// Accept function decides; an accepted connection gets a QP brought to RTS
// before the REP leaves, and waits for the RTU.
func (s *cmState) onRequest(now time.Time, e *cm.Event) {
	reject := func(reason cm.RejectReason, pd []byte) {
		if out, err := s.m.Reject(now, e.ID, reason, pd); err == nil {
			s.apply(now, out)
		}
	}
	// rdma_cm's checks before its consumer sees the request
	// (cma_ib_req_handler): the IP-CM header (cma_ib_id_from_event) and
	// the transport against the listener's QP type
	// (cma_ib_check_req_qp_type), each refused with reason consumer
	// defined (28), as doc/cm.md §2 has the kernel answer.
	l := s.listeners[e.ServiceID]
	if l == nil && s.udListeners[e.ServiceID] == nil || l != nil && l.closed {
		reject(cm.RejectInvalidServiceID, nil) // a listener closing meanwhile
		return
	}
	h, err := cm.CheckIPHeader(e.PrivateData, s.d.local.Addr())
	if err != nil || l == nil || e.QP.Transport != cm.TransportRC {
		reject(cm.RejectConsumerDefined, nil)
		return
	}
	if l.pending+len(l.ready) >= cap(l.ready) {
		reject(cm.RejectNoResources, nil)
		return
	}
	// rdma_cm hands the request to its consumer with a delayed MRA
	// (CMA_CM_MRA_SETTING): what follows is the consumer's REP or REJ,
	// from MRAREQSent.
	if out, err := s.m.SendMRA(now, e.ID, cm.MRAFlagDelay|cmMRAServiceTimeout, nil); err == nil {
		s.apply(now, out)
	}
	if e.QP.PathMTU.Bytes() == 0 {
		// A path MTU code no QP takes (0, or 6–15: reserved, IBA
		// 12.6.5): the kernel rejects it as rdma_accept's failure to
		// reach RTR, consumer defined (28), with no REP (doc/cm.md §2).
		reject(cm.RejectConsumerDefined, nil)
		return
	}
	raddr := netip.AddrPortFrom(e.Peer, h.SrcPort())
	user := e.PrivateData[cm.IPHeaderSize:]
	var reply []byte
	if l.cfg.Accept != nil {
		reply, err = l.cfg.Accept(ConnRequest{RemoteAddr: raddr, PrivateData: user})
		if err != nil {
			var re *RejectError
			if errors.As(err, &re) {
				reject(re.Reason, re.PrivateData)
			} else {
				reject(cm.RejectConsumerDefined, nil)
			}
			return
		}
	}
	q, err := s.d.CreateQP(l.cfg.QPConfig)
	if err != nil {
		reject(cm.RejectNoResources, nil)
		return
	}
	c := &Conn{s: s, id: e.ID, qp: q, passive: true, l: l, pd: user,
		laddr: netip.AddrPortFrom(s.d.local.Addr(), l.port), raddr: raddr,
		ready: make(chan struct{}), done: make(chan struct{})}
	err = q.initCM(l.cfg.Access)
	if err == nil && l.cfg.Setup != nil {
		err = l.cfg.Setup(q)
	}
	if err != nil {
		q.Destroy()
		reject(cm.RejectNoResources, nil)
		return
	}
	params, out, err := s.m.Accept(now, e.ID, &cm.AcceptParams{QPN: q.QPN(), StartingPSN: q.Info().PSN,
		ResponderResources: orDefault(l.cfg.ResponderResources, cmRdAtomic),
		InitiatorDepth:     orDefault(l.cfg.InitiatorDepth, cmRdAtomic),
		RNRRetryCount:      cmRNRRetry, PrivateData: reply})
	if err != nil {
		q.Destroy()
		reject(cm.RejectNoResources, nil)
		return
	}
	if err := q.connectCM(&params, e.Peer); err != nil {
		// The Manager is in REPSent with its REP unsent: forget the
		// connection (the peer gets a REJ, as from cm_destroy_id), or its
		// timer would send a REP for a QP that no longer exists.
		q.Destroy()
		if o, err := s.m.Destroy(now, e.ID); err == nil {
			s.apply(now, o)
		}
		return
	}
	s.conns[e.ID] = c
	l.pending++
	s.send(out.Send)
	s.kick()
}

// initCM moves a QP RESET → INIT granting the remote access flags.
func (h *QP) initCM(access mr.AccessFlags) error {
	return h.Modify(&qp.Attr{State: qp.StateInit, AccessFlags: access & (mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic)},
		qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
}

// connectCM moves a QP INIT → RTR → RTS with what the CM negotiated, the
// attributes ib_cm_init_qp_attr gives rdma_cm.
func (h *QP) connectCM(p *cm.QPParams, peer netip.Addr) error {
	rtr := qp.Attr{State: qp.StateRTR, PathMTU: qp.MTU(p.PathMTU), DestQPN: p.RemoteQPN, RQPSN: p.RecvPSN,
		MaxDestRdAtomic: p.MaxDestRdAtomic, MinRNRTimer: cmMinRNRTimer, AV: qp.AddressVector{Remote: peer}}
	if err := h.Modify(&rtr, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|
		qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		return err
	}
	rts := qp.Attr{State: qp.StateRTS, SQPSN: p.SendPSN, Timeout: p.ACKTimeout, RetryCnt: p.RetryCount,
		RNRRetry: p.RNRRetryCount, MaxRdAtomic: p.MaxRdAtomic}
	return h.Modify(&rts, qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic)
}

// wait waits for ch, the context or the CM's close.
func (s *cmState) wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return ErrClosed
	}
}
