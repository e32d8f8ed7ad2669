package cc

import (
	"math"
	"time"
)

// Stats counts a [DCQCN]'s events since it was created.
type Stats struct {
	// CNPs is the number of CNPs received (OnCNP calls).
	CNPs uint64
	// Decreases is the number of rate cuts applied. Without a decrease
	// period it equals CNPs; with one, several CNPs may share a cut.
	Decreases uint64
	// MinRateClamps counts cuts that stopped at MinRate.
	MinRateClamps uint64
	// TimerEvents and ByteEvents count rate-increase events fired by the
	// timer T and the byte counter B.
	TimerEvents, ByteEvents uint64
	// FastRecovery, AdditiveIncrease and HyperIncrease count increase
	// steps by stage (doc/dcqcn.md §1.3).
	FastRecovery, AdditiveIncrease, HyperIncrease uint64
}

// DCQCN is the reaction point (RP) of one QP: the sender-side rate control
// of DCQCN (doc/dcqcn.md §1.3; for ProfileM the ConnectX variant of §2 and
// §3.1). It implements [Controller].
//
// State: current rate RC, target rate RT, α, the increase-event counters
// T and BC, and the byte count toward B. Before the first CNP the QP sends
// at InitialRate (line rate by default) and no timer is armed. A CNP arms
// the rate limiter; it is released again, with all timers, once RC and RT
// are both back at the line rate.
//
// α timers are evaluated lazily: α is brought up to date, period by
// period, on each call before the input is applied, so they never appear
// in Deadline. [DCQCN.Alpha] reports α as of the latest call.
//
// Invariants after every call (doc/dcqcn.md §5.3 "all"): MinRate ≤ RC ≤ RT ≤
// LineRate.
type DCQCN struct {
	cfg Config

	rc, rt Bitrate

	alpha   float64 // α in AlphaPaper and AlphaSampled
	alphaFP int64   // α in 1/1024 units in AlphaSampledFixedPoint
	gFP     int64   // G·1024
	keepFP  int64   // 1024 − G·1024

	started   bool      // a CNP has arrived: the α timer runs
	alphaNext time.Time // end of the current α period
	alphaCNP  bool      // sampled modes: a CNP arrived in the current period

	decPending bool      // a CNP awaits the end of its decrease period
	decOrigin  time.Time // first CNP: origin of the decrease-period grid
	decNext    time.Time // end of the decrease period holding the CNP

	active       bool      // rate limiter engaged: increase timer armed
	rateNext     time.Time // next firing of the increase timer T
	tCount       int       // timer events since the last decrease
	bcCount      int       // byte-counter events since the last decrease
	bytes        int64     // bytes sent toward the next byte-counter event
	lastIncTimer bool      // the latest increase since the last decrease was timer-driven

	// wake is the earliest of rateNext, decNext and alphaNext that is in
	// use (wakeOK false: none), so that advance returns at once before it.
	wake   time.Time
	wakeOK bool

	stats Stats
}

// New returns the reaction point for one QP, or an error wrapping
// [ErrInvalidConfig] if cfg does not pass [Config.Validate].
func New(cfg Config) (*DCQCN, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &DCQCN{cfg: cfg}
	d.rc = cfg.InitialRate
	if d.rc == 0 {
		d.rc = cfg.LineRate // doc/dcqcn.md §1.3: no slow start
	}
	d.rt = d.rc
	d.alpha = cfg.InitialAlpha
	d.alphaFP = int64(math.Round(cfg.InitialAlpha * 1024))
	d.gFP = int64(math.Round(cfg.G * 1024))
	d.keepFP = 1024 - d.gFP
	return d, nil
}

// Config returns the parameters d was created with.
func (d *DCQCN) Config() Config { return d.cfg }

// Rate returns the current rate RC.
func (d *DCQCN) Rate() Bitrate { return d.rc }

// TargetRate returns the target rate RT.
func (d *DCQCN) TargetRate() Bitrate { return d.rt }

// Alpha returns α as of the latest call, in [0, 1].
func (d *DCQCN) Alpha() float64 {
	if d.cfg.AlphaMode == AlphaSampledFixedPoint {
		return float64(d.alphaFP) / 1024
	}
	return d.alpha
}

// Stats returns the event counters.
func (d *DCQCN) Stats() Stats { return d.stats }

// Deadline returns the next firing of the increase timer T or the end of
// a decrease period with a CNP pending, whichever is first; false while
// the rate limiter is released and no CNP is pending.
func (d *DCQCN) Deadline() (time.Time, bool) {
	var t time.Time
	ok := false
	if d.active {
		t, ok = d.rateNext, true
	}
	if d.decPending && (!ok || d.decNext.Before(t)) {
		t, ok = d.decNext, true
	}
	return t, ok
}

