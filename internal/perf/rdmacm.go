package perf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// perftest's -R mode (doc/oob.md §3.6): no TCP. The exchange runs as SENDs
// on a control connection that rdma_cm sets up first (rdma_server_connect,
// rdma_client_connect), and the test QPs are connected through rdma_cm too
// (create_rdma_cm_connection), all on the same port of the RDMA_PS_TCP
// port space.

// Control connection sizes: perftest's comm context has a tx and rx depth
// of 1 and a buffer of sizeof(struct pingpong_dest); every message of the
// exchange fits in it.
const (
	cmSlot  = 64 // bytes per receive slot (the largest message is 56)
	cmRecvs = 2  // receives kept posted (perftest keeps one)
)

// cmLink is the control connection of a -R test: a perftest.Messenger
// over the QP of an RDMA CM connection, and the test connections it ends
// in order. It is used by the test's goroutine, but abort may be called
// from any.
type cmLink struct {
	dev     *roce.Device
	role    perftest.Role
	timeout time.Duration

	ctrl     *roce.Conn
	data     []*roce.Conn
	scq, rcq *cq.CQ
	buf      []byte // cmRecvs receive slots, then the send slot
	mr       *mr.Region
	wc       [1]cq.Completion

	aborted   chan struct{}
	abortOnce sync.Once
	closeOnce sync.Once
	closeErr  error
}

var _ perftest.Messenger = (*cmLink)(nil)

func newCMLink(dev *roce.Device, role perftest.Role, timeout time.Duration) (*cmLink, error) {
	l := &cmLink{dev: dev, role: role, timeout: timeout, buf: make([]byte, (cmRecvs+1)*cmSlot),
		aborted: make(chan struct{})}
	var err error
	if l.scq, err = dev.CreateCQ(4); err != nil {
		return nil, err
	}
	if l.rcq, err = dev.CreateCQ(cmRecvs + 2); err != nil {
		return nil, err
	}
	if l.mr, err = dev.RegisterMR(nil, l.buf, mr.LocalWrite); err != nil {
		return nil, err
	}
	return l, nil
}

// qpConfig is the control QP's: its own CQs, room for the few WRs.
func (l *cmLink) qpConfig() roce.QPConfig {
	return roce.QPConfig{SendCQ: l.scq, RecvCQ: l.rcq, MaxSendWR: 4, MaxRecvWR: cmRecvs}
}

// postRecvs posts the receives before the REQ or REP leaves (perftest's
// post_one_recv_wqe before rdma_connect and rdma_accept), so that the
// peer's first message finds one. It first drops what the CQs hold: the
// receives of a QP whose REQ was rejected were flushed to them when Dial
// destroyed it, and many retries must not overflow the CQ.
func (l *cmLink) postRecvs(q *roce.QP) error {
	for l.rcq.Poll(l.wc[:]) > 0 || l.scq.Poll(l.wc[:]) > 0 {
	}
	for i := range cmRecvs {
		if err := l.postRecv(q, i); err != nil {
			return err
		}
	}
	return nil
}

func (l *cmLink) postRecv(q *roce.QP, i int) error {
	return q.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{l.mr.SGE(i*cmSlot, cmSlot)}})
}

// abort ends waits in Send and Recv (the context of the test ended).
func (l *cmLink) abort() { l.abortOnce.Do(func() { close(l.aborted) }) }

// errAborted is returned by Send and Recv after abort.
var errAborted = errors.New("perf: the exchange was aborted")

