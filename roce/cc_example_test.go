package roce_test

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// Configure DCQCN for a device on a 25 Gb/s link, pace one QP at no more
// than 1 Gb/s, and see a bad parameter rejected.
func ExampleCCConfig() {
	n := mem.NewNetwork()
	rp := cc.ProfileP.Config()
	rp.LineRate = 25 * cc.Gbps
	np := cc.NPConfig{Interval: 4 * time.Microsecond} // ConnectX min_time_between_cnps
	d, err := roce.Open(roce.Config{
		Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")),
		CC:   roce.CCConfig{RP: &rp, NP: &np},
	})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	c, _ := d.CreateCQ(16)
	q, _ := d.CreateQP(roce.QPConfig{PD: d.AllocPD(), SendCQ: c, RecvCQ: c})
	peer := roce.Info{Addr: netip.MustParseAddr("10.0.0.2"), QPN: 0x42}
	if err := q.Connect(peer, roce.ConnectOptions{MaxRate: 1 * cc.Gbps}); err != nil {
		panic(err)
	}
	s := q.CC()
	fmt.Println("DCQCN before any CNP:", s.Rate, "paced at", s.PaceRate)

	bad := rp
	bad.MinRate = cc.Bitrate(math.NaN())
	_, err = roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort("10.0.0.3:4791")), CC: roce.CCConfig{RP: &bad}})
	fmt.Println(errors.Is(err, roce.ErrInvalidArg), errors.Is(err, cc.ErrInvalidConfig))
	// Output:
	// DCQCN before any CNP: 25 Gb/s paced at 1 Gb/s
	// true true
}
