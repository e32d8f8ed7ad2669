package rawnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
)

// Counter is an atomic event counter.
type Counter = atomic.Uint64

// Template holds the outer headers (Ethernet, IPv4 or IPv6, UDP) of the
// frames to one destination, built once by rocev2.Encap and patched per
// packet with the lengths, the ECN bits, the IPv4 ID, the UDP source port
// and the IPv4 header checksum. The transport packet it wraps already
// carries its ICRC (the device sealed it over the same IP/UDP fields with
// the ID it passes in Datagram.IPID), so nothing here touches it.
type Template struct {
	hdr  [MaxHdrLen]byte
	n    int
	v4   bool
	Dst  netip.AddrPort
	DMAC [6]byte
}

// Len returns the length of the outer headers.
func (t *Template) Len() int { return t.n }

// ErrAddrFamily is returned for a destination of the other IP family.
var ErrAddrFamily = errors.New("rawnet: destination of the other IP family")

// NewTemplate builds the headers from src (MAC, address and default UDP
// source port) to dst, with the TOS (DSCP and default ECN) and TTL given.
func NewTemplate(srcMAC, dstMAC [6]byte, src, dst netip.AddrPort, tos, ttl uint8) (Template, error) {
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	if src.Addr().Is4() != dst.Addr().Is4() || !dst.Addr().IsValid() {
		return Template{}, fmt.Errorf("%w: %v to %v", ErrAddrFamily, src.Addr(), dst.Addr())
	}
	e := rocev2.Encap{Ethernet: true, SrcMAC: srcMAC, DstMAC: dstMAC, Src: src, Dst: dst, TOS: tos, TTL: ttl}
	t := Template{n: e.HeaderLen(), v4: src.Addr().Is4(), Dst: dst, DMAC: dstMAC}
	// Seal a minimal transport packet (BTH + ICRC) to get the headers.
	var scratch [MaxHdrLen + bth.Size + bth.ICRCSize]byte
	tn := bth.Size + bth.ICRCSize
	if _, err := e.Seal(scratch[:], tn); err != nil {
		return Template{}, err
	}
	copy(t.hdr[:], scratch[:t.n])
	return t, nil
}

// Write writes the headers for a transport packet of tn bytes into b
// (len(b) ≥ Len()) with the given UDP source port (0 keeps NewTemplate's,
// the link's port), ECN bits and IPv4 ID, and returns Len(). It does not
// allocate.
func (t *Template) Write(b []byte, sport uint16, ecn uint8, id uint16, tn int) int {
	h := b[:t.n]
	copy(h, t.hdr[:t.n])
	ip := h[EthLen:]
	var udp []byte
	if t.v4 {
		ip[1] = ip[1]&^3 | ecn&3
		binary.BigEndian.PutUint16(ip[2:], uint16(IPv4Len+UDPLen+tn))
		binary.BigEndian.PutUint16(ip[4:], id)
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip[:IPv4Len]))
		udp = ip[IPv4Len:]
	} else {
		ip[1] = ip[1]&^0x30 | (ecn&3)<<4
		binary.BigEndian.PutUint16(ip[4:], uint16(UDPLen+tn))
		udp = ip[IPv6Len:]
	}
	if sport != 0 {
		binary.BigEndian.PutUint16(udp[0:], sport)
	}
	binary.BigEndian.PutUint16(udp[4:], uint16(UDPLen+tn))
	return t.n
}

func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
