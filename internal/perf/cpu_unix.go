//go:build unix

package perf

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time this process (all its threads) has used,
// from getrusage(RUSAGE_SELF). On Linux the total is exact (the
// scheduler's runtime sum); the user/system split is sampled at ticks.
func ProcessCPU() (CPUTime, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return CPUTime{}, false
	}
	return CPUTime{
		User:   time.Duration(ru.Utime.Nano()),
		System: time.Duration(ru.Stime.Nano()),
	}, true
}
