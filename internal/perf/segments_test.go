package perf

import (
	"context"
	"math"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
)

func TestSpreadOf(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		xs   []float64
		want Spread
	}{
		{"empty", nil, Spread{}},
		{"only NaN", []float64{nan, nan}, Spread{}},
		{"one", []float64{0.7}, Spread{N: 1, Median: 0.7, Min: 0.7, Max: 0.7, Q1: 0.7, Q3: 0.7}},
		{"two: median is the mean", []float64{2, 1}, Spread{N: 2, Median: 1.5, Min: 1, Max: 2, Q1: 1.25, Q3: 1.75}},
		{"odd", []float64{5, 1, 3, 2, 4}, Spread{N: 5, Median: 3, Min: 1, Max: 5, Q1: 2, Q3: 4}},
		{"even, unsorted", []float64{0.6, 0.5, 0.9, 0.4, 0.7, 0.8},
			Spread{N: 6, Median: 0.65, Min: 0.4, Max: 0.9, Q1: 0.525, Q3: 0.775}},
		// One wild segment moves the extremes, not the median.
		{"outlier", []float64{0.8, 0.82, 0.79, 0.81, 3.5, 0.8},
			Spread{N: 6, Median: 0.805, Min: 0.79, Max: 3.5, Q1: 0.8, Q3: 0.8175}},
		{"NaN left out", []float64{nan, 3, 1, nan, 2}, Spread{N: 3, Median: 2, Min: 1, Max: 3, Q1: 1.5, Q3: 2.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.xs...)
			got := SpreadOf(tc.xs)
			assert.Equal(t, tc.want.N, got.N)
			for _, f := range []struct {
				name      string
				got, want float64
			}{
				{"median", got.Median, tc.want.Median}, {"min", got.Min, tc.want.Min}, {"max", got.Max, tc.want.Max},
				{"q1", got.Q1, tc.want.Q1}, {"q3", got.Q3, tc.want.Q3},
			} {
				assert.InDelta(t, f.want, f.got, 1e-12, f.name)
			}
			for i := range in { // SpreadOf does not reorder its input
				if !math.IsNaN(in[i]) {
					assert.Equal(t, in[i], tc.xs[i])
				}
			}
		})
	}
}

func TestSpreadBy(t *testing.T) {
	segs := []Segment{{Ratio: 0.5, MppsRatio: 2}, {Ratio: 0}, {Ratio: 0.7, MppsRatio: 4}, {Ratio: 0.6}}
	r := SpreadBy(segs, func(s Segment) float64 { return s.Ratio })
	assert.Equal(t, 3, r.N)
	assert.InDelta(t, 0.6, r.Median, 1e-12)
	assert.InDelta(t, 0.55, r.Q1, 1e-12)
	assert.InDelta(t, 0.65, r.Q3, 1e-12)
	assert.Equal(t, Spread{N: 2, Median: 3, Min: 2, Max: 4, Q1: 2.5, Q3: 3.5},
		SpreadBy(segs, func(s Segment) float64 { return s.MppsRatio }))
}

func TestRatio(t *testing.T) {
	assert.Equal(t, 0.5, ratio(1, 2))
	assert.Equal(t, 0.0, ratio(1, 0))
	assert.Equal(t, 0.0, ratio(1, -1))
}

