package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/roce/metrics"
	"github.com/goroce/goroce/rocev2"
)

// RemoteConfig describes a test against a perftest 4.5 peer (ib_write_bw,
// …) over its TCP exchange, as server or client. Zero values follow
// perftest's defaults.
type RemoteConfig struct {
	Tool   perftest.Tool
	Atomic perftest.AtomicType // -A (ib_atomic_bw)
	// Server makes this side wait for the client on Port; otherwise it
	// connects to Peer.
	Server bool
	Peer   string // the server's host name or address (client)
	Port   int    // -p (default perftest.Port)
	// Listen, if set, is the address the server listens on (default all).
	Listen   string
	Size     int           // -s (default 65536; latency tests 2; atomics 8)
	Iters    int           // -n (default 5000 for bw, 1000 for lat; at least 5)
	Duration time.Duration // -D: bw tests run for a duration instead
	All      bool          // -a: sizes 2 … 2^23
	QPs      int           // -q (bw tests; default 1)
	MTU      qp.MTU        // -m (default: the active MTU of the interface)
	TxDepth  int           // -t (default 128; read/atomic: also ≤ the peer's out_reads)
	RxDepth  int           // -r (send tests; default 512)
	// PostList is --post_list: WRs per post call of the bw tests
	// (default 1; at most TxDepth).
	PostList int
	// QPTimeout is -u: the local ACK timeout exponent, 4.096 µs × 2^u
	// (default 14, 67 ms, with 7 retries; slow peers such as rxe under
	// emulation need more).
	QPTimeout uint8
	// TrafficClass is --tclass: the IPv4 TOS / IPv6 traffic class (DSCP
	// << 2 | ECN) of this side's QPs, as perftest's --tclass.
	TrafficClass uint8
	Gbits        bool // --report_gbits
	// CPUUtil is --cpu_util: the client's bw rows end with perftest's
	// CPU_Util[%] column, this process's CPU time over the measured
	// window in % of its CPUs (CPUUse.Util). As perftest, duration mode
	// (-D) only; and the client only: the passive server measures nothing.
	CPUUtil bool
	// Timeout bounds each step of the TCP exchange, the connection attempts
	// and any stretch of the test without progress (default 30 s).
	Timeout time.Duration
	// Out receives perftest's report; nil discards it.
	Out io.Writer
	// Stats, if set, receives one line of device counters at the end
	// (WriteStats), even when the test fails.
	Stats io.Writer
	// Metrics, if set, exports the device while the test runs (goroce perf
	// --metrics).
	Metrics *metrics.Exporter
	// OpenLink, if set, opens the device's link at the local address of
	// the TCP connection, port 4791 (goroce perf --link afpacket|afxdp);
	// nil opens link/udp there.
	OpenLink func(addr netip.AddrPort) (link.Link, error)
	// RoCEPort is the UDP port of both devices (default 4791, which every
	// RoCEv2 peer uses; tests of two goroce processes on one host pick
	// another).
	RoCEPort uint16
	// Wait says how the test waits for completions and, in write_lat,
	// for the peer's WRITE (WaitMode; the zero WaitAuto polls, as
	// perftest, only on machines with PollCPUs CPUs or more).
	Wait WaitMode
	// Impair, if set, impairs the device's link both ways (the TCP
	// exchange is not impaired); the last result row's Impair then says
	// what the peer did about it.
	Impair *impair.Config
	// ImpairOut, if set with Impair, receives that report as a block
	// (WritePeerReport) at the end, even when the test fails.
	ImpairOut io.Writer
	// RDMACM is perftest's -R: no TCP; the exchange runs over a control
	// connection of the RDMA CM and the test QPs are connected through it
	// too, all on Port of rdma_cm's TCP port space (doc/oob.md §3.6). The
	// server binds Listen (default: the host's one IPv4 address), the
	// client Source (default: the route's to Peer). -u and --tclass do
	// not apply: the CM sets the QPs' timeout and path.
	RDMACM bool
	// Source is the client's local address in the RDMACM mode.
	Source string
	// Listening, if set, is called once the RDMACM server listens.
	Listening func()
}

// Remote errors.
var (
	// ErrMTU is wrapped by the errors for a path MTU the interface cannot
	// carry.
	ErrMTU = errors.New("perf: path MTU does not fit")
	// ErrGIDIndex is wrapped by the errors for a -x this side cannot use.
	ErrGIDIndex = errors.New("perf: GID index")
)

// goroce's GID table has one entry, the RoCEv2 GID ::ffff:<IPv4> of the
// local address, at index 1 as on rxe (index 0 there is the IPv6
// link-local GID, which goroce's IPv4 link does not serve).
const gidIndex = 1

// CheckGIDIndex checks a GID index option (perftest's -x, rc_pingpong's
// -g; flag names it): -1 (not given) and 1 select goroce's GID; 0, rxe's
// IPv6 link-local GID, and anything else are refused with the reason.
func CheckGIDIndex(x int, flag string) error {
	switch x {
	case -1, gidIndex:
		return nil
	case 0:
		return fmt.Errorf("%w 0 is the IPv6 link-local GID (on rxe too); goroce speaks RoCEv2 over IPv4 with the GID ::ffff:<IPv4> at index 1: use %s 1", ErrGIDIndex, flag)
	}
	return fmt.Errorf("%w %d: goroce has one GID, ::ffff:<IPv4> at index 1 (%s 1)", ErrGIDIndex, x, flag)
}

