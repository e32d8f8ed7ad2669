package perf

import "os"

// MachineCPU reads the machine's CPU time from /proc/stat.
func MachineCPU() (MachineTime, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineTime{}, false
	}
	return parseProcStat(b)
}
