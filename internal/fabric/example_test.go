package fabric_test

import (
	"fmt"

	"github.com/goroce/goroce/internal/fabric"
)

// Plan lays out a fabric without building it: here two leaves of two
// hosts and four 1 Gbit/s spines, the hosts and the links of leaf 0.
func ExamplePlan() {
	f, err := fabric.Plan(fabric.Config{Name: "demo", HostsPerLeaf: 2, Spines: 4, Rate: fabric.Gbit})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f)
	for _, h := range f.Hosts {
		fmt.Printf("%s leaf %d %v in %s\n", h.Name, h.Leaf, h.Addr, h.NS)
	}
	for _, l := range f.Links {
		if l.Leaf == 0 {
			fmt.Printf("%-6s %s/%s %v — %s/%s %v, %v\n", l.Name, l.A.NS, l.A.Dev, l.A.Addr, l.B.NS, l.B.Dev, l.B.Addr, l.Rate)
		}
	}
	// Output:
	// fabric demo: 2 leaves × 2 hosts, 4 spines, links 1gbit, hosts unlimited, MTU 9000, buffer 524288 B, ECN at 40000 B (γ 0.95) on 16 egresses
	// h0 leaf 0 10.201.0.2 in gfab-demo-h0
	// h1 leaf 0 10.201.1.2 in gfab-demo-h1
	// h2 leaf 1 10.202.0.2 in gfab-demo-h2
	// h3 leaf 1 10.202.1.2 in gfab-demo-h3
	// l0-s0  gfab-demo-l0/sp0 10.210.0.1/24 — gfab-demo-s0/lf0 10.210.0.2/24, 1gbit
	// l0-s1  gfab-demo-l0/sp1 10.210.1.1/24 — gfab-demo-s1/lf0 10.210.1.2/24, 1gbit
	// l0-s2  gfab-demo-l0/sp2 10.210.2.1/24 — gfab-demo-s2/lf0 10.210.2.2/24, 1gbit
	// l0-s3  gfab-demo-l0/sp3 10.210.3.1/24 — gfab-demo-s3/lf0 10.210.3.2/24, 1gbit
	// l0-h0  gfab-demo-l0/h0 10.201.0.1/24 — gfab-demo-h0/eth0 10.201.0.2/24, unlimited
	// l0-h1  gfab-demo-l0/h1 10.201.1.1/24 — gfab-demo-h1/eth0 10.201.1.2/24, unlimited
}
