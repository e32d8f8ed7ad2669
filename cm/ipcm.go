package cm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// ServiceID is a CM service ID (IBA 12.7.3).
type ServiceID uint64

// PortSpace is an rdma_cm port space (enum rdma_ucm_port_space): the
// protocol byte of an IP-CM service ID (IBA Annex A11.2.1).
type PortSpace uint16

// rdma_cm port spaces.
const (
	PortSpaceIPoIB PortSpace = 0x0002
	PortSpaceIB    PortSpace = 0x013F // RDMA_PS_IB
	PortSpaceTCP   PortSpace = 0x0106 // RDMA_PS_TCP: RC, rping and perftest -R
	PortSpaceUDP   PortSpace = 0x0111 // RDMA_PS_UDP: UD with SIDR
)

// String returns "TCP", "UDP", "IB", "IPoIB" or PortSpace(n).
func (p PortSpace) String() string {
	switch p {
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceUDP:
		return "UDP"
	case PortSpaceIB:
		return "IB"
	case PortSpaceIPoIB:
		return "IPoIB"
	}
	return fmt.Sprintf("PortSpace(%#x)", uint16(p))
}

// UDPQKey is the Q_Key rdma_cm gives every UD QP of the UDP port space
// (RDMA_UDP_QKEY, set by cma.c's cma_set_qkey when the consumer names none)
// and puts in its SIDR_REP; an active side whose QP has it refuses a
// SIDR_REP with another.
const UDPQKey = 0x01234567

// IPServiceID returns the IP-CM service ID of a port in a port space,
// 0x0000000001 | ps | port (cma.c cma_get_service_id: ps << 16 + port).
func IPServiceID(ps PortSpace, port uint16) ServiceID {
	return ServiceID(uint64(ps)<<16 | uint64(port))
}

// IsIP reports whether s is an IP-CM service ID (prefix 0x0000000001).
func (s ServiceID) IsIP() bool { return uint64(s)>>24 == 1 }

// PortSpace returns the port space of an IP-CM service ID.
func (s ServiceID) PortSpace() PortSpace { return PortSpace(uint64(s) >> 16 & 0xffff) }

// Port returns the port of an IP-CM service ID.
func (s ServiceID) Port() uint16 { return uint16(s) }

// String formats the ID in hex, with port space and port for IP-CM IDs.
func (s ServiceID) String() string {
	if s.IsIP() {
		return fmt.Sprintf("%#016x(%v:%d)", uint64(s), s.PortSpace(), s.Port())
	}
	return fmt.Sprintf("%#016x", uint64(s))
}

// IPHeaderSize is the size of the IP-CM private-data header (cma_hdr)
// at the start of a REQ's private data. rdma_cm leaves
// PrivateDataREQ - IPHeaderSize = 56 bytes for the user.
const IPHeaderSize = 36

// ErrBadIPHeader is returned by ParseIPHeader for a cma_hdr with an
// unknown version, and by CheckIPHeader for one rdma_cm refuses.
var ErrBadIPHeader = errors.New("cm: bad IP-CM private data header")

// IPHeader is a view of the IP-CM private data header (Annex A11.3.1.2;
// the kernel's struct cma_hdr).
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| MajV  | MinV  | IPV   | Rsvd  |          Source Port          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Source IP address (16 bytes)                 |
//	|               Destination IP address (16 bytes)               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The version byte is 0 (cma_version; IP-CM major 0 minor 0). An IPv4
// address is 12 zero bytes and the 4 address bytes, not ::ffff-mapped.
type IPHeader []byte

// ParseIPHeader returns a view of the first IPHeaderSize bytes of b,
// usually REQ.PrivateData(). It checks the version byte (0) and the IP
// version (4 or 6).
func ParseIPHeader(b []byte) (IPHeader, error) {
	if len(b) < IPHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrTruncated, len(b))
	}
	h := IPHeader(b[:IPHeaderSize:IPHeaderSize])
	if h.Version() != 0 || (h.IPVersion() != 4 && h.IPVersion() != 6) {
		return nil, fmt.Errorf("%w: version %d, IP version %d", ErrBadIPHeader, h.Version(), h.IPVersion())
	}
	return h, nil
}

// Version returns the cma_version byte (major and minor nibbles).
func (h IPHeader) Version() uint8 { return h[0] }

// IPVersion returns the IP version nibble (4 or 6).
func (h IPHeader) IPVersion() uint8 { return h[1] >> 4 }

// SrcPort returns the active side's rdma_cm port.
func (h IPHeader) SrcPort() uint16 { return binary.BigEndian.Uint16(h[2:]) }

