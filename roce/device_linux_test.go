package roce_test

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/wire"
)

// udpPair is two devices on loopback UDP sockets with one connected QP
// each and a registered buffer on each side.
type udpPair struct {
	a, b     *roce.Device
	qa, qb   *roce.QP
	cqa, cqb *cq.CQ
	ma, mb   *mr.Region
	bufA     []byte
	bufB     []byte
}

// newUDPPair opens both links on free ports (port 0: tests of several
// packages run at once and must not collide), then the devices, each sending
// to the other's port.
func newUDPPair(t testing.TB, size int) *udpPair {
	t.Helper()
	return newUDPPairConfig(t, size, roce.Config{})
}

// newUDPPairConfig is newUDPPair with cfg's fields for both devices (Link
// and DestPort are set here).
func newUDPPairConfig(t testing.TB, size int, cfg roce.Config) *udpPair {
	t.Helper()
	p := &udpPair{bufA: make([]byte, size), bufB: make([]byte, size)}
	la, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	lb, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	require.NoError(t, err)
	open := func(l *udp.Link, peerPort uint16, buf []byte) (*roce.Device, *roce.QP, *cq.CQ, *mr.Region) {
		dc := cfg
		dc.Link, dc.DestPort = l, peerPort
		d, err := roce.Open(dc)
		require.NoError(t, err)
		pd := d.AllocPD()
		c, err := d.CreateCQ(4096)
		require.NoError(t, err)
		q, err := d.CreateQP(roce.QPConfig{PD: pd, SendCQ: c, RecvCQ: c})
		require.NoError(t, err)
		m, err := d.RegisterMR(pd, buf, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead|mr.RemoteAtomic)
		require.NoError(t, err)
		return d, q, c, m
	}
	p.a, p.qa, p.cqa, p.ma = open(la, lb.LocalAddr().Port(), p.bufA)
	p.b, p.qb, p.cqb, p.mb = open(lb, la.LocalAddr().Port(), p.bufB)
	opts := roce.ConnectOptions{MTU: qp.MTU4096} // rdma-core's defaults: timeout 14, retry_cnt 7
	require.NoError(t, p.qa.Connect(p.qb.Info(), opts))
	require.NoError(t, p.qb.Connect(p.qa.Info(), opts))
	return p
}

func (p *udpPair) close() {
	p.a.Close()
	p.b.Close()
}

// write moves total bytes A→B in msg-byte WRITEs, depth outstanding, and
// returns the elapsed time.
func (p *udpPair) write(t testing.TB, total, msg, depth int) time.Duration {
	t.Helper()
	start := time.Now()
	writeLoop(t, p.qa, p.cqa, p.ma, p.mb, total, msg, depth)
	return time.Since(start)
}

