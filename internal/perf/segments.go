package perf

import (
	"context"
	"math"
	"slices"
	"time"
)

// Spread summarizes a set of per-segment figures: the median, the extremes
// and the interquartile range (Q1 and Q3 by linear interpolation between
// order statistics, numpy's default). NaNs are left out; an empty set gives
// the zero Spread.
type Spread struct {
	N                        int
	Median, Min, Max, Q1, Q3 float64
}

// SpreadOf summarizes xs. It does not modify xs.
func SpreadOf(xs []float64) Spread {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return Spread{}
	}
	slices.Sort(s)
	return Spread{N: len(s), Median: quantile(s, 0.5), Min: s[0], Max: s[len(s)-1],
		Q1: quantile(s, 0.25), Q3: quantile(s, 0.75)}
}

// quantile is the p-quantile of sorted s (not empty), interpolating
// linearly between the two nearest order statistics.
func quantile(s []float64, p float64) float64 {
	h := p * float64(len(s)-1)
	lo := int(math.Floor(h))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (h-float64(lo))*(s[hi]-s[lo])
}

// SegmentConfig configures Interleave. Zero fields take the defaults
// shown.
type SegmentConfig struct {
	// Test is the goroce test; Interleave sets its Duration (bandwidth) or
	// Iters (latency) per segment. Its reporting hooks (Progress, Stats,
	// Metrics, Configure, Opened) are not used: a segment reports nothing
	// on its own.
	Test Config
	// Baseline is the raw UDP measurement; Interleave runs only its blast
	// (bandwidth) or only its ping-pong (latency), sized per segment.
	Baseline BaselineConfig
	// Segments is the number of pairs, one goroce segment and one baseline
	// segment each (default 6).
	Segments int
	// Length is the length of a bandwidth segment of either kind (default
	// 500 ms).
	Length time.Duration
	// Block is the number of round trips of a latency segment of either
	// kind (default 2000; the UDP ping-pong adds a tenth as warm-up).
	Block int
	// CPUs is the number of CPUs of Segment.BoundGbps (default CPUs()).
	CPUs int
	// Floor makes bandwidth pairs triples: the goroce segment, the blast
	// and the RoCE floor blast (BaselineConfig.Floor) for Length each, the
	// first of the three rotating (Segment.First). Latency tests ignore
	// it.
	Floor bool
}

