package cc

import (
	"errors"
	"fmt"
	"math"
	"time"
)

//go:generate stringer -type=Profile -trimprefix=Profile -output=profile_string.go
//go:generate stringer -type=AlphaMode -trimprefix=Alpha -output=alphamode_string.go
//go:generate stringer -type=ClampMode -trimprefix=Clamp -output=clampmode_string.go
//go:generate stringer -type=HyperMode -trimprefix=Hyper -output=hypermode_string.go

// ErrInvalidConfig is wrapped by every error that [New], [NewNP] and
// [NewRED] return for a parameter that is NaN, infinite, out of range or
// inconsistent with another one. Test for it with errors.Is.
var ErrInvalidConfig = errors.New("cc: invalid config")

// Profile names one of the parameter sets of doc/dcqcn.md §5.1.
type Profile uint8

const (
	// ProfileP holds the paper's parameters (Zhu et al. 2015; doc/dcqcn.md
	// §1.4, §5.1 "P"), with a 100 Gb/s line rate and a 100 Mb/s floor.
	ProfileP Profile = iota
	// ProfileM is ConnectX-like (doc/dcqcn.md §2 defaults, with the HPCC ns-3
	// settings at 100 Gb/s of §3.1 and §5.1 "M"): fixed-point α sampled
	// every 1 µs with dce_tcp_g = 1019, decreases at most every 4 µs, T =
	// 300 µs, F = 1, no byte counter, 20/200 Mb/s increase steps and a
	// 1 Gb/s floor. Its NP sends a CNP for every CE-marked packet, as
	// HPCC's model does (§3.1, §5.1 "CNP on every CE packet").
	//
	// ConnectX firmware instead limits CNPs with min_time_between_cnps
	// (4 µs, §2). With α sampled every 1 µs that caps α near 1/4 (the
	// share of periods holding a CNP), each cut near 12 %, and in the
	// 16:1 incast of doc/dcqcn.md §5.3 S4 the onset then overflows a 16 MB
	// buffer; set NPConfig.Interval to 4 µs to study that.
	ProfileM
)

// ParseProfile returns the profile named "P" or "M" (case-insensitive).
func ParseProfile(s string) (Profile, error) {
	switch s {
	case "P", "p":
		return ProfileP, nil
	case "M", "m":
		return ProfileM, nil
	}
	return 0, fmt.Errorf("%w: unknown profile %q (want P or M)", ErrInvalidConfig, s)
}

// AlphaMode selects how the reaction point maintains α.
type AlphaMode uint8

const (
	// AlphaPaper follows the paper: α ← (1−g)·α + g on each CNP (eq. 1) and
	// α ← (1−g)·α after every AlphaPeriod (K) without a CNP (eq. 2), the
	// period restarting at each CNP (doc/dcqcn.md §1.3).
	AlphaPaper AlphaMode = iota
	// AlphaSampled is the ConnectX/HPCC sampler (doc/dcqcn.md §2 dce_tcp_rtt,
	// §3.1 UpdateAlphaMlx): from the first CNP on, at the end of every
	// AlphaPeriod α ← (1−g)·α + g if a CNP arrived during that period, else
	// α ← (1−g)·α. The first CNP loads InitialAlpha and does not count.
	AlphaSampled
	// AlphaSampledFixedPoint is AlphaSampled in the firmware's 10-bit fixed
	// point (doc/dcqcn.md §2 dce_tcp_g, initial_alpha_value; §5.4 "Mellanox
	// fixed point"): α is an integer count of 1/1024, updated as
	// α ← ⌊α·(1024−G·1024)/1024⌋ (+ G·1024 if a CNP arrived).
	AlphaSampledFixedPoint
)

// ClampMode selects when a rate decrease first sets the target rate RT to
// the current rate RC.
type ClampMode uint8

const (
	// ClampAlways sets RT = RC on every decrease: paper eq. 1,
	// clamp_tgt_rate = 1 (doc/dcqcn.md §1.3, §2).
	ClampAlways ClampMode = iota
	// ClampAfterTimerIncrease sets RT = RC only if the latest rate increase
	// since the previous decrease was timer-driven, so that back-to-back
	// decreases keep the pre-congestion RT: clamp_tgt_rate = 0 with
	// clamp_tgt_rate_after_time_inc = 1 (doc/dcqcn.md §2; HPCC
	// CheckRateDecreaseMlx, §3.1).
	ClampAfterTimerIncrease
)