// TestFloodDuringTransfer sends a seeded flood of garbage at B's port while
// A writes to B: random bytes, well-formed packets for absent QPs, packets
// for B's QP from a stranger's address, packets with a bad ICRC. Nothing
// panics, every drop is counted by reason, memory stays bounded, and the
// transfer is byte-exact at ≥ 0.5× its unflooded goodput.
func TestFloodDuringTransfer(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket flood; skipped with -short")
	}
	const size = 16 << 20
	p := newUDPPair(t, size)
	defer p.close()
	testutil.FillPattern(p.bufA, 3)
	total := 128 << 20
	p.write(t, total, 1<<20, 16) // warm up

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	// The flooder sends through a batching link (sendmmsg), paced at 50k
	// datagrams/s — more packets than the legitimate 4 KiB transfer carries.
	// On a 2-core machine a one-syscall-per-datagram or unpaced sender would
	// take a core from the transfer and measure the flooder's own CPU, not
	// how the device copes with garbage.
	fl, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.5:0")})
	require.NoError(t, err)
	defer fl.Close()
	dst := p.b.LocalAddr()
	var flooding atomic.Bool
	var stop atomic.Bool
	var sent atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(42, 43))
		const batch = 50 // one batch per millisecond: 50k/s
		bufs := make([][]byte, batch)
		dgs := make([]link.Datagram, batch)
		for i := range bufs {
			bufs[i] = make([]byte, 4200)
			for j := range bufs[i] {
				bufs[i][j] = byte(r.Uint32())
			}
		}
		qpn := p.qb.QPN()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for !stop.Load() {
			<-tick.C
			if !flooding.Load() {
				continue
			}
			for i := range dgs {
				buf := bufs[i]
				// Random bytes were filled once; change a few per datagram so
				// the flooder's CPU goes to sending, not to the RNG.
				b := buf[:r.IntN(len(buf))]
				for k := 0; k < 8 && len(b) > 0; k++ {
					b[r.IntN(len(b))] = byte(r.Uint32())
				}
				switch r.IntN(4) {
				case 0: // random garbage
				case 1: // a well-formed WRITE for a QP that does not exist
					f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCRDMAWriteOnly, PKey: 0xffff, DestQP: bth.QPN(r.Uint32() & 0xffff), PSN: bth.PSN(r.Uint32() & 0xffffff)}}
					n, _ := wire.Build(buf, &f, buf[100:164])
					b = buf[:n]
				case 2, 3: // B's QP, from the wrong address, with or without a valid ICRC
					f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: qpn, PSN: bth.PSN(r.Uint32() & 0xffffff)}}
					n, _ := wire.Build(buf, &f, buf[200:300])
					b = buf[:n]
				}
				dgs[i] = link.Datagram{Buf: b, Dst: dst}
			}
			n, _ := fl.Send(dgs)
			sent.Add(uint64(n))
		}
	}()
	// Alternate clean and flooded transfers and compare each flooded one
	// with the clean one just before it: the machine's load drifts, and
	// runs far apart measure the drift. On a loaded 2-core machine a pair
	// can still straddle a burst of other work (a run beside the other
	// packages' tests measured 0.33 on the medians of three), so up to six
	// pairs run and the best must hold the bound. A device that slows
	// down under the flood fails every pair.
	const minRatio = 0.5
	var cleans, floods []time.Duration
	var ratios []float64
	best := 0.0
	for i := 0; i < 6 && (i < 3 || best < minRatio); i++ {
		c := p.write(t, total, 1<<20, 16)
		flooding.Store(true)
		f := p.write(t, total, 1<<20, 16)
		flooding.Store(false)
		cleans, floods = append(cleans, c), append(floods, f)
		ratios = append(ratios, c.Seconds()/f.Seconds())
		best = max(best, ratios[i])
	}
	stop.Store(true)
	wg.Wait()
	slices.Sort(cleans)
	slices.Sort(floods)
	clean, flooded := cleans[len(cleans)/2], floods[len(floods)/2]

	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	st := p.b.Stats()
	t.Logf("clean %v, flooded %v (medians); ratio per pair %.2f; flood %d datagrams: no-QP %d, bad addr %d, bad ICRC %d, bad hdr %d; heap %d → %d KiB",
		clean, flooded, ratios, sent.Load(), st.DroppedNoQP.Load(), st.BadAddr.Load(),
		st.BadICRC.Load(), st.BadHdr.Load(), before.HeapInuse>>10, after.HeapInuse>>10)
	require.Equal(t, p.bufA, readMR(t, p.mb), "the transfer is byte-exact")
	require.Positive(t, st.DroppedNoQP.Load())
	require.Positive(t, st.BadAddr.Load())
	require.GreaterOrEqual(t, best, minRatio, "goodput under flood ≥ 0.5× unflooded in the best pair")
	require.LessOrEqual(t, float64(after.HeapInuse), 1.1*float64(before.HeapInuse)+4<<20, "heap bounded")
}

