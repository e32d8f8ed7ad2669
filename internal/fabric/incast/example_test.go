package incast_test

import (
	"fmt"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/internal/fabric/incast"
)

// The reaction point's parameters for hosts that send at 1 Gb/s.
func ExampleProfile() {
	p := incast.Profile(cc.Gbps)
	fmt.Printf("line %v, floor %v, R_AI %v, R_HAI %v, T %v, K %v, F %d, g %.5f\n",
		float64(p.LineRate)/1e6, float64(p.MinRate)/1e6, float64(p.AI)/1e6, float64(p.HAI)/1e6, p.RateTimer, p.AlphaPeriod, p.Threshold, p.G)
	fmt.Println(p.Validate())
	// Output:
	// line 1000, floor 10, R_AI 1, R_HAI 5, T 1ms, K 1ms, F 5, g 0.00391
	// <nil>
}