// HyperMode selects the size of a hyper-increase step.
type HyperMode uint8

const (
	// HyperScaled adds i·R_HAI to RT, i = min(T, BC) − F (doc/dcqcn.md §1.3,
	// QCN; htsim DCQCNSrc::increaseRate).
	HyperScaled HyperMode = iota
	// HyperFixed adds R_HAI to RT on every hyper step (HPCC
	// HyperIncreaseMlx, doc/dcqcn.md §3.1), so RT grows linearly.
	HyperFixed
)

// Config holds the reaction-point parameters of one QP's [DCQCN]. Start
// from [Profile.Config] and override fields; [New] validates the result.
// Names in parentheses are the ConnectX sysfs/mlxconfig names (doc/dcqcn.md §2).
type Config struct {
	// LineRate caps RC and RT (doc/dcqcn.md §1.3 "RC, RT capped at line
	// rate"; rpg_max_rate 0 = line rate). Must be positive and finite.
	LineRate Bitrate
	// MinRate is the floor no decrease goes below, however many CNPs
	// arrive (rpg_min_rate; §5.1 P: 100 Mb/s, M: 1 Gb/s). Must be positive
	// and at most LineRate.
	MinRate Bitrate
	// InitialRate is RC = RT before the first CNP; 0 means LineRate, the
	// paper's behaviour (doc/dcqcn.md §1.3 "No slow start"). Otherwise within
	// [MinRate, LineRate].
	InitialRate Bitrate

	// AlphaMode selects how α evolves; see the constants.
	AlphaMode AlphaMode
	// G is the α gain g in (0, 1) (§1.4: 1/256; ConnectX dce_tcp_g = 1019
	// means g = 5/1024). With AlphaSampledFixedPoint, G·1024 must be an
	// integer.
	G float64
	// InitialAlpha is α until the first CNP, or in sampled modes the
	// value loaded at the first CNP (§1.3 recommends 1;
	// initial_alpha_value 1023 means 1023/1024). In (0, 1]; a multiple of
	// 1/1024 with AlphaSampledFixedPoint.
	InitialAlpha float64
	// AlphaPeriod is K, the α update period (§1.4: 55 µs; dce_tcp_rtt
	// 1 µs). Must be positive; the paper requires K > N, the NP interval.
	AlphaPeriod time.Duration

	// DecreasePeriod is 0 to cut the rate at every CNP, as in the paper;
	// otherwise CNPs are collected and at most one decrease happens at the
	// end of each period, counted from the first CNP
	// (rate_reduce_monitor_period, 4 µs). Not negative.
	DecreasePeriod time.Duration
	// MinDecreaseFactor bounds one decrease: RC never drops below this
	// fraction of its previous value (rpg_min_dec_fac 50 % = 0.5). 0 means
	// no bound; otherwise in (0, 1).
	MinDecreaseFactor float64
	// Clamp selects when a decrease sets RT = RC.
	Clamp ClampMode

	// RateTimer is T, the rate-increase timer, restarted at each decrease
	// (§1.4: 55 µs; rpg_time_reset 300 µs). Must be positive.
	RateTimer time.Duration
	// ByteCounter is B in bytes: one increase event per B bytes sent
	// (§1.4: 10 MB; rpg_byte_reset). 0 disables the byte counter; the
	// increase stage then follows the timer alone, as in ConnectX and HPCC
	// RateIncEventMlx (§3.1): T ≤ F fast recovery, T = F+1 additive,
	// beyond that hyper. Not negative.
	ByteCounter int64
	// Threshold is F, the number of fast-recovery steps (§1.4: 5;
	// rpg_threshold 1). At least 1.
	Threshold int
	// AI is R_AI, the additive-increase step (§1.4: 40 Mb/s). Positive and
	// at most LineRate.
	AI Bitrate
	// HAI is R_HAI, the hyper-increase step (§1.4: 200 Mb/s, ns3-rdma). At
	// least AI and at most LineRate.
	HAI Bitrate
	// Hyper selects the hyper-increase step size.
	Hyper HyperMode
}

// NPConfig holds the notification-point parameters.
type NPConfig struct {
	// Interval is N, the minimum time between two CNPs for one QP
	// (doc/dcqcn.md §1.2: 50 µs; ConnectX min_time_between_cnps 4 µs). 0
	// sends a CNP for every CE-marked data packet. Not negative.
	Interval time.Duration
}

