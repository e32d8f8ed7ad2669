package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/link/udp"
)

// segmentFlags are --baseline's: how many interleaved pairs, how long,
// and whether bandwidth pairs include the RoCE floor blast.
type segmentFlags struct {
	segments int
	length   time.Duration
	block    int
	floor    bool
}

func (s *segmentFlags) flags(fs *flag.FlagSet) {
	fs.IntVar(&s.segments, "segments", 6, "--baseline: interleaved pairs of one goroce and one raw UDP segment; the ratio is their median")
	fs.DurationVar(&s.length, "segment-time", 500*time.Millisecond, "--baseline: length of each bandwidth segment")
	fs.IntVar(&s.block, "segment-iters", 2000, "--baseline: round trips of each latency segment (goroce and the UDP ping-pong alike)")
	fs.BoolVar(&s.floor, "floor", false, "with --baseline, bandwidth tests: also run the RoCE floor blast, the raw UDP blast plus only the work every RoCEv2 stack must do (payload read from an 8 MiB region, the ICRC computed by the sender and verified by the receiver, the payload placed into an 8 MiB region), as a third segment of each pair; adds floor_gbps, floor_ratio (goroce / floor), floor_ceiling (floor / blast) and the floor's CPU (doc/limits.md §8)")
}

// addBaseline measures, in the same run, the raw UDP ceiling with the same
// batching, GSO and GRO as the RDMA test and adds it to out. It runs
// sf.segments pairs of short segments, one goroce and one raw UDP, pairs
// alternating which runs first (perf.Interleave): for bandwidth tests
// sf.length of the test against a blast of datagrams the size of a full
// RoCE packet at the test's MTU, for latency tests sf.block round trips of
// the test against as many of a Go UDP ping-pong. The row res of the
// user's test itself is not part of the ratio: one noisy stretch must not
// decide it.
//
// Fields, bandwidth: "baseline_gbps" (median of the blast segments),
// "ratio" (median over pairs of goroce Gb/s / raw Gb/s), "baseline_mpps"
// and "mpps_ratio" (the same for datagrams or messages per second), and
// one plain sendmmsg/recvmmsg blast with GSO and GRO off, not interleaved
// ("baseline_plain_mpps", "baseline_plain_gbps", "mpps_ratio_plain" =
// the row's Mpps / it). Latency: "baseline_p50_us" and "baseline_p99_us"
// (medians of the ping-pong segments' one-way latency), "ratio" (median
// over pairs of goroce p50 / UDP p50), "p99_ratio" (the same for p99),
// "baseline_p999_us" and "p999_ratio" (the same for p99.9).
// CPU, bandwidth (doc/limits.md, "CPU per byte"; medians over the
// pairs): "cpu_cores" and "baseline_cpu_cores" (cores the process kept
// busy in goroce's and the blast's segments), "cpu_ns_per_byte" and
// "baseline_cpu_ns_per_byte" (CPU time per byte moved, = CPU-seconds per
// GB), "cpu_sys_share" and "baseline_cpu_sys_share" (the kernel's part),
// "machine_cores" and "baseline_machine_cores" (cores busy on the whole
// machine, every process's: the rest of what the segment could have had),
// "cpu_cost_ratio" (goroce's CPU per byte over the blast's), "cpus"
// (runtime.NumCPU), "bound_gbps" (what cpus busy CPUs move at goroce's
// CPU per byte) and "bound_ratio" (that over the blast's Gb/s: the best
// "ratio" goroce can reach without costing less per byte).
// With --floor (sf.floor, bandwidth only), each pair is a triple with the
// RoCE floor blast (perf.BaselineConfig.Floor: the blast plus payload from
// a rotating memory region, the ICRC on both sides and placement into one;
// doc/limits.md §8, "The floor"), medians over the triples:
// "floor_gbps" (what the floor blast received), "floor_ratio" (goroce
// Gb/s / floor Gb/s: how far goroce is from the work it cannot avoid),
// "floor_ceiling" (floor Gb/s / blast Gb/s: how much of the ceiling that
// work leaves), "floor_cpu_cores" and "floor_cpu_ns_per_byte" (the floor
// blast's cores and CPU per byte of UDP payload received), "floor_loss"
// and "baseline_loss" (the share of each blast's datagrams its receiver
// did not get: neither has flow control, and the sender's work on the
// lost ones still counts in the CPU per byte).
// Both: "ratio_median" (= "ratio"), "ratio_min", "ratio_max", "ratio_q1",
// "ratio_q3" and "segments", the pairs' figures (perf.Segment).
//
// Before the segments existed, "ratio" was the row's figure over one
// baseline measurement taken after it; it keeps its meaning (goroce over
// the raw path) but is now the median of paired segments.
func addBaseline(ctx context.Context, out map[string]any, c perf.Config, res perf.Result, sf segmentFlags) error {
	mtu := c.MTU.Bytes()
	if mtu == 0 {
		mtu = 4096
	}
	bc := perf.BaselineConfig{
		Sender:   udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")},
		Receiver: udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")},
		Size:     min(mtu, max(res.Size, 1)) + 28 + 4, // BTH+RETH (28) + ICRC: an RDMA WRITE packet
	}
	if c.Latency {
		bc.PingSize = max(res.Size, 1) + 28 + 4
	}
	segs, err := perf.Interleave(ctx, perf.SegmentConfig{Test: c, Baseline: bc,
		Segments: sf.segments, Length: sf.length, Block: sf.block, Floor: sf.floor})
	if err != nil {
		return err
	}
	r := perf.SpreadBy(segs, func(s perf.Segment) float64 { return s.Ratio })
	out["ratio"], out["ratio_median"] = r.Median, r.Median
	out["ratio_min"], out["ratio_max"], out["ratio_q1"], out["ratio_q3"] = r.Min, r.Max, r.Q1, r.Q3
	out["segments"] = segs
	med := func(f func(perf.Segment) float64) float64 { return perf.SpreadBy(segs, f).Median }
	if c.Latency {
		out["baseline_p50_us"] = med(func(s perf.Segment) float64 { return s.BaselineP50us })
		out["baseline_p99_us"] = med(func(s perf.Segment) float64 { return s.BaselineP99us })
		out["p99_ratio"] = med(func(s perf.Segment) float64 { return s.P99Ratio })
		out["baseline_p999_us"] = med(func(s perf.Segment) float64 { return s.BaselineP999us })
		out["p999_ratio"] = med(func(s perf.Segment) float64 { return s.P999Ratio })
		return nil
	}
	out["baseline_gbps"] = med(func(s perf.Segment) float64 { return s.BaselineGbps })
	out["baseline_mpps"] = med(func(s perf.Segment) float64 { return s.BaselineMpps })
	out["mpps_ratio"] = med(func(s perf.Segment) float64 { return s.MppsRatio })
	out["cpus"] = perf.CPUs()
	out["cpu_cores"] = med(func(s perf.Segment) float64 { return s.CPUCores })
	out["baseline_cpu_cores"] = med(func(s perf.Segment) float64 { return s.BaselineCPUCores })
	out["cpu_ns_per_byte"] = med(func(s perf.Segment) float64 { return s.CPUNsPerByte })
	out["baseline_cpu_ns_per_byte"] = med(func(s perf.Segment) float64 { return s.BaselineCPUNsPerByte })
	out["cpu_sys_share"] = med(func(s perf.Segment) float64 { return s.CPUSysShare })
	out["baseline_cpu_sys_share"] = med(func(s perf.Segment) float64 { return s.BaselineCPUSysShare })
	out["machine_cores"] = med(func(s perf.Segment) float64 { return s.MachineCores })
	out["baseline_machine_cores"] = med(func(s perf.Segment) float64 { return s.BaselineMachineCores })
	out["cpu_cost_ratio"] = med(func(s perf.Segment) float64 { return s.CPUCostRatio })
	out["bound_gbps"] = med(func(s perf.Segment) float64 { return s.BoundGbps })
	out["bound_ratio"] = med(func(s perf.Segment) float64 { return s.BoundRatio })
	if sf.floor {
		out["floor_gbps"] = med(func(s perf.Segment) float64 { return s.FloorGbps })
		out["floor_ratio"] = med(func(s perf.Segment) float64 { return s.FloorRatio })
		out["floor_ceiling"] = med(func(s perf.Segment) float64 { return s.FloorCeiling })
		out["floor_cpu_cores"] = med(func(s perf.Segment) float64 { return s.FloorCPUCores })
		out["floor_cpu_ns_per_byte"] = med(func(s perf.Segment) float64 { return s.FloorCPUNsPerByte })
		// A loss of 0 is a figure, not a missing one (med leaves 0s out).
		loss := func(f func(perf.Segment) float64) float64 {
			xs := make([]float64, len(segs))
			for i, s := range segs {
				xs[i] = f(s)
			}
			return perf.SpreadOf(xs).Median
		}
		out["floor_loss"] = loss(func(s perf.Segment) float64 { return s.FloorLoss })
		out["baseline_loss"] = loss(func(s perf.Segment) float64 { return s.BaselineLoss })
	}
	pc := bc
	pc.NoPing, pc.Duration = true, sf.length
	pc.Sender.DisableGSO, pc.Sender.DisableGRO = true, true
	pc.Receiver.DisableGSO, pc.Receiver.DisableGRO = true, true
	p, err := perf.Baseline(ctx, pc)
	if err != nil {
		return err
	}
	out["baseline_plain_mpps"], out["baseline_plain_gbps"] = p.Mpps, p.Gbps
	if p.Mpps > 0 {
		out["mpps_ratio_plain"] = res.Mpps / p.Mpps
	}
	return nil
}