// wait waits up to d for the next completion of the control QP on c, the
// control connection's end (perftest.ErrPeerClosed) or abort. Completions
// of other QPs are dropped: those of earlier, rejected attempts to connect
// (see postRecvs).
func (l *cmLink) wait(c *cq.CQ, d time.Duration) (cq.Completion, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	go func() { // ends with ctx, at the latest when wait returns
		select {
		case <-l.aborted:
			cancel()
		case <-l.ctrl.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	qpn := uint32(l.ctrl.QP().QPN())
	for {
		if _, err := c.Wait(ctx, l.wc[:]); err != nil {
			select {
			case <-l.aborted:
				return cq.Completion{}, errAborted
			case <-l.ctrl.Done():
				return cq.Completion{}, fmt.Errorf("%w: the rdma_cm control connection ended (%v)", perftest.ErrPeerClosed, l.ctrl.Err())
			default:
			}
			return cq.Completion{}, os.ErrDeadlineExceeded
		}
		wc := l.wc[0]
		if wc.QPN != qpn {
			continue
		}
		if wc.Status == cq.StatusWRFlushErr {
			return wc, fmt.Errorf("%w: the rdma_cm control connection was flushed", perftest.ErrPeerClosed)
		}
		if err := wc.Err(); err != nil {
			return wc, &WCError{WC: wc}
		}
		return wc, nil
	}
}

// Send SENDs b on the control QP and waits for its completion
// (rdma_write_data, rdma_write_keys).
func (l *cmLink) Send(b []byte) error {
	if len(b) > cmSlot {
		return fmt.Errorf("perf: a %d-byte exchange message, at most %d", len(b), cmSlot)
	}
	off := cmRecvs * cmSlot
	n := copy(l.buf[off:], b)
	err := l.ctrl.QP().PostSend(&qp.SendWR{WRID: 1 << 32, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{l.mr.SGE(off, n)}})
	if err != nil {
		return err
	}
	_, err = l.wait(l.scq, l.timeout)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: a SEND on the control connection did not complete in %v", perftest.ErrTimeout, l.timeout)
	}
	return err
}

// Recv waits up to d for the peer's next message and reposts its slot
// (rdma_read_data, rdma_read_keys).
func (l *cmLink) Recv(d time.Duration) ([]byte, error) {
	wc, err := l.wait(l.rcq, d)
	if err != nil {
		return nil, err
	}
	i := int(wc.WRID)
	if i >= cmRecvs || !wc.Opcode.IsRecv() {
		return nil, fmt.Errorf("perf: unexpected completion %v (WRID %d) on the control connection", wc.Opcode, wc.WRID)
	}
	n := min(int(wc.ByteLen), cmSlot)
	msg := make([]byte, n)
	// Through the region: the device's goroutine wrote the slot.
	if err := l.mr.ReadAt(msg, l.mr.IOVA()+uint64(i*cmSlot)); err != nil {
		return nil, err
	}
	return msg, l.postRecv(l.ctrl.QP(), i)
}

// Close ends the connections in perftest's order: the client disconnects
// its test connections (rdma_cm_disconnect_nodes, waiting for each DREP),
// the server waits for those disconnects; then the control connection
// goes (the server's rdma_destroy_id sends the DREQ; whoever comes first,
// crossing DREQs are answered).
func (l *cmLink) Close() error {
	l.closeOnce.Do(func() {
		if l.role == perftest.Server {
			deadline := time.After(min(l.timeout, 5*time.Second))
		wait:
			for _, c := range l.data {
				select {
				case <-c.Done():
				case <-deadline:
					break wait
				case <-l.aborted:
					break wait
				}
			}
		}
		for _, c := range l.data {
			if err := c.Close(); err != nil && l.closeErr == nil {
				l.closeErr = err
			}
		}
		if l.ctrl != nil {
			if err := l.ctrl.Close(); err != nil && l.closeErr == nil {
				l.closeErr = err
			}
		}
	})
	return l.closeErr
}

// connectCM is connect for -R: the device, the control connection, the
// exchange's opening over it, the test connections, then the key
// exchanges up to the barrier as over TCP.
func (r *remote) connectCM(ctx context.Context) error {
	cfg := r.cfg
	local, peer, err := r.cmAddrs(ctx)
	if err != nil {
		return err
	}
	if r.info, err = ActiveMTU(local); err != nil {
		return err
	}
	offer, err := CheckMTU(cfg.MTU, r.info)
	if err != nil {
		return err
	}
	if r.dev, err = openDevice(local, cfg.RoCEPort, cfg.OpenLink); err != nil {
		return err
	}
	if cfg.Metrics != nil {
		cfg.Metrics.Add(r.dev)
	}
	if r.cml, err = newCMLink(r.dev, r.role, cfg.Timeout); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, r.cml.abort)
	defer stop()
	port := uint16(cfg.Port)
	if r.role == perftest.Server {
		fmt.Fprintf(cfg.Out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		l, err := r.dev.Listen(port, roce.ListenConfig{QPConfig: r.cml.qpConfig(), Backlog: 1, Setup: r.cml.postRecvs})
		if err != nil {
			return fmt.Errorf("perf: rdma_cm listen on port %d: %w", port, err)
		}
		if cfg.Listening != nil {
			cfg.Listening()
		}
		r.cml.ctrl, err = l.Accept(ctx)
		l.Close() // rdma_server_connect destroys its listener once connected
		if err != nil {
			return err
		}
	} else {
		r.cml.ctrl, err = r.dialCM(ctx, netip.AddrPortFrom(peer, port), roce.DialConfig{QPConfig: r.cml.qpConfig(),
			MTU: offer, Setup: r.cml.postRecvs})
		if err != nil {
			return err
		}
	}
	conn := perftest.NewCMConn(r.cml, r.role)
	conn.Timeout = cfg.Timeout
	conn.Progress = r.progress
	r.ses = perftest.NewSession(conn, cfg.Tool)
	if r.mtu, err = r.ses.Hello(offer); err != nil {
		return r.ctxErr(ctx, err)
	}
	if err := r.setupBuffers(); err != nil {
		return err
	}
	if err := r.connectTestQPs(ctx, peer, port); err != nil {
		return r.ctxErr(ctx, err)
	}
	r.fillLocal(local)
	if r.rem, err = r.ses.Keys(r.local); err != nil {
		return r.ctxErr(ctx, err)
	}
	return r.ready(ctx, r.rem[0].OutReads)
}

// cmAddrs returns the local address (the server's Listen, which goroce's
// device needs; the client's Source or the route's to the peer) and the
// peer's.
func (r *remote) cmAddrs(ctx context.Context) (local, peer netip.Addr, err error) {
	cfg := r.cfg
	if r.role == perftest.Server {
		if cfg.Listen == "" {
			local, err = soleAddr()
			return local, peer, err
		}
		local, err = netip.ParseAddr(cfg.Listen)
		if err != nil || !local.Unmap().Is4() {
			return local, peer, fmt.Errorf("perf: -R server address %q: want an IPv4 address", cfg.Listen)
		}
		return local.Unmap(), peer, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", cfg.Peer)
	if err != nil || len(addrs) == 0 {
		return local, peer, fmt.Errorf("perf: cannot resolve %q to an IPv4 address: %v", cfg.Peer, err)
	}
	peer = addrs[0].Unmap()
	if cfg.Source != "" {
		if local, err = netip.ParseAddr(cfg.Source); err != nil || !local.Unmap().Is4() {
			return local, peer, fmt.Errorf("perf: source address %q: want an IPv4 address", cfg.Source)
		}
		return local.Unmap(), peer, nil
	}
	local, err = RouteSource(peer)
	return local, peer, err
}

// RouteSource returns the local address the kernel sends from to reach
// dst.
func RouteSource(dst netip.Addr) (netip.Addr, error) {
	c, err := net.Dial("udp", netip.AddrPortFrom(dst, 4791).String())
	if err != nil {
		return netip.Addr{}, fmt.Errorf("perf: no route to %v: %w", dst, err)
	}
	defer c.Close()
	return netip.MustParseAddrPort(c.LocalAddr().String()).Addr().Unmap(), nil
}

// soleAddr returns the host's one up, non-loopback IPv4 address, which a
// -R server without an address binds (perftest's binds them all; goroce's
// device has one).
func soleAddr() (netip.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, err
	}
	var found []netip.Addr
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
				found = append(found, p.Addr())
			}
		}
	}
	if len(found) != 1 {
		return netip.Addr{}, fmt.Errorf("perf: a -R server binds one address and this host has %d IPv4 addresses %v: name one (--source_ip)", len(found), found)
	}
	return found[0], nil
}

