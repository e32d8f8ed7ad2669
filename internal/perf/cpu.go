package perf

import (
	"runtime"
	"strconv"
	"strings"
	"time"
)

// CPU accounting (doc/limits.md, "CPU per byte"). Both devices of a
// loopback test, and both ends of the raw UDP blast, run in this process,
// so the process's CPU time over a segment is the whole cost of moving
// its bytes: user time (goroce's own code, the Go runtime) and system
// time (the socket calls, the kernel's copies, and on loopback the
// receive softirq the sending thread runs on its way out). What the
// kernel does for this process on other threads (ksoftirqd under
// overload) is not charged to it and not counted.

// CPUTime is the CPU time a process used, split as the kernel reports it.
type CPUTime struct {
	User, System time.Duration
}

// Total is User + System.
func (t CPUTime) Total() time.Duration { return t.User + t.System }

// Sub returns t − u, field by field.
func (t CPUTime) Sub(u CPUTime) CPUTime {
	return CPUTime{User: t.User - u.User, System: t.System - u.System}
}

// CPUClock reads the CPU time this process has used so far; ok is false
// where the system does not tell. ProcessCPU is the real one; tests pass
// fakes.
type CPUClock func() (t CPUTime, ok bool)

// MachineTime is the whole machine's CPU time, all CPUs and all
// processes together, in the kernel's clock ticks: Busy (user, nice,
// system, irq, softirq, steal) and Total (Busy, idle and iowait). It
// tells whether a process that kept fewer cores busy than the machine has
// was short of CPU anyway, because other processes took the rest.
type MachineTime struct {
	Busy, Total uint64
}

// MachineClock reads the machine's CPU time; ok is false where the system
// does not tell. ProcessCPU's sibling MachineCPU is the real one.
type MachineClock func() (t MachineTime, ok bool)

// parseProcStat reads the aggregate "cpu" line of /proc/stat (proc(5):
// user nice system idle iowait irq softirq steal, then guest time that
// user already counts).
func parseProcStat(b []byte) (MachineTime, bool) {
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return MachineTime{}, false
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return MachineTime{}, false
		}
		v[i] = n
	}
	busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return MachineTime{Busy: busy, Total: busy + v[3] + v[4]}, true
}

// cpuMeter measures the CPU time of one stretch of work: the process's,
// and the whole machine's share of busy CPU.
type cpuMeter struct {
	clock   CPUClock
	machine MachineClock
	start   CPUTime
	mstart  MachineTime
	ok, mok bool
}

// cpuSpan is what a cpuMeter measured: the process's CPU time (if ok)
// and the share of the machine's CPU time that was busy, 0 to 1 (if
// machineOK).
type cpuSpan struct {
	cpu         CPUTime
	machineBusy float64
	ok          bool
	machineOK   bool
}

// startCPU starts a meter on clock (nil: ProcessCPU) and machine (nil:
// MachineCPU).
func startCPU(clock CPUClock, machine MachineClock) cpuMeter {
	if clock == nil {
		clock = ProcessCPU
	}
	if machine == nil {
		machine = MachineCPU
	}
	m := cpuMeter{clock: clock, machine: machine}
	m.mstart, m.mok = machine()
	m.start, m.ok = clock()
	return m
}

// stop returns what was used since startCPU. A reading that failed, or a
// clock that went backwards, leaves its part out (ok or machineOK false).
func (m cpuMeter) stop() cpuSpan {
	var s cpuSpan
	t, ok := m.clock()
	d := t.Sub(m.start)
	if ok && m.ok && d.User >= 0 && d.System >= 0 {
		s.cpu, s.ok = d, true
	}
	mt, mok := m.machine()
	if mok && m.mok && mt.Total > m.mstart.Total && mt.Busy >= m.mstart.Busy {
		s.machineBusy = min(1, float64(mt.Busy-m.mstart.Busy)/float64(mt.Total-m.mstart.Total))
		s.machineOK = true
	}
	return s
}

// CPUUse is what one stretch of work cost: the process's CPU time, the
// wall time it took, and the bytes it moved.
type CPUUse struct {
	CPU   CPUTime
	Wall  time.Duration
	Bytes int64
	// MachineBusy is the share of the whole machine's CPU time that was
	// busy meanwhile, this process's and every other's (0 to 1; 0 where
	// not read): near 1, the machine had no CPU left to give.
	MachineBusy float64
}

// Cores is the number of cores the stretch kept busy on average: CPU time
// over wall time (0 without wall time).
func (u CPUUse) Cores() float64 {
	if u.Wall <= 0 {
		return 0
	}
	return float64(u.CPU.Total()) / float64(u.Wall)
}

// NsPerByte is the CPU time per byte moved, in nanoseconds; the same
// number is CPU-seconds per GB (10^9 bytes). 0 without bytes.
func (u CPUUse) NsPerByte() float64 {
	if u.Bytes <= 0 {
		return 0
	}
	return float64(u.CPU.Total()) / float64(u.Bytes)
}

// SysShare is the part of the CPU time spent in the kernel (0 to 1; 0
// without CPU time).
func (u CPUUse) SysShare() float64 {
	if u.CPU.Total() <= 0 {
		return 0
	}
	return float64(u.CPU.System) / float64(u.CPU.Total())
}

// Util is perftest's CPU_Util[%] for this process: Cores as a percentage
// of cpus CPUs (perftest reads the whole machine's /proc/stat; on a shared
// machine the process's own figure is the one that means something).
func (u CPUUse) Util(cpus int) float64 {
	if cpus <= 0 {
		return 0
	}
	return 100 * u.Cores() / float64(cpus)
}

// BoundGbps is the best rate, in Gb/s (10^9 bit/s), that cpus fully busy
// cores reach when each byte costs nsPerByte nanoseconds of CPU: cpus /
// nsPerByte bytes per nanosecond. 0 when nsPerByte is not positive.
func BoundGbps(cpus int, nsPerByte float64) float64 {
	if nsPerByte <= 0 {
		return 0
	}
	return float64(cpus) * 8 / nsPerByte
}

// CPUs is the number of CPUs the bound assumes: runtime.NumCPU, the CPUs
// this process may run on (its affinity mask). GOMAXPROCS is not the
// limit: the kernel's share (system time) runs on threads in system calls,
// which do not hold a P.
func CPUs() int { return runtime.NumCPU() }