func (c *RemoteConfig) defaults() error {
	t := c.Tool
	if c.Port == 0 {
		c.Port = perftest.Port
	}
	if c.Size == 0 {
		c.Size = 65536
		if t.Lat {
			c.Size = 2
		}
	}
	if t.Verb == perftest.Atomic {
		c.Size = 8
		c.All = false
	}
	if c.Iters == 0 {
		c.Iters = 5000
		if t.Lat {
			c.Iters = 1000
		}
	}
	if c.Duration == 0 && (c.Iters < 5 || c.Iters > 100000000) {
		return fmt.Errorf("perf: iteration count %d: perftest takes 5 to 100000000", c.Iters)
	}
	if c.Duration > 0 && t.Lat {
		return errors.New("perf: -D is supported by the bw tests only")
	}
	if c.Duration > 0 && c.All {
		return errors.New("perf: -D and -a cannot be combined (as in perftest)")
	}
	if c.Wait == WaitInline && !(t.Lat && t.Verb == perftest.Write) {
		return errors.New("perf: --rtc against a peer runs ib_write_lat only (on the device's receive goroutine); use -e or --poll")
	}
	if c.CPUUtil && (t.Lat || c.Duration <= 0 || c.Server) {
		return errors.New("perf: --cpu_util works only on the client of a bw test in duration mode (-D)")
	}
	if c.Size < 1 || c.Size > 1<<23 {
		return fmt.Errorf("perf: size %d out of range (1 to 8388608)", c.Size)
	}
	if c.QPs == 0 {
		c.QPs = 1
	}
	if c.QPs < 1 || c.QPs > t.MaxQPs() {
		return fmt.Errorf("perf: %d QPs: %s takes 1 to %d (perftest: multiple QPs only in bw tests)", c.QPs, t.Name(), t.MaxQPs())
	}
	if c.TxDepth == 0 {
		c.TxDepth = 128
		if t.Lat {
			c.TxDepth = 1
		}
	}
	if c.Duration == 0 && c.TxDepth > c.Iters {
		c.TxDepth = c.Iters // as perftest
	}
	if c.TxDepth < 1 || c.TxDepth > 4096 {
		return fmt.Errorf("perf: tx depth %d out of range", c.TxDepth)
	}
	if c.PostList == 0 || t.Lat {
		c.PostList = 1
	}
	if c.PostList < 1 || c.PostList > c.TxDepth {
		return fmt.Errorf("perf: post list %d not in [1, tx depth %d]", c.PostList, c.TxDepth)
	}
	if c.RxDepth == 0 {
		c.RxDepth = 512
	}
	if c.RxDepth < 1 || c.RxDepth > 8192 {
		return fmt.Errorf("perf: rx depth %d out of range", c.RxDepth)
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.QPTimeout > 31 {
		return fmt.Errorf("perf: -u %d: the timeout exponent is 0 to 31", c.QPTimeout)
	}
	if !c.Server && c.Peer == "" {
		return errors.New("perf: no server to connect to")
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return nil
}

// sizes returns the message sizes the test runs.
func (c *RemoteConfig) sizes() []int {
	if c.All {
		return perftest.AllSizes()
	}
	return []int{c.Size}
}

// MTUInfo describes the interface that holds a local address.
type MTUInfo struct {
	Interface string
	IfMTU     int
	Active    qp.MTU // the RoCE MTU the interface allows, computed as rxe does
}

// rxeMaxHdr is rxe's RXE_MAX_HDR_LENGTH: the active RoCE MTU is the largest
// IB MTU not above the netdev MTU minus these bytes (1500 → 1024,
// 9000 → 4096).
const rxeMaxHdr = 80

// ActiveMTU finds the interface holding local (or, for 127.0.0.2 and the
// like, the loopback interface whose prefix covers it) and the RoCE path
// MTU it allows.
func ActiveMTU(local netip.Addr) (MTUInfo, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return MTUInfo{}, err
	}
	local = local.Unmap()
	var cover *net.Interface
	for i, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			if p.Addr().Unmap() == local {
				return MTUInfo{Interface: ifc.Name, IfMTU: ifc.MTU, Active: mtuFor(ifc.MTU)}, nil
			}
			if ifc.Flags&net.FlagLoopback != 0 && p.Contains(local) && cover == nil {
				cover = &ifs[i]
			}
		}
	}
	if cover != nil {
		return MTUInfo{Interface: cover.Name, IfMTU: cover.MTU, Active: mtuFor(cover.MTU)}, nil
	}
	return MTUInfo{}, fmt.Errorf("perf: no interface has the address %v", local)
}

func mtuFor(ifMTU int) qp.MTU {
	for m := qp.MTU4096; m > qp.MTU256; m-- {
		if m.Bytes()+rxeMaxHdr <= ifMTU {
			return m
		}
	}
	return qp.MTU256
}

// CheckMTU returns the MTU this side offers: -m if given and it fits, else
// the interface's active MTU.
func CheckMTU(want qp.MTU, info MTUInfo) (qp.MTU, error) {
	if want == 0 {
		return info.Active, nil
	}
	if want > info.Active {
		return 0, fmt.Errorf("%w: -m %d is above the active MTU %d of %s (interface MTU %d): a RoCE MTU of %d needs an interface MTU of at least %d (rxe guests: rxe mtu 9000 for 4096)",
			ErrMTU, want.Bytes(), info.Active.Bytes(), info.Interface, info.IfMTU, want.Bytes(), want.Bytes()+rxeMaxHdr)
	}
	return want, nil
}

// Dial connects to addr, retrying while the server is not listening yet
// (perftest servers take a moment to start), until timeout.
func Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		d := net.Dialer{Timeout: time.Until(deadline)}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		last = err
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Now().Add(200*time.Millisecond).After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if errors.Is(last, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("perf: cannot connect to %s for %v: %w (is the server running?)", addr, timeout, last)
	}
	return nil, fmt.Errorf("perf: cannot reach %s: %w (is the peer up and routed? goroce must run where the peer is reachable, e.g. ip netns exec roce0)", addr, last)
}

// Accept listens on addr and returns the first connection, or an error
// when ctx ends.
func Accept(ctx context.Context, addr string) (net.Conn, error) {
	lc := net.ListenConfig{}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("perf: listen on %s: %w", addr, err)
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	c, err := ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return c, nil
}

// OpenDevice opens a goroce device on UDP port (0: 4791) of the local
// address, sending to the same port of its peers.
func OpenDevice(local netip.Addr, port uint16) (*roce.Device, error) {
	return openDevice(local, port, nil)
}