// TestInterleaveQuick runs a few short real segments of each kind over
// loopback and checks that they alternate and measure something.
func TestInterleaveQuick(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("link/udp needs Linux")
	}
	if testing.Short() {
		t.Skip("real sockets")
	}
	tests := []struct {
		name string
		test Config
	}{
		{"bandwidth", Config{Op: OpWrite}},
		{"latency", Config{Op: OpWrite, Latency: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, port := freePorts(t)
			tc.test.Addrs = [2]netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port),
				netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port)}
			tc.test.OpenLink = func(a netip.AddrPort) (link.Link, error) { return udp.Open(udp.Config{Addr: a}) }
			segs, err := Interleave(context.Background(), SegmentConfig{
				Test: tc.test, Segments: 3, Length: 100 * time.Millisecond, Block: 200,
			})
			require.NoError(t, err)
			require.Len(t, segs, 3)
			assert.Equal(t, []string{"goroce", "baseline", "goroce"}, []string{segs[0].First, segs[1].First, segs[2].First})
			for i, s := range segs {
				t.Logf("segment %d: %+v", i, s)
				assert.Positive(t, s.Ratio)
				if tc.test.Latency {
					assert.Positive(t, s.LatP50us)
					assert.Positive(t, s.BaselineP50us)
					assert.Positive(t, s.P99Ratio)
					assert.GreaterOrEqual(t, s.LatP999us, s.LatP99us)
					assert.GreaterOrEqual(t, s.BaselineP999us, s.BaselineP99us)
					assert.InDelta(t, s.LatP999us/s.BaselineP999us, s.P999Ratio, 1e-9)
					assert.Zero(t, s.Gbps)
					assert.Zero(t, s.CPUNsPerByte, "CPU per byte is a bandwidth figure")
				} else {
					assert.Positive(t, s.Gbps)
					assert.Positive(t, s.BaselineGbps)
					assert.Positive(t, s.MppsRatio)
					assert.InDelta(t, s.Gbps/s.BaselineGbps, s.Ratio, 1e-9)
					assertCPUFigures(t, s)
				}
			}
			sp := SpreadBy(segs, func(s Segment) float64 { return s.Ratio })
			assert.Equal(t, 3, sp.N)
			assert.LessOrEqual(t, sp.Min, sp.Median)
			assert.LessOrEqual(t, sp.Median, sp.Max)
		})
	}
}

// assertCPUFigures checks a real bandwidth pair's CPU accounting: every
// figure present and positive, no more cores than the machine has (a
// little slack for the edges of the windows), and the derived figures
// consistent with the measured ones.
func assertCPUFigures(t *testing.T, s Segment) {
	t.Helper()
	cpus := float64(CPUs())
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"cpu_cores", s.CPUCores}, {"baseline_cpu_cores", s.BaselineCPUCores},
		{"cpu_ns_per_byte", s.CPUNsPerByte}, {"baseline_cpu_ns_per_byte", s.BaselineCPUNsPerByte},
		{"cpu_cost_ratio", s.CPUCostRatio}, {"bound_gbps", s.BoundGbps}, {"bound_ratio", s.BoundRatio},
	} {
		assert.Positive(t, f.v, f.name)
	}
	assert.LessOrEqual(t, s.CPUCores, cpus*1.05+0.1, "goroce cores")
	// The machine's busy cores include this process's, give or take a
	// tick (10 ms) over a 100 ms segment.
	assert.Positive(t, s.MachineCores)
	assert.LessOrEqual(t, s.MachineCores, cpus)
	assert.GreaterOrEqual(t, s.MachineCores, s.CPUCores*0.8-0.1*cpus, "machine cores include goroce's")
	assert.LessOrEqual(t, s.BaselineCPUCores, cpus*1.05+0.1, "baseline cores")
	for _, sh := range []float64{s.CPUSysShare, s.BaselineCPUSysShare} {
		assert.GreaterOrEqual(t, sh, 0.0)
		assert.LessOrEqual(t, sh, 1.0)
	}
	assert.InDelta(t, s.CPUNsPerByte/s.BaselineCPUNsPerByte, s.CPUCostRatio, 1e-9)
	assert.InDelta(t, cpus*8/s.CPUNsPerByte, s.BoundGbps, 1e-6*s.BoundGbps)
	assert.InDelta(t, s.BoundGbps/s.BaselineGbps, s.BoundRatio, 1e-9)
	// Cores and CPU per byte describe the same CPU time: cores = ns/byte
	// × bytes/ns. goroce's window is the one its Gb/s is measured over;
	// the blast's starts at its first send, a little before its Gb/s
	// window, so only goroce's must agree closely.
	assert.InDelta(t, s.CPUCores, s.CPUNsPerByte*s.Gbps/8, 0.02*s.CPUCores+1e-3, "goroce cores vs ns/byte × rate")
	assert.LessOrEqual(t, s.BaselineCPUCores, s.BaselineCPUNsPerByte*s.BaselineGbps/8*1.05+1e-3,
		"baseline cores vs ns/byte × rate")
	// The bound is where the machine's CPUs run out: a segment moving
	// bytes with cores c < CPUs reached c/CPUs of it.
	assert.InDelta(t, s.CPUCores/cpus, s.Gbps/s.BoundGbps, 0.02*s.CPUCores/cpus+1e-3)
}

