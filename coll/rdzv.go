package coll

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// control is a rank's end of the rendezvous star: rank 0 holds a
// connection to every other rank, each other rank one to rank 0. It
// carries the rendezvous (hello, table, QP routes, barrier) and then stays
// open as the job's control plane: a rank that closes says goodbye first,
// so a connection that ends without one is a rank that died, and rank 0
// relays every failure to every rank.
type control struct {
	rank, size int
	cfg        *Config
	addr       string // the rendezvous address, for messages

	// rank 0
	ln       net.Listener
	peers    []*ctlConn // by rank; nil for rank 0
	filePath string     // file:// rendezvous: the address file, removed at close
	// others
	srv *ctlConn

	table   []hello
	byes    chan struct{} // rank 0: a rank said goodbye or is gone
	closing atomic.Bool
	comm    atomic.Pointer[Comm] // set by start
	wg      sync.WaitGroup
}

// ctlConn is one control connection.
type ctlConn struct {
	c    net.Conn
	rank int
	wmu  sync.Mutex // writes come from several goroutines (relays)
	bye  atomic.Bool
	done chan struct{} // closed when its reader returns
}

func (cc *ctlConn) send(typ msgType, payload []byte) error {
	b := appendFrame(make([]byte, 0, frameHeader+len(payload)), typ, payload)
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	cc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := cc.c.Write(b)
	return err
}

// who returns "host pid N" of rank r from the table, if known.
func (ct *control) who(r int) string {
	if r >= 0 && r < len(ct.table) && ct.table[r].Host != "" {
		return fmt.Sprintf("%s pid %d", ct.table[r].Host, ct.table[r].Pid)
	}
	return ""
}

// rankErr makes a *RankError about rank r seen by this rank.
func (ct *control) rankErr(r int, err error, format string, a ...any) *RankError {
	e := &RankError{Ranks: []int{r}, Reporter: ct.rank, Reason: fmt.Sprintf(format, a...), Err: err}
	if w := ct.who(r); w != "" {
		e.Hosts = []string{w}
	}
	return e
}

// clientGrace is how much longer than rank 0 a rank waits for rank 0's
// answer: when the rendezvous times out, rank 0's account of it (which
// ranks are missing) arrives before the rank's own timeout.
const clientGrace = 2 * time.Second

// rendezvous meets the other ranks at cfg.Rendezvous and returns every
// rank's hello, indexed by rank.
func rendezvous(ctx context.Context, cfg *Config, me hello, deadline time.Time) (*control, []hello, error) {
	ct := &control{rank: cfg.Rank, size: cfg.Size, cfg: cfg, addr: cfg.Rendezvous}
	var err error
	if cfg.Rank == 0 {
		err = ct.serve(ctx, me, deadline)
	} else {
		err = ct.join(ctx, me, deadline)
	}
	if err != nil {
		ct.shutdown()
		return nil, nil, err
	}
	return ct, ct.table, nil
}

// fileAddr returns the address file of a file:// rendezvous.
func fileAddr(rdzv, job string) (string, bool) {
	dir, ok := strings.CutPrefix(rdzv, "file://")
	if !ok {
		return "", false
	}
	if job == "" {
		job = "default"
	}
	job = strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == os.PathSeparator {
			return '_'
		}
		return r
	}, job)
	return filepath.Join(dir, "goroce-"+job+".rdzv"), true
}