// Segment is one pair of Interleave: a goroce segment and a baseline
// segment run back to back, and their ratio. Bandwidth pairs fill the
// Gb/s and Mpps fields, latency pairs the µs fields. With
// SegmentConfig.Floor a bandwidth pair is a triple, the floor blast the
// third, and fills the Floor fields too.
type Segment struct {
	// First is the kind that ran first in the pair, "goroce", "baseline"
	// or "floor": pairs alternate (triples rotate), so that a drift over
	// the run (a neighbour's load, a warming cache) does not favour one
	// kind.
	First string `json:"first"`
	// Gbps and Mpps are the goroce segment's goodput and message rate;
	// BaselineGbps and BaselineMpps what the raw UDP blast received.
	Gbps         float64 `json:"gbps,omitempty"`
	Mpps         float64 `json:"mpps,omitempty"`
	BaselineGbps float64 `json:"baseline_gbps,omitempty"`
	BaselineMpps float64 `json:"baseline_mpps,omitempty"`
	// LatP50us and LatP99us are the goroce segment's latency (half a round
	// trip, as perftest); BaselineP50us and BaselineP99us the Go UDP
	// ping-pong's one-way latency.
	LatP50us      float64 `json:"lat_p50_us,omitempty"`
	LatP99us      float64 `json:"lat_p99_us,omitempty"`
	BaselineP50us float64 `json:"baseline_p50_us,omitempty"`
	BaselineP99us float64 `json:"baseline_p99_us,omitempty"`
	// LatP999us and BaselineP999us are the 99.9th percentiles, read from
	// only Block/1000 samples beyond them per segment: the median over
	// the segments is the figure to quote.
	LatP999us      float64 `json:"lat_p999_us,omitempty"`
	BaselineP999us float64 `json:"baseline_p999_us,omitempty"`
	// Ratio is Gbps / BaselineGbps, or LatP50us / BaselineP50us; MppsRatio
	// is Mpps / BaselineMpps, P99Ratio LatP99us / BaselineP99us and
	// P999Ratio LatP999us / BaselineP999us. A
	// ratio whose denominator is 0 is 0, which SpreadBy leaves out.
	Ratio     float64 `json:"ratio"`
	MppsRatio float64 `json:"mpps_ratio,omitempty"`
	P99Ratio  float64 `json:"p99_ratio,omitempty"`
	P999Ratio float64 `json:"p999_ratio,omitempty"`
	// Retransmitted counts the goroce segment's retransmitted packets.
	Retransmitted uint64 `json:"retransmitted"`

	// CPU accounting of bandwidth pairs (doc/limits.md, "CPU per byte");
	// 0 where the process's CPU time could not be read.
	//
	// CPUCores and BaselineCPUCores are the cores the process kept busy
	// in the goroce and the baseline segment: CPU time (user + system)
	// over wall time. CPUNsPerByte and BaselineCPUNsPerByte are the CPU
	// time per byte moved, in ns (the same number is CPU-seconds per GB):
	// goroce's per byte of RDMA payload, the blast's per byte of UDP
	// payload received. CPUSysShare and BaselineCPUSysShare are the
	// kernel's part of the CPU time.
	CPUCores             float64 `json:"cpu_cores,omitempty"`
	BaselineCPUCores     float64 `json:"baseline_cpu_cores,omitempty"`
	CPUNsPerByte         float64 `json:"cpu_ns_per_byte,omitempty"`
	BaselineCPUNsPerByte float64 `json:"baseline_cpu_ns_per_byte,omitempty"`
	CPUSysShare          float64 `json:"cpu_sys_share,omitempty"`
	BaselineCPUSysShare  float64 `json:"baseline_cpu_sys_share,omitempty"`
	// MachineCores and BaselineMachineCores are the cores busy on the
	// whole machine during each segment, every process's (CPUs ×
	// CPUUse.MachineBusy): where they reach the CPUs while CPUCores does
	// not, other processes took the rest.
	MachineCores         float64 `json:"machine_cores,omitempty"`
	BaselineMachineCores float64 `json:"baseline_machine_cores,omitempty"`
	// CPUCostRatio is CPUNsPerByte / BaselineCPUNsPerByte: how much more
	// CPU goroce spends per byte than the raw UDP path.
	CPUCostRatio float64 `json:"cpu_cost_ratio,omitempty"`
	// BoundGbps is the rate at which goroce would use every CPU of the
	// machine at this segment's CPU per byte (perf.BoundGbps with
	// perf.CPUs), and BoundRatio that over BaselineGbps: the best Ratio a
	// CPU-bound goroce could reach without costing less per byte.
	BoundGbps  float64 `json:"bound_gbps,omitempty"`
	BoundRatio float64 `json:"bound_ratio,omitempty"`

	// The RoCE floor (SegmentConfig.Floor; 0 without it). FloorGbps is
	// what the floor blast received; FloorRatio is Gbps / FloorGbps
	// (goroce against the floor) and FloorCeiling FloorGbps /
	// BaselineGbps (how much of the ceiling the work every RoCEv2 stack
	// must do leaves). FloorCPUCores and FloorCPUNsPerByte are the floor
	// blast's cores and CPU per byte of UDP payload received, as the
	// baseline's.
	FloorGbps         float64 `json:"floor_gbps,omitempty"`
	FloorRatio        float64 `json:"floor_ratio,omitempty"`
	FloorCeiling      float64 `json:"floor_ceiling,omitempty"`
	FloorCPUCores     float64 `json:"floor_cpu_cores,omitempty"`
	FloorCPUNsPerByte float64 `json:"floor_cpu_ns_per_byte,omitempty"`
	// FloorLoss and BaselineLoss are the share of the floor blast's and
	// the blast's datagrams the receiver did not get (its socket
	// overran: neither blast has flow control). A floor receiver that
	// falls behind loses more, and its sender's work on what was lost
	// still counts in FloorCPUNsPerByte.
	FloorLoss    float64 `json:"floor_loss,omitempty"`
	BaselineLoss float64 `json:"baseline_loss,omitempty"`
}

// setFloor fills the floor fields of a bandwidth triple from its floor
// blast f (Gbps and BaselineGbps set).
func (s *Segment) setFloor(f Blast) {
	s.FloorGbps = f.Gbps
	s.FloorRatio = ratio(s.Gbps, s.FloorGbps)
	s.FloorCeiling = ratio(s.FloorGbps, s.BaselineGbps)
	s.FloorCPUCores, s.FloorCPUNsPerByte = f.CPU.Cores(), f.CPU.NsPerByte()
	s.FloorLoss = f.Loss
}

// setCPU fills the CPU accounting of a bandwidth pair from what its
// goroce segment (g) and its baseline segment (b) cost, for a machine of
// cpus CPUs.
func (s *Segment) setCPU(g, b CPUUse, cpus int) {
	s.CPUCores, s.BaselineCPUCores = g.Cores(), b.Cores()
	s.CPUNsPerByte, s.BaselineCPUNsPerByte = g.NsPerByte(), b.NsPerByte()
	s.CPUSysShare, s.BaselineCPUSysShare = g.SysShare(), b.SysShare()
	s.MachineCores, s.BaselineMachineCores = g.MachineBusy*float64(cpus), b.MachineBusy*float64(cpus)
	s.CPUCostRatio = ratio(s.CPUNsPerByte, s.BaselineCPUNsPerByte)
	s.BoundGbps = BoundGbps(cpus, s.CPUNsPerByte)
	s.BoundRatio = ratio(s.BoundGbps, s.BaselineGbps)
}

