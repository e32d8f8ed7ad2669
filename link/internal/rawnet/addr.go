package rawnet

import (
	"net/netip"

	"github.com/goroce/goroce/rocev2"
)

// RoCEAddr returns a as the raw links read an address: port 0 means the
// RoCEv2 port 4791, and an IPv4-mapped IPv6 address means IPv4. It is
// what a Config's Addr and a Datagram's Dst become.
func RoCEAddr(a netip.AddrPort) netip.AddrPort {
	port := a.Port()
	if port == 0 {
		port = rocev2.UDPPort
	}
	return netip.AddrPortFrom(a.Addr().Unmap(), port)
}
