package cc_test

import (
	"fmt"
	"time"

	"github.com/goroce/goroce/cc"
)

// A sender's reaction point: the first CNP halves the rate (doc/dcqcn.md §5.4
// U1); five timer periods of fast recovery close 31/32 of the gap (U2).
func ExampleDCQCN() {
	d, err := cc.New(cc.ProfileP.Config())
	if err != nil {
		panic(err)
	}
	start := time.Unix(0, 0)
	d.OnCNP(start)
	fmt.Println("after CNP:", d.Rate(), "target", d.TargetRate(), "α", d.Alpha())
	for range 5 {
		deadline, _ := d.Deadline() // a driver arms one timer here
		d.OnTimeout(deadline)
	}
	fmt.Println("after 5·T:", d.Rate(), "target", d.TargetRate())
	// Output:
	// after CNP: 50 Gb/s target 100 Gb/s α 1
	// after 5·T: 98.4375 Gb/s target 100 Gb/s
}

// The receiver's notification point answers CE-marked data packets with at
// most one CNP per N = 50 µs (doc/dcqcn.md §5.4 N1).
func ExampleNP() {
	np, err := cc.NewNP(cc.ProfileP.NPConfig())
	if err != nil {
		panic(err)
	}
	start := time.Unix(0, 0)
	for us := 0; us <= 100; us += 25 {
		now := start.Add(time.Duration(us) * time.Microsecond)
		fmt.Printf("CE at %3d µs → CNP %v\n", us, np.OnPacket(now, true, true))
	}
	// Output:
	// CE at   0 µs → CNP true
	// CE at  25 µs → CNP false
	// CE at  50 µs → CNP true
	// CE at  75 µs → CNP false
	// CE at 100 µs → CNP true
}

// The switch marks with RED on the egress queue length (doc/dcqcn.md §1.1).
func ExampleRED() {
	r, err := cc.NewRED(cc.ProfileP.REDConfig())
	if err != nil {
		panic(err)
	}
	for _, q := range []int{5_000, 102_500, 200_000, 200_001} {
		fmt.Printf("p(%d B) = %g\n", q, r.Probability(q))
	}
	// Output:
	// p(5000 B) = 0
	// p(102500 B) = 0.005
	// p(200000 B) = 0.01
	// p(200001 B) = 1
}

// A pacer at 1 Gb/s with a bucket of one 1000-byte packet: each packet may
// go 8 µs after the one before it; a cut to 500 Mb/s doubles the gap of the
// very next packet.
func ExamplePacer() {
	var p cc.Pacer
	p.SetSize(1000, 1000)
	now := time.Unix(0, 0)
	p.Start(now, 1*cc.Gbps)
	for range 2 {
		fmt.Println("ready:", p.Ready(now))
		p.Sent(now, 1000)
		fmt.Println("next in", p.Next().Sub(now))
		now = p.Next()
	}
	p.SetRate(now, 500*cc.Mbps)
	p.Sent(now, 1000)
	fmt.Println("after the cut, next in", p.Next().Sub(now))
	// Output:
	// ready: true
	// next in 8µs
	// ready: true
	// next in 8µs
	// after the cut, next in 16µs
}
