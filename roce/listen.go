package roce

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// Errors of the connection API.
var (
	// ErrRejected is matched (errors.Is) by every *RejectError.
	ErrRejected = errors.New("roce: connection rejected")
	// ErrUnreachable is returned by Dial when the peer never answered the
	// REQ, or a REP, through all the CM's retransmissions.
	ErrUnreachable = errors.New("roce: connection manager peer unreachable")
	// ErrDisconnected is Conn.Err once the peer disconnected.
	ErrDisconnected = errors.New("roce: connection disconnected")
)

// RejectError is a refused connection: the REJ's reason (IBA 12.6.7.2;
// rdma_cm's RDMA_CM_EVENT_REJECTED status) and private data. Dial returns
// it when the peer rejects (a port nobody listens on gives
// cm.RejectInvalidServiceID, reason 8); a ListenConfig.Accept function
// returns one to reject with its reason and private data.
type RejectError struct {
	Reason RejectReason
	// PrivateData is the REJ's private data: on Dial's error the whole
	// 148-byte field, zero-padded as rdma_cm delivers it; on an Accept
	// function's, at most cm.PrivateDataREJ bytes to send.
	PrivateData []byte
}

// Error returns the reason.
func (e *RejectError) Error() string {
	return fmt.Sprintf("roce: connection rejected: %v (%d)", e.Reason, uint16(e.Reason))
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

// ConnRequest is a connection request as a ListenConfig.Accept function
// sees it.
type ConnRequest struct {
	RemoteAddr netip.AddrPort // the peer's IP and its rdma_cm source port
	// PrivateData is the user part of the REQ's private data (after the
	// 36-byte IP-CM header): 56 bytes, zero-padded. It is valid only
	// during the call.
	PrivateData []byte
}

// ListenConfig configures a Listener. The zero value accepts every
// request, with a QP of the zero QPConfig and no remote access.
type ListenConfig struct {
	// QPConfig configures each accepted connection's QP (RC: Type is
	// ignored).
	QPConfig QPConfig
	// Access is the remote access the connections' QPs grant the peer
	// (mr.RemoteWrite, mr.RemoteRead, mr.RemoteAtomic); the default is
	// none: the peer may only SEND. Memory regions need the access too.
	Access AccessFlags
	// Backlog bounds the connections being set up or waiting for Accept;
	// requests beyond it are rejected with cm.RejectNoResources. 0 means 16.
	Backlog int
	// Accept, if set, decides on each request before a QP is made. It
	// returns the private data of the REP (at most cm.PrivateDataREP
	// bytes), or an error to reject: a *RejectError with its reason and
	// private data, anything else as cm.RejectConsumerDefined. It runs on
	// the device's CM goroutine with the CM lock held: it must return
	// promptly and must not call Listen, Dial, Accept or Close.
	Accept func(req ConnRequest) (privateData []byte, err error)
	// Setup, if set, is called with each accepted connection's QP in INIT,
	// before the REP leaves: post receive WRs here, as rdma_cm servers do
	// before rdma_accept, so that the peer's first SENDs find them (else
	// they wait out an RNR timer, 655 ms with rdma_cm's min_rnr_timer 0).
	// An error rejects the request (cm.RejectNoResources). It runs like
	// Accept, on the CM goroutine.
	Setup func(q *QP) error
	// ResponderResources and InitiatorDepth are rdma_conn_param's, as
	// rdma_accept takes them: the RDMA READ/atomic requests of the peer
	// each connection's QP serves at once (max_dest_rd_atomic), and those
	// it may have outstanding itself (max_rd_atomic). The REP lowers each
	// to what the REQ offered (its initiator depth, its responder
	// resources). 0 offers 16.
	ResponderResources, InitiatorDepth uint8
}

// DialConfig configures Dial. The zero value connects a QP of the zero
// QPConfig, granting no remote access, MTU 1024, without private data.
type DialConfig struct {
	QPConfig QPConfig
	// Access is the remote access the QP grants the peer (default none).
	Access AccessFlags
	// PrivateData goes to the listener (ConnRequest.PrivateData,
	// Conn.PrivateData): at most 56 bytes, after the IP-CM header.
	PrivateData []byte
	// MTU is the path MTU (0: 1024, rdma_cm's on a 1500-byte Ethernet).
	MTU MTU
	// Setup, if set, is called with the new QP in INIT before the REQ
	// leaves: post receive WRs here, as rdma_cm clients do before
	// rdma_connect, so that the listener's first SENDs find them. An error
	// ends Dial with it.
	Setup func(q *QP) error
	// ResponderResources and InitiatorDepth are rdma_conn_param's, as
	// rdma_connect takes them: the RDMA READ/atomic requests of the peer
	// the QP serves at once (max_dest_rd_atomic), and those it may have
	// outstanding itself (max_rd_atomic, lowered to the REP's responder
	// resources). 0 offers 16; perftest offers its out_reads in read and
	// atomic tests (rxe's max_qp_rd_atom, 128).
	ResponderResources, InitiatorDepth uint8
}

// orDefault returns v, or def when v is 0.
func orDefault(v, def uint8) uint8 {
	if v == 0 {
		return def
	}
	return v
}

// maxDialPrivateData is what rdma_cm leaves the user in a REQ.
const maxDialPrivateData = cm.PrivateDataREQ - cm.IPHeaderSize

// connState is a Conn's life cycle.
type connState uint8

const (
	connPending connState = iota
	connEstablished
	connDisconnected
)

// Conn is a connected RC QP made by the connection manager: Dial's, or
// Listener.Accept's. Its methods may be called from any goroutine.
type Conn struct {
	s       *cmState
	id      cm.CommID
	qp      *QP
	passive bool
	l       *Listener // the passive side's
	pd      []byte
	laddr   netip.AddrPort
	raddr   netip.AddrPort

	// Guarded by the CM lock.
	state     connState
	abandoned bool // Dial gave up (context); disconnect when it comes up
	closed    bool // Close was called
	finished  bool
	dialErr   error         // Dial's result
	endErr    error         // why the connection ended; done is closed once set
	ready     chan struct{} // closed when Dial's wait ends (established or failed)
	done      chan struct{} // closed when the connection is gone
}

// finish ends Dial's wait on c with err (nil: established) the first time
// it is called, and the connection itself with the first non-nil err; the
// caller holds the CM lock.
func (c *Conn) finish(err error) {
	if !c.finished {
		c.finished = true
		c.dialErr = err
		close(c.ready)
	}
	if err != nil && c.endErr == nil {
		c.endErr = err
		close(c.done)
	}
}

// QP returns the connection's queue pair, in RTS. Post to it as to any QP;
// Close destroys it.
func (c *Conn) QP() *QP { return c.qp }

// PrivateData returns the peer's private data: on Dial's Conn the REP's
// (196 bytes, zero-padded), on Accept's the REQ's after the IP-CM header
// (56 bytes, zero-padded).
func (c *Conn) PrivateData() []byte { return c.pd }

// LocalAddr returns the local IP and port: the listener's, or the source
// port Dial put in the IP-CM header.
func (c *Conn) LocalAddr() netip.AddrPort { return c.laddr }

// RemoteAddr returns the peer's IP and port.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.raddr }

// Done returns a channel that is closed when the connection ends: the peer
// disconnected (its QP moved to ERR, outstanding work flushed), Close was
// called, or the device closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (ErrDisconnected, ErrClosed), or nil
// while it is up.
func (c *Conn) Err() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.endErr
}

