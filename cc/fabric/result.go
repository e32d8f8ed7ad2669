package fabric

import (
	"math"
	"time"

	"github.com/goroce/goroce/cc"
)

// Result holds a run's raw measurements. The metric methods compute the
// figures of doc/dcqcn.md §5.2 from them; intervals are rounded to Config.Bin.
type Result struct {
	// Config is the run's configuration with defaults filled in.
	Config Config
	// Events counts the events processed.
	Events uint64
	// Flows holds per-flow counters and records, in Config.Flows order.
	Flows []FlowResult

	// QueueHist is the time, in picoseconds, the bottleneck queue spent at
	// each length inside Config.Window, in 64-byte steps (index = bytes/64).
	QueueHist []int64
	// QmaxWindow is the longest queue, in bytes, held inside Config.Window.
	QmaxWindow int
	// Qpeak is the longest queue over the whole run (Qpeak, §5.2).
	Qpeak int
	// LastAboveSettle is the last time the queue was above
	// Config.SettleLevel (Tsettle, §5.2), or −1 if it never was.
	LastAboveSettle time.Duration
	// Drops counts packets dropped at the switch for lack of buffer.
	Drops uint64
	// Pauses counts PFC PAUSE frames sent.
	Pauses uint64

	// Series is the sampled time series behind the plots.
	Series Series

	// ViolationCount counts broken invariants (doc/dcqcn.md §5.3 "all");
	// Violations describes the first few.
	ViolationCount int
	Violations     []string
}

// FlowResult is one flow's share of a [Result].
type FlowResult struct {
	// Sent is the bytes the sender put on the wire.
	Sent uint64
	// Dropped and Marked count the flow's packets dropped and CE-marked at
	// the switch.
	Dropped, Marked uint64
	// Delivered is the bytes delivered to the receiver per Config.Bin.
	Delivered []int64
	// CNPs is the number of CNPs the NP sent per Config.Bin.
	CNPs []int32
	// MinCNPGap is the smallest interval between two CNPs (Δcnp, §5.2),
	// or −1 with fewer than two CNPs.
	MinCNPGap time.Duration
	// PauseTime is the time the sender spent paused by PFC.
	PauseTime time.Duration
	// RP and NP are the controllers' own counters at the end of the run.
	RP cc.Stats
	NP cc.NPStats
}

// Series is a time series sampled every Config.Sample.
type Series struct {
	// T holds the sample times.
	T []time.Duration
	// Rate holds each flow's RC at each sample (0 while not sending).
	Rate [][]cc.Bitrate
	// Queue holds the longest bottleneck queue, in bytes, since the
	// previous sample.
	Queue []int
}

// bins converts [from, to) to bin indices, clamped to the record.
func (r *Result) bins(from, to time.Duration) (int, int) {
	bin := r.Config.Bin
	n := 0
	if len(r.Flows) > 0 {
		n = len(r.Flows[0].Delivered)
	}
	a := int(from / bin)
	b := int((to + bin - 1) / bin)
	return max(0, min(a, n)), max(0, min(b, n))
}

// span returns the length of the bin-rounded interval [from, to).
func (r *Result) span(from, to time.Duration) time.Duration {
	a, b := r.bins(from, to)
	return time.Duration(b-a) * r.Config.Bin
}

// Bytes returns the bytes of flow delivered in [from, to).
func (r *Result) Bytes(flow int, from, to time.Duration) int64 {
	a, b := r.bins(from, to)
	var sum int64
	for _, v := range r.Flows[flow].Delivered[a:b] {
		sum += v
	}
	return sum
}

// Throughput returns flow's delivered rate over [from, to).
func (r *Result) Throughput(flow int, from, to time.Duration) cc.Bitrate {
	d := r.span(from, to)
	if d <= 0 {
		return 0
	}
	return cc.Bitrate(float64(r.Bytes(flow, from, to)) * 8 / d.Seconds())
}

