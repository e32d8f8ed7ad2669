package roce

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
)

// The UDP port space (RDMA_PS_UDP): service ID resolution (SIDR, IBA
// 12.11) gives a UD client the QPN and Q_Key of a server's UD QP, as
// rdma_cm's cma_resolve_ib_udp and cma_send_sidr_rep do. The SIDR_REP ends
// the exchange on both sides: there is no connection to tear down.

// ErrQKeyMismatch is returned by DialUD when the SIDR_REP names a Q_Key
// other than the UDP port space's (UDPQKey): datagrams from that QP
// would not pass the local QP's Q_Key check, so rdma_cm refuses the reply
// too (cma_sidr_rep_handler: RDMA_CM_EVENT_ADDR_ERROR, -EINVAL).
var ErrQKeyMismatch = errors.New("roce: SIDR reply Q_Key is not the UDP port space's")

// SIDRError is a refused service ID resolution: the SIDR_REP's status
// (IBA 12.11.2; rdma_cm reports it as RDMA_CM_EVENT_UNREACHABLE with the
// status) and private data. DialUD returns it for a non-success reply — a
// port nobody listens on gives cm.SIDRUnsupported, status 1, as the
// kernel's CM answers — and a UDListenConfig.Accept function returns one
// to refuse with its status and private data. It matches ErrRejected.
type SIDRError struct {
	Status SIDRStatus
	// PrivateData is the SIDR_REP's private data: on DialUD's error the
	// whole 136-byte field, zero-padded; on an Accept function's, at most
	// cm.PrivateDataSIDRREP bytes to send.
	PrivateData []byte
}

// Error returns the status.
func (e *SIDRError) Error() string {
	return fmt.Sprintf("roce: service ID resolution refused: %v (%d)", e.Status, uint8(e.Status))
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *SIDRError) Is(target error) bool { return target == ErrRejected }

// UDListenConfig configures a UDListener. The zero value answers every
// request with a new UD QP of the zero QPConfig.
type UDListenConfig struct {
	// QPConfig configures the UD QP made for each request (Type is
	// ignored: UD). Its MTU is the largest datagram.
	QPConfig QPConfig
	// Backlog bounds the answered requests waiting for Accept; requests
	// beyond it are refused with cm.SIDRReject. 0 means 16.
	Backlog int
	// Accept, if set, decides on each request before a QP is made. It
	// returns the private data of the SIDR_REP (at most
	// cm.PrivateDataSIDRREP bytes), or an error to refuse: a *SIDRError
	// with its status and private data, anything else as cm.SIDRReject
	// (rdma_reject on a UD ID). It runs on the device's CM goroutine with
	// the CM lock held, like ListenConfig.Accept.
	Accept func(req ConnRequest) (privateData []byte, err error)
	// Setup, if set, is called with each request's QP, ready (RTS, Q_Key
	// UDPQKey), before the SIDR_REP leaves: post receive WRs here, as
	// rdma_cm servers do before rdma_accept, so that the client's first
	// datagrams find them (a UD datagram without a receive WR is dropped).
	// An error refuses the request (cm.SIDRNoQP). It runs like Accept.
	Setup func(q *QP) error
}

// UDDialConfig configures DialUD. The zero value resolves with a UD QP of
// the zero QPConfig and no private data.
type UDDialConfig struct {
	// QPConfig configures the local UD QP (Type is ignored: UD).
	QPConfig QPConfig
	// PrivateData goes to the listener after the IP-CM header:
	// at most cm.PrivateDataSIDRREQ - cm.IPHeaderSize = 180 bytes.
	PrivateData []byte
	// Setup, if set, is called with the new QP, ready (RTS, Q_Key
	// UDPQKey), before the SIDR_REQ leaves: post receive WRs here, as
	// rdma_cm clients do before rdma_connect. An error ends DialUD with it.
	Setup func(q *QP) error
}

// maxSIDRPrivateData is what rdma_cm leaves the user in a SIDR_REQ.
const maxSIDRPrivateData = cm.PrivateDataSIDRREQ - cm.IPHeaderSize