// SrcAddr returns the active side's IP address.
func (h IPHeader) SrcAddr() netip.Addr { return h.addr(4) }

// DstAddr returns the passive side's IP address.
func (h IPHeader) DstAddr() netip.Addr { return h.addr(20) }

func (h IPHeader) addr(off int) netip.Addr {
	if h.IPVersion() == 4 {
		return netip.AddrFrom4([4]byte(h[off+12 : off+16]))
	}
	return netip.AddrFrom16([16]byte(h[off : off+16]))
}

// SetVersion sets the cma_version byte.
func (h IPHeader) SetVersion(v uint8) { h[0] = v }

// SetIPVersion sets the IP version nibble, keeping the reserved nibble.
func (h IPHeader) SetIPVersion(v uint8) { setBits(&h[1], 7, 4, v) }

// SetSrcPort sets the source port.
func (h IPHeader) SetSrcPort(p uint16) { binary.BigEndian.PutUint16(h[2:], p) }

// SetSrcAddr sets the source address in the layout of IPVersion.
func (h IPHeader) SetSrcAddr(a netip.Addr) { h.setAddr(4, a) }

// SetDstAddr sets the destination address in the layout of IPVersion.
func (h IPHeader) SetDstAddr(a netip.Addr) { h.setAddr(20, a) }

func (h IPHeader) setAddr(off int, a netip.Addr) {
	b := h[off : off+16]
	clear(b)
	if h.IPVersion() == 4 {
		a4 := a.Unmap().As4()
		copy(b[12:], a4[:])
		return
	}
	a16 := a.As16()
	copy(b, a16[:])
}

// IPHeaderFields is the cma_hdr in decoded form.
type IPHeaderFields struct {
	SrcPort uint16
	SrcAddr netip.Addr // IPv4 or IPv6; both must be of the same family
	DstAddr netip.Addr
}

// Fields returns the header's fields.
func (h IPHeader) Fields() IPHeaderFields {
	return IPHeaderFields{SrcPort: h.SrcPort(), SrcAddr: h.SrcAddr(), DstAddr: h.DstAddr()}
}

// Encode writes f as a version-0 header: IPv4 when both addresses are
// IPv4 (or ::ffff-mapped), IPv6 otherwise.
func (h IPHeader) Encode(f *IPHeaderFields) {
	h.SetVersion(0)
	h[1] = 0
	if f.SrcAddr.Unmap().Is4() && f.DstAddr.Unmap().Is4() {
		h.SetIPVersion(4)
	} else {
		h.SetIPVersion(6)
	}
	h.SetSrcPort(f.SrcPort)
	h.SetSrcAddr(f.SrcAddr)
	h.SetDstAddr(f.DstAddr)
}

// CheckIPHeader parses the IP-CM header at the start of a request's
// private data and checks it as rdma_cm does before it hands the request
// to a listener bound to local (cma_ib_id_from_event): the version byte
// must be 0 and the IP version 4 or 6 (cma_save_ip_info; an unknown IP
// version is taken for AF_IB, which no IP listener matches); the IP version
// must be local's family and, unless local is unspecified (a listener
// bound to any address), the destination must be local
// (cma_match_private_data: an IPv6 header over IPv4 addresses names
// ::a.b.c.d, no address of the device, and validate_net_dev finds no
// route to it); the source must be a unicast address of that family
// (validate_ipv4_net_dev: not zero, multicast or broadcast). Unlike the
// kernel it accepts loopback sources and destinations, since goroce
// devices run on 127.0.0.0/8. A failure is ErrBadIPHeader; rdma_cm then
// rejects the REQ with reason consumer defined (28), or the SIDR_REQ with
// status reject.
func CheckIPHeader(pd []byte, local netip.Addr) (IPHeader, error) {
	h, err := ParseIPHeader(pd)
	if err != nil {
		return nil, err
	}
	local = local.Unmap()
	if v4 := h.IPVersion() == 4; v4 != local.Is4() {
		return nil, fmt.Errorf("%w: IP version %d for a listener on %v", ErrBadIPHeader, h.IPVersion(), local)
	}
	src, dst := h.SrcAddr(), h.DstAddr()
	if !local.IsUnspecified() && dst != local {
		return nil, fmt.Errorf("%w: destination %v, the listener is on %v", ErrBadIPHeader, dst, local)
	}
	if src.IsUnspecified() || src.IsMulticast() || src == netip.IPv4Unspecified() ||
		src == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return nil, fmt.Errorf("%w: source %v", ErrBadIPHeader, src)
	}
	return h, nil
}
