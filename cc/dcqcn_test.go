package cc_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
)

// t0 is the virtual start time of every test.
var t0 = time.Unix(1_700_000_000, 0)

func us(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Microsecond))) }

func newP(t testing.TB, edit func(*cc.Config)) *cc.DCQCN {
	t.Helper()
	cfg := cc.ProfileP.Config()
	if edit != nil {
		edit(&cfg)
	}
	d, err := cc.New(cfg)
	require.NoError(t, err)
	return d
}

// TestU1_FirstCNP: doc/dcqcn.md §5.4 U1 — RC = RT = 100 Gb/s, α = 1, one CNP
// → RC = 50 Gb/s, RT = 100 Gb/s, α = (1−g)·1 + g = 1 exactly (eq. 1).
func TestU1_FirstCNP(t *testing.T) {
	d := newP(t, nil)
	_, armed := d.Deadline()
	require.False(t, armed, "no timer before the first CNP")
	require.Equal(t, 100*cc.Gbps, d.Rate())

	d.OnCNP(t0)
	assert.Equal(t, 50*cc.Gbps, d.Rate())
	assert.Equal(t, 100*cc.Gbps, d.TargetRate())
	assert.Equal(t, 1.0, d.Alpha())
	dl, armed := d.Deadline()
	require.True(t, armed)
	assert.Equal(t, us(55), dl, "rate timer T restarts at the CNP")
}

// TestU2_FastRecovery: §5.4 U2 — five timer events after the CNP, no CNP:
// RC = (RT+RC)/2 each time → 100 − 50/2⁵ = 98.4375 Gb/s; RT unchanged.
func TestU2_FastRecovery(t *testing.T) {
	d := newP(t, nil)
	d.OnCNP(t0)
	want := []float64{75, 87.5, 93.75, 96.875, 98.4375}
	for i, w := range want {
		dl, ok := d.Deadline()
		require.True(t, ok)
		require.Equal(t, us(55*float64(i+1)), dl)
		d.OnTimeout(dl)
		assert.Equal(t, cc.Bitrate(w)*cc.Gbps, d.Rate(), "after timer event %d", i+1)
		assert.Equal(t, 100*cc.Gbps, d.TargetRate())
	}
	assert.Equal(t, uint64(5), d.Stats().FastRecovery)

	// One late OnTimeout runs the same five events in order.
	d2 := newP(t, nil)
	d2.OnCNP(t0)
	d2.OnTimeout(us(5 * 55))
	assert.Equal(t, 98.4375*cc.Gbps, d2.Rate())
}

// TestU3_AdditiveIncrease: §5.4 U3 — the 6th timer event leaves fast
// recovery: RT = min(line, RT + R_AI), RC = (RT+RC)/2.
func TestU3_AdditiveIncrease(t *testing.T) {
	t.Run("RT at line rate", func(t *testing.T) {
		d := newP(t, nil)
		d.OnCNP(t0)
		d.OnTimeout(us(6 * 55))
		assert.Equal(t, 100*cc.Gbps, d.TargetRate(), "RT capped at line rate")
		assert.Equal(t, 99.21875*cc.Gbps, d.Rate())
		assert.Equal(t, uint64(1), d.Stats().AdditiveIncrease)
	})
	t.Run("RT 60G", func(t *testing.T) {
		d := newP(t, func(c *cc.Config) { c.InitialRate = 60 * cc.Gbps })
		d.OnCNP(t0)
		require.Equal(t, 60*cc.Gbps, d.TargetRate())
		d.OnTimeout(us(5 * 55))
		require.Equal(t, 60*cc.Gbps, d.TargetRate(), "fast recovery keeps RT")
		d.OnTimeout(us(6 * 55))
		assert.Equal(t, 60.04*cc.Gbps, d.TargetRate())
		assert.Equal(t, (60.04*cc.Gbps+(60*cc.Gbps-30*cc.Gbps/32))/2, d.Rate())
	})
}