// UDConn is a UD QP of the UDP port space with its peer: DialUD's, whose
// AH names the server's QP, or a UDListener's, made for one client's
// request. Its methods may be called from any goroutine.
type UDConn struct {
	qp    *QP
	ah    AH
	pd    []byte
	laddr netip.AddrPort
	raddr netip.AddrPort
}

// QP returns the UD QP, ready (RTS) with Q_Key UDPQKey. Close destroys
// it.
func (c *UDConn) QP() *QP { return c.qp }

// AH returns the peer's address handle for SendWR.UD (AH.Dest): on
// DialUD's UDConn the server's IP, QPN and Q_Key from the SIDR_REP; on an
// accepted one the client's IP and the port space's Q_Key, with QPN 0,
// since SIDR does not carry the client's QPN: set it from the client's
// first datagram (cq.Completion.SrcQP).
func (c *UDConn) AH() AH { return c.ah }

// PrivateData returns the peer's private data: on DialUD's UDConn the
// SIDR_REP's (136 bytes, zero-padded), on an accepted one the SIDR_REQ's
// after the IP-CM header (180 bytes, zero-padded).
func (c *UDConn) PrivateData() []byte { return c.pd }

// LocalAddr returns the local IP and port: the listener's, or the source
// port DialUD put in the IP-CM header.
func (c *UDConn) LocalAddr() netip.AddrPort { return c.laddr }

// RemoteAddr returns the peer's IP and rdma_cm port.
func (c *UDConn) RemoteAddr() netip.AddrPort { return c.raddr }

// Close destroys the QP; outstanding work is dropped. SIDR leaves nothing
// to tear down on the wire. Close is idempotent.
func (c *UDConn) Close() error {
	if err := c.qp.Destroy(); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoSuchQP) {
		return err
	}
	return nil
}

// UDListener answers service ID resolutions for one port of the UDP port
// space (rdma_listen on a UD rdma_cm ID). Its methods may be called from
// any goroutine.
type UDListener struct {
	s    *cmState
	sid  cm.ServiceID
	port uint16
	cfg  UDListenConfig

	backlog[*UDConn] // answered, waiting for Accept
}