// Close disconnects (rdma_disconnect): the QP moves to ERR, so its
// outstanding work completes with WR_FLUSH_ERR, a DREQ goes to the peer,
// and Close waits for the DREP — or for the CM's DREQ retransmissions to
// run out (Config.CM), or the device to close — then destroys the QP. On a
// connection the peer already ended it only destroys the QP. Close is
// idempotent.
func (c *Conn) Close() error {
	s := c.s
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return nil
	}
	c.closed = true
	if s.closed {
		s.mu.Unlock()
		return nil // the device's Close destroys the QP
	}
	wait := false
	if s.m.State(c.id) == cm.StateEstablished {
		s.disconnect(time.Now(), c)
		wait = true
	}
	s.mu.Unlock()
	if wait {
		s.wait(context.Background(), c.done)
	}
	s.mu.Lock()
	c.finish(ErrClosed)
	s.mu.Unlock()
	if err := c.qp.Destroy(); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoSuchQP) {
		return err
	}
	return nil
}

// Listener accepts connections for one port of the RDMA_PS_TCP port space
// (rdma_listen). Its methods may be called from any goroutine.
type Listener struct {
	s    *cmState
	sid  cm.ServiceID
	port uint16
	cfg  ListenConfig

	// Guarded by the CM lock.
	pending        int // accepted REQs waiting for their RTU
	backlog[*Conn]     // established, waiting for Accept
}

