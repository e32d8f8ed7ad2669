package fabric_test

import (
	"testing"
	"time"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cc/fabric"
)

// BenchmarkRun measures the simulator on 10 ms of the 2:1 and 16:1
// incasts; events/s is the figure to watch.
func BenchmarkRun(b *testing.B) {
	for _, id := range []string{"S2", "S4"} {
		b.Run(id, func(b *testing.B) {
			c := short(id, cc.ProfileP, 1, 10*time.Millisecond)
			b.ReportAllocs()
			var events uint64
			for b.Loop() {
				r, err := fabric.Run(c)
				if err != nil {
					b.Fatal(err)
				}
				events += r.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