// TestIdleQPMemory measures what an idle connected QP costs: 10,000 QPs in
// RTS on one device must stay within 8 KiB each.
func TestIdleQPMemory(t *testing.T) {
	l, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	d, err := roce.Open(roce.Config{Link: l})
	require.NoError(t, err)
	defer d.Close()
	pd := d.AllocPD()
	c, err := d.CreateCQ(16)
	require.NoError(t, err)
	const n = 10000
	qps := make([]*roce.QP, 0, n)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peer := netip.MustParseAddr("127.0.0.9")
	for i := 0; i < n; i++ {
		q, err := d.CreateQP(roce.QPConfig{PD: pd, SendCQ: c, RecvCQ: c})
		require.NoError(t, err)
		require.NoError(t, q.Connect(roce.Info{Addr: peer, QPN: bth.QPN(1000 + i), PSN: 1}, roce.ConnectOptions{}))
		qps = append(qps, q)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	per := float64(after.HeapInuse-before.HeapInuse) / n
	t.Logf("10,000 idle RTS QPs: %.0f bytes each", per)
	require.LessOrEqual(t, per, 8192.0)
	runtime.KeepAlive(qps)
}

// TestDataPathAllocs pins the device's send, receive and ACK paths at zero
// heap allocations per packet: a 64 MiB WRITE (16,384 packets and their
// ACKs) allocates no more than a 1 MiB one (256 packets).
func TestDataPathAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	p := newUDPPair(t, 64<<20)
	defer p.close()
	p.write(t, 64<<20, 1<<20, 16) // warm up: socket buffers, rings, heaps
	allocs := func(size int) float64 {
		return testing.AllocsPerRun(3, func() { p.write(t, size, size, 1) })
	}
	small, large := allocs(1<<20), allocs(64<<20)
	t.Logf("allocations per WR: 1 MiB (256 packets) %.0f, 64 MiB (16384 packets) %.0f", small, large)
	require.LessOrEqual(t, large, small+16, "allocations must not grow with the packet count")
	// link/udp gathers: those were the iovec path's packets.
	require.Greater(t, p.a.Stats().TxGathered.Load(), uint64(4*16384), "WRITE packets sent from the region")
}

// TestCopyPayloads checks the knob: the same transfer, byte-exact, with
// no packet sent from its region.
func TestCopyPayloads(t *testing.T) {
	p := newUDPPairConfig(t, 4<<20, roce.Config{CopyPayloads: true})
	defer p.close()
	testutil.FillPattern(p.bufA, 5)
	p.write(t, 4<<20, 64<<10, 16)
	require.Zero(t, p.a.Stats().TxGathered.Load())
	got := make([]byte, len(p.bufB))
	require.NoError(t, p.mb.ReadAt(got, p.mb.IOVA()))
	testutil.RequireSameBytes(t, p.bufA, got)
}

// BenchmarkWriteGathered compares, in one run, WRITE over link/udp with
// payloads sent from the region and copied into packet buffers first
// (Config.CopyPayloads): two device pairs take turns moving 16 MiB (64 KiB
// messages, 16 outstanding, from and into 64 MiB regions), so that load on
// the machine hits both alike. It reports the median over the turns of
// each one's Gb/s and of the ratio of their times (gathered/copied: below
// 1, gathering is faster); a median, so that one turn that met a stall
// (a retransmission timeout on a loaded machine) does not decide.
func BenchmarkWriteGathered(b *testing.B) {
	const size, chunk = 64 << 20, 16 << 20
	g := newUDPPairConfig(b, size, roce.Config{})
	defer g.close()
	c := newUDPPairConfig(b, size, roce.Config{CopyPayloads: true})
	defer c.close()
	testutil.FillPattern(g.bufA, 1)
	testutil.FillPattern(c.bufA, 1)
	g.write(b, size, 64<<10, 16) // warm up
	c.write(b, size, 64<<10, 16)
	var gbpsG, gbpsC, ratio []float64
	b.SetBytes(2 * chunk)
	for i := 0; b.Loop(); i++ {
		var tg, tc time.Duration
		if i%2 == 0 { // alternate which goes first
			tg = g.write(b, chunk, 64<<10, 16)
			tc = c.write(b, chunk, 64<<10, 16)
		} else {
			tc = c.write(b, chunk, 64<<10, 16)
			tg = g.write(b, chunk, 64<<10, 16)
		}
		gbpsG = append(gbpsG, chunk*8/tg.Seconds()/1e9)
		gbpsC = append(gbpsC, chunk*8/tc.Seconds()/1e9)
		ratio = append(ratio, tg.Seconds()/tc.Seconds())
	}
	median := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(median(gbpsG), "gathered-Gb/s")
	b.ReportMetric(median(gbpsC), "copied-Gb/s")
	b.ReportMetric(median(ratio), "gathered/copied")
	require.Positive(b, g.a.Stats().TxGathered.Load())
	require.Zero(b, c.a.Stats().TxGathered.Load())
}