// Listen listens on port, the IP-CM service ID cm.IPServiceID(
// cm.PortSpaceTCP, port) that rdma_cm's rdma_listen uses, so rdma_cm
// clients (rping -c, ucmatose) connect to it as to a kernel listener. The
// first Listen or Dial starts the device's connection manager (QP1). It
// returns ErrServiceInUse if the port is listened on and ErrClosed after
// Close.
func (d *Device) Listen(port uint16, cfg ListenConfig) (*Listener, error) {
	if cfg.Backlog == 0 {
		cfg.Backlog = 16
	}
	if cfg.Backlog < 0 || cfg.Access&^(mr.RemoteWrite|mr.RemoteRead|mr.RemoteAtomic|mr.LocalWrite) != 0 {
		return nil, fmt.Errorf("%w: Backlog %d, Access %v", ErrInvalidArg, cfg.Backlog, cfg.Access)
	}
	cfg.QPConfig.Type = RC
	var l *Listener
	err := d.listen(cm.PortSpaceTCP, port, func(s *cmState, sid cm.ServiceID) {
		l = &Listener{s: s, sid: sid, port: port, cfg: cfg, backlog: newBacklog[*Conn](cfg.Backlog)}
		s.listeners[sid] = l
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// listen registers port of space with the device's connection manager,
// starting it if need be, and has add store the listener under the CM
// lock.
func (d *Device) listen(space cm.PortSpace, port uint16, add func(s *cmState, sid cm.ServiceID)) error {
	s, err := d.cmStart()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	sid := cm.IPServiceID(space, port)
	if err := s.m.Listen(sid); err != nil {
		return err
	}
	add(s, sid)
	return nil
}

// Addr returns the listener's local IP and port.
func (l *Listener) Addr() netip.AddrPort { return netip.AddrPortFrom(l.s.d.local.Addr(), l.port) }

// Accept waits for a connection and returns it, established, with its QP
// in RTS. It returns ErrClosed once the listener or the device is closed,
// and the context's error when it is done first.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) { return l.accept(ctx) }

// Close stops listening: new requests are rejected (invalid service ID),
// and the connections not yet accepted are disconnected. Connections
// already accepted stay up. Close is idempotent.
func (l *Listener) Close() error {
	return l.close(l.s, func() { delete(l.s.listeners, l.sid); l.s.m.Unlisten(l.sid) })
}

// backlog is a listener's queue for Accept: what the CM finished and the
// application has not taken yet. closed is guarded by the CM lock.
type backlog[C interface{ Close() error }] struct {
	closed bool
	ready  chan C // capacity: the listener's Backlog
	done   chan struct{}
}

func newBacklog[C interface{ Close() error }](n int) backlog[C] {
	return backlog[C]{ready: make(chan C, n), done: make(chan struct{})}
}

// accept waits for the next queued C, the listener's close (ErrClosed) or
// ctx; a queued C wins over both.
func (b *backlog[C]) accept(ctx context.Context) (C, error) {
	select {
	case c := <-b.ready:
		return c, nil
	default:
	}
	var zero C
	select {
	case c := <-b.ready:
		return c, nil
	case <-b.done:
		return zero, ErrClosed
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// shut marks the listener closed and wakes Accept; the caller holds the
// CM lock.
func (b *backlog[C]) shut() {
	if !b.closed {
		b.closed = true
		close(b.done)
	}
}

// close is a listener's Close: under the CM lock it shuts the backlog and
// unregisters the listener (once; nothing is left to do after the device
// closed), then closes what was queued and never accepted.
func (b *backlog[C]) close(s *cmState, unregister func()) error {
	s.mu.Lock()
	if b.closed || s.closed {
		b.shut()
		s.mu.Unlock()
		return nil
	}
	b.shut()
	unregister()
	var queued []C
	for drained := false; !drained; { // Accept may take one meanwhile: never block
		select {
		case c := <-b.ready:
			queued = append(queued, c)
		default:
			drained = true
		}
	}
	s.mu.Unlock()
	for _, c := range queued {
		c.Close()
	}
	return nil
}

// Dial connects to the listener at raddr (an rdma_cm listener on
// raddr.Port() in the RDMA_PS_TCP port space, or a Listener of this
// package), as rdma_connect does: it creates a QP, sends a REQ to the
// peer's QP1 and, when the REP comes, brings the QP to RTS and sends the
// RTU. It returns a *RejectError (errors.Is ErrRejected) when the peer
// refuses, ErrUnreachable when it never answers, and the context's error
// when ctx is done first: then the REQ is rejected with reason
// RejectTimeout (as rdma_cm does when a connecting ID is destroyed), so
// the listener forgets it, and a REP that still comes is dropped.
func (d *Device) Dial(ctx context.Context, raddr netip.AddrPort, cfg DialConfig) (*Conn, error) {
	if len(cfg.PrivateData) > maxDialPrivateData {
		return nil, fmt.Errorf("%w: %d bytes of private data, at most %d", cm.ErrPrivateData,
			len(cfg.PrivateData), maxDialPrivateData)
	}
	if cfg.MTU == 0 {
		cfg.MTU = qp.MTU1024
	}
	if !raddr.Addr().IsValid() || cfg.MTU < qp.MTU256 || cfg.MTU > qp.MTU4096 {
		return nil, fmt.Errorf("%w: address %v, MTU %v", ErrInvalidArg, raddr, cfg.MTU)
	}
	cfg.QPConfig.Type = RC
	s, q, sport, pd, err := d.dialStart(raddr, cfg.QPConfig,
		func(q *QP) error { return q.initCM(cfg.Access) }, cfg.Setup, cfg.PrivateData)
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
	id, out, err := s.m.Connect(now, &cm.ConnectParams{Peer: raddr.Addr(),
		ServiceID: cm.IPServiceID(cm.PortSpaceTCP, raddr.Port()), Transport: cm.TransportRC,
		QPN: q.QPN(), StartingPSN: q.Info().PSN, RetryCount: cmRetryCount, RNRRetryCount: cmRNRRetry,
		ResponderResources: orDefault(cfg.ResponderResources, cmRdAtomic), InitiatorDepth: orDefault(cfg.InitiatorDepth, cmRdAtomic),
		PathMTU: cm.MTU(cfg.MTU), Path: cm.RoCEPath(local, raddr.Addr()), PrivateData: pd})
	if err != nil {
		s.mu.Unlock()
		q.Destroy()
		return nil, err
	}
	c := &Conn{s: s, id: id, qp: q, laddr: netip.AddrPortFrom(local, sport), raddr: raddr,
		ready: make(chan struct{}), done: make(chan struct{})}
	s.conns[id] = c
	s.apply(now, out)
	s.kick()
	s.mu.Unlock()

	werr := s.wait(ctx, c.ready)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.finished {
		if c.dialErr != nil {
			return nil, c.dialErr
		}
		return c, nil
	}
	if !s.closed {
		if st := s.m.State(id); st == cm.StateREQSent || st == cm.StateMRAREQRcvd {
			// Canceled with the REQ out: reject it with reason Timeout,
			// as the kernel does when a connecting cm_id is destroyed
			// (cm_destroy_id), so the listener drops its half-open
			// connection now instead of retransmitting its REP.
			if out, err := s.m.Destroy(time.Now(), id); err == nil {
				s.send(out.Send)
				s.kick()
			}
			delete(s.conns, id)
			c.closed = true
			c.finish(werr)
			c.qp.Destroy()
			return nil, werr
		}
	}
	// The device closed: whatever comes later tears down.
	c.abandoned = true
	c.closed = true
	return nil, werr
}

// dialStart is the start Dial and DialUD share: the device's CM running,
// a new QP of qc made ready by prep (Dial: INIT; DialUD: RTS with the UDP
// port space's Q_Key) and then by the program's setup (if any), an
// ephemeral source port, as rdma_cm binds one (the IANA range Linux uses),
// and the private data behind the IP-CM header naming it. On an error the
// QP is destroyed.
func (d *Device) dialStart(raddr netip.AddrPort, qc QPConfig, prep, setup func(q *QP) error,
	private []byte) (s *cmState, q *QP, sport uint16, pd []byte, err error) {
	if s, err = d.cmStart(); err != nil {
		return nil, nil, 0, nil, err
	}
	if q, err = d.CreateQP(qc); err != nil {
		return nil, nil, 0, nil, err
	}
	err = prep(q)
	if err == nil && setup != nil {
		err = setup(q)
	}
	if err != nil {
		q.Destroy()
		return nil, nil, 0, nil, err
	}
	sport = uint16(32768 + rand.IntN(28232))
	pd = make([]byte, cm.IPHeaderSize+len(private))
	cm.IPHeader(pd).Encode(&cm.IPHeaderFields{SrcPort: sport, SrcAddr: d.local.Addr(), DstAddr: raddr.Addr()})
	copy(pd[cm.IPHeaderSize:], private)
	return s, q, sport, pd, nil
}

// CMStats returns the connection manager's counters (cm.Stats: MADs
// received and dropped, retransmissions, REJs sent, connections timed out
// or destroyed); zero before Listen or Dial started it.
func (d *Device) CMStats() CMStats {
	d.cmMu.Lock()
	s := d.cms
	d.cmMu.Unlock()
	if s == nil {
		return cm.Stats{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Stats()
}
