package rawnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
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
	hdr   [MaxHdrLen]byte
	n     int
	ipOff int // EthLen, or EthLen+VLANLen with an 802.1Q tag
	v4    bool
	tos   uint8 // the default TOS / traffic class (DSCP and ECN)
	Dst   netip.AddrPort
	DMAC  [6]byte
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
	t := Template{n: e.HeaderLen(), ipOff: EthLen, v4: src.Addr().Is4(), tos: tos, Dst: dst, DMAC: dstMAC}
	// Seal a minimal transport packet (BTH + ICRC) to get the headers.
	var scratch [MaxHdrLen + bth.Size + bth.ICRCSize]byte
	tn := bth.Size + bth.ICRCSize
	if _, err := e.Seal(scratch[:], tn); err != nil {
		return Template{}, err
	}
	copy(t.hdr[:], scratch[:t.n])
	return t, nil
}

// Tag inserts an IEEE 802.1Q tag with VLAN ID vid (0: priority-tagged
// only) after the MAC addresses; Write then sets its PCP per frame.
func (t *Template) Tag(vid uint16) {
	if t.ipOff != EthLen {
		return
	}
	copy(t.hdr[EthLen-2+VLANLen:t.n+VLANLen], t.hdr[EthLen-2:t.n])
	binary.BigEndian.PutUint16(t.hdr[12:], EthTypeVLAN)
	binary.BigEndian.PutUint16(t.hdr[14:], vid&0x0fff)
	t.n += VLANLen
	t.ipOff += VLANLen
}

// Write writes the headers of dg, whose transport packet (dg.Buf) follows
// them, into b (len(b) ≥ Len()) and returns Len(): the UDP source port
// dg.Src's (0 keeps NewTemplate's, the link's), the ECN bits dg.ECN, the
// DSCP dg.DSCP (0 keeps the template's), the IPv4 ID dg.IPID, the IPv6 flow
// label dg.FlowLabel (0 keeps none), and with a tag (Tag) the PCP
// dg.Priority. It does not allocate.
func (t *Template) Write(b []byte, dg *link.Datagram) int {
	tn := len(dg.Buf)
	h := b[:t.n]
	copy(h, t.hdr[:t.n])
	if t.ipOff != EthLen {
		h[14] = h[14]&0x1f | dg.Priority<<5 // PCP, DEI 0
	}
	tos := t.tos&^3 | dg.ECN&3
	if dg.DSCP != 0 {
		tos = dg.DSCP<<2 | dg.ECN&3
	}
	ip := h[t.ipOff:]
	var udp []byte
	if t.v4 {
		ip[1] = tos
		binary.BigEndian.PutUint16(ip[2:], uint16(IPv4Len+UDPLen+tn))
		binary.BigEndian.PutUint16(ip[4:], dg.IPID)
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], rocev2.IPv4Checksum(ip[:IPv4Len]))
		udp = ip[IPv4Len:]
	} else {
		ip[0] = 0x60 | tos>>4
		ip[1] = tos<<4 | ip[1]&0x0f
		if fl := dg.FlowLabel & 0xFFFFF; fl != 0 {
			ip[1] = ip[1]&0xf0 | byte(fl>>16)
			binary.BigEndian.PutUint16(ip[2:], uint16(fl))
		}
		binary.BigEndian.PutUint16(ip[4:], uint16(UDPLen+tn))
		udp = ip[IPv6Len:]
	}
	if sport := dg.Src.Port(); sport != 0 {
		binary.BigEndian.PutUint16(udp[0:], sport)
	}
	binary.BigEndian.PutUint16(udp[4:], uint16(UDPLen+tn))
	return t.n
}
