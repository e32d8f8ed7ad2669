package cmhostile_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/internal/cmhostile"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// Example runs one scenario against a goroce device on an in-memory
// network: a DREQ for comm IDs nobody has, which the kernel's CM answers
// with a DREP (cm_issue_drep), as goroce does.
func Example() {
	n := mem.NewNetwork()
	self, target := netip.MustParseAddrPort("10.0.0.1:4791"), netip.MustParseAddrPort("10.0.0.2:4791")
	d, err := roce.Open(roce.Config{Link: n.Attach(target)})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	l, err := d.Listen(7471, roce.ListenConfig{}) // starts the device's CM (QP1)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	peer := cmhostile.NewLinkPeer(n.Attach(self), target)
	defer peer.Close()
	for _, sc := range cmhostile.Scenarios() {
		if sc.Name != "dreq-unknown" {
			continue
		}
		s := cmhostile.NewSession(peer, cmhostile.Env{Self: self.Addr(), Target: target.Addr(), RCPort: 7471,
			Wait: time.Second, Seed: 1})
		fmt.Printf("%s: %v\nthe kernel: %s\n", sc.Name, sc.Run(s), sc.Kernel)
	}
	// Output:
	// dreq-unknown: <nil>
	// the kernel: a DREQ for unknown comm IDs: DREP with the IDs swapped (cm_issue_drep)
}
