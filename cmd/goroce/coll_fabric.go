package main

import (
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/goroce/goroce/cc"
	ccfabric "github.com/goroce/goroce/cc/fabric"
	"github.com/goroce/goroce/internal/fabric"
)

// Defaults of goroce coll --fabric (doc/fabric.md "Collectives on the
// fabric").
const (
	// defaultSampleEvery is the flow sampler's interval: one packet in 32
	// on every uplink. A QP that sends 200 packets is missed with
	// probability e^(−200/32) ≈ 0.2 %.
	defaultSampleEvery = 32
	// defaultSeries is the interval of the links' time series.
	defaultSeries = 200 * time.Millisecond
	// fabricQPTimeout is the QPs' ACK timeout on a fabric unless
	// --qp-timeout says otherwise: IB's code 18, 4.096 µs × 2^18 ≈ 1.07 s.
	// A full 512 KiB queue at 100 Mbit/s holds 42 ms on each of three
	// marked hops, and eight rank processes on two CPUs add scheduling
	// delays of tens of milliseconds: the 67 ms default then times out
	// on ACKs that are late, not lost, and goes back N for nothing
	// (NCCL's own default, code 20, is 4.3 s).
	fabricQPTimeout = 1073741824 * time.Nanosecond
)

// fabricRun is what goroce coll -np N --fabric (or --report) gathered:
// the fabric and where the ranks ran, the ranks' files, the flows the
// sampler saw, and the counters.
type fabricRun struct {
	fab       *fabric.Fabric // nil: --report without a fabric
	hosts     []fabric.Host  // of each rank
	placement string
	cc        string        // the --cc the ranks ran with
	qpTimeout time.Duration // the QPs' ACK timeout
	cmdline   string
	start     time.Time
	end       time.Time

	files       []*collRankFile
	every       int
	samples     []fabric.FlowSample
	sampleDrops uint64
	whole       *fabric.Stats   // the whole job
	series      []*fabric.Stats // every defaultSeries
}

// rank0 returns rank 0's file, or nil.
func (r *fabricRun) rank0() *collRankFile {
	if len(r.files) == 0 {
		return nil
	}
	return r.files[0]
}

// sameLeaf reports whether ranks a and b run under one leaf.
func (r *fabricRun) sameLeaf(a, b int) bool {
	return r.fab != nil && r.hosts[a].Leaf == r.hosts[b].Leaf
}

// spines returns the spines the sampler saw the packets of rank from's QP
// to peer's QP peerQPN take (in order, usually one), and the packets
// sampled.
func (r *fabricRun) spines(from, peer int, peerQPN uint32) ([]int, uint64) {
	src, dst := r.hosts[from].Addr, r.hosts[peer].Addr
	var out []int
	var n uint64
	i, _ := slices.BinarySearchFunc(r.samples, src, func(s fabric.FlowSample, a netip.Addr) int { return s.Src.Addr().Compare(a) })
	for ; i < len(r.samples) && r.samples[i].Src.Addr() == src; i++ {
		s := r.samples[i]
		if s.Dst.Addr() == dst && uint32(s.DestQP) == peerQPN {
			out = append(out, s.Spine)
			n += s.Packets
		}
	}
	return out, n
}

// spineLabel is how the summary names where a QP's packets went: "s2",
// "s1+s3" (a QP whose packets took two spines), "-" (under one leaf) or
// "?" (no packet sampled).
func (r *fabricRun) spineLabel(from, peer int, peerQPN uint32) string {
	if r.sameLeaf(from, peer) {
		return "-"
	}
	sp, _ := r.spines(from, peer, peerQPN)
	if len(sp) == 0 {
		return "?"
	}
	var parts []string
	for _, k := range sp {
		parts = append(parts, fmt.Sprintf("s%d", k))
	}
	return strings.Join(parts, "+")
}

// windowLoad is one timed run's load on the spines.
type windowLoad struct {
	spineBytes []uint64
	maxMean    float64
	busiest    float64 // the busiest uplink end's tx bits over its rate × the window
	busiestAt  string  // its link and direction, "l0-s1 up"
	marks      uint64
	drops      uint64
}

// load returns a timed run's load from the fabric's counters over it.
func (r *fabricRun) load(s *fabric.Stats) windowLoad {
	w := windowLoad{spineBytes: s.SpineBytes()}
	_, _, _, w.maxMean, _ = fabric.Balance(w.spineBytes, 0)
	w.marks, w.drops = s.Marks()
	w.busiest, w.busiestAt = busiestUplink(r.fab, s)
	return w
}