// OpenDeviceLink is OpenDevice on a link opened by open (nil: link/udp),
// e.g. an Impaired opener.
func OpenDeviceLink(local netip.Addr, port uint16, open func(netip.AddrPort) (link.Link, error)) (*roce.Device, error) {
	return openDevice(local, port, open)
}

// openDevice opens a goroce device on a link opened by open (nil: link/udp)
// at UDP port (0: 4791) of the local address.
func openDevice(local netip.Addr, port uint16, open func(netip.AddrPort) (link.Link, error)) (*roce.Device, error) {
	if open == nil {
		open = func(a netip.AddrPort) (link.Link, error) { return udp.Open(udp.Config{Addr: a}) }
	}
	if port == 0 {
		port = rocev2.UDPPort
	}
	l, err := open(netip.AddrPortFrom(local.Unmap(), port))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("perf: UDP %d on %v is taken (%w): another RoCE stack, e.g. the kernel's rdma_rxe, owns it in this network namespace; run goroce in another one (ip netns exec roce0 …)",
				port, local, err)
		}
		return nil, err
	}
	d, err := roce.Open(roce.Config{Link: l, DestPort: port})
	if err != nil {
		l.Close()
		return nil, err
	}
	return d, nil
}

// remote is one test against a perftest peer.
type remote struct {
	cfg  *RemoteConfig
	ses  *perftest.Session
	role perftest.Role
	mtu  qp.MTU
	info MTUInfo

	endpoint
	slot     int // bytes of buf per QP (the target half for write_lat)
	local    []perftest.Dest
	rem      []perftest.Dest
	outReads uint16
	cml      *cmLink // the RDMACM mode's control connection
	lastRx   uint64
	watch    *stallWatch   // the waits' stall timeout (run)
	stall    time.Duration // the longest gap between completions of the loops
}

// RunRemote runs one test against a perftest peer and prints perftest's
// report to cfg.Out. It returns the result rows it printed (the client's
// for bw tests, as perftest's server prints them).
func RunRemote(ctx context.Context, cfg RemoteConfig) ([]Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &remote{cfg: &cfg}
	defer r.close()
	var im *Impaired
	if cfg.Impair != nil {
		im = &Impaired{Config: *cfg.Impair}
		cfg.OpenLink = im.Opener(cfg.OpenLink)
	}
	var rows []Result
	err := r.connect(ctx)
	if err == nil {
		rows, err = r.run(ctx)
	}
	if im != nil && im.Link != nil && r.dev != nil {
		rep := NewPeerReport(r.dev, r.qps, im.Link, r.stall)
		if len(rows) > 0 {
			rows[len(rows)-1].Impair = &rep
		}
		if cfg.ImpairOut != nil {
			WritePeerReport(cfg.ImpairOut, rep)
		}
	}
	return rows, err
}

func (r *remote) close() {
	if r.ses != nil && r.cml == nil {
		r.ses.Conn().Close()
	}
	// The RDMACM mode's connections: ended in order by the Session's
	// Close when the test succeeds, else by the device's Close (a DREQ
	// each, not waited for).
	if r.dev != nil {
		r.dev.Close()
		if r.cfg.Metrics != nil {
			r.cfg.Metrics.Remove(r.dev) // exported while the test runs only
		}
		if r.cfg.Stats != nil {
			WriteStats(r.cfg.Stats, r.dev, r.qps)
		}
	}
}

// WriteStats prints the device's counters and the QPs' retransmissions on
// one line, for scripts: "goroce: stats rx=… tx=… bad_icrc=… …", then the
// device's and QPs' counters as `rdma statistic show` lines
// (metrics.Exporter.WriteStatistic), to diff against rxe's.
func WriteStats(w io.Writer, dev *roce.Device, qps []*roce.QP) {
	defer metrics.NewExporter(dev).WriteStatistic(w)
	st := dev.Stats()
	var retx, rkey uint64
	for _, q := range qps {
		c := q.Counters()
		retx += c.Load(qp.CounterRetransmittedPkts)
		rkey += c.Load(qp.CounterRkeyViolation)
	}
	fmt.Fprintf(w, "goroce: stats rx=%d tx=%d bad_icrc=%d icrc_id_fixups=%d bad_addr=%d bad_hdr=%d dropped_no_qp=%d send_errors=%d retransmitted=%d rkey_violations=%d\n",
		st.RxPackets.Load(), st.TxPackets.Load(), st.BadICRC.Load(), st.ICRCIDFixups.Load(), st.BadAddr.Load(),
		st.BadHdr.Load(), st.DroppedNoQP.Load(), st.SendErrors.Load(), retx, rkey)
}

