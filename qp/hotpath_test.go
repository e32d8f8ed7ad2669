package qp_test

// Hot-path benchmarks and allocation pins (no per-packet heap allocation on
// the data path). Each path has a Benchmark reporting
// ns/packet (ns/op is one packet) and allocations, and a Test pinning it at
// 0 allocations with testing.AllocsPerRun:
//   - the responder's WRITE path: HandlePacket of a 4 KiB WRITE MIDDLE, then
//     NextPacket (an ACK every 64 packets and on the LAST);
//   - the requester's ACK path: HandlePacket of an ACK completing a WQE;
//   - the responder's READ path: NextPacket of a 4 KiB READ response, and
//     NextPacketGather of one;
//   - the requester's WRITE path: NextPacket of a 4 KiB WRITE packet, and
//     NextPacketGather of one (the payload left in its region, pinned).

import (
	"testing"
	"time"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

const (
	hpMTU     = qp.MTU4096
	hpPkt     = 4096
	hpMsgPkts = 256 // packets of one message on the responder paths (1 MiB)
)

// hpQP is one QP in RTS (its peer exists only as a QPN) with the
// connection parameters of the harness at MTU 4096.
func hpQP(tb testing.TB) *endpoint {
	tb.Helper()
	p := defaultParams()
	p.mtu = hpMTU
	e := newEndpoint(tb, "B", 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
	peer := newEndpoint(tb, "A", 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
	connect(tb, e, peer, p, p.psnB, p.psnA)
	return e
}

// hpPacket builds f with payload into a buffer of its own and parses it;
// the returned Packet's views let the caller patch the BTH in place.
func hpPacket(tb testing.TB, f wire.Fields, payload []byte) *wire.Packet {
	tb.Helper()
	f.BTH.PKey, f.BTH.DestQP = 0xffff, 0x22
	buf := make([]byte, qp.MaxPacketLen(hpMTU))
	n, err := wire.Build(buf, &f, payload)
	if err != nil {
		tb.Fatal(err)
	}
	p := new(wire.Packet)
	if err := p.Parse(buf[:n]); err != nil {
		tb.Fatal(err)
	}
	return p
}

// hpWriter drives a responder with 1 MiB WRITEs: FIRST, 254 MIDDLE, LAST,
// the AckReq bit every 64 packets and on the LAST, as the requester sets it.
type hpWriter struct {
	e                   *endpoint
	first, middle, last *wire.Packet
	psn                 bth.PSN
	k                   int // packet index within the message
	out                 []byte
	now                 time.Time
	acks                int
}

func newHPWriter(tb testing.TB) *hpWriter {
	e := hpQP(tb)
	r := e.reg(make([]byte, hpMsgPkts*hpPkt), mr.LocalWrite|mr.RemoteWrite)
	data := testutil.Pattern(1, hpPkt)
	var f wire.Fields
	f.BTH.Opcode = bth.RCRDMAWriteFirst
	f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey()), hpMsgPkts*hpPkt
	w := &hpWriter{e: e, first: hpPacket(tb, f, data), psn: defaultParams().psnA,
		out: make([]byte, qp.MaxPacketLen(hpMTU)), now: testutil.Epoch()}
	f = wire.Fields{}
	f.BTH.Opcode = bth.RCRDMAWriteMiddle
	w.middle = hpPacket(tb, f, data)
	f.BTH.Opcode = bth.RCRDMAWriteLast
	w.last = hpPacket(tb, f, data)
	return w
}

// step hands the next packet to the responder and sends what it answers.
func (w *hpWriter) step() {
	p := w.middle
	switch w.k {
	case 0:
		p = w.first
	case hpMsgPkts - 1:
		p = w.last
	}
	p.BTH.SetPSN(w.psn)
	p.BTH.SetAckReq(w.k == hpMsgPkts-1 || w.k%64 == 63)
	w.e.qp.HandlePacket(w.now, p)
	if _, ok := w.e.qp.NextPacket(w.now, w.out); ok {
		w.acks++
	}
	w.psn = w.psn.Next()
	w.k = (w.k + 1) % hpMsgPkts
}

func BenchmarkResponderWrite4K(b *testing.B) {
	w := newHPWriter(b)
	b.SetBytes(hpPkt)
	b.ReportAllocs()
	for b.Loop() {
		w.step()
	}
	if w.e.qp.State() != qp.StateRTS || w.acks == 0 {
		b.Fatalf("state %v, %d ACKs", w.e.qp.State(), w.acks)
	}
}

func TestAllocsResponderWrite4K(t *testing.T) {
	w := newHPWriter(t)
	allocs := testing.AllocsPerRun(4, func() {
		for range hpMsgPkts {
			w.step()
		}
	})
	if w.e.qp.State() != qp.StateRTS || w.acks != 5*hpMsgPkts/64 {
		t.Fatalf("state %v, %d ACKs", w.e.qp.State(), w.acks)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per 1 MiB WRITE (%d packets); want 0", allocs, hpMsgPkts)
	}
}

// hpAcker drives a requester: batches of single-packet WRITEs, sent, then
// each completed by its own ACK.
type hpAcker struct {
	e    *endpoint
	wr   qp.SendWR
	ack  *wire.Packet
	out  []byte
	wcs  []cq.Completion
	now  time.Time
	psn  bth.PSN
	done int
}

func newHPAcker(tb testing.TB) *hpAcker {
	e := hpQP(tb)
	r := e.reg(make([]byte, hpPkt), mr.LocalWrite)
	var f wire.Fields
	f.BTH.Opcode = bth.RCAcknowledge
	f.AETH.Syndrome = aeth.ACKUnlimited
	return &hpAcker{e: e, ack: hpPacket(tb, f, nil), out: make([]byte, qp.MaxPacketLen(hpMTU)),
		wcs: make([]cq.Completion, 64), now: testutil.Epoch(), psn: defaultParams().psnB,
		wr: qp.SendWR{Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL:        []qp.SGE{{Addr: r.IOVA(), Length: 64, LKey: r.LKey()}},
			RemoteAddr: 0x1000, RKey: 0x1234}}
}

// post posts and sends n WRITEs.
func (a *hpAcker) post(tb testing.TB, n int) {
	for range n {
		a.wr.WRID++
		if err := a.e.qp.PostSend(&a.wr); err != nil {
			tb.Fatal(err)
		}
		if _, ok := a.e.qp.NextPacket(a.now, a.out); !ok {
			tb.Fatal("no packet")
		}
	}
}

// ack completes the oldest WRITE.
func (a *hpAcker) ackOne() {
	a.ack.BTH.SetPSN(a.psn)
	a.e.qp.HandlePacket(a.now, a.ack)
	a.psn = a.psn.Next()
}

// poll takes the completions and checks them.
func (a *hpAcker) poll(tb testing.TB) {
	for {
		n := a.e.scq.Poll(a.wcs)
		if n == 0 {
			return
		}
		for _, c := range a.wcs[:n] {
			if c.Status != cq.StatusSuccess {
				tb.Fatalf("completion %+v", c)
			}
		}
		a.done += n
	}
}

func BenchmarkRequesterAck(b *testing.B) {
	a := newHPAcker(b)
	b.ReportAllocs()
	const batch = 64
	n := 0
	for b.Loop() {
		if n%batch == 0 {
			b.StopTimer()
			a.poll(b)
			a.post(b, batch)
			b.StartTimer()
		}
		a.ackOne()
		n++
	}
	b.StopTimer()
	a.poll(b)
	if a.done != n || a.e.qp.State() != qp.StateRTS {
		b.Fatalf("%d of %d completed, state %v", a.done, n, a.e.qp.State())
	}
}

// BenchmarkRequesterAckCycle is the whole life of a one-packet WRITE:
// PostSend, NextPacket, HandlePacket of its ACK, Poll.
func BenchmarkRequesterAckCycle(b *testing.B) {
	a := newHPAcker(b)
	b.ReportAllocs()
	for b.Loop() {
		a.post(b, 1)
		a.ackOne()
		a.poll(b)
	}
}

func TestAllocsRequesterAck(t *testing.T) {
	a := newHPAcker(t)
	// AllocsPerRun cannot leave work out, so each run is the WRITE's whole
	// cycle: the ACK path is pinned at 0 together with PostSend, the WRITE's
	// NextPacket and Poll.
	allocs := testing.AllocsPerRun(1000, func() {
		a.post(t, 1)
		a.ackOne()
		a.poll(t)
	})
	if a.done != 1001 {
		t.Fatalf("%d completions", a.done)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per WRITE posted, sent and ACKed; want 0", allocs)
	}
}

// hpReader drives a responder with 1 MiB READ requests and pulls their
// 4 KiB responses.
type hpReader struct {
	e      *endpoint
	req    *wire.Packet
	psn    bth.PSN
	k      int
	out    []byte
	now    time.Time
	gather bool // NextPacketGather, releasing each pin
}

func newHPReader(tb testing.TB) *hpReader {
	e := hpQP(tb)
	r := e.reg(testutil.Pattern(2, hpMsgPkts*hpPkt), mr.RemoteRead)
	var f wire.Fields
	f.BTH.Opcode, f.BTH.AckReq = bth.RCRDMAReadRequest, true
	f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey()), hpMsgPkts*hpPkt
	return &hpReader{e: e, req: hpPacket(tb, f, nil), psn: defaultParams().psnA,
		out: make([]byte, qp.MaxPacketLen(hpMTU)), now: testutil.Epoch()}
}

// step sends one READ response, handing in the next READ request first
// when the previous one is done.
func (r *hpReader) step(tb testing.TB) {
	if r.k == 0 {
		r.req.BTH.SetPSN(r.psn)
		r.e.qp.HandlePacket(r.now, r.req)
		r.psn = r.psn.Add(hpMsgPkts)
	}
	if r.gather {
		var p qp.TxPayload
		n, ok := r.e.qp.NextPacketGather(r.now, r.out, &p)
		if !ok || p.Region == nil || n+len(p.Data) < hpPkt {
			tb.Fatalf("gathered READ response %d: %d+%d bytes, %v", r.k, n, len(p.Data), ok)
		}
		p.Region.Release()
	} else if n, ok := r.e.qp.NextPacket(r.now, r.out); !ok || n < hpPkt {
		tb.Fatalf("READ response %d: %d bytes, %v", r.k, n, ok)
	}
	r.k = (r.k + 1) % hpMsgPkts
}

func BenchmarkResponderReadResponse4K(b *testing.B) {
	r := newHPReader(b)
	b.SetBytes(hpPkt)
	b.ReportAllocs()
	for b.Loop() {
		r.step(b)
	}
}

func BenchmarkResponderReadResponse4KGather(b *testing.B) {
	r := newHPReader(b)
	r.gather = true
	b.SetBytes(hpPkt)
	b.ReportAllocs()
	for b.Loop() {
		r.step(b)
	}
}

func TestAllocsResponderReadResponse4KGather(t *testing.T) {
	testAllocsResponderReadResponse4K(t, true)
}

func TestAllocsResponderReadResponse4K(t *testing.T) {
	testAllocsResponderReadResponse4K(t, false)
}

func testAllocsResponderReadResponse4K(t *testing.T, gather bool) {
	r := newHPReader(t)
	r.gather = gather
	allocs := testing.AllocsPerRun(4, func() {
		for range hpMsgPkts {
			r.step(t)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per 1 MiB READ (%d responses); want 0", allocs, hpMsgPkts)
	}
}

// hpSender drives a requester with 512 KiB WRITEs (128 packets: the whole
// unacknowledged window), ACKing each when its last packet is out.
type hpSender struct {
	a      *hpAcker
	k      int
	gather bool // NextPacketGather, releasing each pin
}

const hpSendPkts = qp.MaxUnackedPSNs

func newHPSender(tb testing.TB) *hpSender {
	e := hpQP(tb)
	r := e.reg(testutil.Pattern(3, hpSendPkts*hpPkt), mr.LocalWrite)
	a := newHPAcker(tb)
	a.e = e
	a.wr.SGL = []qp.SGE{{Addr: r.IOVA(), Length: hpSendPkts * hpPkt, LKey: r.LKey()}}
	return &hpSender{a: a}
}

// step sends one 4 KiB WRITE packet; the first of a WR is preceded by its
// PostSend, the last followed by the ACK and the completion.
func (s *hpSender) step(tb testing.TB) {
	a := s.a
	if s.k == 0 {
		a.wr.WRID++
		if err := a.e.qp.PostSend(&a.wr); err != nil {
			tb.Fatal(err)
		}
	}
	if s.gather {
		var p qp.TxPayload
		n, ok := a.e.qp.NextPacketGather(a.now, a.out, &p)
		if !ok || p.Region == nil || n+len(p.Data) < hpPkt {
			tb.Fatalf("gathered WRITE packet %d: %d+%d bytes, %v", s.k, n, len(p.Data), ok)
		}
		p.Region.Release()
	} else {
		n, ok := a.e.qp.NextPacket(a.now, a.out)
		if !ok || n < hpPkt {
			tb.Fatalf("WRITE packet %d: %d bytes, %v", s.k, n, ok)
		}
	}
	s.k++
	if s.k == hpSendPkts {
		s.k = 0
		a.psn = a.psn.Add(hpSendPkts - 1)
		a.ackOne()
		a.poll(tb)
	}
}

func BenchmarkRequesterWrite4K(b *testing.B) {
	s := newHPSender(b)
	b.SetBytes(hpPkt)
	b.ReportAllocs()
	for b.Loop() {
		s.step(b)
	}
}

func BenchmarkRequesterWrite4KGather(b *testing.B) {
	s := newHPSender(b)
	s.gather = true
	b.SetBytes(hpPkt)
	b.ReportAllocs()
	for b.Loop() {
		s.step(b)
	}
}

func TestAllocsRequesterWrite4KGather(t *testing.T) {
	testAllocsRequesterWrite4K(t, true)
}

func TestAllocsRequesterWrite4K(t *testing.T) {
	testAllocsRequesterWrite4K(t, false)
}

func testAllocsRequesterWrite4K(t *testing.T, gather bool) {
	s := newHPSender(t)
	s.gather = gather
	allocs := testing.AllocsPerRun(4, func() {
		for range hpSendPkts {
			s.step(t)
		}
	})
	if s.a.done != 5 {
		t.Fatalf("%d WRs completed", s.a.done)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per 512 KiB WRITE (%d packets); want 0", allocs, hpSendPkts)
	}
}