// OnTimeout runs every timer due at or before now.
func (d *DCQCN) OnTimeout(now time.Time) { d.advance(now) }

// OnPacketSent feeds the byte counter B: every B bytes sent is one
// increase event (doc/dcqcn.md §1.3, BC_count++). Bytes sent while the rate
// limiter is released are not counted, and sizes ≤ 0 are ignored.
func (d *DCQCN) OnPacketSent(now time.Time, bytes int) {
	d.advance(now)
	if !d.active || d.cfg.ByteCounter == 0 || bytes <= 0 {
		return
	}
	d.bytes += int64(bytes)
	for d.active && d.bytes >= d.cfg.ByteCounter {
		d.bytes -= d.cfg.ByteCounter
		d.bcCount++
		d.stats.ByteEvents++
		d.increase(false)
	}
	if !d.active {
		d.rewake() // released by a byte-counter increase
	}
}

// OnCNP reacts to a congestion notification (doc/dcqcn.md §1.3, paper eq. 1):
// without a decrease period, RT = RC, RC = max(MinRate, RC·(1 − α/2)),
// then α = (1 − g)·α + g, the counters reset and the timers restart. With
// a decrease period the cut waits for the end of the current period (§2
// rate_reduce_monitor_period), and in the sampled α modes the CNP only
// marks the current α period.
func (d *DCQCN) OnCNP(now time.Time) {
	d.advance(now)
	d.stats.CNPs++
	if !d.started {
		d.started = true
		d.decOrigin = now
		if d.cfg.AlphaMode != AlphaPaper {
			// HPCC cnp_received_mlx (doc/dcqcn.md §3.1): load α
			// (initial_alpha_value, §2) and start the sampler; this CNP
			// does not count toward the first period.
			d.alpha = d.cfg.InitialAlpha
			d.alphaFP = int64(math.Round(d.cfg.InitialAlpha * 1024))
			d.alphaNext = now.Add(d.cfg.AlphaPeriod)
		}
	} else if d.cfg.AlphaMode != AlphaPaper {
		d.alphaCNP = true
	}

	if d.cfg.DecreasePeriod == 0 {
		d.decrease(now) // eq. 1 cuts with α before its update
	} else if !d.decPending {
		d.decPending = true
		p := d.cfg.DecreasePeriod
		k := now.Sub(d.decOrigin)/p + 1
		d.decNext = d.decOrigin.Add(k * p)
	}

	if d.cfg.AlphaMode == AlphaPaper {
		// eq. 1: α ← (1−g)α + g; eq. 2's K timer restarts.
		d.alpha = (1-d.cfg.G)*d.alpha + d.cfg.G
		d.alphaNext = now.Add(d.cfg.AlphaPeriod)
	}
	d.rewake()
}

// advance runs, in time order, every increase-timer firing and pending
// decrease due at or before now, bringing α up to date before each, and
// finally up to now. At equal times the increase timer fires first, as the
// earlier-scheduled event in HPCC's ns-3 model.
func (d *DCQCN) advance(now time.Time) {
	if !d.wakeOK || now.Before(d.wake) {
		return
	}
	for {
		var at time.Time
		timer, ok := false, false
		if d.active && !d.rateNext.After(now) {
			at, timer, ok = d.rateNext, true, true
		}
		if d.decPending && !d.decNext.After(now) && (!ok || d.decNext.Before(at)) {
			at, timer, ok = d.decNext, false, true
		}
		if !ok {
			break
		}
		d.updateAlpha(at)
		if timer {
			// doc/dcqcn.md §1.3: the timer fires every T, T_count++.
			d.rateNext = d.rateNext.Add(d.cfg.RateTimer)
			d.tCount++
			d.stats.TimerEvents++
			d.increase(true)
		} else {
			d.decPending = false
			d.decrease(at)
		}
	}
	d.updateAlpha(now)
	d.rewake()
}

// rewake recomputes wake after any change to the timers.
func (d *DCQCN) rewake() {
	d.wake, d.wakeOK = d.Deadline()
	if d.started && (!d.wakeOK || d.alphaNext.Before(d.wake)) {
		d.wake, d.wakeOK = d.alphaNext, true
	}
}

