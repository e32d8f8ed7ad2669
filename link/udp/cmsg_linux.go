//go:build linux

package udp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// putName writes ap as a sockaddr for this socket's family.
func (l *Link) putName(b *[sockaddrSize]byte, ap netip.AddrPort) (uint32, error) {
	a := ap.Addr()
	if !l.v6 {
		a = a.Unmap()
		if !a.Is4() {
			return 0, fmt.Errorf("%w: %v on IPv4 link %s", ErrAddress, ap, l.local)
		}
		putU16(b[0:], unix.AF_INET)
		b[2], b[3] = byte(ap.Port()>>8), byte(ap.Port())
		a4 := a.As4()
		copy(b[4:8], a4[:])
		clear(b[8:16])
		return unix.SizeofSockaddrInet4, nil
	}
	if !a.Is6() || a.Is4In6() {
		return 0, fmt.Errorf("%w: %v on IPv6 link %s", ErrAddress, ap, l.local)
	}
	putU16(b[0:], unix.AF_INET6)
	b[2], b[3] = byte(ap.Port()>>8), byte(ap.Port())
	clear(b[4:8])
	a16 := a.As16()
	copy(b[8:24], a16[:])
	putU32(b[24:], l.zoneIndex(a.Zone()))
	return unix.SizeofSockaddrInet6, nil
}

// zoneIndex resolves an IPv6 zone to an interface index, caching the last.
func (l *Link) zoneIndex(z string) uint32 {
	if z == "" {
		return 0
	}
	t := &l.tx
	if z == t.zoneName {
		return t.zoneIdx
	}
	var idx uint32
	if ifi, err := net.InterfaceByName(z); err == nil {
		idx = uint32(ifi.Index)
	} else {
		for i := 0; i < len(z); i++ {
			if z[i] < '0' || z[i] > '9' {
				idx = 0
				break
			}
			idx = idx*10 + uint32(z[i]-'0')
		}
	}
	t.zoneName, t.zoneIdx = z, idx
	return idx
}

// putPktinfo writes an IP_PKTINFO / IPV6_PKTINFO control message choosing
// the source address a.
func (l *Link) putPktinfo(b []byte, a netip.Addr) int {
	if l.v6 {
		if !a.Is6() {
			return 0
		}
		n := putCmsg(b, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, unix.SizeofInet6Pktinfo, 0)
		d := b[unix.CmsgLen(0):]
		a16 := a.As16()
		copy(d[0:16], a16[:])
		putU32(d[16:], 0)
		return n
	}
	if !a.Is4() {
		return 0
	}
	n := putCmsg(b, unix.IPPROTO_IP, unix.IP_PKTINFO, unix.SizeofInet4Pktinfo, 0)
	d := b[unix.CmsgLen(0):]
	putU32(d[0:], 0) // ifindex
	a4 := a.As4()
	copy(d[4:8], a4[:]) // ipi_spec_dst: the source address
	clear(d[8:12])
	return n
}

// putCmsg writes a control message header and a native-endian value of
// size 1, 2 or 4 (larger payloads are written by the caller) and returns
// CMSG_SPACE(size).
func putCmsg(b []byte, level, typ int32, size int, v uint32) int {
	c := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	c.Level, c.Type = level, typ
	c.SetLen(unix.CmsgLen(size))
	d := b[unix.CmsgLen(0):]
	switch size {
	case 1:
		d[0] = byte(v)
	case 2:
		putU16(d, uint16(v))
	case 4:
		putU32(d, v)
	}
	sp := unix.CmsgSpace(size)
	clear(b[unix.CmsgLen(size):sp])
	return sp
}

// parseRx reads message m's source address and control messages.
func (l *Link) parseRx(m int, md *rxMeta) {
	r := &l.rx
	md.src = parseName(&r.names[m])
	md.dst = l.local
	h := &r.msgs[m].Hdr
	oob := r.oob[m*rxOOBSize : m*rxOOBSize+int(h.Controllen)]
	hdr := unix.CmsgLen(0)
	for len(oob) >= hdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		cl := int(c.Len)
		if cl < hdr || cl > len(oob) {
			return
		}
		data := oob[hdr:cl]
		switch {
		case c.Level == unix.SOL_UDP && c.Type == unix.UDP_GRO && len(data) >= 4:
			md.seg = int(getU32(data))
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_TTL && len(data) >= 4:
			md.ttl = uint8(getU32(data))
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_HOPLIMIT && len(data) >= 4:
			md.ttl = uint8(getU32(data))
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_TOS && len(data) >= 1:
			md.ecn, md.dscp = data[0]&3, data[0]>>2
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_TCLASS && len(data) >= 4:
			md.ecn, md.dscp = uint8(getU32(data))&3, uint8(getU32(data))>>2
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			md.dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(data[8:12])), l.local.Port())
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			md.dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(data[0:16])), l.local.Port())
		}
		sp := unix.CmsgSpace(cl - hdr)
		if sp >= len(oob) {
			return
		}
		oob = oob[sp:]
	}
}

// parseName decodes a sockaddr_in / sockaddr_in6.
func parseName(b *[sockaddrSize]byte) netip.AddrPort {
	port := uint16(b[2])<<8 | uint16(b[3])
	switch getU16(b[0:]) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case unix.AF_INET6:
		a := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := getU32(b[24:]); scope != 0 && a.IsLinkLocalUnicast() {
			a = a.WithZone(zoneName(scope))
		}
		return netip.AddrPortFrom(a, port)
	}
	return netip.AddrPort{}
}

func zoneName(idx uint32) string {
	if ifi, err := net.InterfaceByIndex(int(idx)); err == nil {
		return ifi.Name
	}
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + idx%10)
		idx /= 10
		if idx == 0 {
			break
		}
	}
	return string(b[i:])
}

func putU16(b []byte, v uint16) { binary.NativeEndian.PutUint16(b, v) }
func putU32(b []byte, v uint32) { binary.NativeEndian.PutUint32(b, v) }
func getU16(b []byte) uint16    { return binary.NativeEndian.Uint16(b) }
func getU32(b []byte) uint32    { return binary.NativeEndian.Uint32(b) }
