//go:build !unix

package perf

// ProcessCPU reports no CPU time where getrusage is missing.
func ProcessCPU() (CPUTime, bool) { return CPUTime{}, false }
