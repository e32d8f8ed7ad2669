package flow_test

import (
	"fmt"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/flow"
)

// ExampleAnalyze reconstructs the RC connection of ibv_rc_pingpong: both
// sides are requesters, each acknowledging the other's SENDs.
func ExampleAnalyze() {
	r, err := capture.Open("../../testdata/pcaps/rc_pingpong.pcap")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	res, err := flow.Analyze(r, flow.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := res.Connections[0]
	fmt.Println(c.Title(), "paired by", c.PairedBy)
	for _, d := range c.Dirs {
		fmt.Printf("%s: %d requests, %d ACKs, PSNs per ACK %.1f\n", d.Name(), d.Requests.Packets, d.Responses.ACKs, d.Responses.Coalescing.Mean)
	}
	// Output:
	// RC 10.77.0.3 (QP 0x000011) <-> 10.77.0.2 (QP 0x000011) paired by udp-port
	// 10.77.0.3 -> 10.77.0.2 QP 0x000011: 5 requests, 5 ACKs, PSNs per ACK 1.0
	// 10.77.0.2 -> 10.77.0.3 QP 0x000011: 5 requests, 5 ACKs, PSNs per ACK 1.0
}