// TestGatheredDeregisterWaits deregisters the source region while WRITEs
// from it are in flight over link/udp, whose packets read their payload
// from the region as they are sent: DeregisterMR must return (the pins
// last one batch), later packets must find the region gone (the WR fails
// LOC_PROT_ERR or had completed), and what did arrive must be the source's
// bytes, never those the application writes into its buffer once
// DeregisterMR has returned.
func TestGatheredDeregisterWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	const size = 16 << 20
	p := newUDPPair(t, size)
	defer p.close()
	for i := range p.bufA {
		p.bufA[i] = byte(i*7 + 1)
	}
	wr := roce.SendWR{WRID: 1, Opcode: roce.WRRDMAWrite, Flags: roce.SendSignaled,
		SGL:        []roce.SGE{p.ma.SGE(0, size)},
		RemoteAddr: p.mb.IOVA(), RKey: p.mb.RKey()}
	require.NoError(t, p.qa.PostSend(&wr))
	for p.a.Stats().TxGathered.Load() < 64 {
		runtime.Gosched()
	}
	require.NoError(t, p.a.DeregisterMR(p.ma))
	for i := range p.bufA {
		p.bufA[i] = 0xEE // the buffer is the application's again: no packet may read it now
	}
	wcs := make([]cq.Completion, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := p.cqa.Wait(ctx, wcs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	t.Logf("WRITE completed %v after %d packets gathered", wcs[0].Status, p.a.Stats().TxGathered.Load())
	require.Contains(t, []cq.Status{cq.StatusSuccess, cq.StatusLocProtErr}, wcs[0].Status)
	got := make([]byte, size)
	require.NoError(t, p.mb.ReadAt(got, p.mb.IOVA()))
	for i, c := range got {
		if c != 0 && c != byte(i*7+1) {
			t.Fatalf("byte %d is %#x: not the source's", i, c)
		}
	}
}

// TestLoopbackGSONoIDRecovery: between two Linux UDP links the link's guess
// of each segment's IPv4 ID (its place in the GSO super-packet, which
// loopback delivers whole) is right, so no ICRC needs rocev2.RecoverIPv4ID.
func TestLoopbackGSONoIDRecovery(t *testing.T) {
	p := newUDPPair(t, 1<<20)
	defer p.close()
	p.write(t, 16<<20, 64<<10, 16)
	for _, st := range []*roce.Stats{p.a.Stats(), p.b.Stats()} {
		require.Zero(t, st.BadICRC.Load())
		require.Zero(t, st.ICRCIDFixups.Load())
	}
	require.Positive(t, p.b.Stats().RxPackets.Load())
}

// TestGatheredSendWhileRegionWritten: QP 1 of device A sends WRITEs from
// the first half of A's region without copying while B's WRITEs on QP 2,
// which sits in A's other shard, land in that same half. The sender holds
// the region's ReadLock from the ICRC to the end of the send, so each
// packet's bytes are those its ICRC covers: B counts no bad ICRC, and
// every WRITE both ways succeeds. (The race detector's view of the same
// bug, the ICRC's read in one goroutine's sendBatch against the receive
// goroutine's WriteAt, shows in TestStressVerbsUDP under -race.)
func TestGatheredSendWhileRegionWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	const size, msg, rounds, depth = 1 << 20, 16 << 10, 256, 8
	p := newUDPPairConfig(t, size, roce.Config{Shards: 2})
	defer p.close()
	// A second QP pair, its A end in the other shard than p.qa.
	var qa2, qb2 *roce.QP
	for qa2 == nil {
		q, err := p.a.CreateQP(roce.QPConfig{PD: p.ma.PD(), SendCQ: p.cqa, RecvCQ: p.cqa})
		require.NoError(t, err)
		if q.QPN()%2 != p.qa.QPN()%2 {
			qa2 = q
		}
	}
	qb2, err := p.b.CreateQP(roce.QPConfig{PD: p.mb.PD(), SendCQ: p.cqb, RecvCQ: p.cqb})
	require.NoError(t, err)
	opts := roce.ConnectOptions{MTU: qp.MTU4096}
	require.NoError(t, qa2.Connect(qb2.Info(), opts))
	require.NoError(t, qb2.Connect(qa2.Info(), opts))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	half := size / 2
	// Each round posts depth WRITEs on both QPs, then waits for them.
	post := func(q *roce.QP, src, dst *mr.Region, from, i int) error {
		off := (i * msg) % half
		return q.PostSend(&roce.SendWR{WRID: uint64(i), Opcode: roce.WRRDMAWrite, Flags: roce.SendSignaled,
			SGL: []roce.SGE{src.SGE(from+off, msg)}, RemoteAddr: dst.IOVA() + uint64(off), RKey: dst.RKey()})
	}
	wait := func(c *cq.CQ, n int) error {
		wcs := make([]cq.Completion, 2*depth)
		for n > 0 {
			k, err := c.Wait(ctx, wcs)
			if err != nil {
				return err
			}
			for _, wc := range wcs[:k] {
				if err := wc.Err(); err != nil {
					return err
				}
			}
			n -= k
		}
		return nil
	}
	for i := 0; i < rounds; i += depth {
		for j := i; j < i+depth; j++ {
			require.NoError(t, post(p.qa, p.ma, p.mb, 0, j))   // A → B from A's first half
			require.NoError(t, post(qb2, p.mb, p.ma, half, j)) // B → A's first half
		}
		require.NoError(t, wait(p.cqa, depth))
		require.NoError(t, wait(p.cqb, depth))
	}
	require.Positive(t, p.a.Stats().TxGathered.Load(), "A sent from its region")
	assert.Zero(t, p.b.Stats().BadICRC.Load(), "B's bad ICRCs")
	assert.Zero(t, p.a.Stats().BadICRC.Load(), "A's bad ICRCs")
}