// ListenUD listens on port of the UDP port space, the service ID
// cm.IPServiceID(cm.PortSpaceUDP, port) that rdma_cm's rdma_listen uses for
// RDMA_PS_UDP, so that rdma_cm UD clients (udaddy -s) resolve it as a
// kernel listener. Each SIDR_REQ gets a new UD QP, ready with Q_Key
// UDPQKey, and a SIDR_REP with its QPN; Accept returns it. As in the
// kernel's CM, which forgets a request once it has answered it, a SIDR_REQ
// the client retransmits after a lost SIDR_REP is a new request. The first
// listener or dial starts the device's connection manager (QP1). It returns
// ErrServiceInUse if the port is listened on and ErrClosed after Close.
func (d *Device) ListenUD(port uint16, cfg UDListenConfig) (*UDListener, error) {
	if cfg.Backlog == 0 {
		cfg.Backlog = 16
	}
	if cfg.Backlog < 0 {
		return nil, fmt.Errorf("%w: Backlog %d", ErrInvalidArg, cfg.Backlog)
	}
	cfg.QPConfig.Type = UD
	var l *UDListener
	err := d.listen(cm.PortSpaceUDP, port, func(s *cmState, sid cm.ServiceID) {
		l = &UDListener{s: s, sid: sid, port: port, cfg: cfg, backlog: newBacklog[*UDConn](cfg.Backlog)}
		s.udListeners[sid] = l
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Addr returns the listener's local IP and port.
func (l *UDListener) Addr() netip.AddrPort { return netip.AddrPortFrom(l.s.d.local.Addr(), l.port) }

// Accept waits for an answered request and returns its UDConn. It returns
// ErrClosed once the listener or the device is closed, and the context's
// error when it is done first.
func (l *UDListener) Accept(ctx context.Context) (*UDConn, error) { return l.accept(ctx) }

// Close stops listening: new requests get cm.SIDRUnsupported, as for a port
// nobody listens on, and the answered requests not yet accepted lose their
// QPs. Close is idempotent.
func (l *UDListener) Close() error {
	return l.close(l.s, func() { delete(l.s.udListeners, l.sid); l.s.m.Unlisten(l.sid) })
}

// onSIDRRequest answers a SIDR_REQ for a listened-on port; the caller
// holds the CM lock. The statuses follow the kernel: a bad IP-CM header or
// a refusal is SIDRReject (cma_ib_req_handler failing, rdma_reject), a QP
// that cannot be made SIDRNoQP.
func (s *cmState) onSIDRRequest(now time.Time, e *cm.Event) {
	reply := func(p *cm.SIDRReplyParams) error {
		out, err := s.m.SIDRReply(now, e.ID, p)
		if err == nil {
			s.apply(now, out)
		}
		return err
	}
	refuse := func(st cm.SIDRStatus, pd []byte) { _ = reply(&cm.SIDRReplyParams{Status: st, PrivateData: pd}) }
	l := s.udListeners[e.ServiceID]
	if l == nil && s.listeners[e.ServiceID] == nil || l != nil && l.closed {
		refuse(cm.SIDRUnsupported, nil) // a listener closing meanwhile
		return
	}
	// rdma_cm's checks, as for a REQ (onRequest): the IP-CM header, and a
	// SIDR_REQ for an RC listener's service ID (cma_ib_check_req_qp_type)
	// is refused with status reject (cm_destroy_id in SIDR_REQ_RCVD).
	h, err := cm.CheckIPHeader(e.PrivateData, s.d.local.Addr())
	if err != nil || l == nil || len(l.ready) >= cap(l.ready) {
		refuse(cm.SIDRReject, nil)
		return
	}
	raddr := netip.AddrPortFrom(e.Peer, h.SrcPort())
	user := e.PrivateData[cm.IPHeaderSize:]
	var pd []byte
	if l.cfg.Accept != nil {
		pd, err = l.cfg.Accept(ConnRequest{RemoteAddr: raddr, PrivateData: user})
		if err != nil {
			var se *SIDRError
			if errors.As(err, &se) && se.Status != cm.SIDRSuccess {
				refuse(se.Status, se.PrivateData)
			} else {
				refuse(cm.SIDRReject, nil)
			}
			return
		}
		if len(pd) > cm.PrivateDataSIDRREP {
			s.d.log.Debug("cm: SIDR reply private data too long", "len", len(pd))
			refuse(cm.SIDRReject, nil)
			return
		}
	}
	q, err := s.d.CreateQP(l.cfg.QPConfig)
	if err != nil {
		refuse(cm.SIDRNoQP, nil)
		return
	}
	err = q.Ready(cm.UDPQKey)
	if err == nil && l.cfg.Setup != nil {
		err = l.cfg.Setup(q)
	}
	if err != nil {
		q.Destroy()
		refuse(cm.SIDRNoQP, nil)
		return
	}
	c := &UDConn{qp: q, pd: user, laddr: netip.AddrPortFrom(s.d.local.Addr(), l.port), raddr: raddr,
		ah: AH{Addr: e.Peer, QKey: cm.UDPQKey}}
	if err := reply(&cm.SIDRReplyParams{Status: cm.SIDRSuccess, QPN: q.QPN(), QKey: cm.UDPQKey, PrivateData: pd}); err != nil {
		// The Manager sent no SIDR_REP (it no longer knows the request):
		// the client never learns this QP, so it must not reach Accept.
		s.d.log.Debug("cm: SIDR reply not sent", "err", err)
		q.Destroy()
		return
	}
	l.ready <- c // len(ready) < cap, checked above, under the CM lock
}

// udDial is a DialUD waiting for its SIDR_REP; guarded by the CM lock.
type udDial struct {
	ready chan struct{} // closed when the reply (or its absence) is known
	err   error
	qpn   bth.QPN
	qkey  uint32
	pd    []byte
}

// onSIDRReply ends a DialUD's wait; the caller holds the CM lock.
func (s *cmState) onSIDRReply(e *cm.Event) {
	dl := s.udDials[e.ID]
	if dl == nil {
		return
	}
	delete(s.udDials, e.ID)
	switch {
	case e.Kind == cm.EventUnreachable:
		dl.err = ErrUnreachable
	case e.SIDRStatus != cm.SIDRSuccess:
		dl.err = &SIDRError{Status: e.SIDRStatus, PrivateData: e.PrivateData}
	case e.QKey != cm.UDPQKey:
		dl.err = fmt.Errorf("%w: %#x, want %#x", ErrQKeyMismatch, e.QKey, uint32(cm.UDPQKey))
	}
	dl.qpn, dl.qkey, dl.pd = e.QP.RemoteQPN, e.QKey, e.PrivateData
	close(dl.ready)
}

// DialUD resolves the UD service at raddr (an rdma_cm UD listener on
// raddr.Port() in the UDP port space, such as udaddy's, or a UDListener of
// this package) as rdma_connect does on a UD rdma_cm ID: it makes a UD QP
// ready with Q_Key UDPQKey, sends a SIDR_REQ with the IP-CM header to
// the peer's QP1, retransmitted on timeout (Config.CM), and returns, when
// the SIDR_REP comes, a UDConn whose AH sends to the server's QP. It
// returns a *SIDRError (errors.Is ErrRejected) for a reply that refuses,
// ErrQKeyMismatch for one with another Q_Key, ErrUnreachable when no reply
// comes through all retransmissions, and the context's error when ctx is
// done first.
func (d *Device) DialUD(ctx context.Context, raddr netip.AddrPort, cfg UDDialConfig) (*UDConn, error) {
	if len(cfg.PrivateData) > maxSIDRPrivateData {
		return nil, fmt.Errorf("%w: %d bytes of private data, at most %d", cm.ErrPrivateData,
			len(cfg.PrivateData), maxSIDRPrivateData)
	}
	if !raddr.Addr().IsValid() {
		return nil, fmt.Errorf("%w: address %v", ErrInvalidArg, raddr)
	}
	cfg.QPConfig.Type = UD
	s, q, sport, pd, err := d.dialStart(raddr, cfg.QPConfig,
		func(q *QP) error { return q.Ready(cm.UDPQKey) }, cfg.Setup, cfg.PrivateData)
	if err != nil {
		return nil, err
	}
	local := d.local.Addr()

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		q.Destroy()
		return nil, ErrClosed
	}
	now := time.Now()
	id, out, err := s.m.ResolveService(now, &cm.SIDRParams{Peer: raddr.Addr(),
		ServiceID: cm.IPServiceID(cm.PortSpaceUDP, raddr.Port()), PrivateData: pd})
	if err != nil {
		s.mu.Unlock()
		q.Destroy()
		return nil, err
	}
	dl := &udDial{ready: make(chan struct{})}
	s.udDials[id] = dl
	s.apply(now, out)
	s.kick()
	s.mu.Unlock()

	werr := s.wait(ctx, dl.ready)
	s.mu.Lock()
	select {
	case <-dl.ready:
		werr = nil
	default:
		// Canceled, or the device closed: stop the retransmissions.
		delete(s.udDials, id)
		if !s.closed {
			s.m.CancelResolve(id)
			s.kick()
		}
	}
	s.mu.Unlock()
	if werr == nil {
		werr = dl.err
	}
	if werr != nil {
		q.Destroy()
		return nil, werr
	}
	return &UDConn{qp: q, ah: AH{Addr: raddr.Addr(), QPN: dl.qpn, QKey: dl.qkey}, pd: dl.pd,
		laddr: netip.AddrPortFrom(local, sport), raddr: raddr}, nil
}
