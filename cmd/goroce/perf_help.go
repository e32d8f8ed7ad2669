package main

// perfFlagGroups are the headings of goroce perf -h (doc/cli.md): the
// flags perftest users know first, then what only goroce has.
var perfFlagGroups = []flagGroup{
	{"the test (as perftest's)", []string{"a", "s", "n", "D", "q", "t", "l", "r", "A", "lat", "m", "u", "tclass", "x", "F"}},
	{"output (as perftest's)", []string{"report_gbits", "cpu_util", "json", "stats", "metrics"}},
	{"against a peer (SERVER or --server)", []string{"server", "p", "R", "source_ip", "roce-port", "timeout"}},
	{"waiting for completions", []string{"e", "poll", "rtc"}},
	{"loopback (no SERVER, no --server)", []string{"local", "remote", "shards", "link", "dev", "pcap", "pcap-side"}},
	{"the machine's ceiling (loopback)", []string{"baseline", "segments", "segment-time", "segment-iters", "floor"}},
	{"impairment and profiling", []string{"impair", "trace", "cpuprofile"}},
}