// busiestUplink returns the largest share of its rate any uplink end sent
// over s's span, and which.
func busiestUplink(f *fabric.Fabric, s *fabric.Stats) (float64, string) {
	if f == nil || f.Config.Rate == 0 || s.Span <= 0 {
		return 0, ""
	}
	best, at := 0.0, ""
	for _, l := range s.Links {
		if l.Kind != fabric.Uplink {
			continue
		}
		for _, e := range []struct {
			dir string
			b   uint64
		}{{"up", l.A.TxBytes}, {"down", l.B.TxBytes}} {
			u := float64(e.b) * 8 / (float64(f.Config.Rate) * s.Span.Seconds())
			if u > best {
				best, at = u, l.Name+" "+e.dir
			}
		}
	}
	return best, at
}

// jobCounters are the ranks' QP and device counters summed over the job.
type jobCounters struct {
	sent, retransmitted, goBackN, seqNAKs uint64
	cnpsSent, cnpsReceived, rateCuts      uint64
	qps                                   int
	heapPerQP                             float64 // Go heap of a rank after its join over its QPs, averaged
	joinSec                               float64 // the slowest rank's join
}

func (r *fabricRun) counters() jobCounters {
	var c jobCounters
	var heap, qps float64
	for _, f := range r.files {
		if f == nil {
			continue
		}
		for _, cn := range f.Conns {
			for _, q := range cn.QPs {
				c.sent += q.Sent
				c.retransmitted += q.Retransmitted
				c.goBackN += q.GoBackN
				c.seqNAKs += q.SeqNAKs
				c.cnpsReceived += q.CNPsReceived
				c.rateCuts += q.RateCuts
			}
		}
		c.cnpsSent += f.Device.TxCNPs
		c.qps += f.QPs
		if f.HeapJoin > f.HeapBefore && f.QPs > 0 {
			heap += float64(f.HeapJoin - f.HeapBefore)
			qps += float64(f.QPs)
		}
		c.joinSec = max(c.joinSec, f.JoinSec)
	}
	if qps > 0 {
		c.heapPerQP = heap / qps
	}
	return c
}

// wireEfficiency is the share of a RoCEv2 data packet's frame that is
// payload, for WRITEs of chunk bytes in packets of mtu: every packet
// carries Ethernet (14), IPv4 (20), UDP (8), BTH (12) and ICRC (4) bytes,
// a WRITE's first packet a RETH (16) and its last an immediate (4). A tbf
// and the link counters count whole frames.
func wireEfficiency(mtu, chunk int) float64 {
	if mtu <= 0 || chunk <= 0 {
		return 1
	}
	pkts := float64((chunk + mtu - 1) / mtu)
	per := float64(min(mtu, chunk))
	return per / (per + 58 + 20/pkts)
}

// modelFigures are the balanced ideal and the fluid model's prediction of
// a ring all-reduce's busbw on the run's fabric (doc/fabric.md
// "Collectives on the fabric").
type modelFigures struct {
	size                  int
	ideal, predicted      float64 // GB/s
	loadMaxMean           float64 // the model's per-spine bytes max/mean
	unobserved, crossFlow int     // cross-leaf flows without a sampled spine, of all
	efficiency            float64
}