// connect sets up TCP, the device and the QPs, and does the exchange up to
// the barrier.
func (r *remote) connect(ctx context.Context) error {
	cfg := r.cfg
	r.role = perftest.Client
	if cfg.Server {
		r.role = perftest.Server
	}
	if cfg.RDMACM {
		return r.connectCM(ctx)
	}
	var nc net.Conn
	var err error
	if cfg.Server {
		addr := net.JoinHostPort(cfg.Listen, strconv.Itoa(cfg.Port))
		fmt.Fprintf(cfg.Out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		nc, err = Accept(ctx, addr)
	} else {
		nc, err = Dial(ctx, net.JoinHostPort(cfg.Peer, strconv.Itoa(cfg.Port)), cfg.Timeout)
	}
	if err != nil {
		return err
	}
	conn := perftest.NewConn(nc, r.role)
	conn.Timeout = cfg.Timeout
	conn.Progress = r.progress
	r.ses = perftest.NewSession(conn, cfg.Tool)
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()

	local := netip.MustParseAddrPort(nc.LocalAddr().String()).Addr().Unmap()
	if !local.Is4() {
		return fmt.Errorf("perf: the TCP connection is over %v; goroce's link here is IPv4 only", local)
	}
	if r.info, err = ActiveMTU(local); err != nil {
		return err
	}
	offer, err := CheckMTU(cfg.MTU, r.info)
	if err != nil {
		return err
	}
	if r.mtu, err = r.ses.Hello(offer); err != nil {
		return r.ctxErr(ctx, err)
	}
	if r.dev, err = openDevice(local, cfg.RoCEPort, cfg.OpenLink); err != nil {
		return err
	}
	if cfg.Metrics != nil {
		cfg.Metrics.Add(r.dev)
	}
	if err := r.setup(local); err != nil {
		return err
	}
	if r.rem, err = r.ses.Keys(r.local); err != nil {
		return r.ctxErr(ctx, err)
	}
	peerOut := r.rem[0].OutReads
	for i, q := range r.qps {
		addr, err := perftest.GIDAddr(r.rem[i].GID, "-x")
		if err != nil {
			return err
		}
		if peer := netip.MustParseAddrPort(nc.RemoteAddr().String()).Addr().Unmap(); addr != peer {
			return fmt.Errorf("%w: the peer's GID is ::ffff:%v but it talks TCP from %v: is its GID index (-x) the one of that address?",
				perftest.ErrGID, addr, peer)
		}
		o := roce.ConnectOptions{
			MTU:             r.mtu,
			Timeout:         qpTimeout(cfg.QPTimeout),
			MaxRdAtomic:     uint8(min(int(max(r.rem[i].OutReads, 1)), 255)),
			MaxDestRdAtomic: uint8(min(int(max(r.outReads, 1)), 255)),
			Access:          qpAccess(r.access),
			TrafficClass:    cfg.TrafficClass,
		}
		if err := q.Connect(roce.Info{Addr: addr, QPN: bth.QPN(r.rem[i].QPN), PSN: bth.PSN(r.rem[i].PSN)}, o); err != nil {
			return fmt.Errorf("perf: connecting QP %d: %w", i, err)
		}
	}
	return r.ready(ctx, peerOut)
}

// ready ends the setup of either exchange: the tx depth bounded by the
// peer's out_reads in READ and atomic tests (as perftest does), the
// initial receives posted, the header printed, and the barrier passed.
func (r *remote) ready(ctx context.Context, peerOut uint16) error {
	cfg := r.cfg
	if cfg.Tool.ReadsOrAtomics() && int(peerOut) < cfg.TxDepth {
		cfg.TxDepth = max(int(peerOut), 1) // perftest: tx depth ≤ the peer's out_reads
	}
	if err := r.postInitialRecvs(); err != nil {
		return err
	}
	r.printHeader()
	if err := r.ses.Barrier(); err != nil {
		return r.ctxErr(ctx, err)
	}
	return nil
}

func (r *remote) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// progress reports whether the peer's requests or responses moved since
// the last call: a long wait for the peer's end-of-test message is not a
// dead peer while its traffic keeps being accepted. Packets that are not
// accepted do not count (RNR-NAKed, out of sequence, duplicates): a peer
// SENDing to a test that posts no receives (a different tool) would
// otherwise keep the wait alive for ever.
func (r *remote) progress() bool {
	var n uint64
	for _, q := range r.qps {
		c := q.Counters()
		n += c.Load(qp.CounterRcvdPkts) - c.Load(qp.CounterSendRNRErr) - c.Load(qp.CounterOutOfSeqRequest) - c.Load(qp.CounterDuplicateRequest)
	}
	moved := n != r.lastRx
	r.lastRx = n
	return moved
}

// setup creates the CQs, the buffer and the QPs, and fills r.local.
func (r *remote) setup(local netip.Addr) error {
	if err := r.setupBuffers(); err != nil {
		return err
	}
	for range r.cfg.QPs {
		q, err := r.dev.CreateQP(r.testQPConfig())
		if err != nil {
			return err
		}
		r.qps = append(r.qps, q)
	}
	r.fillLocal(local)
	return nil
}

// testQPConfig is the test QPs' configuration.
func (r *remote) testQPConfig() roce.QPConfig {
	return roce.QPConfig{PD: r.pd, SendCQ: r.scq, RecvCQ: r.rcq, MaxSendWR: r.cfg.TxDepth + 16, MaxRecvWR: r.cfg.RxDepth + 16}
}

// setupBuffers creates the CQs and the buffer, and sets r.outReads.
func (r *remote) setupBuffers() error {
	cfg := r.cfg
	maxSize := slices.Max(cfg.sizes())
	// perftest's peer may access anywhere in its cycle buffer (max(size,
	// 4096) per QP): give each QP that much, 64-byte aligned.
	r.slot = (max(maxSize, perftest.CycleBuffer) + 63) &^ 63
	n := r.slot * cfg.QPs
	if cfg.Tool.Lat && cfg.Tool.Verb == perftest.Write {
		n = 2 * r.slot // source, then the target the peer writes
	}
	var access mr.AccessFlags
	if r.targeted() {
		access = remoteAccess(r.op())
	}
	if err := r.endpoint.setup(endpointConfig{cqDepth: cfg.QPs*(cfg.TxDepth+cfg.RxDepth) + 64,
		bufSize: n, access: access}); err != nil {
		return err
	}
	if cfg.Wait.polls(runtime.NumCPU()) {
		r.scq.SetSpin(PollSpin)
		r.rcq.SetSpin(PollSpin)
	}
	r.outReads = 1
	if cfg.Tool.ReadsOrAtomics() {
		r.outReads = 128 // as rxe's max_qp_rd_atom
	}
	return nil
}

// fillLocal fills r.local, the key messages of r.qps.
func (r *remote) fillLocal(local netip.Addr) {
	cfg := r.cfg
	gid := perftest.GIDFromAddr(local)
	for i, q := range r.qps {
		inf := q.Info()
		d := perftest.Dest{OutReads: r.outReads, QPN: uint32(inf.QPN), PSN: uint32(inf.PSN), GID: gid,
			RKey: uint32(r.mr.RKey()), VAddr: r.target(i)}
		if cfg.Tool.Verb == perftest.Send {
			d.RKey, d.VAddr = 0, r.mr.IOVA()+uint64(i*r.slot)
		}
		if cfg.RDMACM {
			d.GIDIndex = gidIndex
		}
		r.local = append(r.local, d)
	}
}

// targeted reports whether the peer's requests access this side's buffer:
// the server's in the bw tests and ib_read_lat, both sides' in
// ib_write_lat (a ping-pong of WRITEs). A client of the other tests is
// only a requester and grants no remote access.
func (r *remote) targeted() bool {
	return r.role == perftest.Server || r.cfg.Tool.Lat && r.cfg.Tool.Verb == perftest.Write
}

// target returns the address the peer accesses on QP i.
func (r *remote) target(i int) uint64 {
	if r.cfg.Tool.Lat && r.cfg.Tool.Verb == perftest.Write {
		return r.mr.IOVA() + uint64(r.slot)
	}
	return r.mr.IOVA() + uint64(i*r.slot)
}

// receivesNeeded reports whether this side receives SENDs.
func (r *remote) receivesNeeded() bool {
	t := r.cfg.Tool
	return t.Verb == perftest.Send && (t.Lat || r.role == perftest.Server)
}

func (r *remote) postInitialRecvs() error {
	if !r.receivesNeeded() {
		return nil
	}
	n := r.cfg.RxDepth
	if r.cfg.Duration == 0 {
		n = min(n, r.cfg.Iters)
	}
	for i, q := range r.qps {
		for range n {
			if err := q.PostRecv(r.recvWR(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *remote) recvWR(i int) *qp.RecvWR {
	// Every receive of a QP uses the same buffer, as perftest's do.
	return r.endpoint.recvWR(i, uint64(i*r.slot), r.slot)
}

// run does the traffic and the end of the exchange.
func (r *remote) run(ctx context.Context) ([]Result, error) {
	cfg := r.cfg
	t := cfg.Tool
	var rows []Result
	stop := context.AfterFunc(ctx, func() {
		if r.cml != nil {
			r.cml.abort()
		} else {
			r.ses.Conn().Close()
		}
	})
	defer stop()
	r.watch = watchStalls(ctx, cfg.Timeout)
	defer r.watch.stop()
	// measure runs one size on this side; the passive server has none: the
	// client's requests run against our buffer and we wait in the exchange
	// that ends the test.
	var measure func(context.Context, int) (Result, error)
	switch {
	case r.role == perftest.Server && t.ServerPassive():
	case t.Lat:
		measure = r.latency
	case r.role == perftest.Server: // ib_send_bw server: count receives
		measure = r.receive
	default: // bw client
		measure = r.bandwidth
	}
	if measure != nil {
		sizes := cfg.sizes()
		for k, s := range sizes {
			res, err := measure(ctx, s)
			if err != nil {
				return nil, r.explain(ctx, err)
			}
			rows = append(rows, res)
			if cfg.CPUUtil {
				WriteResultCPUUtil(cfg.Out, res, cfg.Gbits, CPUs())
			} else {
				WriteResult(cfg.Out, res, t.Lat, cfg.Gbits)
			}
			if cfg.All {
				if err := r.ses.SizeDone(k == len(sizes)-1); err != nil {
					return nil, r.ctxErr(ctx, err)
				}
			}
		}
	}
	var mine perftest.Report
	if len(rows) > 0 {
		mine = r.report(rows[len(rows)-1])
	}
	rem, err := r.ses.Results(mine)
	if err != nil {
		return nil, r.explain(ctx, err)
	}
	if r.role == perftest.Server && t.ServerPassive() && !t.Lat {
		res := r.fromReport(rem)
		rows = append(rows, res)
		WriteResult(cfg.Out, res, false, cfg.Gbits)
	}
	if r.cml != nil {
		// Before the Session's Close disconnects them (and their QPs
		// move to ERR).
		if err := r.checkQPs(); err != nil {
			return nil, err
		}
	}
	if err := r.ses.Close(); err != nil {
		return nil, r.explain(ctx, err)
	}
	WriteFooter(cfg.Out)
	if r.cml != nil {
		return rows, nil
	}
	return rows, r.checkQPs()
}

// checkQPs fails if a QP ended in ERR (a peer's NAK, a retry exhausted).
// In the RDMACM mode a QP whose connection the peer has disconnected is
// in ERR by design (ib_write_lat's client disconnects as soon as it is
// done, without a closing exchange).
func (r *remote) checkQPs() error {
	for i, q := range r.qps {
		if r.cml != nil && errors.Is(r.cml.data[i].Err(), roce.ErrDisconnected) {
			continue
		}
		if s := q.State(); s == qp.StateErr {
			return r.explain(context.Background(), fmt.Errorf("perf: QP %d ended in state %v", i, s))
		}
	}
	return nil
}

// report converts a result row into perftest's results message, in the
// unit this side reports (the peer prints it as it is).
func (r *remote) report(res Result) perftest.Report {
	conv := func(gbps float64) float64 {
		if r.cfg.Gbits {
			return gbps
		}
		return gbps * 1e9 / 8 / (1 << 20)
	}
	return perftest.Report{Size: uint64(res.Size), Iters: uint64(res.Iters), BWPeak: conv(res.PeakGbps),
		BWAvg: conv(res.Gbps), MsgRate: res.Mpps}
}

// fromReport converts the client's results message, assumed to be in the
// unit this side was asked for (perftest makes the same assumption).
func (r *remote) fromReport(rep perftest.Report) Result {
	conv := func(v float64) float64 {
		if r.cfg.Gbits {
			return v
		}
		return v * (1 << 20) * 8 / 1e9
	}
	return Result{Op: Op(r.cfg.Tool.Verb.String()), Size: int(rep.Size), Iters: int(rep.Iters), QPs: r.cfg.QPs,
		MTU: r.mtu.Bytes(), Gbps: conv(rep.BWAvg), PeakGbps: conv(rep.BWPeak), Mpps: rep.MsgRate}
}

// wait polls c for completions, failing when nothing completes for the
// timeout.
func (r *remote) wait(ctx context.Context, c *cq.CQ, wcs []cq.Completion, what string) (int, error) {
	return poll(ctx, r.watch, c, wcs,
		func() error {
			return fmt.Errorf("perf: no %s for %v: the peer stopped answering (is it still running?)", what, r.cfg.Timeout)
		},
		func(wc cq.Completion) error { return &WCError{WC: wc} })
}

// WCError is a failed work completion.
type WCError struct{ WC cq.Completion }

// Error describes the failed completion.
func (e *WCError) Error() string {
	return fmt.Sprintf("work completion error %v (opcode %v, QPN %#x)", e.WC.Status, e.WC.Opcode, e.WC.QPN)
}

// Unwrap returns the completion's *cq.StatusError.
func (e *WCError) Unwrap() error { return e.WC.Err() }

// explain adds the likely cause to an error of the test.
func (r *remote) explain(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var rnr uint64
	for _, q := range r.qps {
		rnr += q.Counters().Load(qp.CounterSendRNRErr)
	}
	if rnr > 0 && !r.receivesNeeded() {
		err = fmt.Errorf("%w (the peer SENDs, %d RNR NAKs: does it run %s too?)", err, rnr, r.cfg.Tool.Name())
	}
	return Explain(err, r.dev, r.mtu, r.info, "-x")
}

// Explain adds the likely cause to an error of a test against a peer:
// what a failed completion status usually means with rxe, and the
// device's drop counters (doc/rxe.md §10 items 7, 8). flag
// is the peer tool's GID-index option.
func Explain(err error, dev *roce.Device, mtu qp.MTU, info MTUInfo, flag string) error {
	var we *WCError
	hint := ""
	if errors.As(err, &we) {
		switch we.WC.Status {
		case cq.StatusRetryExcErr:
			hint = fmt.Sprintf("the peer never acknowledged: is it still running, does it use the RoCEv2 GID (%s 1 on rxe), and do both sides agree on the path MTU", flag)
		case cq.StatusRemInvReqErr:
			hint = fmt.Sprintf("the peer rejected a request as invalid: most likely a path MTU mismatch (this side sends up to %d-byte payloads; rxe's active MTU follows its netdev MTU: 1500 → 1024, 9000 → 4096)", mtu.Bytes())
		case cq.StatusRemAccessErr:
			hint = "the peer refused the rkey or address: do both sides use the same -s, -a and -q?"
		case cq.StatusRNRRetryExcErr:
			hint = "the peer posted no receive buffers"
		case cq.StatusWRFlushErr, cq.StatusLocLenErr, cq.StatusRemOpErr:
			hint = fmt.Sprintf("our QP failed on a request from the peer: is the peer's path MTU larger than ours (%d), or its message larger than our buffers?", mtu.Bytes())
		}
	}
	if dev != nil {
		st := dev.Stats()
		if n := st.SendErrors.Load(); n > 0 {
			hint += fmt.Sprintf("; %d packets could not be sent (interface %s has MTU %d, the path MTU is %d)", n, info.Interface, info.IfMTU, mtu.Bytes())
		}
		if n := st.BadICRC.Load(); n > 0 {
			hint += fmt.Sprintf("; %d packets failed the ICRC check", n)
		}
		if n := st.BadAddr.Load(); n > 0 {
			hint += fmt.Sprintf("; %d packets came from an address other than the peer's GID (its GID index?)", n)
		}
	}
	if hint == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.TrimPrefix(hint, "; "))
}

// bandwidth runs one size of a bw test as the client: every QP keeps
// TxDepth requests outstanding until Iters completed (or Duration passed).
func (r *remote) bandwidth(ctx context.Context, size int) (Result, error) {
	cfg := r.cfg
	l := r.requester(size, cfg.TxDepth, "completion")
	l.iters, l.dur = cfg.Iters, cfg.Duration
	l.postList = min(cfg.PostList, cfg.TxDepth) // TxDepth may have dropped to the peer's out_reads
	t, err := l.run(ctx)
	r.stall = max(r.stall, t.stall)
	if err != nil {
		return Result{}, err
	}
	res := t.result(r.op(), size, len(r.qps), r.mtu.Bytes())
	if cfg.Duration > 0 {
		res.PeakGbps = 0 // perftest reports no peak with -D
	}
	for _, q := range r.qps {
		res.Retransmitted += q.Counters().Load(qp.CounterRetransmittedPkts)
	}
	return res, nil
}

// requester returns the loop of this side's requests of size bytes on
// every QP, depth outstanding on each, against the peer's buffers; what
// names a completion in the stall error.
func (r *remote) requester(size, depth int, what string) *loop {
	return &loop{qps: r.qps, size: size, depth: depth,
		next: func(wr *qp.SendWR, i int, seq uint64) { r.request(wr, i, seq, size) },
		wait: func(ctx context.Context, wcs []cq.Completion) (int, error) {
			return r.wait(ctx, r.scq, wcs, what)
		}}
}

// request builds into wr the seq-th request of QP i: size bytes of its
// slot of the buffer, to or from the peer's.
func (r *remote) request(wr *qp.SendWR, i int, seq uint64, size int) {
	rem := r.rem[i]
	r.endpoint.request(wr, r.op(), r.cfg.Atomic == perftest.CmpAndSwap, i, seq, uint64(i*r.slot), size,
		rem.VAddr, mr.Key(rem.RKey))
}

// op is the test's operation.
func (r *remote) op() Op { return Op(r.cfg.Tool.Verb.String()) }

// receive runs one size of ib_send_bw as the server: it counts Iters
// receives per QP (or receives until Duration passed), reposting each.
func (r *remote) receive(ctx context.Context, size int) (Result, error) {
	cfg := r.cfg
	nq := len(r.qps)
	want := cfg.Iters * nq
	var start, last time.Time
	var deadline time.Time
	got := 0
	var bytes int64
	wcs := make([]cq.Completion, 256)
	for cfg.Duration > 0 || got < want {
		if cfg.Duration > 0 && !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		n, err := r.wait(ctx, r.rcq, wcs, "message from the client")
		if err != nil {
			return Result{}, err
		}
		now := time.Now()
		if start.IsZero() {
			start = now
			deadline = now.Add(cfg.Duration)
		}
		last = now
		for _, wc := range wcs[:n] {
			got++
			bytes += int64(wc.ByteLen)
			i := int(wc.WRID)
			if err := r.qps[i].PostRecv(r.recvWR(i)); err != nil {
				return Result{}, err
			}
		}
	}
	el := last.Sub(start).Seconds()
	if el <= 0 {
		el = 1e-9
	}
	res := throughput(OpSend, size, nq, r.mtu.Bytes(), got, bytes, el)
	if cfg.Duration > 0 {
		res.PeakGbps = 0
	}
	return res, nil
}

// latency runs one size of a latency test on QP 0 and returns perftest's
// figures: the times between successive posts, halved for the ping-pong
// tests (write, send) whose iteration is a round trip.
func (r *remote) latency(ctx context.Context, size int) (Result, error) {
	cfg := r.cfg
	n := cfg.Iters
	var posts []time.Time
	var err error
	switch cfg.Tool.Verb {
	case perftest.Write:
		if cfg.Wait.inline(runtime.NumCPU()) {
			posts, err = r.writeLatInline(ctx, size, n)
		} else {
			posts, err = r.writeLat(ctx, size, n)
		}
	case perftest.Send:
		posts, err = r.sendLat(ctx, size, n)
	case perftest.Read:
		posts, err = r.readLat(ctx, size, n)
	}
	if err != nil {
		return Result{}, err
	}
	factor := 2.0
	if cfg.Tool.Verb == perftest.Read {
		factor = 1
	}
	deltas := make([]time.Duration, 0, len(posts))
	for i := 1; i < len(posts); i++ {
		deltas = append(deltas, posts[i].Sub(posts[i-1]))
	}
	if len(deltas) == 0 {
		deltas = append(deltas, 0)
	}
	res := Result{Op: r.op(), Size: size, Iters: n, QPs: 1, MTU: r.mtu.Bytes()}
	setLatency(&res, deltas, factor)
	return res, nil
}

// writeLat is perftest's run_iter_lat_write: each side RDMA-WRITEs size
// bytes into the peer's buffer, the last byte carrying the iteration
// number, and polls the last byte of its own for the peer's. The server
// writes first.
func (r *remote) writeLat(ctx context.Context, size, n int) ([]time.Time, error) {
	q := r.qps[0]
	src := r.mr.IOVA()
	dst := r.target(0) + uint64(size-1)
	var b [1]byte
	wcs := make([]cq.Completion, 1)
	posts := make([]time.Time, 0, n)
	rcnt, scnt := 0, 0
	var wr qp.SendWR // reused: a request allocates nothing
	for scnt < n || rcnt < n {
		if rcnt < n && !(scnt == 0 && r.role == perftest.Server) {
			rcnt++
			if err := r.pollByte(ctx, dst, byte(rcnt)); err != nil {
				return nil, err
			}
		}
		if scnt < n {
			scnt++
			b[0] = byte(scnt)
			if err := r.mr.WriteAt(b[:], src+uint64(size-1)); err != nil {
				return nil, err
			}
			posts = append(posts, time.Now())
			r.request(&wr, 0, uint64(scnt), size)
			if err := q.PostSend(&wr); err != nil {
				return nil, err
			}
			if _, err := r.wait(ctx, r.scq, wcs, "WRITE completion"); err != nil {
				return nil, err
			}
		}
	}
	return posts, nil
}

// pollByte waits until the byte at va is v: the peer's WRITE arrived. It
// looks at the byte only when the device has processed a received batch
// since the last look (RxSeq), so it does not take the region's lock in a
// tight loop against the receive goroutine that writes it. Between looks
// it busy-polls the count for up to PollSpin, as perftest polls the
// byte, when the test polls (WaitMode) and GOMAXPROCS leaves a processor
// beside the spinner; then it sleeps in WaitRx, woken by the batch.
// writeLatInline is writeLat run to completion (WaitInline): the look at
// the last byte of the buffer, the wait for the own WRITE's completion and
// the next post all happen on the device's receive goroutine after each
// batch it receives (roce.Device.OnBatch), in perftest's order (wait for
// the peer's WRITE, post, wait for the completion). The calling goroutine
// makes the first step and then only waits: for the end, ctx, an error,
// or cfg.Timeout without progress; every cfg.Timeout/8 it also steps
// itself, for completions no received batch followed.
func (r *remote) writeLatInline(ctx context.Context, size, n int) ([]time.Time, error) {
	q := r.qps[0]
	src := r.mr.IOVA() + uint64(size-1)
	dst := r.target(0) + uint64(size-1)
	var (
		x          inlineRun // its mutex guards the rest
		b          [1]byte
		wcs        = make([]cq.Completion, 4)
		posts      = make([]time.Time, 0, n)
		rcnt, scnt int
		awaitComp  bool      // a WRITE is posted and not completed
		last       time.Time // the last progress
		wr         qp.SendWR
	)
	// need is how many of the peer's WRITEs must have landed before the
	// next post: the client's WRITE k follows the peer's k, the server's
	// (which writes first) follows the peer's k-1; after the last post,
	// all of them.
	need := func() int {
		switch {
		case scnt == n:
			return n
		case r.role == perftest.Server:
			return scnt
		}
		return scnt + 1
	}
	// step moves the test on as far as it can.
	step := func() {
		for !x.over {
			switch {
			case awaitComp:
				k := r.scq.Poll(wcs)
				if k == 0 {
					return
				}
				for _, wc := range wcs[:k] {
					if wc.Status != cq.StatusSuccess {
						x.finish(&WCError{WC: wc})
						return
					}
				}
				awaitComp = false
			case rcnt < need():
				if err := r.mr.ReadAt(b[:], dst); err != nil {
					x.finish(err)
					return
				}
				if b[0] != byte(rcnt+1) {
					if q.State() == qp.StateErr {
						x.finish(fmt.Errorf("perf: QP in state ERR while waiting for the peer's WRITE"))
					}
					return
				}
				rcnt++
			case scnt < n:
				scnt++
				b[0] = byte(scnt)
				if err := r.mr.WriteAt(b[:], src); err != nil {
					x.finish(err)
					return
				}
				posts = append(posts, time.Now())
				r.request(&wr, 0, uint64(scnt), size)
				if err := q.PostSend(&wr); err != nil {
					x.finish(err)
					return
				}
				awaitComp = true
			default:
				x.finish(nil)
				return
			}
			last = time.Now()
		}
	}
	start := func() error { last = time.Now(); return nil }
	err := x.drive(ctx, r.dev, r.cfg.Timeout/8, start, step, func(now time.Time) error {
		if now.Sub(last) > r.cfg.Timeout {
			return fmt.Errorf("perf: the peer's WRITE %d did not arrive in %v: the peer stopped (is it still running?)", rcnt+1, r.cfg.Timeout)
		}
		return nil
	})
	x.mu.Lock()
	defer x.mu.Unlock()
	return posts, err
}

func (r *remote) pollByte(ctx context.Context, va uint64, v byte) error {
	var b [1]byte
	dev := r.dev
	spin := r.cfg.Wait.spins()
	spinEnd := time.Now().Add(PollSpin)
	for {
		seq := dev.RxSeq()
		if err := r.mr.ReadAt(b[:], va); err != nil {
			return err
		}
		if b[0] == v {
			return nil
		}
		if r.qps[0].State() == qp.StateErr {
			return fmt.Errorf("perf: QP in state ERR while waiting for the peer's WRITE")
		}
		if spin && spinUntilMoved(ctx, dev, seq, spinEnd) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Parked: the timeout is a stretch with nothing received at all.
		wctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		err := dev.WaitRx(wctx, seq)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("perf: the peer's WRITE %d did not arrive in %v: the peer stopped (is it still running?)", v, r.cfg.Timeout)
			}
			return err
		}
	}
}

// spinYield is how often a busy-polling test yields its processor, as
// cq.CQ's spinning Wait does: a goroutine queued behind the spinner waits
// at most that long, and the spinner is not always in the global run
// queue, where it would keep the scheduler from polling the network.
const spinYield = 20 * time.Microsecond

// spinUntilMoved busy-polls dev's RxSeq until it moves past seq (true) or
// end passes or ctx ends (false). It yields every spinYield.
func spinUntilMoved(ctx context.Context, dev *roce.Device, seq uint64, end time.Time) bool {
	yield := time.Now().Add(spinYield)
	for i := 1; ; i++ {
		if dev.RxSeq() != seq {
			return true
		}
		if i%64 != 0 {
			continue
		}
		now := time.Now()
		if !now.Before(end) || ctx.Err() != nil {
			return false
		}
		if now.After(yield) {
			runtime.Gosched()
			yield = now.Add(spinYield)
		}
	}
}

// sendLat is perftest's run_iter_lat_send: SEND ping-pong, the client
// first; each side sends once it received.
func (r *remote) sendLat(ctx context.Context, size, n int) ([]time.Time, error) {
	q := r.qps[0]
	wcs := make([]cq.Completion, 1)
	posts := make([]time.Time, 0, n)
	rcnt, scnt := 0, 0
	var wr qp.SendWR // reused: a request allocates nothing
	for scnt < n || rcnt < n {
		if rcnt < n && !(scnt == 0 && r.role == perftest.Client) {
			if _, err := r.wait(ctx, r.rcq, wcs, "message from the peer"); err != nil {
				return nil, err
			}
			rcnt++
			if err := q.PostRecv(r.recvWR(0)); err != nil {
				return nil, err
			}
		}
		if scnt < n {
			scnt++
			posts = append(posts, time.Now())
			r.request(&wr, 0, uint64(scnt), size)
			if err := q.PostSend(&wr); err != nil {
				return nil, err
			}
			if _, err := r.wait(ctx, r.scq, wcs, "SEND completion"); err != nil {
				return nil, err
			}
		}
	}
	return posts, nil
}

// readLat is the client of ib_read_lat: the requester loop with one READ
// at a time on QP 0.
func (r *remote) readLat(ctx context.Context, size, n int) ([]time.Time, error) {
	l := r.requester(size, 1, "READ completion")
	l.qps, l.iters, l.times = r.qps[:1], n, true
	t, err := l.run(ctx)
	r.stall = max(r.stall, t.stall)
	return t.posts, err
}

// printHeader prints perftest's banner and both sides' addresses.
func (r *remote) printHeader() {
	cfg := r.cfg
	t := cfg.Tool
	b := banner{title: testName(Op(t.Verb.String()), t.Lat, cfg.Atomic), qps: cfg.QPs, mtu: r.mtu.Bytes(),
		gidIndex: gidIndex, remote: true, rdmaCM: cfg.RDMACM}
	if r.role == perftest.Client || !t.ServerPassive() {
		b.txDepth = cfg.TxDepth
	}
	if t.ReadsOrAtomics() {
		b.outReads = int(r.outReads)
	}
	writeBanner(cfg.Out, b)
	send := t.Verb == perftest.Send
	for i := range r.local {
		writeAddress(cfg.Out, "local", r.local[i], send, t.ReadsOrAtomics())
	}
	for i := range r.rem {
		writeAddress(cfg.Out, "remote", r.rem[i], send, t.ReadsOrAtomics())
	}
	fmt.Fprintln(cfg.Out, rule)
	if r.role == perftest.Server && t.Lat && t.ServerPassive() {
		return // ib_read_lat's server prints no results
	}
	if cfg.CPUUtil {
		writeColumnsCPUUtil(cfg.Out, cfg.Gbits)
		return
	}
	writeColumns(cfg.Out, t.Lat, cfg.Gbits)
}

// qpTimeout is the ConnectOptions.Timeout of perftest's -u exponent: the
// code's exact duration, which Connect maps back to the same code; 0 keeps
// the default (14).
func qpTimeout(code uint8) time.Duration {
	t, _ := qp.AckTimeout(code)
	return t
}
