//go:build linux

package afxdp_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afxdp"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// Open an AF_XDP link and pick the QP path MTU from what the kernel gave
// it: 4096 needs multi-buffer frames.
func Example() {
	l, err := afxdp.Open(afxdp.Config{
		Interface: "eth0",
		Addr:      netip.MustParseAddrPort("10.77.0.1:4791"),
	})
	if errors.Is(err, link.ErrNotSupported) {
		fmt.Println("needs CAP_NET_RAW, CAP_BPF and CAP_NET_ADMIN:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	mtu := qp.MTU4096
	if in := l.Info(); in.MaxFrame < 14+20+8+12+16+4096+4 {
		mtu = qp.MTU2048
	}
	dev, err := roce.Open(roce.Config{Link: l})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	fmt.Println("path MTU", mtu.Bytes())
}
