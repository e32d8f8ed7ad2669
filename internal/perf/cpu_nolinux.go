//go:build !linux

package perf

// MachineCPU reports nothing where there is no /proc/stat.
func MachineCPU() (MachineTime, bool) { return MachineTime{}, false }
