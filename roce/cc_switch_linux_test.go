package roce_test

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// switchRun is the outcome of two senders through a marking switch.
type switchRun struct {
	u, j        float64   // utilisation and Jain index over the last half
	rates       []float64 // per-flow mean rate over the last half, b/s
	q50, q99    int       // queue found by arrivals in the last half, bytes
	qmax        int
	marked      int
	drops       int
	cnps        []uint64
	minJw, jw10 float64 // Jain index of 100 ms windows in the last half: min, mean
	delay       float64 // CPU wait of the process's threads / wall time
}

func (r switchRun) String() string {
	return fmt.Sprintf("U %.3f, J %.4f (100 ms windows: min %.3f, mean %.3f), flows %.1f / %.1f Mb/s, queue p50 %.1f KB p99 %.1f KB max %.1f KB, %d marked, %d dropped, CNPs %v, CPU wait %.2f",
		r.u, r.j, r.minJw, r.jw10, r.rates[0]/1e6, r.rates[1]/1e6, float64(r.q50)/1e3, float64(r.q99)/1e3,
		float64(r.qmax)/1e3, r.marked, r.drops, r.cnps, r.delay)
}

func jain(x []float64) float64 {
	var s, s2 float64
	for _, v := range x {
		s += v
		s2 += v * v
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(x)) * s2)
}

// runSwitch runs two sender devices into one receiver device through a
// MarkSwitch of capacity c for d, the senders using ccfg, and measures the
// last half on the switch's virtual schedule.
func runSwitch(t *testing.T, c float64, red cc.REDConfig, ccfg roce.CCConfig, np cc.NPConfig, d time.Duration) switchRun {
	// Free ports (tests of several packages run at once): the links first,
	// then the switch, whose fronts share one port, then the devices, which
	// all send to that port.
	ap := func(ip string) netip.AddrPort { return netip.MustParseAddrPort(ip + ":0") }
	listen := func(a netip.AddrPort) *udp.Link {
		l, err := udp.Open(udp.Config{Addr: a})
		require.NoError(t, err)
		return l
	}
	lr := listen(ap("127.0.0.40"))
	ls := []*udp.Link{listen(ap("127.0.0.41")), listen(ap("127.0.0.42"))}
	curve, err := cc.NewRED(red)
	require.NoError(t, err)
	sw, err := testutil.NewMarkSwitch(testutil.MarkSwitchConfig{Receiver: lr.LocalAddr(),
		Ports: []testutil.SwitchPort{
			{Sender: ls[0].LocalAddr(), In: ap("127.0.0.51"), Out: ap("127.0.0.61")},
			{Sender: ls[1].LocalAddr(), In: ap("127.0.0.52"), Out: ap("127.0.0.62")},
		},
		Rate: c, Mark: curve.Mark, Seed: testutil.Seed(t), Reseal: reseal})
	require.NoError(t, err)
	defer sw.Close()
	ports := sw.Ports()
	front := ports[0].In.Port()

	open := func(l *udp.Link, cfg roce.CCConfig) *roce.Device {
		dev, err := roce.Open(roce.Config{Link: l, DestPort: front, CC: cfg})
		require.NoError(t, err)
		return dev
	}
	dr := open(lr, roce.CCConfig{NP: &np})
	defer dr.Close()
	pdr := dr.AllocPD()
	const size = 4 << 20
	type flow struct {
		dev      *roce.Device
		q, rq    *roce.QP
		cq       *cq.CQ
		src, dst *mr.Region
	}
	flows := make([]flow, len(ports))
	opts := roce.ConnectOptions{MTU: qp.MTU4096}
	for i, p := range ports {
		f := &flows[i]
		f.dev = open(ls[i], ccfg)
		defer f.dev.Close()
		pd := f.dev.AllocPD()
		f.cq = mustCQ(t, f.dev)
		f.q, err = f.dev.CreateQP(roce.QPConfig{PD: pd, SendCQ: f.cq, RecvCQ: f.cq})
		require.NoError(t, err)
		f.rq, err = dr.CreateQP(roce.QPConfig{PD: pdr, SendCQ: mustCQ(t, dr), RecvCQ: mustCQ(t, dr)})
		require.NoError(t, err)
		si, ri := f.q.Info(), f.rq.Info()
		si.Addr, ri.Addr = p.Out.Addr(), p.In.Addr()
		require.NoError(t, f.q.Connect(ri, opts))
		require.NoError(t, f.rq.Connect(si, opts))
		f.src, err = f.dev.RegisterMR(pd, make([]byte, size), mr.LocalWrite)
		require.NoError(t, err)
		f.dst, err = dr.RegisterMR(pdr, make([]byte, size), mr.LocalWrite|mr.RemoteWrite)
		require.NoError(t, err)
	}
	start, rd := time.Now(), runDelay()
	var wg sync.WaitGroup
	for i := range flows {
		f := &flows[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			streamWrites(t, f.q, f.cq, f.src, f.dst, 256<<10, 8, d)
		}()
	}
	wg.Wait()
	delay := float64(runDelay()-rd) / float64(time.Since(start))

	// The last half of the run, on the switch's virtual schedule.
	from, to := start.Add(d/2), start.Add(d)
	r := switchRun{delay: delay}
	bytes := make([]float64, len(ports))
	const w = 100 * time.Millisecond
	nw := int(to.Sub(from) / w)
	win := make([][]float64, nw)
	for i := range win {
		win[i] = make([]float64, len(ports))
	}
	var qs []int
	for _, ev := range sw.Log() {
		if ev.Drop {
			r.drops++
		}
		if ev.At.Before(from) || !ev.At.Before(to) {
			continue
		}
		qs = append(qs, ev.Queue)
		r.qmax = max(r.qmax, ev.Queue)
		if ev.Marked {
			r.marked++
		}
		if !ev.Drop && ev.Depart.Before(to) {
			bytes[ev.Port] += float64(ev.Size)
			if k := int(ev.Depart.Sub(from) / w); k < nw {
				win[k][ev.Port] += float64(ev.Size)
			}
		}
	}
	require.NotEmpty(t, qs)
	slices.Sort(qs)
	r.q50, r.q99 = qs[len(qs)/2], qs[len(qs)*99/100]
	sec := to.Sub(from).Seconds()
	total := 0.0
	for _, b := range bytes {
		r.rates = append(r.rates, b*8/sec)
		total += b
	}
	r.u = total * 8 / sec / c
	r.j = jain(r.rates)
	r.minJw = 1
	for _, x := range win {
		jw := jain(x)
		r.minJw = min(r.minJw, jw)
		r.jw10 += jw / float64(nw)
	}
	for _, f := range flows {
		r.cnps = append(r.cnps, f.q.CC().CNPsReceived)
	}
	return r
}

