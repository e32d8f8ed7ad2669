package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afpacket"
	"github.com/goroce/goroce/link/afxdp"
	"github.com/goroce/goroce/link/udp"
)

// linkKinds lists the bindings --link accepts.
const linkKinds = "udp, afpacket or afxdp"

// openLink opens the binding kind for a device at addr; dev is the
// network interface of the raw bindings (ignored by udp).
func openLink(kind, dev string, addr netip.AddrPort) (link.Link, error) {
	switch kind {
	case "", "udp":
		return udp.Open(udp.Config{Addr: addr})
	case "afpacket":
		if dev == "" {
			return nil, fmt.Errorf("--link afpacket needs --dev IFACE")
		}
		return afpacket.Open(afpacket.Config{Interface: dev, Addr: addr})
	case "afxdp":
		if dev == "" {
			return nil, fmt.Errorf("--link afxdp needs --dev IFACE")
		}
		return afxdp.Open(afxdp.Config{Interface: dev, Addr: addr})
	}
	return nil, fmt.Errorf("unknown --link %q (%s)", kind, linkKinds)
}

// linkOpener returns an opener for devices at the given addresses: devs is
// one interface for all of them, or a comma-separated list with one
// interface per address (two devices of a loopback test on the two ends
// of a veth pair).
func linkOpener(kind, devs string, addrs ...netip.AddrPort) (func(netip.AddrPort) (link.Link, error), error) {
	if kind != "" && kind != "udp" && kind != "afpacket" && kind != "afxdp" {
		return nil, fmt.Errorf("unknown --link %q (%s)", kind, linkKinds)
	}
	list := strings.Split(devs, ",")
	if devs != "" && len(list) != 1 && len(list) != len(addrs) {
		return nil, fmt.Errorf("--dev %q: give one interface, or one per device (%d)", devs, len(addrs))
	}
	return func(addr netip.AddrPort) (link.Link, error) {
		dev := list[0]
		for i, a := range addrs {
			if a == addr && i < len(list) {
				dev = list[i]
			}
		}
		return openLink(kind, dev, addr)
	}, nil
}
