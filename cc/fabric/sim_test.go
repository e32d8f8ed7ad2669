package fabric_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cc/fabric"
)

func short(id string, p cc.Profile, seed uint64, d time.Duration) fabric.Config {
	s, ok := fabric.LookupScenario(id)
	if !ok {
		panic(id)
	}
	c := s.Config(p, seed)
	c.Duration = d
	c.Window = [2]time.Duration{0, d}
	c.Sample = 0
	return c
}

// TestDeterministic: a run is a pure function of its Config; another
// seed changes the RED draws.
func TestDeterministic(t *testing.T) {
	c := short("S2", cc.ProfileP, 7, 3*time.Millisecond)
	a, err := fabric.Run(c)
	require.NoError(t, err)
	b, err := fabric.Run(c)
	require.NoError(t, err)
	assert.Equal(t, a, b)

	c.Seed = 8
	d, err := fabric.Run(c)
	require.NoError(t, err)
	assert.NotEqual(t, a.Flows[0].Marked, d.Flows[0].Marked)
}

// TestPacer: an uncongested flow is paced exactly at its rate, with no
// queue at the switch (doc/dcqcn.md §7.4: no bursts beyond the bucket).
func TestPacer(t *testing.T) {
	c := short("S1", cc.ProfileP, 1, 2*time.Millisecond)
	c.RP.InitialRate = 10 * cc.Gbps
	r, err := fabric.Run(c)
	require.NoError(t, err)
	assert.InDelta(t, 0.1, r.Utilization(100*time.Microsecond, 2*time.Millisecond), 1e-4)
	assert.LessOrEqual(t, r.Qpeak, 1024, "a 10 G flow never queues behind itself")
	assert.Zero(t, r.TotalCNPs())
	assert.Equal(t, cc.Stats{}, r.Flows[0].RP)
}

// TestPFC: with a 2 MB buffer the 16:1 onset drops packets; PFC with
// per-port XOff 64 KB keeps it lossless and reports the pause time.
func TestPFC(t *testing.T) {
	c := short("S4", cc.ProfileP, 1, 2*time.Millisecond)
	c.Buffer = 2_000_000
	lossy, err := fabric.Run(c)
	require.NoError(t, err)
	assert.Positive(t, lossy.Drops)

	c.PFC = fabric.PFC{Enabled: true, XOff: 64_000, XOn: 32_000}
	r, err := fabric.Run(c)
	require.NoError(t, err)
	assert.Zero(t, r.Drops)
	assert.Positive(t, r.Pauses)
	assert.Positive(t, r.Flows[0].PauseTime)
	assert.LessOrEqual(t, r.Qpeak, 16*(64_000+30_000))
	assert.Empty(t, r.Violations)
}

// TestCNPInvariants checks doc/dcqcn.md §5.3 "all" directly on a congested
// run: Δcnp ≥ N for every flow, hence CNP rate ≤ 1/N.
func TestCNPInvariants(t *testing.T) {
	r, err := fabric.Run(short("S3", cc.ProfileP, 3, 5*time.Millisecond))
	require.NoError(t, err)
	require.Positive(t, r.TotalCNPs())
	for i, f := range r.Flows {
		assert.GreaterOrEqual(t, f.MinCNPGap, 50*time.Microsecond, "flow %d", i)
		assert.LessOrEqual(t, r.CNPRate(i, 0, 5*time.Millisecond), 20_000.0, "flow %d", i)
		assert.Equal(t, f.NP.CNPs, f.RP.CNPs, "flow %d: every CNP sent arrives", i)
	}
	assert.Zero(t, r.ViolationCount)
}