// TestOnBatchRunToCompletionUDP: the run-to-completion ping-pong over
// loopback UDP, where the receive loop runs inside the link's pump and
// the function's PostSend sends from within it.
func TestOnBatchRunToCompletionUDP(t *testing.T) {
	p := newUDPPair(t, 4096)
	defer p.a.Close()
	defer p.b.Close()
	a := &side{dev: p.a, qp: p.qa, scq: p.cqa}
	calls := onBatchPingPong(t, a, p.ma, p.mb, 500)
	assert.GreaterOrEqual(t, calls, 500)
	assert.Equal(t, byte(500%256), readMR(t, p.mb)[63])
}

// TestRcvBufGrowsWithQPs: the device grows its UDP socket's receive
// buffer with its QPs to what their peers may have in flight to it
// (qp.MaxUnackedPSNs packets of a 4096-byte MTU per QP), so that 64 QPs
// streaming into it do not overrun it; a few QPs keep the link's default.
func TestRcvBufGrowsWithQPs(t *testing.T) {
	l, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.9:0")})
	require.NoError(t, err)
	dev, err := roce.Open(roce.Config{Link: l})
	require.NoError(t, err)
	defer dev.Close()
	def := l.Info().RcvBuf
	if !l.Info().BufForced {
		t.Skipf("socket buffers not forced (no CAP_NET_ADMIN): the kernel caps them at rmem_max (%d)", def)
	}
	for range 4 {
		_, err := dev.CreateQP(roce.QPConfig{})
		require.NoError(t, err)
	}
	assert.Equal(t, def, l.Info().RcvBuf, "4 QPs fit the default buffer")
	for range 60 {
		_, err := dev.CreateQP(roce.QPConfig{})
		require.NoError(t, err)
	}
	const inFlight = 64 * qp.MaxUnackedPSNs * 4096 // the peers' windows' payload
	got := l.Info().RcvBuf
	t.Logf("receive buffer: %d with 4 QPs, %d with 64 (payload in flight %d)", def, got, inFlight)
	assert.GreaterOrEqual(t, got, 2*inFlight, "the kernel's accounting room for 64 windows")
}