// TestInterleaveCancel: a cancelled context stops Interleave with its
// error.
func TestInterleaveCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Interleave(ctx, SegmentConfig{Segments: 2, Length: 50 * time.Millisecond})
	require.ErrorIs(t, err, context.Canceled)
}

// TestInterleaveFloor: with Floor, bandwidth pairs are triples whose
// first kind rotates and whose floor fields are filled; without it they
// stay 0; a latency test ignores Floor.
func TestInterleaveFloor(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("link/udp needs Linux")
	}
	if testing.Short() {
		t.Skip("real sockets")
	}
	run := func(t *testing.T, test Config, floor bool, n int) []Segment {
		_, port := freePorts(t)
		test.Addrs = [2]netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port),
			netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port)}
		test.OpenLink = func(a netip.AddrPort) (link.Link, error) { return udp.Open(udp.Config{Addr: a}) }
		segs, err := Interleave(context.Background(), SegmentConfig{
			Test: test, Segments: n, Length: 100 * time.Millisecond, Block: 200, Floor: floor,
		})
		require.NoError(t, err)
		require.Len(t, segs, n)
		return segs
	}
	t.Run("floor", func(t *testing.T) {
		segs := run(t, Config{Op: OpWrite}, true, 3)
		assert.Equal(t, []string{"goroce", "baseline", "floor"}, []string{segs[0].First, segs[1].First, segs[2].First})
		for i, s := range segs {
			t.Logf("segment %d: %+v", i, s)
			assert.Positive(t, s.Gbps)
			assert.Positive(t, s.BaselineGbps)
			assert.Positive(t, s.FloorGbps)
			assert.InDelta(t, s.Gbps/s.FloorGbps, s.FloorRatio, 1e-9)
			assert.InDelta(t, s.FloorGbps/s.BaselineGbps, s.FloorCeiling, 1e-9)
			assert.Positive(t, s.FloorCPUCores)
			assert.Positive(t, s.FloorCPUNsPerByte)
			assert.True(t, s.FloorLoss >= 0 && s.FloorLoss < 1, "floor loss %v", s.FloorLoss)
			assert.True(t, s.BaselineLoss >= 0 && s.BaselineLoss < 1, "blast loss %v", s.BaselineLoss)
			assert.InDelta(t, s.Gbps/s.BaselineGbps, s.Ratio, 1e-9, "the ratio is still against the ceiling")
		}
	})
	t.Run("no floor", func(t *testing.T) {
		segs := run(t, Config{Op: OpWrite}, false, 2)
		assert.Equal(t, []string{"goroce", "baseline"}, []string{segs[0].First, segs[1].First})
		for _, s := range segs {
			assert.Positive(t, s.Ratio)
			assert.Zero(t, s.FloorGbps)
			assert.Zero(t, s.FloorRatio)
			assert.Zero(t, s.FloorCeiling)
			assert.Zero(t, s.FloorCPUCores)
			assert.Zero(t, s.FloorCPUNsPerByte)
			assert.Zero(t, s.FloorLoss)
		}
	})
	t.Run("latency ignores it", func(t *testing.T) {
		segs := run(t, Config{Op: OpWrite, Latency: true}, true, 2)
		assert.Equal(t, []string{"goroce", "baseline"}, []string{segs[0].First, segs[1].First})
		for _, s := range segs {
			assert.Positive(t, s.Ratio)
			assert.Zero(t, s.FloorGbps)
			assert.Zero(t, s.FloorRatio)
		}
	})
}