// TestU4_AlphaDecay: §5.4 U4 — no CNP for 10·K = 550 µs → α = (255/256)¹⁰
// = 0.96165 (eq. 2); time constant 256·55 µs ≈ 14.1 ms.
func TestU4_AlphaDecay(t *testing.T) {
	d := newP(t, nil)
	d.OnCNP(t0)
	require.Equal(t, 1.0, d.Alpha())
	d.OnTimeout(us(549.999))
	assert.InDelta(t, math.Pow(255.0/256, 9), d.Alpha(), 1e-12, "nine periods before 550 µs")
	d.OnTimeout(us(550))
	assert.InDelta(t, math.Pow(255.0/256, 10), d.Alpha(), 1e-12)
	// doc/dcqcn.md §5.4: (255/256)¹⁰ is 0.961617 (the research note behind
	// it printed 0.96165, a rounding slip), which is what eq. 2 gives.
	assert.InDelta(t, 0.961617, d.Alpha(), 5e-7)

	d.OnTimeout(us(256 * 55))
	assert.InDelta(t, math.Pow(255.0/256, 256), d.Alpha(), 1e-12)
	assert.InDelta(t, 1/math.E, d.Alpha(), 0.001, "≈ e⁻¹ after one time constant")
}

// TestU5_SecondCNP: §5.4 U5 — a CNP at α = 0.5 cuts RC by 1 − α/2 = 0.75.
func TestU5_SecondCNP(t *testing.T) {
	// α0 = 127/255 gives α = (1−g)α0 + g = 0.5 after the first CNP.
	d := newP(t, func(c *cc.Config) { c.InitialAlpha = 127.0 / 255 })
	d.OnCNP(t0)
	require.InDelta(t, 0.5, d.Alpha(), 1e-15)
	before := d.Rate()
	alpha := d.Alpha()
	d.OnCNP(us(50)) // before the K timer (55 µs) decays α
	assert.InEpsilon(t, float64(before)*0.75, float64(d.Rate()), 1e-12)
	assert.Equal(t, before*cc.Bitrate(1-alpha/2), d.Rate())
	assert.Equal(t, before, d.TargetRate(), "RT = RC before the cut")
	assert.InDelta(t, (255.0/256)*alpha+1.0/256, d.Alpha(), 1e-15)
}

// TestU6_HyperIncrease: §5.4 U6 — with T_count = 8 and BC_count = 7
// (F = 5) the step is hyper with i = min(T, BC) − F = 2: RT += 2·R_HAI.
func TestU6_HyperIncrease(t *testing.T) {
	for _, timerLast := range []bool{false, true} {
		name := map[bool]string{false: "byte counter reaches 7", true: "timer reaches 8"}[timerLast]
		t.Run(name, func(t *testing.T) {
			d := newP(t, func(c *cc.Config) { c.InitialRate = 40 * cc.Gbps })
			d.OnCNP(t0)
			b := int(d.Config().ByteCounter)
			var last time.Time
			if timerLast {
				d.OnTimeout(us(7 * 55)) // T = 7
				for range 7 {
					d.OnPacketSent(us(7*55+1), b) // BC → 7
				}
				last = us(8 * 55)
			} else {
				d.OnTimeout(us(8 * 55)) // T = 8
				for range 6 {
					d.OnPacketSent(us(8*55+1), b) // BC → 6
				}
				last = us(8*55 + 2)
			}
			rt := d.TargetRate()
			if timerLast {
				d.OnTimeout(last)
			} else {
				d.OnPacketSent(last, b)
			}
			assert.Equal(t, rt+2*d.Config().HAI, d.TargetRate(), "RT += 2·R_HAI")
			s := d.Stats()
			assert.Equal(t, uint64(8), s.TimerEvents)
			assert.Equal(t, uint64(7), s.ByteEvents)
			assert.Equal(t, uint64(5), s.FastRecovery)
			// Byte counter last: (8,6) i = 1, (8,7) i = 2. Timer last:
			// (7,6) i = 1, (7,7) i = 2, (8,7) i = 2.
			assert.Equal(t, map[bool]uint64{false: 2, true: 3}[timerLast], s.HyperIncrease)
		})
	}
}

