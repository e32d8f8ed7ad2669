package fabric_test

import (
	"fmt"
	"time"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cc/fabric"
)

// Two flows share a 100 G bottleneck under the paper's parameters
// (doc/dcqcn.md §5.3 S2, shortened to 30 ms).
func Example() {
	sc, _ := fabric.LookupScenario("S2")
	cfg := sc.Config(cc.ProfileP, 1)
	cfg.Duration = 30 * time.Millisecond
	cfg.Window = [2]time.Duration{10 * time.Millisecond, 30 * time.Millisecond}
	r, err := fabric.Run(cfg)
	if err != nil {
		panic(err)
	}
	from, to := 10*time.Millisecond, 30*time.Millisecond
	fmt.Printf("U %.2f, J %.2f, drops %d\n", r.Utilization(from, to), r.Jain([]int{0, 1}, from, to), r.Drops)
	fmt.Println("Q99 below Kmax:", r.QueueQuantile(0.99) < cfg.RED.Kmax)
	// Output:
	// U 0.99, J 1.00, drops 0
	// Q99 below Kmax: true
}