// pct is a share in out as a percentage (0 if missing).
func pct(v any) float64 {
	f, _ := v.(float64)
	return 100 * f
}

// writeBaseline prints what addBaseline put in out under perftest's table:
// one line per pair, then the medians and the spread.
func writeBaseline(w io.Writer, out map[string]any, lat bool) {
	segs, _ := out["segments"].([]perf.Segment)
	if lat {
		fmt.Fprintln(w, " segment first     goroce p50  p99 p99.9[usec]   UDP p50  p99 p99.9[usec]   ratio p50  p99 p99.9")
		for i, s := range segs {
			fmt.Fprintf(w, " %-7d %-9s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f %5.2f %5.2f\n", i+1, s.First,
				s.LatP50us, s.LatP99us, s.LatP999us, s.BaselineP50us, s.BaselineP99us, s.BaselineP999us,
				s.Ratio, s.P99Ratio, s.P999Ratio)
		}
		fmt.Fprintf(w, " raw UDP ping-pong p50: %.2f usec (ratio %.2f)\n", out["baseline_p50_us"], out["ratio"])
		fmt.Fprintf(w, " raw UDP ping-pong p99: %.2f usec (ratio %.2f)\n", out["baseline_p99_us"], out["p99_ratio"])
		fmt.Fprintf(w, " raw UDP ping-pong p99.9: %.2f usec (ratio %.2f)\n", out["baseline_p999_us"], out["p999_ratio"])
	} else {
		fmt.Fprintln(w, " segment first     goroce[Gb/sec]  UDP[Gb/sec]  ratio  retransmitted   cores(machine)  UDP cores(machine)  ns/byte  UDP ns/byte  cost  bound")
		for i, s := range segs {
			fmt.Fprintf(w, " %-7d %-9s %14.2f %12.2f %6.2f  %-13d  %5.2f (%4.2f) %10.2f (%4.2f) %9.3f %12.3f %5.2f %5.2f\n", i+1, s.First,
				s.Gbps, s.BaselineGbps, s.Ratio, s.Retransmitted,
				s.CPUCores, s.MachineCores, s.BaselineCPUCores, s.BaselineMachineCores,
				s.CPUNsPerByte, s.BaselineCPUNsPerByte, s.CPUCostRatio, s.BoundRatio)
		}
		fmt.Fprintf(w, " raw UDP ceiling: %.2f Gb/sec (ratio %.2f)\n", out["baseline_gbps"], out["ratio"])
		fmt.Fprintf(w, " raw UDP message rate: GSO %.3f Mpps (ratio %.2f), plain sendmmsg %.3f Mpps (ratio %.2f)\n",
			out["baseline_mpps"], out["mpps_ratio"], out["baseline_plain_mpps"], out["mpps_ratio_plain"])
		fmt.Fprintf(w, " CPU: goroce %.2f cores (machine %.2f), %.3f ns/byte (%.0f%% system); raw UDP %.2f cores (machine %.2f), %.3f ns/byte (%.0f%% system); cost ratio %.2f\n",
			out["cpu_cores"], out["machine_cores"], out["cpu_ns_per_byte"], pct(out["cpu_sys_share"]),
			out["baseline_cpu_cores"], out["baseline_machine_cores"], out["baseline_cpu_ns_per_byte"],
			pct(out["baseline_cpu_sys_share"]), out["cpu_cost_ratio"])
		fmt.Fprintf(w, " CPU bound: %d CPUs at goroce's CPU per byte move %.2f Gb/sec (ratio %.2f)\n",
			out["cpus"], out["bound_gbps"], out["bound_ratio"])
		if _, ok := out["floor_gbps"]; ok {
			fmt.Fprintf(w, " RoCE floor (UDP blast + ICRC both sides + placement): %.2f Gb/sec = %.2f of the ceiling; goroce %.2f of it\n",
				out["floor_gbps"], out["floor_ceiling"], out["floor_ratio"])
			fmt.Fprintf(w, " RoCE floor CPU: %.2f cores, %.3f ns/byte; datagrams lost: floor %.1f%%, raw UDP %.1f%%\n",
				out["floor_cpu_cores"], out["floor_cpu_ns_per_byte"], pct(out["floor_loss"]), pct(out["baseline_loss"]))
		}
	}
	fmt.Fprintf(w, " ratio over %d pairs: median %.2f, min %.2f, max %.2f, IQR %.2f-%.2f\n", len(segs),
		out["ratio_median"], out["ratio_min"], out["ratio_max"], out["ratio_q1"], out["ratio_q3"])
}
