package roce_test

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// TestECNLoopbackUDP is doc/dcqcn.md §7.1's test on real sockets: a raw peer
// on 127.0.0.2 sends a device on 127.0.0.1 requests with Not-ECT, ECT(1),
// ECT(0) and CE set per datagram (IP_TOS control messages); the device's
// UDP binding reports the same two bits (IP_RECVTOS), the NP answers the
// CE-marked ones with exactly one CNP per window N, and everything the
// device sends back — ACKs and CNPs — arrives ECT(0). A burst the device
// took in over more than a window (the machine stalled) starts the run
// again with a fresh device, up to three times.
func TestECNLoopbackUDP(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets; skipped with -short")
	}
	retryStalls(t, ecnLoopbackUDP)
}

func ecnLoopbackUDP(t *testing.T) (stall time.Duration) {
	const window = 100 * time.Millisecond
	// Free ports: tests of several packages run at once.
	ld, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	lp, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	require.NoError(t, err)
	d, err := roce.Open(roce.Config{Link: ld, DestPort: lp.LocalAddr().Port(), CC: roce.CCConfig{NP: &cc.NPConfig{Interval: window}}})
	require.NoError(t, err)
	defer d.Close()
	pd := d.AllocPD()
	q, err := d.CreateQP(roce.QPConfig{PD: pd, SendCQ: mustCQ(t, d), RecvCQ: mustCQ(t, d)})
	require.NoError(t, err)
	p := newRawPeer(t, lp, d.LocalAddr(), 0x118)
	defer p.close()
	require.NoError(t, q.Connect(p.info(), roce.ConnectOptions{}))
	postRecvs(t, d, pd, q, 64)

	st := d.Stats()
	sent := [4]uint64{}
	send := func(ecns ...uint8) {
		for _, e := range ecns {
			sent[e]++
		}
		p.send(p.sends(q.QPN(), ecns...)...)
	}
	send(link.NotECT, link.ECT1, link.ECT0, link.ECT1, link.ECT0, link.ECT0)
	taken(t, d, q, 6)
	assert.Zero(t, st.TxCNPs.Load(), "no CNP without CE")

	// The windows are the device's, which stamps a packet when it takes it
	// in: wait for that, not for a fixed time, and open the next window a
	// window after the CNP arrived (the device stamped it before).
	var got []link.Datagram
	windows := 0
	for w := 0; w < 3; w++ {
		start := time.Now()
		send(link.CE, link.ECT0, link.CE, link.CE, link.ECT1, link.CE)
		taken(t, d, q, uint64(6+6*(w+1)))
		if el := time.Since(start); el >= window {
			return el
		}
		got = append(got, p.collectCNPs(1, 10*time.Second)...)
		windows++
		time.Sleep(window + 10*time.Millisecond)
	}
	require.Equal(t, uint64(6+6*3), st.RxPackets.Load())
	for e := range sent {
		assert.Equal(t, sent[e], st.RxECN[e].Load(), "received with ECN %d", e)
	}
	assert.Equal(t, windows, cnps(t, got, qpAddr(d, q), lp.LocalAddr(), p.qpn), "one CNP per NP window")
	assert.Equal(t, uint64(windows), st.TxCNPs.Load())
	acks := 0
	for _, dg := range got {
		assert.Equal(t, link.ECT0, dg.ECN, "the device's packets carry ECT(0)")
		if dg.Buf[0] != 0x81 {
			acks++
		}
	}
	assert.Positive(t, acks)
	assert.Zero(t, st.BadICRC.Load())
	s := q.CC()
	t.Logf("received %v (Not-ECT, ECT(1), ECT(0), CE); %d CNPs; NP %+v", sent, s.CNPsSent, s.NP)
	return 0
}

// stampLink records when each received datagram came up from the socket
// and its size on the wire (IP and UDP headers included): the receiver's
// view of a sender's rate.
type stampLink struct {
	link.Link
	mu    sync.Mutex
	from  netip.Addr // record only datagrams from this address
	stamp []stamp
}

type stamp struct {
	at time.Time
	n  int
}

func (l *stampLink) Recv(dgs []link.Datagram) (int, error) {
	n, err := l.Link.Recv(dgs)
	now := time.Now()
	l.mu.Lock()
	for _, dg := range dgs[:n] {
		if dg.Src.Addr() == l.from {
			l.stamp = append(l.stamp, stamp{now, len(dg.Buf) + 28})
		}
	}
	l.mu.Unlock()
	return n, err
}

func (l *stampLink) take() []stamp {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stamp
	l.stamp = nil
	return s
}

