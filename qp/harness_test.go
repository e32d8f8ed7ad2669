package qp_test

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// endpoint is one side of a virtual-time RC connection: memory, CQs, a QP,
// and the link towards the peer. It plays the device's part: it seals and
// verifies the ICRC over the IP/UDP headers the packet would have, parses,
// and hands packets to the QP.
type endpoint struct {
	t      testing.TB
	name   string
	tbl    *mr.Table
	pd     *mr.PD
	scq    *cq.CQ
	rcq    *cq.CQ
	qp     *qp.QP
	out    *testutil.Link
	self   netip.AddrPort // our address and UDP source port
	peer   netip.AddrPort // the peer's address and UDP source port
	buf    []byte
	pkt    wire.Packet
	sent   int
	bw     float64                                   // transmit rate in bit/s; 0 = unpaced
	txFree time.Time                                 // when the transmitter is free again
	wantTx bool                                      // the QP may have more to send once it is
	trace  func(now time.Time, dir string, b []byte) // optional packet trace
	drop   func(b []byte) bool                       // optional: drop before sending
	wcs    []cq.Completion
	// pause, if set, stops the endpoint in [pause.Start, pause.End) of
	// virtual time, as a descheduled process: it neither sends nor runs its
	// timers, and what arrives waits in its socket (held) until it resumes.
	pause testutil.Window
	held  [][]byte
	// ip, if set, is the IP header deliver reports with each packet
	// (HandlePacketIP), as a device does for its UD QPs.
	ip *qp.IPInfo
	// gather makes pump pull packets with NextPacketGather, as a device
	// over a link.Gatherer does: a payload left in its region is spliced
	// into the packet, the pin released and the packet counted in
	// gathered.
	gather   bool
	gathered int
	flat     []byte
}

// paused reports whether the endpoint is stopped at now.
func (e *endpoint) paused(now time.Time) bool {
	at := now.Sub(testutil.Epoch())
	return at >= e.pause.Start && at < e.pause.End
}

// resumeAt is when a pause covering now ends.
func (e *endpoint) resumeAt() time.Time { return testutil.Epoch().Add(e.pause.End) }

func newEndpoint(t testing.TB, name string, qpn bth.QPN, self, peer string) *endpoint {
	t.Helper()
	tbl, err := mr.NewTable(mr.TableConfig{})
	require.NoError(t, err)
	scq, err := cq.New(cq.Config{Capacity: 1 << 16})
	require.NoError(t, err)
	rcq, err := cq.New(cq.Config{Capacity: 1 << 16})
	require.NoError(t, err)
	pd := tbl.AllocPD()
	q, err := qp.New(qp.Config{QPN: qpn, MRs: tbl, PD: pd, SendCQ: scq, RecvCQ: rcq, MaxSendWR: 4096, MaxRecvWR: 4096})
	require.NoError(t, err)
	return &endpoint{
		t: t, name: name, tbl: tbl, pd: pd, scq: scq, rcq: rcq, qp: q,
		self: netip.MustParseAddrPort(self), peer: netip.MustParseAddrPort(peer),
		buf: make([]byte, qp.MaxPacketLen(qp.MTU4096)),
	}
}

// reg registers buf with the given access.
func (e *endpoint) reg(buf []byte, acc mr.AccessFlags) *mr.Region {
	e.t.Helper()
	r, err := e.tbl.Register(e.pd, mr.RegisterConfig{Buf: buf, Access: acc})
	require.NoError(e.t, err)
	return r
}

// connParams are the attributes of a connection under test.
type connParams struct {
	mtu             qp.MTU
	timeout         uint8
	retryCnt        uint8
	rnrRetry        uint8
	minRNRTimer     uint8
	maxRdAtomic     uint8
	maxDestRdAtomic uint8
	access          mr.AccessFlags
	psnA, psnB      bth.PSN
}

func defaultParams() connParams {
	return connParams{
		mtu: qp.MTU1024, timeout: 8, retryCnt: 7, rnrRetry: 7, minRNRTimer: 12,
		maxRdAtomic: 16, maxDestRdAtomic: 16,
		access: mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic,
		psnA:   0x100, psnB: 0x200,
	}
}

