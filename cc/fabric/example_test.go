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

// A ring all-reduce over 2 leaves × 8 hosts and 8 spines, with every QP
// sending from port 4791 and with the kernel's source-port rule, 8 QPs per
// neighbour pair, over 20 seeds.
func ExampleECMPSim_Sweep() {
	var sim fabric.ECMPSim
	seeds := make([]uint64, 20)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	for _, m := range []fabric.PortMode{fabric.PortFixed, fabric.PortKernel} {
		st, err := sim.Sweep(fabric.ECMPConfig{Mode: m, QPs: 8}, seeds)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-6s completion/ideal median %.2f, worst %.2f\n", m, st.RatioMedian, st.RatioWorst)
	}
	// Output:
	// fixed  completion/ideal median 2.01, worst 2.01
	// kernel completion/ideal median 1.00, worst 1.25
}