// REDConfig holds the congestion point's marking curve (doc/dcqcn.md §1.1).
// Queue lengths are in bytes.
type REDConfig struct {
	// Kmin is the queue length at or below which nothing is marked.
	Kmin int
	// Kmax is the queue length above which everything is marked; at least
	// Kmin. Kmin = Kmax gives DCTCP-style step marking.
	Kmax int
	// Pmax is the marking probability at Kmax, in (0, 1].
	Pmax float64
}

// Config returns the reaction-point parameters of p at a 100 Gb/s line
// rate (doc/dcqcn.md §5.1). An unknown profile yields the zero Config, which
// [New] rejects.
func (p Profile) Config() Config {
	switch p {
	case ProfileP:
		// doc/dcqcn.md §1.4 and §5.1 P.
		return Config{
			LineRate:     100 * Gbps,
			MinRate:      100 * Mbps,
			AlphaMode:    AlphaPaper,
			G:            1.0 / 256,
			InitialAlpha: 1,
			AlphaPeriod:  55 * time.Microsecond,
			Clamp:        ClampAlways,
			RateTimer:    55 * time.Microsecond,
			ByteCounter:  10_000_000,
			Threshold:    5,
			AI:           40 * Mbps,
			HAI:          200 * Mbps,
			Hyper:        HyperScaled,
		}
	case ProfileM:
		// doc/dcqcn.md §2 (dce_tcp_g 1019, dce_tcp_rtt 1 µs,
		// initial_alpha_value 1023, rate_reduce_monitor_period 4 µs,
		// rpg_min_dec_fac 50, clamp_tgt_rate_ati 1, rpg_time_reset 300 µs,
		// rpg_threshold 1) with §5.1 M rates (HPCC run.py at 100 G).
		return Config{
			LineRate:          100 * Gbps,
			MinRate:           1 * Gbps,
			AlphaMode:         AlphaSampledFixedPoint,
			G:                 5.0 / 1024,
			InitialAlpha:      1023.0 / 1024,
			AlphaPeriod:       1 * time.Microsecond,
			DecreasePeriod:    4 * time.Microsecond,
			MinDecreaseFactor: 0.5,
			Clamp:             ClampAfterTimerIncrease,
			RateTimer:         300 * time.Microsecond,
			ByteCounter:       0,
			Threshold:         1,
			AI:                20 * Mbps,
			HAI:               200 * Mbps,
			Hyper:             HyperFixed,
		}
	}
	return Config{}
}

// NPConfig returns the notification-point parameters of p: N = 50 µs for
// P (doc/dcqcn.md §1.2); for M a CNP per CE-marked packet, as in HPCC's
// ConnectX model (§3.1; see [ProfileM]).
func (p Profile) NPConfig() NPConfig {
	switch p {
	case ProfileP:
		return NPConfig{Interval: 50 * time.Microsecond}
	case ProfileM:
		return NPConfig{Interval: 0}
	}
	return NPConfig{Interval: -1}
}

// REDConfig returns the switch marking curve of p (1 KB = 1000 B): 5 KB,
// 200 KB, 1 % for P (doc/dcqcn.md §1.4); 400 KB, 1600 KB, 20 % for M (§3.1 at
// 100 G).
func (p Profile) REDConfig() REDConfig {
	switch p {
	case ProfileP:
		return REDConfig{Kmin: 5_000, Kmax: 200_000, Pmax: 0.01}
	case ProfileM:
		return REDConfig{Kmin: 400_000, Kmax: 1_600_000, Pmax: 0.2}
	}
	return REDConfig{}
}

// validator collects every problem of a config, each wrapping
// ErrInvalidConfig.
type validator struct{ errs []error }

func (v *validator) failf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
}

func (v *validator) err() error { return errors.Join(v.errs...) }

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func (v *validator) positiveRate(name string, r Bitrate) bool {
	if !finite(float64(r)) || r <= 0 {
		v.failf("%s = %v, want a positive finite rate", name, float64(r))
		return false
	}
	return true
}

// isMultiple1024 reports whether f·1024 is an integer.
func isMultiple1024(f float64) bool {
	x := f * 1024
	return x == math.Trunc(x)
}