// TestU7_FloorAndCap: §5.4 U7 — RC never drops below MinRate whatever the
// CNP flood, and never exceeds the line rate; the limiter is released at
// line rate.
func TestU7_FloorAndCap(t *testing.T) {
	for _, p := range []cc.Profile{cc.ProfileP, cc.ProfileM} {
		t.Run(p.String(), func(t *testing.T) {
			cfg := p.Config()
			d, err := cc.New(cfg)
			require.NoError(t, err)
			now := t0
			for i := range 100_000 {
				if i%1000 == 0 {
					now = now.Add(time.Microsecond) // bursts of 1000 CNPs at one instant
				}
				d.OnCNP(now)
				if d.Rate() < cfg.MinRate || d.Rate() > d.TargetRate() {
					t.Fatalf("CNP %d: RC %v below MinRate %v or above RT %v", i, d.Rate(), cfg.MinRate, d.TargetRate())
				}
			}
			d.OnTimeout(now.Add(10 * time.Microsecond))
			assert.Equal(t, cfg.MinRate, d.Rate(), "flood ends exactly at the floor")
			assert.Positive(t, d.Stats().MinRateClamps)

			// No more CNPs: climb back and release at the line rate.
			for i := 0; ; i++ {
				dl, ok := d.Deadline()
				if !ok {
					break
				}
				if i == 1_000_000 {
					t.Fatal("never released")
				}
				d.OnTimeout(dl)
				if d.Rate() > d.TargetRate() || d.TargetRate() > cfg.LineRate {
					t.Fatalf("step %d: RC %v ≤ RT %v ≤ line %v violated", i, d.Rate(), d.TargetRate(), cfg.LineRate)
				}
			}
			assert.Equal(t, cfg.LineRate, d.Rate())
			assert.Equal(t, cfg.LineRate, d.TargetRate())
		})
	}
}

// TestM_FixedPointAlpha: doc/dcqcn.md §5.4 "Mellanox fixed point" and §2 —
// α_fp = 1023 at the first CNP, α_fp ← ⌊α_fp·1019/1024⌋ (+5 with a CNP)
// every 1 µs, the cut RC·(1 − α_fp/2¹¹) at the end of the 4 µs monitor
// period, RT kept unless the last increase was timer-driven.
func TestM_FixedPointAlpha(t *testing.T) {
	d, err := cc.New(cc.ProfileM.Config())
	require.NoError(t, err)

	d.OnCNP(t0)
	assert.Equal(t, 1023.0/1024, d.Alpha(), "initial_alpha_value")
	assert.Equal(t, 100*cc.Gbps, d.Rate(), "rate_to_set_on_first_cnp 0: no immediate cut")
	dl, ok := d.Deadline()
	require.True(t, ok)
	require.Equal(t, us(4), dl, "decrease at the end of the 4 µs period")

	d.OnTimeout(us(4))
	// 1023 → 1018 → 1013 → 1008 → 1003 over four 1-µs periods without CNP.
	assert.Equal(t, 1003.0/1024, d.Alpha())
	rc1 := 100 * cc.Gbps * (1 - 1003.0/2048)
	assert.Equal(t, rc1, d.Rate())
	assert.Equal(t, 100*cc.Gbps, d.TargetRate(), "no increase since the last cut: RT kept")

	d.OnCNP(us(4.5)) // counts for the α period (4, 5] and the decrease period (4, 8]
	d.OnTimeout(us(5))
	assert.Equal(t, 1003.0/1024, d.Alpha(), "⌊1003·1019/1024⌋ + 5 = 998 + 5")
	assert.Equal(t, rc1, d.Rate(), "cut waits for the period end")
	d.OnTimeout(us(8))
	assert.Equal(t, 988.0/1024, d.Alpha(), "1003 → 998 → 993 → 988")
	rc2 := rc1 * (1 - 988.0/2048)
	assert.Equal(t, rc2, d.Rate())
	assert.Equal(t, 100*cc.Gbps, d.TargetRate(), "back-to-back cuts keep RT (clamp_tgt_rate 0)")
	assert.Equal(t, uint64(2), d.Stats().Decreases)

	// A flood of CNPs within one period is one cut.
	for i := range 50 {
		d.OnCNP(us(8.01 + float64(i)*0.05))
	}
	d.OnTimeout(us(12))
	assert.Equal(t, uint64(3), d.Stats().Decreases)

	// Timer increases: T = 300 µs after the last cut, F = 1.
	rc3 := d.Rate()
	d.OnTimeout(us(12 + 300))
	assert.Equal(t, (100*cc.Gbps+rc3)/2, d.Rate(), "fast recovery")
	d.OnTimeout(us(12 + 600))
	assert.Equal(t, 100*cc.Gbps, d.TargetRate(), "additive step capped at line")
	// The latest increase was timer-driven: the next cut clamps RT = RC.
	rcBefore := d.Rate()
	d.OnCNP(us(613))
	d.OnTimeout(us(616))
	assert.Equal(t, rcBefore, d.TargetRate(), "clamp_tgt_rate_after_time_inc")

	// α reaches 0 when CNPs stop, and stays there.
	d.OnTimeout(us(10_000))
	assert.Equal(t, 0.0, d.Alpha())
}