// Utilization returns U (§5.2): bytes delivered through the bottleneck in
// [from, to) over Bottleneck·(to − from).
func (r *Result) Utilization(from, to time.Duration) float64 {
	d := r.span(from, to)
	if d <= 0 {
		return math.NaN()
	}
	var sum int64
	for i := range r.Flows {
		sum += r.Bytes(i, from, to)
	}
	return float64(sum) * 8 / (float64(r.Config.Bottleneck) * d.Seconds())
}

// Jain returns Jain's fairness index (Σx)²/(n·Σx²) of xs: 1 when all are
// equal, 1/n when one takes everything. It is 1 for no values or all
// zeros.
func Jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(xs)) * s2)
}

// Jain returns J (§5.2) over the given flows' throughput in [from, to).
func (r *Result) Jain(flows []int, from, to time.Duration) float64 {
	xs := make([]float64, len(flows))
	for i, f := range flows {
		xs[i] = float64(r.Bytes(f, from, to))
	}
	return Jain(xs)
}

// JainWindows returns the minimum and mean of Jw(w) (§5.2): J over each
// whole window of length w in [from, to).
func (r *Result) JainWindows(flows []int, from, to, w time.Duration) (lo, mean float64) {
	lo, n := math.Inf(1), 0
	for t := from; t+w <= to; t += w {
		j := r.Jain(flows, t, t+w)
		lo = min(lo, j)
		mean += j
		n++
	}
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	return lo, mean / float64(n)
}

// Tconv returns the convergence time after a perturbation at from (§5.2):
// the earliest t − from such that J over the trailing window w stays at or
// above thr for every step-spaced t up to until; ok is false if J is below
// thr at until.
func (r *Result) Tconv(flows []int, from, until, w, step time.Duration, thr float64) (time.Duration, bool) {
	conv, ok := time.Duration(0), false
	for t := from + w; t <= until; t += step {
		if r.Jain(flows, t-w, t) >= thr {
			if !ok {
				conv, ok = t-from, true
			}
		} else {
			ok = false
		}
	}
	return conv, ok
}

// Recovery returns how long after from flow's throughput, over bins of
// length step, reaches level and stays there until the end of the run; ok
// is false if it never does.
func (r *Result) Recovery(flow int, from time.Duration, level cc.Bitrate, step time.Duration) (time.Duration, bool) {
	rec, ok := time.Duration(0), false
	for t := from + step; t <= r.Config.Duration; t += step {
		if r.Throughput(flow, t-step, t) >= level {
			if !ok {
				rec, ok = t-from, true
			}
		} else {
			ok = false
		}
	}
	return rec, ok
}

// CNPRate returns flow's CNPs per second in [from, to).
func (r *Result) CNPRate(flow int, from, to time.Duration) float64 {
	a, b := r.bins(from, to)
	var n int64
	for _, v := range r.Flows[flow].CNPs[a:b] {
		n += int64(v)
	}
	d := r.span(from, to)
	if d <= 0 {
		return math.NaN()
	}
	return float64(n) / d.Seconds()
}

// TotalCNPs returns the CNPs sent over the whole run, all flows.
func (r *Result) TotalCNPs() int64 {
	var n int64
	for _, f := range r.Flows {
		for _, v := range f.CNPs {
			n += int64(v)
		}
	}
	return n
}

// QueueQuantile returns the time-weighted q-quantile of the queue length
// in bytes inside Config.Window (Q99 for q = 0.99, §5.2), at 64-byte
// resolution.
func (r *Result) QueueQuantile(q float64) int {
	var total int64
	for _, v := range r.QueueHist {
		total += v
	}
	if total == 0 {
		return 0
	}
	target := q * float64(total)
	var cum int64
	for i, v := range r.QueueHist {
		cum += v
		if float64(cum) >= target {
			return i << 6
		}
	}
	return (len(r.QueueHist) - 1) << 6
}