func TestConfigErrors(t *testing.T) {
	good := short("S1", cc.ProfileP, 1, time.Millisecond)
	tests := []struct {
		name string
		edit func(*fabric.Config)
	}{
		{"no duration", func(c *fabric.Config) { c.Duration = 0 }},
		{"no bottleneck", func(c *fabric.Config) { c.Bottleneck = 0 }},
		{"NaN bottleneck", func(c *fabric.Config) { c.Bottleneck = cc.Bitrate(math.NaN()) }},
		{"no flows", func(c *fabric.Config) { c.Flows = nil }},
		{"stop before start", func(c *fabric.Config) { c.Flows[0].Start, c.Flows[0].Stop = 2, 1 }},
		{"tiny buffer", func(c *fabric.Config) { c.Buffer = 100 }},
		{"PFC thresholds", func(c *fabric.Config) { c.PFC = fabric.PFC{Enabled: true, XOff: 10, XOn: 10} }},
		{"window past end", func(c *fabric.Config) { c.Window = [2]time.Duration{0, time.Second} }},
		{"K not above N", func(c *fabric.Config) { c.NP.Interval = c.RP.AlphaPeriod }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			c.Flows = append([]fabric.Flow(nil), good.Flows...)
			tc.edit(&c)
			_, err := fabric.Run(c)
			require.ErrorIs(t, err, fabric.ErrInvalidConfig)
		})
	}
	c := good
	c.RP.MinRate = -1
	_, err := fabric.Run(c)
	require.ErrorIs(t, err, cc.ErrInvalidConfig, "controller config errors pass through")
}

func TestMetrics(t *testing.T) {
	assert.Equal(t, 1.0, fabric.Jain([]float64{3, 3, 3}))
	assert.InDelta(t, 0.5, fabric.Jain([]float64{1, 0}), 1e-15)
	assert.Equal(t, 1.0, fabric.Jain(nil))
	assert.Equal(t, 2.0, fabric.Median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, fabric.Median([]float64{4, 1, 2, 3}))
	assert.Equal(t, 3.0, fabric.Median([]float64{math.NaN(), 1, 3}), "NaNs sort last")

	// A hand-built record: flow 0 gets 2× flow 1 in the first 10 ms, then
	// equal shares.
	r := &fabric.Result{Config: fabric.Config{Bin: time.Millisecond, Duration: 20 * time.Millisecond, Bottleneck: 24 * cc.Mbps}}
	r.Flows = make([]fabric.FlowResult, 2)
	for i := range r.Flows {
		r.Flows[i].Delivered = make([]int64, 20)
		r.Flows[i].CNPs = make([]int32, 20)
	}
	for b := range 20 {
		r.Flows[0].Delivered[b], r.Flows[1].Delivered[b] = 1500, 1500
		if b < 10 {
			r.Flows[0].Delivered[b], r.Flows[1].Delivered[b] = 2000, 1000
		}
	}
	assert.InDelta(t, 1.0, r.Utilization(0, 20*time.Millisecond), 1e-12)
	assert.InDelta(t, 0.9, r.Jain([]int{0, 1}, 0, 10*time.Millisecond), 1e-12)
	conv, ok := r.Tconv([]int{0, 1}, 0, 20*time.Millisecond, 5*time.Millisecond, time.Millisecond, 0.95)
	require.True(t, ok)
	// Trailing 5-ms windows: J(ending at 12 ms) = (3·3000+2·3000…) — the
	// first window whose Jain index reaches 0.95 ends at 12 ms.
	assert.Equal(t, 12*time.Millisecond, conv)
	lo, mean := r.JainWindows([]int{0, 1}, 0, 20*time.Millisecond, 5*time.Millisecond)
	assert.InDelta(t, 0.9, lo, 1e-12)
	assert.InDelta(t, 0.95, mean, 1e-12)
	rec, ok := r.Recovery(0, 0, 12*cc.Mbps, time.Millisecond)
	require.True(t, ok)
	assert.Equal(t, time.Millisecond, rec)

	q := &fabric.Result{QueueHist: []int64{90, 0, 9, 1}}
	assert.Equal(t, 0, q.QueueQuantile(0.5))
	assert.Equal(t, 128, q.QueueQuantile(0.99))
	assert.Equal(t, 192, q.QueueQuantile(1))
}

func TestFigure(t *testing.T) {
	u := fabric.Figure{Key: "U", Value: 0.96, Cmp: fabric.AtLeast, Limit: 0.95, High: true}
	assert.True(t, u.Pass())
	assert.True(t, u.Worse(0.9, 0.99))
	assert.True(t, u.Worse(math.NaN(), 0.1), "NaN is worst")
	q := fabric.Figure{Key: "Q99_bytes", Value: 250_001, Cmp: fabric.AtMost, Limit: 250_000}
	assert.False(t, q.Pass())
	assert.True(t, q.Worse(2, 1))
	assert.False(t, fabric.Figure{Value: math.NaN(), Cmp: fabric.AtMost, Limit: 1}.Pass(), "NaN never passes a judged figure")
	assert.True(t, fabric.Figure{Value: math.NaN()}.Pass(), "report-only")
}