// model computes the ideal and the prediction for the all-reduce of size
// bytes as the ring this job ran: its ring order, each rank's leaf, and
// the spine the sampler saw each QP of each ring connection take, over
// the fabric's links at their rate × the data packets' wire efficiency,
// the hosts at their rate (unlimited: 100 × the links'). It returns false
// when the run has no fabric, no rate, or no ring.
func (r *fabricRun) model(size int) (modelFigures, bool) {
	f0 := r.rank0()
	if r.fab == nil || f0 == nil || f0.Setup == nil || r.fab.Config.Rate == 0 || len(r.hosts) < 2 || size <= 0 {
		return modelFigures{}, false
	}
	st := f0.Setup
	n := len(r.hosts)
	order := st.RankOrder
	if order == nil {
		order = make([]int, n)
		for i := range order {
			order[i] = i
		}
	}
	// The QPs of rank a's connection to b, per channel, from a's file.
	conn := func(a, b, ch int) *collConnFile {
		if a >= len(r.files) || r.files[a] == nil {
			return nil
		}
		for i := range r.files[a].Conns {
			c := &r.files[a].Conns[i]
			if c.Peer == b && c.Channel == ch {
				return c
			}
		}
		return nil
	}
	q := st.Channels * st.QPsPerConn
	leafOf := make([]int, n)
	spineOf := make([][]int, n)
	m := modelFigures{size: size, efficiency: wireEfficiency(st.MTU, st.Chunk)}
	for i, a := range order {
		b := order[(i+1)%n]
		leafOf[i] = r.hosts[a].Leaf
		spineOf[i] = make([]int, q)
		for j := range spineOf[i] {
			spineOf[i][j] = -1
		}
		if r.sameLeaf(a, b) {
			continue
		}
		for ch := range st.Channels {
			c := conn(a, b, ch)
			for k := range st.QPsPerConn {
				m.crossFlow++
				if c == nil || k >= len(c.QPs) {
					m.unobserved++
					continue
				}
				sp, _ := r.spines(a, b, c.QPs[k].PeerQPN)
				if len(sp) == 0 {
					m.unobserved++
					continue
				}
				spineOf[i][ch*st.QPsPerConn+k] = sp[0]
			}
		}
	}
	fc := r.fab.Config
	link := cc.Bitrate(float64(fc.Rate) * m.efficiency)
	host := cc.Bitrate(float64(fc.HostRate) * m.efficiency)
	if fc.HostRate == 0 {
		host = 100 * link
	}
	var sim ccfabric.ECMPSim
	res, err := sim.Run(ccfabric.ECMPConfig{Leaves: fc.Leaves, HostsPerLeaf: fc.HostsPerLeaf, Spines: fc.Spines,
		QPs: q, Mode: ccfabric.PortKernel, HostRate: host, SpineRate: link, Data: int64(size), NoDCQCN: true,
		LeafOf: leafOf, SpineOf: spineOf})
	if err != nil || res.Step <= 0 || res.IdealStep <= 0 {
		return modelFigures{}, false
	}
	per := float64(size) / float64(n) / 1e9 // GB each ring step moves per rank
	m.ideal = per / res.IdealStep.Seconds()
	m.predicted = per / res.Step.Seconds()
	m.loadMaxMean = res.LoadMaxMean
	return m, true
}

// isRing reports whether rank 0's setup says the ring ran the largest
// size of an all-reduce.
func (r *fabricRun) isRing() bool {
	f0 := r.rank0()
	if f0 == nil || f0.Setup == nil || f0.Setup.Collective != "all_reduce" {
		return false
	}
	a := f0.Setup.Algorithm
	return a == "ring" || strings.HasSuffix(a, "ring for the large)")
}

// largestRow returns the largest size of rank 0's table.
func (r *fabricRun) largestRow() (collRow, bool) {
	f0 := r.rank0()
	if f0 == nil || len(f0.Rows) == 0 {
		return collRow{}, false
	}
	best := f0.Rows[0]
	for _, row := range f0.Rows {
		if row.Size > best.Size {
			best = row
		}
	}
	return best, true
}

// fmtMB formats bytes in MB (10^6) for the summary's columns.
func fmtMB(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/1e6) }