// Validate reports every problem of c as one error (errors.Join), each
// wrapping [ErrInvalidConfig]; nil means New accepts c.
func (c Config) Validate() error {
	var v validator
	lineOK := v.positiveRate("LineRate", c.LineRate)
	minOK := v.positiveRate("MinRate", c.MinRate)
	if lineOK && minOK && c.MinRate > c.LineRate {
		v.failf("MinRate %v exceeds LineRate %v", c.MinRate, c.LineRate)
	}
	switch {
	case !finite(float64(c.InitialRate)) || c.InitialRate < 0:
		v.failf("InitialRate = %v, want 0 (line rate) or a positive finite rate", float64(c.InitialRate))
	case c.InitialRate != 0 && lineOK && minOK && (c.InitialRate < c.MinRate || c.InitialRate > c.LineRate):
		v.failf("InitialRate %v outside [MinRate %v, LineRate %v]", c.InitialRate, c.MinRate, c.LineRate)
	}

	if c.AlphaMode > AlphaSampledFixedPoint {
		v.failf("unknown AlphaMode %d", c.AlphaMode)
	}
	if !finite(c.G) || c.G <= 0 || c.G >= 1 {
		v.failf("G = %v, want 0 < g < 1", c.G)
	} else if c.AlphaMode == AlphaSampledFixedPoint && !isMultiple1024(c.G) {
		v.failf("G = %v is not a multiple of 1/1024, as AlphaSampledFixedPoint needs", c.G)
	}
	if !finite(c.InitialAlpha) || c.InitialAlpha <= 0 || c.InitialAlpha > 1 {
		v.failf("InitialAlpha = %v, want 0 < α0 ≤ 1", c.InitialAlpha)
	} else if c.AlphaMode == AlphaSampledFixedPoint && !isMultiple1024(c.InitialAlpha) {
		v.failf("InitialAlpha = %v is not a multiple of 1/1024, as AlphaSampledFixedPoint needs", c.InitialAlpha)
	}
	if c.AlphaPeriod <= 0 {
		v.failf("AlphaPeriod (K) = %v, want > 0", c.AlphaPeriod)
	}

	if c.DecreasePeriod < 0 {
		v.failf("DecreasePeriod = %v, want ≥ 0", c.DecreasePeriod)
	}
	if !finite(c.MinDecreaseFactor) || c.MinDecreaseFactor < 0 || c.MinDecreaseFactor >= 1 {
		v.failf("MinDecreaseFactor = %v, want 0 (none) or in (0, 1)", c.MinDecreaseFactor)
	}
	if c.Clamp > ClampAfterTimerIncrease {
		v.failf("unknown Clamp %d", c.Clamp)
	}

	if c.RateTimer <= 0 {
		v.failf("RateTimer (T) = %v, want > 0", c.RateTimer)
	}
	if c.ByteCounter < 0 {
		v.failf("ByteCounter (B) = %d, want 0 (off) or > 0", c.ByteCounter)
	}
	if c.Threshold < 1 {
		v.failf("Threshold (F) = %d, want ≥ 1", c.Threshold)
	}
	aiOK := v.positiveRate("AI", c.AI)
	haiOK := v.positiveRate("HAI", c.HAI)
	if aiOK && haiOK && c.HAI < c.AI {
		v.failf("HAI %v below AI %v", c.HAI, c.AI)
	}
	if haiOK && lineOK && c.HAI > c.LineRate {
		v.failf("HAI %v exceeds LineRate %v", c.HAI, c.LineRate)
	}
	if c.Hyper > HyperFixed {
		v.failf("unknown Hyper %d", c.Hyper)
	}
	return v.err()
}

// Validate reports whether c is usable, as an error wrapping
// [ErrInvalidConfig].
func (c NPConfig) Validate() error {
	if c.Interval < 0 {
		return fmt.Errorf("%w: NP Interval (N) = %v, want ≥ 0", ErrInvalidConfig, c.Interval)
	}
	return nil
}

// Validate reports every problem of c as one error, each wrapping
// [ErrInvalidConfig].
func (c REDConfig) Validate() error {
	var v validator
	if c.Kmin < 0 {
		v.failf("Kmin = %d B, want ≥ 0", c.Kmin)
	}
	if c.Kmax < c.Kmin {
		v.failf("Kmax = %d B below Kmin = %d B", c.Kmax, c.Kmin)
	}
	if !finite(c.Pmax) || c.Pmax <= 0 || c.Pmax > 1 {
		v.failf("Pmax = %v, want 0 < Pmax ≤ 1", c.Pmax)
	}
	return v.err()
}