// serve is rank 0's rendezvous: listen, gather the hellos, send the table.
func (ct *control) serve(ctx context.Context, me hello, deadline time.Time) error {
	listenOn := ct.addr
	if path, ok := fileAddr(ct.addr, ct.cfg.JobID); ok {
		listenOn = net.JoinHostPort(me.Addr.Addr().String(), "0")
		ct.filePath = path
	} else if h, p, err := net.SplitHostPort(ct.addr); err == nil {
		if _, perr := netip.ParseAddr(h); perr != nil && h != "localhost" {
			listenOn = ":" + p // a host name: listen on every address
		}
	}
	ln, err := net.Listen("tcp", listenOn)
	if err != nil {
		return fmt.Errorf("coll: rank 0: rendezvous listener on %s: %w", listenOn, err)
	}
	ct.ln = ln
	if ct.filePath != "" {
		if err := writeAddrFile(ct.filePath, ln.Addr().String()); err != nil {
			return fmt.Errorf("coll: rank 0: rendezvous file: %w", err)
		}
		ct.addr = ct.cfg.Rendezvous + " (" + ln.Addr().String() + ")"
	}
	ct.peers = make([]*ctlConn, ct.size)
	ct.table = make([]hello, ct.size)
	ct.table[0] = me

	type arrival struct {
		cc  *ctlConn
		h   hello
		err error
	}
	arrivals := make(chan arrival)
	stop := make(chan struct{})
	// unread holds the connections whose hello is still being read: when
	// the job is complete (or fails) they are closed, so that a connection
	// that never speaks (a port scanner, a health check) holds nothing up
	// until the deadline (doc/coll.md §2: it is refused and the job goes
	// on).
	var (
		unreadMu sync.Mutex
		unread   = map[net.Conn]struct{}{}
		stopped  bool
	)
	var acceptWG sync.WaitGroup
	acceptWG.Add(1)
	go func() { // accept until stopped; each connection's hello read on its own
		defer acceptWG.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			unreadMu.Lock()
			if stopped {
				unreadMu.Unlock()
				c.Close()
				return
			}
			unread[c] = struct{}{}
			unreadMu.Unlock()
			acceptWG.Add(1)
			go func() {
				defer acceptWG.Done()
				c.SetReadDeadline(deadline)
				cc := &ctlConn{c: c, rank: -1, done: make(chan struct{})}
				f, err := readFrame(c)
				unreadMu.Lock()
				delete(unread, c)
				unreadMu.Unlock()
				var h hello
				if err == nil && f.typ != msgHello {
					err = fmt.Errorf("%w: %d frame before hello", ErrBadFrame, f.typ)
				}
				if err == nil {
					h, err = decodeHello(f.payload)
				}
				select {
				case arrivals <- arrival{cc, h, err}:
				case <-stop:
					c.Close()
				}
			}()
		}
	}()
	defer func() {
		close(stop)
		ln.Close()
		unreadMu.Lock()
		stopped = true
		for c := range unread {
			c.Close()
		}
		unreadMu.Unlock()
		acceptWG.Wait()
	}()

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	joined := 1
	var fatal error
	for joined < ct.size && fatal == nil {
		select {
		case <-ctx.Done():
			fatal = ctx.Err()
		case <-timer.C:
			var missing []int
			var hosts []string
			for r := 1; r < ct.size; r++ {
				if ct.peers[r] == nil {
					missing = append(missing, r)
				}
			}
			fatal = &RankError{Ranks: missing, Hosts: hosts, Reporter: 0, Err: ErrTimeout,
				Reason: fmt.Sprintf("never joined the rendezvous at %s (job %q) within %v: %d of %d ranks joined",
					ct.addr, ct.cfg.JobID, ct.cfg.Timeout, joined, ct.size)}
		case a := <-arrivals:
			if a.err != nil {
				// A stray connection (a port scan, another program):
				// refuse it and keep waiting.
				ct.cfg.Logger.Info("coll: rendezvous: refused a connection", "from", a.cc.c.RemoteAddr(), "err", a.err)
				refuse(a.cc, fmt.Sprintf("not a goroce rendezvous hello: %v", a.err))
				continue
			}
			h := a.h
			switch {
			case h.JobID != me.JobID:
				refuse(a.cc, fmt.Sprintf("this rendezvous serves job %q, not %q", me.JobID, h.JobID))
				ct.cfg.Logger.Info("coll: rendezvous: refused another job", "job", h.JobID)
				continue
			case h.Size != ct.size:
				fatal = fmt.Errorf("coll: rank 0: rank %d (%s pid %d) says the job has %d ranks, rank 0 says %d", h.Rank, h.Host, h.Pid, h.Size, ct.size)
				refuse(a.cc, fatal.Error())
			case h.Rank <= 0 || h.Rank >= ct.size:
				fatal = fmt.Errorf("coll: rank 0: a rank %d (%s pid %d) joined a job of %d ranks", h.Rank, h.Host, h.Pid, ct.size)
				refuse(a.cc, fatal.Error())
			case ct.peers[h.Rank] != nil:
				o := ct.table[h.Rank]
				fatal = fmt.Errorf("coll: rank 0: rank %d joined twice (%s pid %d and %s pid %d)", h.Rank, o.Host, o.Pid, h.Host, h.Pid)
				refuse(a.cc, fatal.Error())
			case h.Shape != me.Shape:
				fatal = fmt.Errorf("coll: rank 0: rank %d (%s pid %d) has channels/QPs/steps/chunk/split/order %+v, rank 0 has %+v", h.Rank, h.Host, h.Pid, h.Shape, me.Shape)
				refuse(a.cc, fatal.Error())
			default:
				a.cc.rank = h.Rank
				a.cc.c.SetReadDeadline(time.Time{})
				ct.peers[h.Rank] = a.cc
				ct.table[h.Rank] = h
				joined++
			}
		}
	}
	if fatal != nil {
		ct.refuseAll(fatal.Error())
		return fatal
	}
	if ct.filePath != "" {
		os.Remove(ct.filePath) // everybody is in; a late reader would find a dead address
		ct.filePath = ""
	}
	tb := appendTable(nil, ct.table)
	for _, cc := range ct.peers[1:] {
		if err := cc.send(msgTable, tb); err != nil {
			err := ct.rankErr(cc.rank, err, "dropped out of the rendezvous")
			ct.refuseAll(err.Error())
			return err
		}
	}
	return nil
}

