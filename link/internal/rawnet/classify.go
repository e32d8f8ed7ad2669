package rawnet

import (
	"encoding/binary"
	"net/netip"
)

// Drop is the reason a received frame is not delivered.
type Drop uint8

// Drop reasons, in the order the classifier checks them.
const (
	Deliver       Drop = iota // a RoCEv2 datagram for the link
	DropTruncated             // shorter than its headers, or than its IP / UDP length says
	DropVLAN                  // 802.1ad or stacked tags in the frame, or a tag the kernel stripped that is not the link's
	DropNotIP                 // another EtherType (ARP, LLDP, …) or another IP version
	DropIPOptions             // IPv4 header with options (RoCEv2 senders never send them; the ICRC assumes 20 bytes)
	DropFragment              // an IPv4 fragment
	DropNotUDP                // another IP protocol, or IPv6 extension headers
	DropOtherAddr             // IP destination is not the link's address (or the other family)
	DropNotRoCE               // UDP to another port
	DropTooBig                // longer than the ring frame or the caller's buffer
	NumDrops
)

var dropNames = [NumDrops]string{"deliver", "truncated", "vlan", "not-ip", "ip-options", "fragment", "not-udp", "other-addr", "not-roce", "too-big"}

// String returns a short name of d.
func (d Drop) String() string {
	if d < NumDrops {
		return dropNames[d]
	}
	return "Drop(invalid)"
}

// Header sizes and protocol numbers.
const (
	EthLen      = 14
	IPv4Len     = 20
	IPv6Len     = 40
	UDPLen      = 8
	VLANLen     = 4                                   // an IEEE 802.1Q tag
	MaxHdrLen   = EthLen + VLANLen + IPv6Len + UDPLen // the longest outer header a raw link writes
	EthTypeIPv4 = 0x0800
	EthTypeIPv6 = 0x86dd
	EthTypeARP  = 0x0806
	EthTypeVLAN = 0x8100
	EthTypeQinQ = 0x88a8
	ProtoUDP    = 17
	ProtoICMPv6 = 58
)

// Frame is what Classify extracts from a frame it delivers.
type Frame struct {
	// Payload is the UDP payload (BTH to ICRC): a view into the frame.
	Payload []byte
	Src     netip.AddrPort
	Dst     netip.AddrPort
	SrcMAC  [6]byte
	ECN     uint8
	DSCP    uint8
	IPID    uint16 // 0 for IPv6
	// Tagged says the frame carried one IEEE 802.1Q tag, whose PCP and
	// VLAN ID are Priority and VLAN.
	Tagged   bool
	Priority uint8
	VLAN     uint16
}

// Classify decides whether the Ethernet frame b is a RoCEv2 datagram for
// local:port and, if so, fills f. It reads b only within len(b) and trusts
// no length field beyond what b holds; trailing Ethernet padding is
// ignored (the IP length bounds the datagram). It does not allocate.
func Classify(b []byte, local netip.Addr, port uint16, f *Frame) Drop {
	d, off, n := ClassifyHead(b, len(b), local, port, f)
	if d == Deliver {
		f.Payload = b[off : off+n]
	}
	return d
}

// ClassifyHead is Classify for a frame of total bytes of which only the
// first len(head) are at hand (the first buffer of a multi-buffer frame):
// it checks the headers, which must lie in head, and the length fields
// against total, and returns the offset and length of the UDP payload in
// the whole frame instead of setting f.Payload.
func ClassifyHead(head []byte, total int, local netip.Addr, port uint16, f *Frame) (d Drop, off, n int) {
	b := head
	if total < len(b) {
		b = b[:total]
	}
	if len(b) < EthLen {
		return DropTruncated, 0, 0
	}
	e := EthLen
	et := binary.BigEndian.Uint16(b[12:])
	f.Tagged, f.Priority, f.VLAN = false, 0, 0
	if et == EthTypeVLAN { // one 802.1Q tag: PFC priorities, a VLAN
		if len(b) < EthLen+VLANLen {
			return DropTruncated, 0, 0
		}
		tci := binary.BigEndian.Uint16(b[14:])
		f.Tagged, f.Priority, f.VLAN = true, uint8(tci>>13), tci&0x0fff
		e += VLANLen
		et = binary.BigEndian.Uint16(b[16:])
	}
	switch et {
	case EthTypeVLAN, EthTypeQinQ:
		return DropVLAN, 0, 0 // stacked tags
	case EthTypeIPv4:
		if !local.Is4() {
			return DropOtherAddr, 0, 0
		}
		ip := b[e:]
		if len(ip) < IPv4Len+UDPLen {
			return DropTruncated, 0, 0
		}
		if ip[0]>>4 != 4 {
			return DropNotIP, 0, 0
		}
		if ip[0]&0x0f != 5 {
			return DropIPOptions, 0, 0
		}
		ipTotal := int(binary.BigEndian.Uint16(ip[2:]))
		if ipTotal < IPv4Len+UDPLen || e+ipTotal > total {
			return DropTruncated, 0, 0
		}
		if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
			return DropFragment, 0, 0
		}
		if ip[9] != ProtoUDP {
			return DropNotUDP, 0, 0
		}
		if netip.AddrFrom4([4]byte(ip[16:20])) != local {
			return DropOtherAddr, 0, 0
		}
		udp := ip[IPv4Len:]
		if binary.BigEndian.Uint16(udp[2:]) != port {
			return DropNotRoCE, 0, 0
		}
		ul := int(binary.BigEndian.Uint16(udp[4:]))
		if ul < UDPLen || ul > ipTotal-IPv4Len {
			return DropTruncated, 0, 0
		}
		off, n = e+IPv4Len+UDPLen, ul-UDPLen
		f.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), binary.BigEndian.Uint16(udp[0:]))
		f.ECN, f.DSCP = ip[1]&3, ip[1]>>2
		f.IPID = binary.BigEndian.Uint16(ip[4:])
	case EthTypeIPv6:
		if !local.Is6() {
			return DropOtherAddr, 0, 0
		}
		ip := b[e:]
		if len(ip) < IPv6Len+UDPLen {
			return DropTruncated, 0, 0
		}
		if ip[0]>>4 != 6 {
			return DropNotIP, 0, 0
		}
		plen := int(binary.BigEndian.Uint16(ip[4:]))
		if plen < UDPLen || e+IPv6Len+plen > total {
			return DropTruncated, 0, 0
		}
		if ip[6] != ProtoUDP {
			return DropNotUDP, 0, 0
		}
		if netip.AddrFrom16([16]byte(ip[24:40])) != local {
			return DropOtherAddr, 0, 0
		}
		udp := ip[IPv6Len:]
		if binary.BigEndian.Uint16(udp[2:]) != port {
			return DropNotRoCE, 0, 0
		}
		ul := int(binary.BigEndian.Uint16(udp[4:]))
		if ul < UDPLen || ul > plen {
			return DropTruncated, 0, 0
		}
		off, n = e+IPv6Len+UDPLen, ul-UDPLen
		f.Src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(ip[8:24])), binary.BigEndian.Uint16(udp[0:]))
		tc := ip[0]<<4 | ip[1]>>4
		f.ECN, f.DSCP = tc&3, tc>>2
		f.IPID = 0
	default:
		return DropNotIP, 0, 0
	}
	f.Dst = netip.AddrPortFrom(local, port)
	copy(f.SrcMAC[:], b[6:12])
	return Deliver, off, n
}

// DropCounters counts frames by Drop reason. The zero value is ready. It
// is written by the one receiving goroutine and read by any (atomics).
type DropCounters [NumDrops]Counter
