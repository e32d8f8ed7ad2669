package fabric

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/goroce/goroce/cc"
)

// Cmp says how a [Figure] is judged.
type Cmp uint8

const (
	// Report marks a figure that is reported but not judged.
	Report Cmp = iota
	// AtLeast passes when Value ≥ Limit.
	AtLeast
	// AtMost passes when Value ≤ Limit.
	AtMost
)

// Figure is one measured figure of a scenario with its pass threshold
// (doc/dcqcn.md §5.3). A NaN Value means "not applicable" (for example
// Tconv with one flow) and passes only if the figure is not judged.
type Figure struct {
	// Key names the figure in JSON output ("U", "Q99_bytes", …).
	Key string
	// Value is the measured value, in the unit the key names.
	Value float64
	// Cmp and Limit are the pass condition.
	Cmp   Cmp
	Limit float64
	// High marks a figure where higher values are better (U, J, Δcnp);
	// it orders seeds from best to worst.
	High bool
}

// Pass reports whether f meets its threshold.
func (f Figure) Pass() bool {
	switch f.Cmp {
	case AtLeast:
		return f.Value >= f.Limit
	case AtMost:
		return f.Value <= f.Limit
	}
	return true
}

// Worse reports whether value a is worse than b for this figure: lower
// if f.High, higher otherwise, NaN worst of all.
func (f Figure) Worse(a, b float64) bool {
	switch {
	case math.IsNaN(a):
		return !math.IsNaN(b)
	case math.IsNaN(b):
		return false
	case f.High:
		return a < b
	}
	return a > b
}

// Scenario is one scenario of doc/dcqcn.md §5.3: a topology and traffic
// pattern, the window its figures are measured over, and their thresholds
// for each profile.
type Scenario struct {
	// ID is the scenario's name in doc/dcqcn.md §5.3 ("S3"; "S1b-25G" for the
	// 25 G variant of S1b).
	ID string
	// Title describes it in a line.
	Title string

	build func(p cc.Profile, seed uint64) Config
	eval  func(r *Result, p cc.Profile) []Figure
}

// Config returns the scenario's simulation config for profile p and seed.
func (s Scenario) Config(p cc.Profile, seed uint64) Config { return s.build(p, seed) }

// Figures evaluates a result of s.Config(p, …) against the thresholds.
func (s Scenario) Figures(r *Result, p cc.Profile) []Figure { return s.eval(r, p) }

// Run simulates the scenario once and evaluates it.
func (s Scenario) Run(p cc.Profile, seed uint64) (*Result, []Figure, error) {
	r, err := Run(s.Config(p, seed))
	if err != nil {
		return nil, nil, err
	}
	return r, s.Figures(r, p), nil
}

// LookupScenario returns the scenario with the given ID.
func LookupScenario(id string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.ID == id {
			return s, true
		}
	}
	return Scenario{}, false
}

const (
	ms = time.Millisecond
	kb = 1000 // doc/dcqcn.md quotes queue bounds in KB = 1000 B
)

// base returns a scenario config at profile p: n flows starting within the
// first microsecond (seeded jitter), 100 G NICs, 1 µs links, 1024-B
// frames, 16 MB buffer, no PFC (doc/dcqcn.md §5.1).
func base(p cc.Profile, seed uint64, n int, bottleneck cc.Bitrate, dur time.Duration, window [2]time.Duration) Config {
	jit := rand.New(rand.NewPCG(seed, 1))
	flows := make([]Flow, n)
	for i := range flows {
		flows[i] = Flow{Delay: time.Microsecond, Start: time.Duration(jit.Int64N(1000))}
	}
	return Config{
		Seed:       seed,
		Duration:   dur,
		RP:         p.Config(),
		NP:         p.NPConfig(),
		RED:        p.REDConfig(),
		Bottleneck: bottleneck,
		Delay:      time.Microsecond,
		Flows:      flows,
		PacketSize: 1024,
		Buffer:     16_000_000,
		Window:     window,
	}
}

