package perf

import (
	"context"
	"net/netip"
	"strconv"
	"testing"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// BenchmarkMessageRate runs the loopback message-rate test (64-byte
// requests, run to completion, as `goroce perf write -s 64` below 4 CPUs)
// between two devices on link/mem, which moves datagrams with a copy and
// no system call: one op is one message, and cpu-ns/msg the process's CPU
// time per message (both devices', user space only, without the kernel's
// share that the UDP loopback test adds; doc/limits.md §9), which a loaded
// machine disturbs less than ns/op. Run it with -cpu 1 for a figure free
// of wake-ups across processors.
func BenchmarkMessageRate(b *testing.B) {
	for _, tc := range []struct {
		name  string
		op    Op
		qps   int
		batch int
	}{
		{"write/qps=1", OpWrite, 1, 0},
		{"write/qps=1/batch=64", OpWrite, 1, 64},
		{"write/qps=64", OpWrite, 64, 0},
		{"send/qps=1", OpSend, 1, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			n := mem.New(mem.Config{QueueLen: 1 << 15})
			cfg := Config{Op: tc.op, Size: 64, QPs: tc.qps, Iters: max(b.N/tc.qps, 1), Wait: WaitInline,
				OpenLink: func(a netip.AddrPort) (link.Link, error) { return n.Attach(a), nil },
				Addrs: [2]netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:4791"),
					netip.MustParseAddrPort("10.0.0.2:4791")},
				Configure: func(_ netip.AddrPort, c *roce.Config) { c.Batch = tc.batch }}
			b.ResetTimer()
			res, err := Run(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if res.Retransmitted != 0 {
				b.Log("retransmitted " + strconv.FormatUint(res.Retransmitted, 10))
			}
			b.ReportMetric(res.Mpps, "Mpps")
			if msgs := float64(res.Iters * res.QPs); res.CPUSeconds > 0 && msgs > 0 {
				b.ReportMetric(res.CPUSeconds*1e9/msgs, "cpu-ns/msg")
			}
		})
	}
}
