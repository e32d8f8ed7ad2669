//go:build linux

package afpacket_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afpacket"
	"github.com/goroce/goroce/roce"
)

// Open a raw link on an interface and run a device over it. Without
// CAP_NET_RAW the error matches link.ErrNotSupported.
func Example() {
	l, err := afpacket.Open(afpacket.Config{
		Interface: "eth0",
		Addr:      netip.MustParseAddrPort("10.77.0.1:4791"),
	})
	if errors.Is(err, link.ErrNotSupported) {
		fmt.Println("needs CAP_NET_RAW:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", l.Info())
	dev, err := roce.Open(roce.Config{Link: l}) // the device closes the link
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
}