// TestDCQCNMarkingSwitch is the real-socket check of DCQCN (issue 8, item
// 6): two sender devices write into one receiver device over loopback UDP
// through a switch egress of 200 Mb/s that CE-marks with the paper's RED
// curve shape (Kmin 5 KB, Kmax 200 KB, Pmax 1 %, doc/dcqcn.md §1.4). The
// receiver's NP sends CNPs, the senders' RPs cut and pace; over the last
// half of the run the flows share the link fairly (Jain J ≥ 0.95), the
// link stays busy and the queue stays bounded, where without congestion
// control it sits at what the senders' windows can fill.
func TestDCQCNMarkingSwitch(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket DCQCN run; skipped with -short")
	}
	if raceEnabled {
		t.Skip("timing test: the race detector slows the stack several times over")
	}
	const c = 200e6
	// The link runs 500× slower than the paper's 100 Gb/s, and the base
	// RTT through the relay is ~1–2 ms (its Go timer releases packets in
	// ~1 ms steps) instead of ~10 µs, so the paper's 55 µs timers would let
	// a flow recover fully before any feedback could arrive. The profile is
	// P with the timers at the RTT scale — N = 1 ms, K = T = 1 ms — and
	// rate steps for a 1 Gb/s NIC; step marking at 40 KB (DCTCP-like, Kmin
	// = Kmax, Pmax = 1, which doc/dcqcn.md §1.1 allows). A virtual-time sweep
	// with cc/fabric picked these: paper timers overflow any buffer here.
	red := cc.REDConfig{Kmin: 40_000, Kmax: 40_000, Pmax: 1}
	rp := cc.ProfileP.Config()
	rp.LineRate, rp.MinRate, rp.AI, rp.HAI = 1*cc.Gbps, 10*cc.Mbps, 2*cc.Mbps, 10*cc.Mbps
	rp.RateTimer, rp.AlphaPeriod = time.Millisecond, time.Millisecond+time.Microsecond
	np := cc.NPConfig{Interval: time.Millisecond}
	ccfg := roce.CCConfig{RP: &rp, NP: &np}
	const d = 2 * time.Second
	// Two senders, a switch and a receiver in one process on two shared
	// cores: when the machine freezes the process for tens of ms, DCQCN's
	// timers catch up on wake-up with no CNP received meanwhile and the
	// flows overshoot. A second attempt is allowed, and a run whose
	// threads waited for a CPU more than half the time is held to looser
	// bounds (the queue still well under the ~1 MB the windows reach
	// without the RP).
	var r switchRun
	for attempt := 0; attempt < 2; attempt++ {
		r = runSwitch(t, c, red, ccfg, np, d)
		t.Logf("DCQCN: %v", r)
		if r.u >= 0.8 && r.q99 < 4*red.Kmax {
			break
		}
	}
	minU, maxQ := 0.8, 4*red.Kmax
	if r.delay > 0.5 {
		minU, maxQ = 0.5, 12*red.Kmax
		t.Logf("the machine is loaded (threads waited for a CPU %.0f %% of the run): U ≥ %.1f, Q99 < %d KB", 100*r.delay, minU, maxQ/1000)
	}
	assert.GreaterOrEqual(t, r.j, 0.95, "Jain index over the last half")
	assert.GreaterOrEqual(t, r.u, minU, "utilisation over the last half")
	assert.Less(t, r.q99, maxQ, "Q99")
	assert.Zero(t, r.drops)
	for i, n := range r.cnps {
		assert.Positive(t, n, "flow %d received CNPs", i)
	}
	if *long {
		// The comparison: without the RP the queue sits where the
		// senders' windows (128 PSNs of 4 KiB each) put it.
		off := runSwitch(t, c, red, roce.CCConfig{DisableRP: true}, np, d)
		t.Logf("without the RP: %v", off)
	}
}