// writeSummary prints, after nccl-tests' table, what the fabric did: the
// placement, each timed run's per-spine load, the job's retransmissions,
// CNPs, marks and drops, the ideal and the model's prediction, and every
// connection that carried the data with its QPs' source ports and
// spines.
func (r *fabricRun) writeSummary(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, "# goroce fabric: "+format+"\n", a...) }
	if r.fab == nil {
		return
	}
	fc := r.fab.Config
	hostRate := "unlimited"
	if fc.HostRate > 0 {
		hostRate = fc.HostRate.String()
	}
	fmt.Fprintln(w, "#")
	p("%s: %d leaves × %d hosts, %d spines; leaf–spine links %v, host links %s; buffer %d B, ECN threshold %d B",
		r.fab.Name, fc.Leaves, fc.HostsPerLeaf, fc.Spines, fc.Rate, hostRate, fc.Buffer, fc.ECN.Threshold)
	var pl []string
	for i, h := range r.hosts {
		pl = append(pl, fmt.Sprintf("%d:%s", i, h.Name))
	}
	p("ranks %s: %s", r.placement, strings.Join(pl, " "))
	p("congestion control --cc %s; QP ACK timeout %v; each QP's spine sampled in 1 of %d packets on the uplinks", r.cc, r.qpTimeout, r.every)
	if f0 := r.rank0(); f0 != nil && len(f0.Windows) > 0 {
		p("timed runs: bytes each spine forwarded (MB), their max/mean, the busiest uplink's share of its rate, CE marks, tbf drops")
		var head strings.Builder
		fmt.Fprintf(&head, "%12s %5s", "size", "half")
		for k := range fc.Spines {
			fmt.Fprintf(&head, " %8s", fmt.Sprintf("s%d", k))
		}
		fmt.Fprintf(&head, " %8s %8s %-12s %8s %7s", "max/mean", "busiest", "", "CE", "drops")
		fmt.Fprintf(w, "# %s\n", head.String())
		for _, win := range f0.Windows {
			if win.Fabric == nil {
				continue
			}
			l := r.load(win.Fabric)
			var b strings.Builder
			half := "out"
			if win.InPlace {
				half = "in"
			}
			fmt.Fprintf(&b, "%12d %5s", win.Size, half)
			for _, x := range l.spineBytes {
				fmt.Fprintf(&b, " %8s", fmtMB(x))
			}
			fmt.Fprintf(&b, " %8.2f %8.2f %-12s %8d %7d", l.maxMean, l.busiest, l.busiestAt, l.marks, l.drops)
			fmt.Fprintf(w, "# %s\n", b.String())
		}
	}
	c := r.counters()
	retr := 0.0
	if c.sent > 0 {
		retr = float64(c.retransmitted) / float64(c.sent)
	}
	marks, drops := uint64(0), uint64(0)
	if r.whole != nil {
		marks, drops = r.whole.Marks()
	}
	p("whole job: %d QPs sent %d packets, retransmitted %d (%.4f %%; Go-Back-N %d, NAK sequence errors %d); CNPs sent %d, received %d, rate cuts %d; CE marks %d, tbf drops %d",
		c.qps, c.sent, c.retransmitted, 100*retr, c.goBackN, c.seqNAKs, c.cnpsSent, c.cnpsReceived, c.rateCuts, marks, drops)
	if c.heapPerQP > 0 {
		p("memory: %.0f bytes of Go heap per QP (a rank's heap after its join over its QPs, with their posted receives); slowest join %.2f s", c.heapPerQP, c.joinSec)
	}
	if row, ok := r.largestRow(); ok && r.isRing() {
		if m, ok := r.model(row.Size); ok {
			note := ""
			if m.unobserved > 0 {
				note = fmt.Sprintf(" (%d of %d cross-leaf flows not sampled: hashed by the model)", m.unobserved, m.crossFlow)
			}
			out, in := row.Half[0].BusBw, row.Half[1].BusBw
			p("all_reduce %d B (ring): busbw %s / %s GB/s (out-of-place / in place); balanced ideal %s GB/s: measured/ideal %.2f / %.2f; the model's prediction for the spines the QPs took %s GB/s (per-spine max/mean %.2f): measured/predicted %.2f / %.2f%s",
				row.Size, cG(out), cG(in), cG(m.ideal), out/m.ideal, in/m.ideal, cG(m.predicted), m.loadMaxMean,
				out/m.predicted, in/m.predicted, note)
		}
	}
	r.writeConns(w)
}

// writeConns lists the connections that carried the data (at least a
// tenth of the busiest connection's packets) with their QPs.
func (r *fabricRun) writeConns(w io.Writer) {
	var busiest uint64
	sent := func(c collConnFile) uint64 {
		var s uint64
		for _, q := range c.QPs {
			s += q.Sent
		}
		return s
	}
	for _, f := range r.files {
		if f == nil {
			continue
		}
		for _, c := range f.Conns {
			busiest = max(busiest, sent(c))
		}
	}
	if busiest == 0 {
		return
	}
	fmt.Fprintf(w, "# goroce fabric: connections that carried the data (≥ 1/10 of the busiest's packets): each QP's number, UDP source port, spine (\"-\": under one leaf, \"?\": not sampled)\n")
	for _, f := range r.files {
		if f == nil {
			continue
		}
		for _, c := range f.Conns {
			if s := sent(c); s == 0 || s*10 < busiest {
				continue
			}
			var b strings.Builder
			for i, q := range c.QPs {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, " qp%d %#x sport %d %s", q.Index, q.QPN, q.SourcePort, r.spineLabel(f.Rank, c.Peer, q.PeerQPN))
			}
			fmt.Fprintf(w, "# rank %d (%s) -> rank %d (%s) ch %d:%s\n", f.Rank, r.hosts[f.Rank].Name, c.Peer, r.hosts[c.Peer].Name, c.Channel, b.String())
		}
	}
}

// ratio returns a/b, NaN when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