// connect moves a's QP to RTS towards b's (RESET → INIT → RTR → RTS).
func connect(t testing.TB, a, b *endpoint, p connParams, aPSN, bPSN bth.PSN) {
	t.Helper()
	require.NoError(t, a.qp.Modify(&qp.Attr{State: qp.StateInit, AccessFlags: p.access},
		qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags))
	require.NoError(t, a.qp.Modify(&qp.Attr{
		State: qp.StateRTR, PathMTU: p.mtu, DestQPN: b.qp.QPN(), RQPSN: bPSN,
		MaxDestRdAtomic: p.maxDestRdAtomic, MinRNRTimer: p.minRNRTimer,
		AV: qp.AddressVector{Remote: b.self.Addr()},
	}, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer))
	require.NoError(t, a.qp.Modify(&qp.Attr{
		State: qp.StateRTS, SQPSN: aPSN, Timeout: p.timeout, RetryCnt: p.retryCnt,
		RNRRetry: p.rnrRetry, MaxRdAtomic: p.maxRdAtomic,
	}, qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic))
}

// pump sends the packets the QP has now, at the transmitter's line rate
// like a NIC: it pulls a packet only when the previous one is on the wire,
// so a Go-Back-N rewind still takes back what was not yet sent.
func (e *endpoint) pump(now time.Time) {
	for {
		if e.paused(now) && e.txFree.Before(e.resumeAt()) {
			e.txFree = e.resumeAt() // nothing leaves a stopped process
		}
		if e.bw > 0 && e.txFree.After(now) || e.paused(now) {
			e.wantTx = true
			return
		}
		e.wantTx = false
		n, ok := e.next(now)
		if !ok {
			return
		}
		pkt := e.buf[:n]
		var ph [48]byte
		ip, udp := rocev2.PseudoHeaders(&ph, e.self, netip.AddrPortFrom(e.peer.Addr(), rocev2.UDPPort), 0, n)
		rocev2.PutICRC(pkt[n-4:], rocev2.ComputeICRC(ip, udp, pkt[:n-4]))
		e.sent++
		if e.bw > 0 {
			if e.txFree.Before(now) {
				e.txFree = now
			}
			e.txFree = e.txFree.Add(time.Duration(float64(n*8) / e.bw * 1e9))
		}
		if e.trace != nil {
			e.trace(now, e.name+">", pkt)
		}
		if e.drop != nil && e.drop(pkt) {
			continue
		}
		e.out.Send(now, pkt)
	}
}

// next pulls the QP's next packet into e.buf, through NextPacketGather
// when e.gather is set.
func (e *endpoint) next(now time.Time) (int, bool) {
	if !e.gather {
		return e.qp.NextPacket(now, e.buf)
	}
	var p qp.TxPayload
	n, ok := e.qp.NextPacketGather(now, e.buf, &p)
	if !ok || p.Region == nil {
		return n, ok
	}
	e.gathered++
	e.flat = append(append(append(e.flat[:0], e.buf[:p.At]...), p.Data...), e.buf[p.At:n]...)
	p.Region.Release()
	return copy(e.buf, e.flat), true
}

// deadline is the earliest of the QP's timers and the transmitter becoming
// free while the QP has more to send.
func (e *endpoint) deadline() (time.Time, bool) {
	d, ok := e.qp.Deadline()
	if e.wantTx && (!ok || e.txFree.Before(d)) {
		d, ok = e.txFree, true
	}
	if len(e.held) > 0 && (!ok || e.resumeAt().Before(d)) {
		d, ok = e.resumeAt(), true
	}
	if ok && e.paused(d) {
		d = e.resumeAt()
	}
	return d, ok
}

// onTimeout runs the endpoint's timers; at the end of a pause it first
// takes in what arrived meanwhile, in arrival order.
func (e *endpoint) onTimeout(now time.Time) {
	if e.paused(now) {
		return
	}
	held := e.held
	e.held = nil
	for _, b := range held {
		e.deliver(now, b)
	}
	e.qp.OnTimeout(now)
	e.pump(now)
}

