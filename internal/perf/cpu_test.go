package perf

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeCPU is a CPUClock that returns the readings it is given, in order,
// the last one forever.
func fakeCPU(readings ...CPUTime) CPUClock {
	i := 0
	return func() (CPUTime, bool) {
		r := readings[min(i, len(readings)-1)]
		i++
		return r, true
	}
}

func TestCPUMeter(t *testing.T) {
	m := startCPU(fakeCPU(CPUTime{User: 3 * time.Second, System: time.Second},
		CPUTime{User: 3500 * time.Millisecond, System: 1200 * time.Millisecond}))
	d, ok := m.stop()
	require.True(t, ok)
	assert.Equal(t, CPUTime{User: 500 * time.Millisecond, System: 200 * time.Millisecond}, d)
	assert.Equal(t, 700*time.Millisecond, d.Total())

	failing := func() (CPUTime, bool) { return CPUTime{}, false }
	_, ok = startCPU(failing).stop()
	assert.False(t, ok, "a clock that cannot be read measures nothing")
	_, ok = startCPU(fakeCPU(CPUTime{User: time.Second}, CPUTime{})).stop()
	assert.False(t, ok, "a clock going backwards measures nothing")
}

// TestProcessCPU: the real clock advances with work this process does.
func TestProcessCPU(t *testing.T) {
	m := startCPU(nil)
	if !m.ok {
		t.Skip("no getrusage here")
	}
	x := uint64(1)
	for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	d, ok := m.stop()
	require.True(t, ok)
	assert.Positive(t, d.Total(), "spun %x", x)
}

func TestCPUUse(t *testing.T) {
	tests := []struct {
		name                  string
		u                     CPUUse
		cores, nsPerByte, sys float64
	}{
		// 1.5 s of CPU over 1 s moving 3 GB: 1.5 cores, 0.5 ns (CPU-s per GB) per byte.
		{"busy", CPUUse{CPU: CPUTime{User: time.Second, System: 500 * time.Millisecond}, Wall: time.Second, Bytes: 3e9},
			1.5, 0.5, 1.0 / 3},
		{"kernel only", CPUUse{CPU: CPUTime{System: 250 * time.Millisecond}, Wall: time.Second, Bytes: 1e9},
			0.25, 0.25, 1},
		{"no wall time", CPUUse{CPU: CPUTime{User: time.Second}, Bytes: 1e9}, 0, 1, 0},
		{"no bytes", CPUUse{CPU: CPUTime{User: time.Second}, Wall: time.Second}, 1, 0, 0},
		{"nothing", CPUUse{}, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.cores, tc.u.Cores(), 1e-12, "cores")
			assert.InDelta(t, tc.nsPerByte, tc.u.NsPerByte(), 1e-12, "ns per byte")
			assert.InDelta(t, tc.sys, tc.u.SysShare(), 1e-12, "system share")
		})
	}
	u := CPUUse{CPU: CPUTime{User: time.Second}, Wall: time.Second}
	assert.InDelta(t, 50.0, u.Util(2), 1e-12, "one core of two is 50 %")
	assert.Zero(t, u.Util(0))
}

func TestBoundGbps(t *testing.T) {
	// 2 cores at 1 ns per byte move 2 bytes per ns: 16 Gb/s.
	assert.InDelta(t, 16.0, BoundGbps(2, 1), 1e-12)
	assert.InDelta(t, 4.0, BoundGbps(1, 2), 1e-12)
	assert.Zero(t, BoundGbps(2, 0))
}

// TestSegmentCPU checks a pair's CPU figures from fake measurements: the
// lead's profile of the 64 KiB WRITE (goroce keeping 1.9 cores busy at 3×
// the blast's CPU per byte) in numbers.
func TestSegmentCPU(t *testing.T) {
	s := Segment{Gbps: 25, BaselineGbps: 45}
	// goroce: 1.9 s of CPU over 1 s moving 25 Gb = 3.125 GB.
	g := CPUUse{CPU: CPUTime{User: 1200 * time.Millisecond, System: 700 * time.Millisecond}, Wall: time.Second, Bytes: 3125e6}
	// baseline: 0.55 s over 0.5 s moving 45 Gb/s × 0.5 s = 2.8125 GB.
	b := CPUUse{CPU: CPUTime{User: 50 * time.Millisecond, System: 500 * time.Millisecond}, Wall: 500 * time.Millisecond, Bytes: 28125e5}
	s.setCPU(g, b, 2)
	assert.InDelta(t, 1.9, s.CPUCores, 1e-12)
	assert.InDelta(t, 1.1, s.BaselineCPUCores, 1e-12)
	assert.InDelta(t, 0.608, s.CPUNsPerByte, 1e-12)
	assert.InDelta(t, 0.55/2.8125, s.BaselineCPUNsPerByte, 1e-12)
	assert.InDelta(t, 0.608/(0.55/2.8125), s.CPUCostRatio, 1e-9)
	assert.InDelta(t, 0.7/1.9, s.CPUSysShare, 1e-12)
	assert.InDelta(t, 0.5/0.55, s.BaselineCPUSysShare, 1e-12)
	// 2 cores / 0.608 ns per byte = 3.289 GB/s = 26.3 Gb/s, 0.585 of 45.
	assert.InDelta(t, 16/0.608, s.BoundGbps, 1e-9)
	assert.InDelta(t, 16/0.608/45, s.BoundRatio, 1e-9)

	var none Segment
	none.setCPU(CPUUse{}, CPUUse{}, 2)
	assert.Equal(t, Segment{}, none, "nothing measured: no figures")
}

// TestTallyCPU: the loop's CPU reading reaches the Result, and
// Result.CPUUse gives it back with the window and bytes.
func TestTallyCPU(t *testing.T) {
	tl := tally{msgs: 10, bytes: 655360, elapsed: 2 * time.Millisecond,
		cpu: CPUTime{User: 3 * time.Millisecond, System: time.Millisecond}, cpuOK: true}
	res := tl.result(OpWrite, 65536, 1, 4096)
	assert.InDelta(t, 0.004, res.CPUSeconds, 1e-12)
	assert.InDelta(t, 0.001, res.CPUSysSeconds, 1e-12)
	u := res.CPUUse()
	assert.Equal(t, CPUTime{User: 3 * time.Millisecond, System: time.Millisecond}, u.CPU)
	assert.Equal(t, 2*time.Millisecond, u.Wall)
	assert.Equal(t, int64(655360), u.Bytes)
	assert.InDelta(t, 2.0, u.Cores(), 1e-9)

	tl.cpuOK = false
	assert.Zero(t, tl.result(OpWrite, 65536, 1, 4096).CPUSeconds, "not read: not reported")
}