// dialCM dials raddr, retrying while the server is not listening yet
// (rdma_cm's reject with reason 8, invalid service ID), until cfg.Timeout:
// perftest's client retries its test connections so (rdma_cm_client_connection,
// ten times), and its server needs a moment to start.
func (r *remote) dialCM(ctx context.Context, raddr netip.AddrPort, dc roce.DialConfig) (*roce.Conn, error) {
	deadline := time.Now().Add(r.cfg.Timeout)
	for {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		c, err := r.dev.Dial(dctx, raddr, dc)
		cancel()
		if err == nil {
			return c, nil
		}
		var re *roce.RejectError
		if !errors.As(err, &re) || re.Reason != cm.RejectInvalidServiceID || time.Now().Add(100*time.Millisecond).After(deadline) {
			if errors.As(err, &re) && re.Reason == cm.RejectInvalidServiceID {
				err = fmt.Errorf("%w (nobody listens on rdma_cm port %d of %v: is the server running, with -R?)", err, raddr.Port(), raddr.Addr())
			}
			return nil, fmt.Errorf("perf: rdma_cm connect to %v: %w", raddr, r.ctxErr(ctx, err))
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// connectTestQPs connects cfg.QPs test QPs through the RDMA CM as
// create_rdma_cm_connection does: a handshake on the control connection
// (the server listens by then), the connections, another handshake.
func (r *remote) connectTestQPs(ctx context.Context, peer netip.Addr, port uint16) error {
	cfg := r.cfg
	qc := r.testQPConfig()
	// rdma_conn_param: perftest offers its out_reads in read and atomic
	// tests, nothing else (0: our default).
	var rd uint8
	if cfg.Tool.ReadsOrAtomics() {
		rd = uint8(min(r.outReads, 255))
	}
	if r.role == perftest.Server {
		l, err := r.dev.Listen(port, roce.ListenConfig{QPConfig: qc, Access: r.access, Backlog: cfg.QPs,
			ResponderResources: rd, InitiatorDepth: rd})
		if err != nil {
			return fmt.Errorf("perf: rdma_cm listen on port %d: %w", port, err)
		}
		defer l.Close() // rdma_cm_server_connection destroys it once all are in
		if err := r.ses.CMSync(); err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		for i := range cfg.QPs {
			c, err := l.Accept(actx)
			if err != nil {
				return fmt.Errorf("perf: waiting for the client's rdma_cm connection %d of %d: %w", i+1, cfg.QPs, err)
			}
			r.cml.data = append(r.cml.data, c)
			r.qps = append(r.qps, c.QP())
		}
	} else {
		if err := r.ses.CMSync(); err != nil {
			return err
		}
		for range cfg.QPs {
			c, err := r.dialCM(ctx, netip.AddrPortFrom(peer, port), roce.DialConfig{QPConfig: qc, Access: r.access,
				MTU: r.mtu, ResponderResources: rd, InitiatorDepth: rd})
			if err != nil {
				return err
			}
			r.cml.data = append(r.cml.data, c)
			r.qps = append(r.qps, c.QP())
		}
	}
	return r.ses.CMSync()
}