// TestM_LinearHyperIncrease checks ProfileM's timer-only staging (HPCC
// RateIncEventMlx, doc/dcqcn.md §3.1): fast recovery, one additive step, then
// a constant R_HAI per T.
func TestM_LinearHyperIncrease(t *testing.T) {
	cfg := cc.ProfileM.Config()
	cfg.InitialRate = 10 * cc.Gbps
	d, err := cc.New(cfg)
	require.NoError(t, err)
	d.OnCNP(t0)
	d.OnTimeout(us(4)) // cut
	require.Equal(t, 10*cc.Gbps, d.TargetRate())
	d.OnTimeout(us(4 + 300)) // FR
	assert.Equal(t, 10*cc.Gbps, d.TargetRate())
	d.OnTimeout(us(4 + 600)) // AI
	assert.Equal(t, 10*cc.Gbps+20*cc.Mbps, d.TargetRate())
	for i := 1; i <= 5; i++ {
		d.OnTimeout(us(4 + 300*float64(i+2)))
		assert.InDelta(t, float64(10*cc.Gbps+20*cc.Mbps+cc.Bitrate(i)*200*cc.Mbps), float64(d.TargetRate()), 1e-3)
	}
}

func TestMinDecreaseFactor(t *testing.T) {
	d := newP(t, func(c *cc.Config) { c.MinDecreaseFactor = 0.6 })
	d.OnCNP(t0) // α = 1 would halve; rpg_min_dec_fac bounds the cut
	assert.Equal(t, 60*cc.Gbps, d.Rate())
}

func TestClampAfterTimerIncreaseByteEvents(t *testing.T) {
	// A byte-counter increase is not timer-driven: RT survives the next cut.
	d := newP(t, func(c *cc.Config) { c.Clamp = cc.ClampAfterTimerIncrease; c.ByteCounter = 1000 })
	d.OnCNP(t0)
	d.OnPacketSent(us(1), 1000)
	rc := d.Rate()
	d.OnCNP(us(2))
	assert.Equal(t, 100*cc.Gbps, d.TargetRate())
	assert.Less(t, d.Rate(), rc)
	d.OnTimeout(us(2 + 55))
	rc = d.Rate()
	d.OnCNP(us(60))
	assert.Equal(t, rc, d.TargetRate(), "timer-driven increase: clamp")
}

