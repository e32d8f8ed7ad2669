package testutil_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/goroce/goroce/internal/testutil"
)

// A link with 1 ms of delay that drops the packets listed in DropList,
// driven by a Sim: each delivered packet is echoed back on the reverse link.
func Example() {
	clock := testutil.NewClock()
	ab := testutil.NewLink(1, testutil.Impairment{Delay: time.Millisecond, DropList: []int{1}})
	ba := testutil.NewLink(2, testutil.Impairment{Delay: time.Millisecond})

	echoed := 0
	sim := testutil.NewSim(clock)
	sim.AddLink(ab, func(now time.Time, pkt []byte) {
		fmt.Printf("+%v B got %q\n", clock.Elapsed(), pkt)
		ba.Send(now, pkt)
	})
	sim.AddLink(ba, func(now time.Time, pkt []byte) {
		fmt.Printf("+%v A got %q back\n", clock.Elapsed(), pkt)
		echoed++
	})

	for _, m := range []string{"zero", "one", "two"} {
		ab.Send(clock.Now(), []byte(m))
	}
	err := sim.Run(func() bool { return echoed == 3 }, time.Second)
	fmt.Println(errors.Is(err, testutil.ErrDeadlock), ab.Stats().Dropped[testutil.DropIndex])
	// Output:
	// +1ms B got "zero"
	// +1ms B got "two"
	// +2ms A got "zero" back
	// +2ms A got "two" back
	// true 1
}

// The oracle checks completion accounting, here a retry-exceeded error
// followed by flushes (reliability matrix B8).
func ExampleOracle() {
	o := testutil.NewOracle()
	o.Post("sq", 1, true, testutil.AnyLen)
	o.Post("sq", 2, false, testutil.AnyLen)
	o.Post("sq", 3, true, testutil.AnyLen)
	o.Complete("sq", 1, 12, 0) // IBV_WC_RETRY_EXC_ERR
	o.Complete("sq", 3, testutil.StatusWRFlushErr, 0)
	fmt.Println(o.Check(false))
	// Output:
	// oracle: queue "sq": missing flush CQE for unsignaled wr_id 2 (post #1) after an error (IBA 10.7.3.1)
}