// updateAlpha applies every α period that ended at or before t.
func (d *DCQCN) updateAlpha(t time.Time) {
	if !d.started || d.alphaNext.After(t) {
		return
	}
	k := d.cfg.AlphaPeriod
	n := int64(t.Sub(d.alphaNext)/k) + 1 // periods ending in (.., t]
	d.alphaNext = d.alphaNext.Add(time.Duration(n) * k)
	switch d.cfg.AlphaMode {
	case AlphaPaper:
		// eq. 2: α ← (1−g)α for every K without a CNP.
		d.alpha = decay(d.alpha, 1-d.cfg.G, n)
	case AlphaSampled:
		// §3.1 UpdateAlphaMlx: the first period may hold a CNP.
		d.alpha *= 1 - d.cfg.G
		if d.alphaCNP {
			d.alpha += d.cfg.G
			d.alphaCNP = false
		}
		d.alpha = decay(d.alpha, 1-d.cfg.G, n-1)
	case AlphaSampledFixedPoint:
		// §5.4: α_fp ← α_fp·1019/1024 (+5 if a CNP arrived).
		d.alphaFP = d.alphaFP * d.keepFP >> 10
		if d.alphaCNP {
			d.alphaFP += d.gFP
			d.alphaCNP = false
		}
		for i := int64(1); i < n && d.alphaFP > 0; i++ {
			d.alphaFP = d.alphaFP * d.keepFP >> 10
		}
	}
}

// decay returns a·keep^n, multiplying step by step for small n so that
// short gaps give bit-identical results to a per-period timer.
func decay(a, keep float64, n int64) float64 {
	if n <= 64 {
		for ; n > 0; n-- {
			a *= keep
		}
		return a
	}
	return a * math.Pow(keep, float64(n))
}

// decrease cuts the rate (doc/dcqcn.md §1.3 eq. 1; §2 rpg_min_dec_fac,
// rpg_min_rate, clamp_tgt_rate*), resets the increase state and restarts
// the increase timer T at t.
func (d *DCQCN) decrease(t time.Time) {
	factor := 1 - d.Alpha()/2 // rpg_gd = 11: α/2^11 with α in 1/1024
	if f := d.cfg.MinDecreaseFactor; f > 0 && factor < f {
		factor = f
	}
	if d.cfg.Clamp == ClampAlways || d.lastIncTimer {
		d.rt = d.rc
	}
	rc := d.rc * Bitrate(factor)
	if rc < d.cfg.MinRate {
		rc = d.cfg.MinRate // the floor: no CNP flood goes below MinRate
		d.stats.MinRateClamps++
	}
	d.rc = rc
	d.stats.Decreases++

	d.tCount, d.bcCount, d.bytes = 0, 0, 0
	d.lastIncTimer = false
	d.active = true
	d.rateNext = t.Add(d.cfg.RateTimer)
}

// increase performs one rate-increase step (doc/dcqcn.md §1.3; htsim
// DCQCNSrc::increaseRate; HPCC RateIncEventMlx when B is off).
func (d *DCQCN) increase(byTimer bool) {
	f := d.cfg.Threshold
	var hyperSteps int // 0: fast recovery; -1: additive; > 0: hyper
	if d.cfg.ByteCounter > 0 {
		switch {
		case max(d.tCount, d.bcCount) <= f:
			// fast recovery: RT unchanged
		case min(d.tCount, d.bcCount) > f:
			hyperSteps = min(d.tCount, d.bcCount) - f
		default:
			hyperSteps = -1
		}
	} else {
		switch {
		case d.tCount <= f:
		case d.tCount == f+1:
			hyperSteps = -1
		default:
			hyperSteps = d.tCount - f - 1
		}
	}
	switch {
	case hyperSteps == 0:
		d.stats.FastRecovery++
	case hyperSteps < 0:
		d.rt += d.cfg.AI
		d.stats.AdditiveIncrease++
	default:
		if d.cfg.Hyper == HyperFixed {
			hyperSteps = 1
		}
		d.rt += Bitrate(hyperSteps) * d.cfg.HAI
		d.stats.HyperIncrease++
	}
	if d.rt > d.cfg.LineRate {
		d.rt = d.cfg.LineRate
	}
	d.rc = (d.rt + d.rc) / 2
	if d.rc > d.rt {
		d.rc = d.rt // guards against rounding; RC ≤ RT by construction
	}
	d.lastIncTimer = byTimer
	if d.rc == d.cfg.LineRate && d.rt == d.cfg.LineRate {
		// Back at line rate: release the rate limiter (QCN RP; htsim's
		// increaseRate returns early at line rate).
		d.active = false
		d.tCount, d.bcCount, d.bytes = 0, 0, 0
	}
}