// deliver is the device's receive path for one packet from the peer.
func (e *endpoint) deliver(now time.Time, b []byte) {
	if e.paused(now) {
		e.held = append(e.held, append([]byte(nil), b...))
		return
	}
	if e.trace != nil {
		e.trace(now, ">"+e.name, b)
	}
	// The ICRC is checked before any header is interpreted, so a corrupted
	// header is counted as what it is.
	var ph [48]byte
	ip, udp := rocev2.PseudoHeaders(&ph, e.peer, netip.AddrPortFrom(e.self.Addr(), rocev2.UDPPort), 0, len(b))
	if len(b) < bth.Size+bth.ICRCSize {
		e.qp.Counters().Add(qp.CounterBadHdr, 1)
		return
	}
	if rocev2.ComputeICRC(ip, udp, b[:len(b)-4]) != rocev2.ReadICRC(b[len(b)-4:]) {
		e.qp.Counters().Add(qp.CounterBadICRC, 1)
		return
	}
	if err := e.pkt.Parse(b); err != nil {
		e.qp.Counters().Add(qp.CounterBadHdr, 1)
		return
	}
	if e.pkt.BTH.DestQP() != e.qp.QPN() {
		e.qp.Counters().Add(qp.CounterDroppedNoQP, 1)
		return
	}
	if e.ip != nil {
		e.qp.HandlePacketIP(now, &e.pkt, e.ip)
	} else {
		e.qp.HandlePacket(now, &e.pkt)
	}
	e.pump(now)
}

// poll moves completions from the CQs into e.wcs and returns the new ones.
func (e *endpoint) poll() []cq.Completion {
	start := len(e.wcs)
	var buf [256]cq.Completion
	for _, c := range []*cq.CQ{e.scq, e.rcq} {
		for {
			n := c.Poll(buf[:])
			if n == 0 {
				break
			}
			e.wcs = append(e.wcs, buf[:n]...)
		}
	}
	return e.wcs[start:]
}

// pair is two connected endpoints over two impaired links in virtual time.
type pair struct {
	t      testing.TB
	a, b   *endpoint
	ab, ba *testutil.Link
	clock  *testutil.Clock
	sim    *testutil.Sim
	seed   uint64
}

// linkShape is the clean link the matrix measures goodput on: 10 Gb/s and
// 10 µs one way (an RTT of about 20 µs plus serialization).
func linkShape(imp testutil.Impairment) testutil.Impairment {
	if imp.Bandwidth == 0 {
		imp.Bandwidth = 10e9
	}
	if imp.Delay == 0 {
		imp.Delay = 10 * time.Microsecond
	}
	return imp
}

func newPair(t testing.TB, p connParams, ab, ba testutil.Impairment) *pair {
	t.Helper()
	seed := testutil.Seed(t)
	a := newEndpoint(t, "A", 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
	b := newEndpoint(t, "B", 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
	pr := &pair{t: t, a: a, b: b, seed: seed, clock: testutil.NewClock()}
	pr.ab = testutil.NewLink(testutil.SubSeed(seed, "ab"), linkShape(ab))
	pr.ba = testutil.NewLink(testutil.SubSeed(seed, "ba"), linkShape(ba))
	a.out, b.out = pr.ab, pr.ba
	connect(t, a, b, p, p.psnA, p.psnB)
	connect(t, b, a, p, p.psnB, p.psnA)
	if os.Getenv("GOROCE_TRACE") != "" {
		pr.traceTo(t)
	}
	pr.sim = testutil.NewSim(pr.clock)
	for _, e := range []*endpoint{a, b} {
		e := e
		e.bw = float64(linkShape(ab).Bandwidth)
		pr.sim.AddNode(testutil.NodeFuncs{
			DeadlineFunc: e.deadline,
			TimeoutFunc:  e.onTimeout,
		})
	}
	pr.sim.AddLink(pr.ab, b.deliver)
	pr.sim.AddLink(pr.ba, a.deliver)
	return pr
}

// run drives the simulation until done() or the virtual-time limit.
func (pr *pair) run(done func() bool, limit time.Duration) error {
	step := func() bool {
		if done() {
			return true
		}
		now := pr.clock.Now()
		pr.a.pump(now)
		pr.b.pump(now)
		return false
	}
	if step() {
		return nil
	}
	return pr.sim.Run(step, limit)
}

func (pr *pair) String() string { return fmt.Sprintf("seed=%d", pr.seed) }

// traceTo prints every packet of the pair (for debugging: GOROCE_TRACE=1).
func (pr *pair) traceTo(t testing.TB) {
	f := func(now time.Time, dir string, b []byte) {
		var p wire.Packet
		if err := p.Parse(b); err != nil {
			t.Logf("%v %s bad %v", now.Sub(testutil.Epoch()), dir, err)
			return
		}
		s := ""
		if p.AETH != nil {
			s = p.AETH.Syndrome().String()
		}
		t.Logf("%12v %s %-32v psn=%d A=%v len=%d %s", now.Sub(testutil.Epoch()), dir, p.Opcode(), p.BTH.PSN(), p.BTH.AckReq(), len(p.Payload), s)
	}
	pr.a.trace, pr.b.trace = f, f
}
