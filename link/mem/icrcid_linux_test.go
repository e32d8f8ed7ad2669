package mem_test

import (
	"net/netip"
	"testing"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link/mem"
)

// TestExactICRCID: link/mem carries the IPv4 ID and reports it known, so
// the device checks each ICRC against the header's ID exactly and never
// recovers another (issue 17, defect 1).
func TestExactICRCID(t *testing.T) {
	n := mem.NewNetwork()
	peer := n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))
	dev := n.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))
	defer peer.Close()
	linktest.CheckExactICRCID(t, peer, dev)
}