func allFlows(r *Result) []int {
	fs := make([]int, len(r.Flows))
	for i := range fs {
		fs[i] = i
	}
	return fs
}

// limits holds the §5.3 thresholds one scenario applies under one
// profile; a zero Cmp leaves the figure report-only.
type limits map[string]Figure

func at(cmp Cmp, limit float64) Figure { return Figure{Cmp: cmp, Limit: limit} }

// common measures the figures every scenario reports over [from, to) and
// judges those named in lim, plus the §5.3 "all" invariants.
func common(r *Result, p cc.Profile, from, to time.Duration, conv time.Duration, lim limits) []Figure {
	flows := allFlows(r)
	var active []int
	for _, f := range flows {
		fl := r.Config.Flows[f]
		if fl.Start <= from+r.Config.Bin && (fl.Stop == 0 || fl.Stop >= to) {
			active = append(active, f)
		}
	}
	nan := math.NaN()
	tconv := nan
	jwMin, jwMean := nan, nan
	if len(active) > 1 {
		if t, ok := r.Tconv(active, conv, to, 5*ms, 1*ms, 0.95); ok {
			tconv = float64(t) / float64(ms)
		} else {
			tconv = math.Inf(1)
		}
		jwMin, jwMean = r.JainWindows(active, from, to, 5*ms)
	}
	cnpRate, gap := 0.0, math.Inf(1)
	for f := range r.Flows {
		cnpRate = max(cnpRate, r.CNPRate(f, from, to))
		if g := r.Flows[f].MinCNPGap; g >= 0 {
			gap = min(gap, float64(g)/float64(time.Microsecond))
		}
	}
	if math.IsInf(gap, 1) {
		gap = nan
	}
	tsettle := 0.0
	if r.LastAboveSettle > 0 {
		tsettle = float64(r.LastAboveSettle) / float64(ms)
	}
	var pause time.Duration
	for _, f := range r.Flows {
		pause = max(pause, f.PauseTime)
	}
	figs := []Figure{
		{Key: "U", Value: r.Utilization(from, to), High: true},
		{Key: "J", Value: r.Jain(active, from, to), High: true},
		{Key: "Jw5_min", Value: jwMin, High: true},
		{Key: "Jw5_mean", Value: jwMean, High: true},
		{Key: "Q99_bytes", Value: float64(r.QueueQuantile(0.99))},
		{Key: "Qmax_bytes", Value: float64(r.QmaxWindow)},
		{Key: "Qpeak_bytes", Value: float64(r.Qpeak)},
		{Key: "Tconv_ms", Value: tconv},
		{Key: "Tsettle_ms", Value: tsettle},
		{Key: "drops", Value: float64(r.Drops)},
		{Key: "pause_ms", Value: float64(pause) / float64(ms)},
		{Key: "cnps", Value: float64(r.TotalCNPs())},
		{Key: "cnp_per_s", Value: cnpRate},
		{Key: "min_cnp_gap_us", Value: gap, High: true},
		{Key: "violations", Value: float64(r.ViolationCount)},
	}
	// doc/dcqcn.md §5.3 "all": Δcnp ≥ N ⇒ CNP rate ≤ 1/N per flow; the
	// simulator checks the RP invariants and "no CNP without CE" itself.
	n := r.Config.NP.Interval
	if n > 0 {
		lim["cnp_per_s"] = at(AtMost, float64(time.Second/n))
		if !math.IsNaN(gap) {
			lim["min_cnp_gap_us"] = at(AtLeast, float64(n)/float64(time.Microsecond))
		}
	}
	lim["violations"] = at(AtMost, 0)
	for i := range figs {
		if l, ok := lim[figs[i].Key]; ok {
			figs[i].Cmp, figs[i].Limit = l.Cmp, l.Limit
		}
	}
	return figs
}