func (c SegmentConfig) withDefaults() SegmentConfig {
	if c.Segments <= 0 {
		c.Segments = 6
	}
	if c.Length <= 0 {
		c.Length = 500 * time.Millisecond
	}
	if c.Block <= 0 {
		c.Block = 2000
	}
	if c.CPUs <= 0 {
		c.CPUs = CPUs()
	}
	return c
}

// Interleave alternates short goroce and raw UDP segments in one run, so
// that the ratio of each pair is taken under the same conditions and one
// noisy stretch decides one pair, not the figure: summarize the pairs with
// SpreadOf. A bandwidth test (Test.Latency false) pairs a Test run for
// Length with a Baseline blast for Length (with cfg.Floor, and a floor
// blast for Length: pair i runs goroce, the blast and the floor in this
// order rotated by i%3); a latency test pairs Block round trips of Test
// with Block round trips of the Go UDP ping-pong. Each segment opens its
// own devices or sockets, outside what it times. Cancelling ctx stops it
// with ctx's error.
func Interleave(ctx context.Context, cfg SegmentConfig) ([]Segment, error) {
	cfg = cfg.withDefaults()
	tc := cfg.Test
	tc.Progress, tc.Stats, tc.Metrics, tc.Configure, tc.Opened = nil, nil, nil, nil, nil
	bc := cfg.Baseline
	bc.Floor = false // the floor blast is a segment of its own
	floor := cfg.Floor && !tc.Latency
	if tc.Latency {
		tc.Iters, tc.Duration = cfg.Block, 0
		bc.NoBlast, bc.NoPing = true, false
		bc.Pings, bc.PingWarmup = cfg.Block, max(cfg.Block/10, 1)
	} else {
		tc.Duration = cfg.Length
		bc.NoBlast, bc.NoPing, bc.Plain = false, true, false
		bc.Duration = cfg.Length
	}
	segs := make([]Segment, 0, cfg.Segments)
	for i := range cfg.Segments {
		if err := ctx.Err(); err != nil {
			return segs, err
		}
		var (
			s   Segment
			res Result
			b   BaselineResult
			f   Blast
			err error
		)
		type step struct {
			kind string
			run  func() error
		}
		steps := []step{
			{"goroce", func() error { res, err = Run(ctx, tc); return err }},
			{"baseline", func() error { b, err = Baseline(ctx, bc); return err }},
		}
		if floor {
			fc := bc.withDefaults()
			steps = append(steps, step{"floor", func() error { f, err = blast(ctx, fc, nil, nil, true); return err }})
		}
		k := i % len(steps)
		steps = append(steps[k:len(steps):len(steps)], steps[:k]...) // rotated, in a new array
		s.First = steps[0].kind
		for _, st := range steps {
			if err := st.run(); err != nil {
				return segs, err
			}
		}
		s.Retransmitted = res.Retransmitted
		if tc.Latency {
			s.LatP50us, s.LatP99us, s.LatP999us = res.LatP50us, res.LatP99us, res.LatP999us
			s.BaselineP50us = float64(b.Latency.P50) / 1e3
			s.BaselineP99us = float64(b.Latency.P99) / 1e3
			s.BaselineP999us = float64(b.Latency.P999) / 1e3
			s.Ratio = ratio(s.LatP50us, s.BaselineP50us)
			s.P99Ratio = ratio(s.LatP99us, s.BaselineP99us)
			s.P999Ratio = ratio(s.LatP999us, s.BaselineP999us)
		} else {
			s.Gbps, s.Mpps = res.Gbps, res.Mpps
			s.BaselineGbps, s.BaselineMpps = b.Gbps, b.Mpps
			s.BaselineLoss = b.Loss
			s.Ratio = ratio(s.Gbps, s.BaselineGbps)
			s.MppsRatio = ratio(s.Mpps, s.BaselineMpps)
			s.setCPU(res.CPUUse(), b.CPU, cfg.CPUs)
			if floor {
				s.setFloor(f)
			}
		}
		segs = append(segs, s)
	}
	return segs, nil
}

// ratio is a / b, or 0 when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// SpreadBy summarizes one field of segs, leaving out the segments where
// it is 0 (a ratio without a denominator, or a figure not measured).
func SpreadBy(segs []Segment, field func(Segment) float64) Spread {
	xs := make([]float64, len(segs))
	for i, s := range segs {
		xs[i] = field(s)
		if xs[i] == 0 {
			xs[i] = math.NaN()
		}
	}
	return SpreadOf(xs)
}