// windowRates returns the rate of each whole window of length w from from
// on, in bits per second.
func windowRates(st []stamp, from time.Time, w time.Duration) []float64 {
	var bytes []int
	for _, s := range st {
		if s.at.Before(from) {
			continue
		}
		i := int(s.at.Sub(from) / w)
		for len(bytes) <= i {
			bytes = append(bytes, 0)
		}
		bytes[i] += s.n
	}
	if len(bytes) > 0 {
		bytes = bytes[:len(bytes)-1] // the last window is partial
	}
	r := make([]float64, len(bytes))
	for i, b := range bytes {
		r[i] = float64(b) * 8 / w.Seconds()
	}
	return r
}

// streamWrites keeps depth WRITEs of msg bytes outstanding from a to b for
// d and returns the bytes completed.
func streamWrites(t testing.TB, qa *roce.QP, ca *cq.CQ, src, dst *mr.Region, msg, depth int, d time.Duration) int {
	t.Helper()
	posted, done := 0, 0
	wcs := make([]cq.Completion, 64)
	wr := qp.SendWR{Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: make([]qp.SGE, 1), RKey: dst.RKey()}
	slots := int(src.Len()) / msg
	end := time.Now().Add(d)
	for {
		for time.Now().Before(end) && posted-done < depth {
			off := uint64(posted%slots) * uint64(msg)
			wr.WRID = uint64(posted)
			wr.SGL[0] = qp.SGE{Addr: src.IOVA() + off, Length: uint32(msg), LKey: src.LKey()}
			wr.RemoteAddr = dst.IOVA() + off
			require.NoError(t, qa.PostSend(&wr))
			posted++
		}
		if done == posted {
			return done * msg
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		k, err := ca.Wait(ctx, wcs)
		cancel()
		require.NoError(t, err, "posted %d done %d: %+v", posted, done, qa.Counters().Snapshot())
		for _, wc := range wcs[:k] {
			require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
			done++
		}
	}
}

// TestPacingLoopbackRate paces a QP at 100 Mb/s, 500 Mb/s and 1 Gb/s over
// loopback UDP (doc/dcqcn.md §7.4) and measures, on the receiver's
// timestamps, the rate of every 10 ms window.
//
// One property holds on any machine: the pacer is never ahead of its
// schedule (by any time, at most one bucket more than the rate allows
// since the first packet). The other — every window within ±5 % — needs
// the CPU when the pacer wants it: a descheduled sender loses the time
// (the bucket caps the catch-up at 16 KiB, by design) and a descheduled
// receiver stamps late. Up to three attempts per rate; if none holds ±5 %
// everywhere, the spread of the best is logged as what this machine could
// hold, and its median window must still be within ±1 % and its mean at
// least half the rate — unless the process's threads waited for a CPU
// 30 % of the run or more (/proc/self/task/*/schedstat).
func TestPacingLoopbackRate(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets at up to 1 Gb/s; skipped with -short")
	}
	if raceEnabled {
		t.Skip("timing test: the race detector slows the stack several times over")
	}
	la, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	lb, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	require.NoError(t, err)
	da, err := roce.Open(roce.Config{Link: la, DestPort: lb.LocalAddr().Port()})
	require.NoError(t, err)
	defer da.Close()
	sl := &stampLink{Link: lb, from: la.LocalAddr().Addr(), stamp: make([]stamp, 0, 1<<16)}
	db, err := roce.Open(roce.Config{Link: sl, DestPort: la.LocalAddr().Port()})
	require.NoError(t, err)
	defer db.Close()
	pda, pdb := da.AllocPD(), db.AllocPD()
	ca := mustCQ(t, da)
	const size = 4 << 20
	src, err := da.RegisterMR(pda, make([]byte, size), mr.LocalWrite)
	require.NoError(t, err)
	dst, err := db.RegisterMR(pdb, make([]byte, size), mr.LocalWrite|mr.RemoteWrite)
	require.NoError(t, err)

	const win = 10 * time.Millisecond
	tests := []struct {
		rate cc.Bitrate
		mtu  qp.MTU
	}{
		// ≥ 100 packets per 10 ms window, so that one packet is < 1 %.
		{100 * cc.Mbps, qp.MTU1024},
		{500 * cc.Mbps, qp.MTU4096},
		{1 * cc.Gbps, qp.MTU4096},
	}
	type result struct {
		rates   []float64
		delay   float64 // CPU wait of the process's threads / wall time
		mean    float64 // mean rate, b/s
		within  int     // windows within ±5 %
		median  float64 // deviation of the median window, %
		summary string
	}
	run := func(rate cc.Bitrate, mtu qp.MTU) result {
		qa, err := da.CreateQP(roce.QPConfig{PD: pda, SendCQ: ca, RecvCQ: ca})
		require.NoError(t, err)
		defer qa.Destroy()
		qb, err := db.CreateQP(roce.QPConfig{PD: pdb, SendCQ: mustCQ(t, db), RecvCQ: mustCQ(t, db)})
		require.NoError(t, err)
		defer qb.Destroy()
		require.NoError(t, qa.Connect(qb.Info(), roce.ConnectOptions{MTU: mtu, MaxRate: rate}))
		require.NoError(t, qb.Connect(qa.Info(), roce.ConnectOptions{MTU: mtu}))
		sl.take()
		start, rd := time.Now(), runDelay()
		n := streamWrites(t, qa, ca, src, dst, 64<<10, 48, 150*time.Millisecond)
		r := result{delay: float64(runDelay()-rd) / float64(time.Since(start))}
		st := sl.take()
		require.NotEmpty(t, st)
		// Skip the first 20 ms: the start-up burst and the first ACKs.
		r.rates = windowRates(st, start.Add(20*time.Millisecond), win)
		require.GreaterOrEqual(t, len(r.rates), 8, "rate %v: %d windows", rate, len(r.rates))
		dev := func(x float64) float64 { return 100 * (x/float64(rate) - 1) }
		lo, hi, mean := math.Inf(1), math.Inf(-1), 0.0
		for _, x := range r.rates {
			lo, hi, mean = min(lo, dev(x)), max(hi, dev(x)), mean+x/float64(len(r.rates))
			if abs(dev(x)) <= 5 {
				r.within++
			}
		}
		// Never ahead of the schedule: by any time t, the bytes received
		// are at most the bucket plus the rate since the first packet
		// (with 2 ms for that packet's own trip). A late receiver only
		// delays.
		var cum float64
		for _, s := range st {
			cum += float64(s.n)
			allowed := roce.MaxPaceDepth + float64(rate)/8*(s.at.Sub(st[0].at)+2*time.Millisecond).Seconds()
			if !assert.LessOrEqual(t, cum, allowed, "rate %v: ahead of the schedule at %v", rate, s.at.Sub(st[0].at)) {
				break
			}
		}
		r.mean = mean
		med := slices.Clone(r.rates)
		slices.Sort(med)
		r.median = dev(med[len(med)/2])
		r.summary = fmt.Sprintf("%v (MTU %v): %d MiB, %d pacer waits, CPU wait %.2f; %d of %d windows of %v within ±5 %%, median %+.2f %%, range %+.2f %% … %+.2f %%, mean %+.2f %%",
			rate, mtu, n>>20, qa.CC().PaceWaits, r.delay, r.within, len(r.rates), win, r.median, lo, hi, dev(mean))
		t.Log(r.summary)
		return r
	}
	for _, tc := range tests {
		var best result
		for attempt := 0; attempt < 3; attempt++ {
			r := run(tc.rate, tc.mtu)
			if attempt == 0 || r.within*len(best.rates) > best.within*len(r.rates) {
				best = r
			}
			if best.within == len(best.rates) {
				break
			}
		}
		if best.within == len(best.rates) {
			continue
		}
		t.Logf("%v: no attempt held ±5 %% in every window; best: %s", tc.rate, best.summary)
		if best.delay >= 0.3 {
			t.Logf("%v: the machine is too loaded to judge (the threads waited for a CPU %.0f %% of the run)", tc.rate, 100*best.delay)
			continue
		}
		// Some windows hit by a scheduling hiccup of some ms: the CPU wait
		// of the whole run does not see those, but the median window does
		// not move, and the QP keeps moving.
		assert.InDelta(t, 0, best.median, 1, "rate %v: median window; windows %.4g", tc.rate, best.rates)
		assert.GreaterOrEqual(t, best.mean, 0.5*float64(tc.rate), "rate %v: the QP kept moving", tc.rate)
	}
}

func abs(x float64) float64 { return max(x, -x) }

// runDelay returns the time this process's threads have spent waiting
// for a CPU (/proc/self/task/*/schedstat, second field): how much the
// machine has held the test back.
func runDelay() time.Duration {
	tasks, _ := os.ReadDir("/proc/self/task")
	var sum time.Duration
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/schedstat")
		if err != nil {
			continue
		}
		var run, wait int64
		if _, err := fmt.Sscan(string(b), &run, &wait); err == nil {
			sum += time.Duration(wait)
		}
	}
	return sum
}