// writeAddrFile writes addr to path atomically (a temporary file renamed
// over it), so that a reader never sees half an address.
func writeAddrFile(path, addr string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func refuse(cc *ctlConn, reason string) {
	p := appendStr(nil, reason)
	cc.send(msgRefuse, p)
	cc.c.Close()
}

// refuseAll tells every joined rank that the rendezvous failed.
func (ct *control) refuseAll(reason string) {
	for _, cc := range ct.peers {
		if cc != nil {
			refuse(cc, reason)
		}
	}
}

// join is a rank's side of the rendezvous: find rank 0, say hello, read
// the table.
func (ct *control) join(ctx context.Context, me hello, deadline time.Time) error {
	c, err := ct.dial(ctx, deadline)
	if err != nil {
		return err
	}
	cc := &ctlConn{c: c, rank: 0, done: make(chan struct{})}
	ct.srv = cc
	if err := cc.send(msgHello, me.append(nil)); err != nil {
		return ct.lost(err, "rendezvous")
	}
	c.SetReadDeadline(deadline.Add(clientGrace))
	f, err := ct.read(ctx, cc, msgTable, "rendezvous")
	if err != nil {
		return err
	}
	t, err := decodeTable(f.payload)
	if err != nil {
		return fmt.Errorf("coll: rank %d: rendezvous table: %w", ct.rank, err)
	}
	if len(t) != ct.size || t[ct.rank].Pid != me.Pid || t[ct.rank].Addr != me.Addr {
		return fmt.Errorf("%w: rank %d: rendezvous table of %d ranks does not hold this rank as it said hello", ErrProtocol, ct.rank, len(t))
	}
	ct.table = t
	return nil
}

// dial connects to rank 0, retrying while it is not up yet.
func (ct *control) dial(ctx context.Context, deadline time.Time) (net.Conn, error) {
	wait := 10 * time.Millisecond
	var last error
	for {
		addr := ct.addr
		if path, ok := fileAddr(ct.addr, ct.cfg.JobID); ok {
			b, err := os.ReadFile(path)
			if err == nil {
				addr = strings.TrimSpace(string(b))
			} else {
				addr, last = "", err
			}
		}
		if addr != "" {
			d := net.Dialer{Deadline: deadline}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				return c, nil
			}
			last = err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, &RankError{Ranks: []int{0}, Reporter: ct.rank, Err: ErrTimeout,
				Reason: fmt.Sprintf("did not serve the rendezvous at %s (job %q) within %v: %v", ct.addr, ct.cfg.JobID, ct.cfg.Timeout, last)}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// read reads the next frame from rank 0 and expects want; a refusal or an
// abort becomes the error.
func (ct *control) read(ctx context.Context, cc *ctlConn, want msgType, stage string) (frame, error) {
	stopCtx := context.AfterFunc(ctx, func() { cc.c.SetReadDeadline(time.Now()) })
	defer stopCtx()
	f, err := readFrame(cc.c)
	if err != nil {
		if ctx.Err() != nil {
			return frame{}, ctx.Err()
		}
		return frame{}, ct.lost(err, stage)
	}
	switch f.typ {
	case want:
		return f, nil
	case msgRefuse:
		reason, _ := decodeRefuse(f.payload)
		return frame{}, fmt.Errorf("coll: rank %d: rank 0 ended the %s: %s", ct.rank, stage, reason)
	case msgAbort:
		a, err := decodeAbort(f.payload)
		if err != nil {
			return frame{}, err
		}
		return frame{}, ct.rankErr(a.Rank, nil, "failed during the %s (reported by rank %d): %s", stage, a.Reporter, a.Reason)
	}
	return frame{}, fmt.Errorf("%w: rank %d: %d frame during the %s, want %d", ErrProtocol, ct.rank, f.typ, stage, want)
}

// lost is the error of a connection to rank 0 that failed.
func (ct *control) lost(err error, stage string) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ct.rankErr(0, ErrTimeout, "did not finish the %s at %s within %v", stage, ct.addr, ct.cfg.Timeout)
	}
	return ct.rankErr(0, err, "died during the %s: its control connection failed", stage)
}

// gather reads one frame of type typ from every other rank (rank 0's
// side), each on its own goroutine, and returns their payloads by rank.
// A rank that does not send it by deadline, or whose connection fails,
// is named in the error.
func (ct *control) gather(ctx context.Context, typ msgType, stage string, deadline time.Time) ([][]byte, error) {
	type got struct {
		rank int
		f    frame
		err  error
	}
	ch := make(chan got, ct.size)
	for _, cc := range ct.peers[1:] {
		go func() {
			cc.c.SetReadDeadline(deadline)
			f, err := readFrame(cc.c)
			cc.c.SetReadDeadline(time.Time{})
			ch <- got{cc.rank, f, err}
		}()
	}
	out := make([][]byte, ct.size)
	var fatal error
	for range ct.size - 1 {
		var g got
		select {
		case g = <-ch:
		case <-ctx.Done():
			for _, cc := range ct.peers[1:] {
				cc.c.SetReadDeadline(time.Now())
			}
			g = <-ch
			if fatal == nil {
				fatal = ctx.Err()
			}
		}
		switch {
		case g.err != nil:
			var ne net.Error
			if errors.As(g.err, &ne) && ne.Timeout() && ctx.Err() == nil {
				if fatal == nil {
					fatal = ct.rankErr(g.rank, ErrTimeout, "did not finish the %s within %v", stage, ct.cfg.Timeout)
				}
			} else if fatal == nil {
				fatal = ct.rankErr(g.rank, g.err, "died during the %s: its control connection failed", stage)
			}
		case g.f.typ == msgAbort:
			a, _ := decodeAbort(g.f.payload)
			if fatal == nil {
				fatal = ct.rankErr(g.rank, nil, "failed during the %s: %s", stage, a.Reason)
			}
		case g.f.typ != typ:
			if fatal == nil {
				fatal = fmt.Errorf("%w: rank %d sent a %d frame during the %s", ErrProtocol, g.rank, g.f.typ, stage)
			}
		default:
			out[g.rank] = g.f.payload
		}
	}
	if fatal != nil {
		ct.refuseAll(fatal.Error())
		return nil, fatal
	}
	return out, nil
}

// exchange sends this rank's QPs to rank 0 and returns the peers' QPs
// towards it; rank 0 routes every rank's list.
func (ct *control) exchange(ctx context.Context, rank int, mine []qpEntry, deadline time.Time) ([]qpEntry, error) {
	if rank != 0 {
		if err := ct.srv.send(msgQPs, appendQPs(nil, mine)); err != nil {
			return nil, ct.lost(err, "connection exchange")
		}
		ct.srv.c.SetReadDeadline(deadline.Add(clientGrace))
		f, err := ct.read(ctx, ct.srv, msgRoute, "connection exchange")
		if err != nil {
			return nil, err
		}
		return decodeQPs(f.payload)
	}
	payloads, err := ct.gather(ctx, msgQPs, "connection exchange", deadline)
	if err != nil {
		return nil, err
	}
	routes := make([][]qpEntry, ct.size)
	route := func(from int, qs []qpEntry) error {
		for _, q := range qs {
			if q.Peer < 0 || q.Peer >= ct.size || q.Peer == from {
				return fmt.Errorf("%w: rank %d named a QP towards rank %d", ErrProtocol, from, q.Peer)
			}
			to := q.Peer
			q.Peer = from
			routes[to] = append(routes[to], q)
		}
		return nil
	}
	if err := route(0, mine); err != nil {
		return nil, err
	}
	for r := 1; r < ct.size; r++ {
		qs, err := decodeQPs(payloads[r])
		if err == nil {
			err = route(r, qs)
		}
		if err != nil {
			err = fmt.Errorf("coll: rank 0: rank %d's QP list: %w", r, err)
			ct.refuseAll(err.Error())
			return nil, err
		}
	}
	for r := 1; r < ct.size; r++ {
		if err := ct.peers[r].send(msgRoute, appendQPs(nil, routes[r])); err != nil {
			err := ct.rankErr(r, err, "dropped out of the connection exchange")
			ct.refuseAll(err.Error())
			return nil, err
		}
	}
	return routes[0], nil
}

// barrier returns once every rank has connected its QPs.
func (ct *control) barrier(ctx context.Context, rank int, deadline time.Time) error {
	if rank != 0 {
		if err := ct.srv.send(msgReady, nil); err != nil {
			return ct.lost(err, "connection barrier")
		}
		ct.srv.c.SetReadDeadline(deadline.Add(clientGrace))
		_, err := ct.read(ctx, ct.srv, msgGo, "connection barrier")
		ct.srv.c.SetReadDeadline(time.Time{})
		return err
	}
	if _, err := ct.gather(ctx, msgReady, "connection barrier", deadline); err != nil {
		return err
	}
	for r := 1; r < ct.size; r++ {
		if err := ct.peers[r].send(msgGo, nil); err != nil {
			err := ct.rankErr(r, err, "dropped out of the connection barrier")
			ct.refuseAll(err.Error())
			return err
		}
	}
	return nil
}

// start turns the rendezvous connections into the control plane: a
// reader per connection, which fails c when a rank dies or reports a
// failure.
func (ct *control) start(c *Comm) {
	ct.comm.Store(c)
	ct.byes = make(chan struct{}, ct.size)
	if ct.rank != 0 {
		ct.wg.Add(1)
		go ct.readServer(ct.srv)
		return
	}
	for _, cc := range ct.peers[1:] {
		ct.wg.Add(1)
		go ct.readPeer(cc)
	}
}

// readServer is a rank's reader of rank 0's connection.
func (ct *control) readServer(cc *ctlConn) {
	defer ct.wg.Done()
	defer close(cc.done)
	c := ct.comm.Load()
	for {
		f, err := readFrame(cc.c)
		if err != nil {
			if !ct.closing.Load() {
				c.fail(ct.rankErr(0, err, "died: its control connection closed"))
			}
			return
		}
		if f.typ == msgAbort {
			if a, err := decodeAbort(f.payload); err == nil {
				c.failRemote(ct.rankErr(a.Rank, nil, "failed (reported by rank %d): %s", a.Reporter, a.Reason))
			}
		}
	}
}

// readPeer is rank 0's reader of one rank's connection: a goodbye, an
// abort to relay, or the end of a rank that died.
func (ct *control) readPeer(cc *ctlConn) {
	defer ct.wg.Done()
	defer close(cc.done)
	defer func() {
		if !cc.bye.Load() {
			ct.byes <- struct{}{} // gone without a goodbye: nothing to wait for
		}
	}()
	c := ct.comm.Load()
	for {
		f, err := readFrame(cc.c)
		if err != nil {
			if !cc.bye.Load() && !ct.closing.Load() {
				e := ct.rankErr(cc.rank, err, "died: its control connection closed")
				ct.relay(abortMsg{Rank: cc.rank, Reporter: 0, Reason: "died: its control connection closed"}, cc.rank)
				c.failRemote(e)
			}
			return
		}
		switch f.typ {
		case msgBye:
			// Only the first goodbye counts: a rank that repeated it
			// counted as others' goodbyes, and past Size of them this
			// reader blocked on the full channel and Close hung.
			if cc.bye.CompareAndSwap(false, true) {
				ct.byes <- struct{}{}
			}
		case msgAbort:
			a, err := decodeAbort(f.payload)
			if err != nil {
				continue
			}
			ct.relay(a, cc.rank)
			c.failRemote(ct.rankErr(a.Rank, nil, "failed (reported by rank %d): %s", a.Reporter, a.Reason))
		}
	}
}

// relay sends a to every rank but skip (rank 0's side).
func (ct *control) relay(a abortMsg, skip int) {
	p := appendAbort(nil, a)
	for _, cc := range ct.peers[1:] {
		if cc.rank != skip && !cc.bye.Load() {
			cc.send(msgAbort, p)
		}
	}
}

// reportAbort tells the job that this rank failed with err.
func (ct *control) reportAbort(rank int, err error) {
	a := abortMsg{Rank: rank, Reporter: rank, Reason: err.Error()}
	var re *RankError
	if errors.As(err, &re) && len(re.Ranks) > 0 {
		a.Rank = re.Ranks[0]
	}
	if ct.rank == 0 {
		ct.relay(a, -1)
		return
	}
	if ct.srv != nil {
		ct.srv.send(msgAbort, appendAbort(nil, a))
	}
}

// close ends the control plane gracefully, as a barrier: every rank
// says goodbye to rank 0 and waits; once every rank has said goodbye (or
// died), rank 0 hangs up, which releases them. No rank closes its device
// while another may still be in its last collective (whose
// clear-to-sends to a closed device would fail). deadline bounds the
// wait; a failed job does not wait.
func (ct *control) close(deadline time.Time, failed bool) {
	ct.closing.Store(true)
	if ct.rank != 0 {
		if ct.srv != nil && !failed {
			ct.srv.send(msgBye, nil)
			select {
			case <-ct.srv.done:
			case <-time.After(time.Until(deadline)):
			}
		}
		ct.shutdown()
		return
	}
	if !failed {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
	wait:
		for range ct.size - 1 {
			select {
			case <-ct.byes:
			case <-t.C:
				break wait
			}
		}
	}
	ct.shutdown()
}

// shutdown closes every connection and waits for the readers.
func (ct *control) shutdown() {
	ct.closing.Store(true)
	if ct.ln != nil {
		ct.ln.Close()
	}
	if ct.filePath != "" {
		os.Remove(ct.filePath)
	}
	if ct.srv != nil {
		ct.srv.c.Close()
	}
	for _, cc := range ct.peers {
		if cc != nil {
			cc.c.Close()
		}
	}
	ct.wg.Wait()
}
