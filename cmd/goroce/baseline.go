package main

import (
	"context"
	"net/netip"
	"time"

	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/link/udp"
)

// addBaseline measures, in the same run, the raw UDP ceiling with the same
// batching, GSO and GRO as the RDMA test (perf.Baseline) and adds it to out:
// for bandwidth tests a blast of datagrams the size of a full RoCE packet at
// the test's MTU ("baseline_gbps", "ratio" = RDMA goodput / raw), for
// latency tests a Go UDP ping-pong ("baseline_p50_us", "ratio" = RDMA p50 /
// raw p50). Both report what perftest users compare against: the best this
// machine's kernel UDP path can do. Bandwidth tests also get the message
// rate of two raw shapes: the GSO/GRO blast ("baseline_mpps",
// "mpps_ratio") and plain sendmmsg/recvmmsg with GSO and GRO off
// ("baseline_plain_mpps", "baseline_plain_gbps", "mpps_ratio_plain").
func addBaseline(ctx context.Context, out map[string]any, c perf.Config, res perf.Result) error {
	mtu := c.MTU.Bytes()
	if mtu == 0 {
		mtu = 4096
	}
	bc := perf.BaselineConfig{
		Sender:   udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")},
		Receiver: udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")},
		Size:     min(mtu, max(res.Size, 1)) + 28 + 4, // BTH+RETH (28) + ICRC: an RDMA WRITE packet
		Duration: time.Second,
	}
	if c.Latency {
		bc.NoBlast = true
		bc.PingSize = max(res.Size, 1) + 28 + 4
	} else {
		bc.NoPing = true
		bc.Plain = true
	}
	b, err := perf.Baseline(ctx, bc)
	if err != nil {
		return err
	}
	if c.Latency {
		p50 := float64(b.Latency.P50) / 1e3
		out["baseline_p50_us"] = p50
		out["baseline_p99_us"] = float64(b.Latency.P99) / 1e3
		if p50 > 0 {
			out["ratio"] = res.LatP50us / p50
		}
		return nil
	}
	out["baseline_gbps"] = b.Gbps
	if b.Gbps > 0 {
		out["ratio"] = res.Gbps / b.Gbps
	}
	out["baseline_mpps"] = b.Mpps
	out["baseline_plain_mpps"] = b.Plain.Mpps
	out["baseline_plain_gbps"] = b.Plain.Gbps
	if b.Mpps > 0 {
		out["mpps_ratio"] = res.Mpps / b.Mpps
	}
	if b.Plain.Mpps > 0 {
		out["mpps_ratio_plain"] = res.Mpps / b.Plain.Mpps
	}
	return nil
}
