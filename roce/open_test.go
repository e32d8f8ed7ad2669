package roce_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/roce"
)

// TestOpenFailureClosesItsLink: "if Open fails, it closes the link it
// opened". Found in review: the deferred close read the if-block's shadowed
// err, which was nil, so the UDP socket leaked and the port stayed bound.
func TestOpenFailureClosesItsLink(t *testing.T) {
	// find a free port
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(c.LocalAddr().String())
	c.Close()
	if _, err := roce.Open(roce.Config{Addr: addr, Batch: -1}); err == nil {
		t.Fatal("Open accepted Batch -1")
	}
	l, err := udp.Open(udp.Config{Addr: addr})
	if err != nil {
		t.Fatalf("the failed Open left its UDP socket open: %v", err)
	}
	l.Close()
}
