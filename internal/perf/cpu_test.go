package perf

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a clock (a CPUClock or a MachineClock) that returns the
// readings it is given, in order, the last one forever.
func fakeClock[T any](readings ...T) func() (T, bool) {
	i := 0
	return func() (T, bool) {
		r := readings[min(i, len(readings)-1)]
		i++
		return r, true
	}
}

// fakeCPU and fakeMachine are fakeClock for each kind.
func fakeCPU(readings ...CPUTime) CPUClock             { return fakeClock(readings...) }
func fakeMachine(readings ...MachineTime) MachineClock { return fakeClock(readings...) }

func TestCPUMeter(t *testing.T) {
	m := startCPU(fakeCPU(CPUTime{User: 3 * time.Second, System: time.Second},
		CPUTime{User: 3500 * time.Millisecond, System: 1200 * time.Millisecond}),
		fakeMachine(MachineTime{Busy: 1000, Total: 5000}, MachineTime{Busy: 1150, Total: 5200}))
	s := m.stop()
	require.True(t, s.ok)
	assert.Equal(t, CPUTime{User: 500 * time.Millisecond, System: 200 * time.Millisecond}, s.cpu)
	assert.Equal(t, 700*time.Millisecond, s.cpu.Total())
	require.True(t, s.machineOK)
	assert.InDelta(t, 0.75, s.machineBusy, 1e-12, "150 of 200 ticks busy")

	failing := func() (CPUTime, bool) { return CPUTime{}, false }
	noMachine := func() (MachineTime, bool) { return MachineTime{}, false }
	s = startCPU(failing, noMachine).stop()
	assert.False(t, s.ok, "a clock that cannot be read measures nothing")
	assert.False(t, s.machineOK)
	s = startCPU(fakeCPU(CPUTime{User: time.Second}, CPUTime{}), fakeMachine(MachineTime{Busy: 1, Total: 2})).stop()
	assert.False(t, s.ok, "a clock going backwards measures nothing")
	assert.False(t, s.machineOK, "no tick passed: no share")
}

// TestProcessCPU: the real clocks advance with work this process does.
func TestProcessCPU(t *testing.T) {
	m := startCPU(nil, nil)
	if !m.ok {
		t.Skip("no getrusage here")
	}
	x := uint64(1)
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	s := m.stop()
	require.True(t, s.ok)
	assert.Positive(t, s.cpu.Total(), "spun %x", x)
	if m.mok {
		require.True(t, s.machineOK, "50 ms is several ticks")
		// This process kept one CPU busy: at least 1/CPUs of the machine,
		// give or take a tick.
		assert.Greater(t, s.machineBusy, 0.5/float64(CPUs()))
		assert.LessOrEqual(t, s.machineBusy, 1.0)
	}
}

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want MachineTime
		ok   bool
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice
		{"linux 6", "cpu  1580688 10584 608566 1431553 3701 0 50760 1252 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n",
			MachineTime{Busy: 1580688 + 10584 + 608566 + 50760 + 1252, Total: 1580688 + 10584 + 608566 + 50760 + 1252 + 1431553 + 3701}, true},
		{"no steal column", "cpu  1 2 3 4 5 6 7\n", MachineTime{}, false},
		{"per-CPU line first", "cpu0 1 2 3 4 5 6 7 8 9 10\n", MachineTime{}, false},
		{"garbage", "cpu  a b c d e f g h\n", MachineTime{}, false},
		{"empty", "", MachineTime{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseProcStat([]byte(tc.in))
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
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
	g.MachineBusy, b.MachineBusy = 0.99, 0.6
	s.setCPU(g, b, 2)
	assert.InDelta(t, 1.98, s.MachineCores, 1e-12)
	assert.InDelta(t, 1.2, s.BaselineMachineCores, 1e-12)
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
		cpu: cpuSpan{cpu: CPUTime{User: 3 * time.Millisecond, System: time.Millisecond}, ok: true,
			machineBusy: 0.9, machineOK: true}}
	res := tl.result(OpWrite, 65536, 1, 4096)
	assert.InDelta(t, 0.004, res.CPUSeconds, 1e-12)
	assert.InDelta(t, 0.001, res.CPUSysSeconds, 1e-12)
	assert.InDelta(t, 0.9, res.MachineBusy, 1e-12)
	u := res.CPUUse()
	assert.Equal(t, CPUTime{User: 3 * time.Millisecond, System: time.Millisecond}, u.CPU)
	assert.Equal(t, 2*time.Millisecond, u.Wall)
	assert.Equal(t, int64(655360), u.Bytes)
	assert.InDelta(t, 0.9, u.MachineBusy, 1e-12)
	assert.InDelta(t, 2.0, u.Cores(), 1e-9)

	tl.cpu = cpuSpan{}
	res = tl.result(OpWrite, 65536, 1, 4096)
	assert.Zero(t, res.CPUSeconds, "not read: not reported")
	assert.Zero(t, res.MachineBusy, "not read: not reported")
}