// TestInvariantsRandom drives both profiles with random inputs and checks
// doc/dcqcn.md §5.3 "all": MinRate ≤ RC ≤ RT ≤ line after every call, α in
// [0, 1], and deadlines never in the past.
func TestInvariantsRandom(t *testing.T) {
	for _, p := range []cc.Profile{cc.ProfileP, cc.ProfileM} {
		t.Run(p.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(p)))
			cfg := p.Config()
			cfg.ByteCounter = map[cc.Profile]int64{cc.ProfileP: 64 << 10, cc.ProfileM: 0}[p]
			d, err := cc.New(cfg)
			require.NoError(t, err)
			now := t0
			for i := range 200_000 {
				now = now.Add(time.Duration(rng.ExpFloat64() * float64(2*time.Microsecond)))
				congested := now.Sub(t0)/(5*time.Millisecond)%2 == 0
				switch r := rng.IntN(100); {
				case r < 5 && congested:
					d.OnCNP(now)
				case r < 60:
					d.OnPacketSent(now, 1024)
				default:
					if dl, ok := d.Deadline(); ok && !dl.After(now) {
						d.OnTimeout(now)
					}
				}
				if dl, ok := d.Deadline(); ok && !dl.After(now) {
					t.Fatalf("step %d: deadline %v not after now %v", i, dl.Sub(t0), now.Sub(t0))
				}
				if rc, rt := d.Rate(), d.TargetRate(); rc < cfg.MinRate || rc > rt || rt > cfg.LineRate {
					t.Fatalf("step %d: MinRate %v ≤ RC %v ≤ RT %v ≤ line %v violated", i, cfg.MinRate, rc, rt, cfg.LineRate)
				}
				if a := d.Alpha(); a < 0 || a > 1 {
					t.Fatalf("step %d: α = %v", i, a)
				}
			}
			s := d.Stats()
			assert.Positive(t, s.Decreases)
			assert.Positive(t, s.FastRecovery)
			assert.Positive(t, s.AdditiveIncrease)
			assert.Positive(t, s.HyperIncrease)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*cc.Config)
	}{
		{"NaN line rate", func(c *cc.Config) { c.LineRate = cc.Bitrate(math.NaN()) }},
		{"zero line rate", func(c *cc.Config) { c.LineRate = 0 }},
		{"infinite line rate", func(c *cc.Config) { c.LineRate = cc.Bitrate(math.Inf(1)) }},
		{"zero min rate", func(c *cc.Config) { c.MinRate = 0 }},
		{"negative min rate", func(c *cc.Config) { c.MinRate = -1 }},
		{"min above line", func(c *cc.Config) { c.MinRate = 200 * cc.Gbps }},
		{"initial below min", func(c *cc.Config) { c.InitialRate = 1 * cc.Mbps }},
		{"initial above line", func(c *cc.Config) { c.InitialRate = 101 * cc.Gbps }},
		{"NaN initial", func(c *cc.Config) { c.InitialRate = cc.Bitrate(math.NaN()) }},
		{"zero g", func(c *cc.Config) { c.G = 0 }},
		{"g one", func(c *cc.Config) { c.G = 1 }},
		{"NaN g", func(c *cc.Config) { c.G = math.NaN() }},
		{"zero alpha0", func(c *cc.Config) { c.InitialAlpha = 0 }},
		{"alpha0 above one", func(c *cc.Config) { c.InitialAlpha = 1.5 }},
		{"fixed point g", func(c *cc.Config) { c.AlphaMode = cc.AlphaSampledFixedPoint }}, // g = 1/256 = 4/1024 is fine, so break α0:
		{"zero K", func(c *cc.Config) { c.AlphaPeriod = 0 }},
		{"negative decrease period", func(c *cc.Config) { c.DecreasePeriod = -time.Microsecond }},
		{"min dec factor one", func(c *cc.Config) { c.MinDecreaseFactor = 1 }},
		{"NaN min dec factor", func(c *cc.Config) { c.MinDecreaseFactor = math.NaN() }},
		{"zero T", func(c *cc.Config) { c.RateTimer = 0 }},
		{"negative B", func(c *cc.Config) { c.ByteCounter = -1 }},
		{"zero F", func(c *cc.Config) { c.Threshold = 0 }},
		{"zero AI", func(c *cc.Config) { c.AI = 0 }},
		{"HAI below AI", func(c *cc.Config) { c.HAI = 10 * cc.Mbps }},
		{"HAI above line", func(c *cc.Config) { c.AI = 1 * cc.Gbps; c.HAI = 200 * cc.Gbps }},
		{"unknown alpha mode", func(c *cc.Config) { c.AlphaMode = 9 }},
		{"unknown clamp", func(c *cc.Config) { c.Clamp = 9 }},
		{"unknown hyper", func(c *cc.Config) { c.Hyper = 9 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cc.ProfileP.Config()
			tc.edit(&cfg)
			if tc.name == "fixed point g" {
				cfg.InitialAlpha = 0.3 // not a multiple of 1/1024
			}
			d, err := cc.New(cfg)
			assert.Nil(t, d)
			require.ErrorIs(t, err, cc.ErrInvalidConfig)
			t.Log(err)
		})
	}
	t.Run("all problems reported", func(t *testing.T) {
		err := cc.Config{}.Validate()
		require.ErrorIs(t, err, cc.ErrInvalidConfig)
		assert.Contains(t, err.Error(), "LineRate")
		assert.Contains(t, err.Error(), "Threshold")
	})
	t.Run("profiles valid", func(t *testing.T) {
		for _, p := range []cc.Profile{cc.ProfileP, cc.ProfileM} {
			require.NoError(t, p.Config().Validate(), p)
			require.NoError(t, p.NPConfig().Validate(), p)
			require.NoError(t, p.REDConfig().Validate(), p)
		}
		require.Error(t, cc.Profile(7).Config().Validate())
		require.Error(t, cc.Profile(7).NPConfig().Validate())
		require.Error(t, cc.Profile(7).REDConfig().Validate())
	})
	t.Run("parse profile", func(t *testing.T) {
		p, err := cc.ParseProfile("m")
		require.NoError(t, err)
		assert.Equal(t, cc.ProfileM, p)
		_, err = cc.ParseProfile("X")
		require.ErrorIs(t, err, cc.ErrInvalidConfig)
	})
}

