package coll_test

import (
	"fmt"
	"testing"

	"github.com/goroce/goroce/coll"
)

// BenchmarkAllReduce runs float32 sum all-reduces on 4 ranks of this
// process (one device each, on loopback) at the three sizes of the
// issue's goals, and reports beside the time what decides it on a shared
// CPU (doc/coll.md §5): per call and rank, the datagrams received and
// sent and the batches the receive goroutine processed (each batch that
// finds the process asleep is a wake-up). The ranks share the test's
// processors, unlike goroce coll's processes, so its times are not the
// tool's; its counts are, and its allocations (all ranks', 0 per call).
// Profile it with -cpuprofile.
func BenchmarkAllReduce(b *testing.B) {
	const n = 4
	for _, size := range []int{8, 1 << 20, 64 << 20} {
		for _, algo := range []coll.Algorithm{coll.AlgoAuto, coll.AlgoRing, coll.AlgoHD} {
			b.Run(fmt.Sprintf("bytes=%d/algo=%v", size, algo), func(b *testing.B) {
				if size >= 64<<20 && algo != coll.AlgoAuto {
					b.Skip("64 MiB: the automatic choice only")
				}
				comms := startJob(b, n, func(c *coll.Config) { c.Algorithm = algo })
				bufs := make([][]float32, n)
				for i := range bufs {
					bufs[i] = make([]float32, size/4)
					for j := range bufs[i] {
						bufs[i][j] = 1
					}
				}
				call := func(c *coll.Comm) error {
					b := bufs[c.Rank()]
					return coll.AllReduce(c, b, b, coll.Sum)
				}
				for _, err := range onAll(comms, call) { // staging, programs, CTSs
					if err != nil {
						b.Fatal(err)
					}
				}
				var rx0, tx0, bat0 uint64
				for _, c := range comms {
					st := c.Device().Stats()
					rx0 += st.RxPackets.Load()
					tx0 += st.TxPackets.Load()
					bat0 += st.RxBatches.Load()
				}
				b.SetBytes(int64(size))
				b.ReportAllocs() // of all four ranks: 0 in steady state
				b.ResetTimer()
				errs := onAll(comms, func(c *coll.Comm) error {
					for range b.N {
						if err := call(c); err != nil {
							return err
						}
					}
					return nil
				})
				b.StopTimer()
				for r, err := range errs {
					if err != nil {
						b.Fatalf("rank %d: %v", r, err)
					}
				}
				var rx, tx, bat uint64
				for _, c := range comms {
					st := c.Device().Stats()
					rx += st.RxPackets.Load()
					tx += st.TxPackets.Load()
					bat += st.RxBatches.Load()
				}
				per := float64(b.N * n)
				b.ReportMetric(float64(rx-rx0)/per, "rx-pkts/call/rank")
				b.ReportMetric(float64(tx-tx0)/per, "tx-pkts/call/rank")
				b.ReportMetric(float64(bat-bat0)/per, "batches/call/rank")
			})
		}
	}
}