// pick returns v[0] for profile P and v[1] for M.
func pick[T any](p cc.Profile, v ...T) T {
	if p == cc.ProfileM && len(v) > 1 {
		return v[1]
	}
	return v[0]
}

// Scenarios returns S1–S6 of doc/dcqcn.md §5.3 (S1b in its 40 G and 25 G
// variants). Thresholds are §5.3's for profile P and §5.3's "Profile M
// expectations" for M; a figure §5.3 gives no bound for under M is
// reported, not judged.
func Scenarios() []Scenario {
	steady := [2]time.Duration{20 * ms, 100 * ms}
	s1b := func(rate cc.Bitrate, id string) Scenario {
		return Scenario{
			ID:    id,
			Title: "1 flow, NIC 100G, bottleneck " + rate.String(),
			build: func(p cc.Profile, seed uint64) Config {
				return base(p, seed, 1, rate, 100*ms, steady)
			},
			eval: func(r *Result, p cc.Profile) []Figure {
				kmax := float64(r.Config.RED.Kmax)
				return common(r, p, steady[0], steady[1], 0, limits{
					"U":         at(AtLeast, pick(p, 0.95, 0.98)),
					"Q99_bytes": at(AtMost, kmax),
					"drops":     at(AtMost, 0),
				})
			},
		}
	}
	incast := func(n int, id string) Scenario {
		return Scenario{
			ID:    id,
			Title: itoa(n) + ":1 incast, all flows start at t≈0 at line rate",
			build: func(p cc.Profile, seed uint64) Config {
				return base(p, seed, n, 100*cc.Gbps, 100*ms, steady)
			},
			eval: func(r *Result, p cc.Profile) []Figure {
				kmax := float64(r.Config.RED.Kmax)
				lim := limits{
					"U":     at(AtLeast, pick(p, 0.95, 0.98)),
					"J":     at(AtLeast, pick(p, 0.98, 0.99)),
					"drops": at(AtMost, 0),
				}
				switch n {
				case 2:
					lim["J"] = at(AtLeast, pick(p, 0.95, 0.99))
					lim["Jw5_min"] = at(AtLeast, 0.85)
					lim["Q99_bytes"] = at(AtMost, pick(p, 100.0*kb, kmax))
					if p == cc.ProfileP {
						lim["Qmax_bytes"] = at(AtMost, kmax)
					}
					lim["Tconv_ms"] = at(AtMost, 50)
					lim["dev_max"] = at(AtMost, 0.20)
				case 8:
					lim["Q99_bytes"] = at(AtMost, kmax)
					lim["Tsettle_ms"] = at(AtMost, pick(p, 2.0, 5.0))
				case 16:
					lim["Q99_bytes"] = at(AtMost, pick(p, 1.25*kmax, kmax))
					lim["Tsettle_ms"] = at(AtMost, 5)
				}
				figs := common(r, p, steady[0], steady[1], 0, lim)
				if n == 2 {
					// Each flow's mean within ±20 % of C/2 (§5.3 S2).
					fair := float64(r.Config.Bottleneck) / float64(n)
					dev := 0.0
					for f := range r.Flows {
						x := float64(r.Throughput(f, steady[0], steady[1]))
						dev = max(dev, math.Abs(x-fair)/fair)
					}
					l := lim["dev_max"]
					figs = append(figs, Figure{Key: "dev_max", Value: dev, Cmp: l.Cmp, Limit: l.Limit})
				}
				return figs
			},
		}
	}
	joinLeave := Scenario{
		ID:    "S5",
		Title: "join/leave: A from 0, B joins at 20 ms and leaves at 120 ms, end 220 ms",
		build: func(p cc.Profile, seed uint64) Config {
			c := base(p, seed, 2, 100*cc.Gbps, 220*ms, [2]time.Duration{0, 220 * ms})
			c.Flows[1].Start += 20 * ms
			c.Flows[1].Stop = 120 * ms
			return c
		},
		eval: func(r *Result, p cc.Profile) []Figure {
			join, leave := 20*ms, 120*ms
			// §5.3 gives U ≥ 0.93 for P. Under M the recovery after the
			// leave is linear, R_HAI = 200 Mb/s per T = 300 µs: from C/2 to
			// 0.9·C takes 60 ms and costs about 0.5·(C/2)·60 ms / (C·220 ms)
			// ≈ 7 % of the run, so M is held to U ≥ 0.90 here.
			figs := common(r, p, 0, 220*ms, 0, limits{
				"U": at(AtLeast, pick(p, 0.93, 0.90)),
			})
			// J and Tconv while both flows run (§5.3 S5 "Tconv after join").
			both := []int{0, 1}
			tconv := math.Inf(1)
			if t, ok := r.Tconv(both, join, leave, 5*ms, 1*ms, 0.95); ok {
				tconv = float64(t) / float64(ms)
			}
			rec := math.Inf(1)
			if t, ok := r.Recovery(0, leave, 0.9*r.Config.Bottleneck, 1*ms); ok {
				rec = float64(t) / float64(ms)
			}
			for i := range figs {
				switch figs[i].Key {
				case "J":
					figs[i].Value = r.Jain(both, join+5*ms, leave)
				case "Jw5_min", "Jw5_mean":
					lo, mean := r.JainWindows(both, join, leave, 5*ms)
					figs[i].Value = map[bool]float64{true: lo, false: mean}[figs[i].Key == "Jw5_min"]
				case "Tconv_ms":
					figs[i].Value = tconv
					figs[i].Cmp, figs[i].Limit = AtMost, 50
				}
			}
			return append(figs, Figure{Key: "Trecover_ms", Value: rec, Cmp: AtMost, Limit: pick(p, 30.0, 70.0)})
		},
	}
	mixedRTT := Scenario{
		ID:    "S6",
		Title: "mixed RTT: 2 flows, base RTT ≈ 4 µs and ≈ 42 µs",
		build: func(p cc.Profile, seed uint64) Config {
			c := base(p, seed, 2, 100*cc.Gbps, 100*ms, steady)
			c.Flows[1].Delay = 20 * time.Microsecond // RTT 2·(20+1) µs
			return c
		},
		eval: func(r *Result, p cc.Profile) []Figure {
			return common(r, p, steady[0], steady[1], 0, limits{
				"U": at(AtLeast, pick(p, 0.93, 0.98)),
				"J": at(AtLeast, pick(p, 0.95, 0.99)),
			})
		},
	}
	return []Scenario{
		{
			ID:    "S1",
			Title: "1 flow, NIC 100G, bottleneck 100G",
			build: func(p cc.Profile, seed uint64) Config {
				return base(p, seed, 1, 100*cc.Gbps, 20*ms, [2]time.Duration{0, 20 * ms})
			},
			eval: func(r *Result, p cc.Profile) []Figure {
				// Qmax ≤ 2 packets, judged on the time-weighted maximum and
				// on the instantaneous peak alike.
				two := float64(2 * r.Config.PacketSize)
				return common(r, p, 0, 20*ms, 0, limits{
					"U":           at(AtLeast, 0.99),
					"cnps":        at(AtMost, 0),
					"Qmax_bytes":  at(AtMost, two),
					"Qpeak_bytes": at(AtMost, two),
				})
			},
		},
		s1b(40*cc.Gbps, "S1b"),
		s1b(25*cc.Gbps, "S1b-25G"),
		incast(2, "S2"),
		incast(8, "S3"),
		incast(16, "S4"),
		joinLeave,
		mixedRTT,
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// Median returns the median of xs (NaN for none); NaNs sort last.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.SortFunc(s, func(a, b float64) int {
		switch {
		case math.IsNaN(a) && math.IsNaN(b):
			return 0
		case math.IsNaN(a):
			return 1
		case math.IsNaN(b):
			return -1
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	})
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