func TestBitrate(t *testing.T) {
	assert.Equal(t, "98.4375 Gb/s", (98.4375 * cc.Gbps).String())
	assert.Equal(t, "40 Mb/s", (40 * cc.Mbps).String())
	assert.Equal(t, "1.5 kb/s", (1.5 * cc.Kbps).String())
	assert.Equal(t, "0 b/s", cc.Bitrate(0).String())
	assert.Equal(t, 81*time.Nanosecond, (100 * cc.Gbps).TxTime(1024), "81.92 ns truncated")
	assert.Equal(t, 204*time.Nanosecond, (40 * cc.Gbps).TxTime(1024))
}

// TestZeroAllocs pins the reaction point's hot paths at 0 allocations
// (no garbage on the data path: a collection mid-run is a latency tail).
func TestZeroAllocs(t *testing.T) {
	d := newP(t, nil)
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Microsecond)
		d.OnPacketSent(now, 1024)
		if now.Sub(t0)%(60*time.Microsecond) == 0 {
			d.OnCNP(now)
		}
		d.OnTimeout(now)
		d.Deadline()
	})
	assert.Zero(t, allocs)
	np, err := cc.NewNP(cc.ProfileP.NPConfig())
	require.NoError(t, err)
	allocs = testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Microsecond)
		np.OnPacket(now, true, true)
	})
	assert.Zero(t, allocs)
}
