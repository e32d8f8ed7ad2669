package cm

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// GID is a 128-bit global identifier. On RoCEv2 it is the port's IP
// address: an IPv6 address, or an IPv4 address mapped as ::ffff:a.b.c.d.
type GID [16]byte

// GIDFromAddr returns the RoCEv2 GID of an address (IPv4 becomes
// ::ffff:a.b.c.d).
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// Addr returns the GID as an address, unmapping ::ffff:a.b.c.d to IPv4.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// String formats the GID as its address.
func (g GID) String() string { return g.Addr().String() }

// PermissiveLID is the LID the kernel puts in a REQ's path when the route
// leaves the subnet (hop limit > 1), as every RoCEv2 route does
// (cm_format_req). With hop limit ≤ 1 it sends the path's LIDs, 0 on RoCE.
const PermissiveLID = 0xFFFF

// MTU is an IBA path MTU code (IBA 9.7.6.1; enum ib_mtu).
type MTU uint8

// Path MTU codes.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, 0 for an invalid code.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// String returns the size ("1024") or MTU(n) for an invalid code.
func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return fmt.Sprint(b)
	}
	return fmt.Sprintf("MTU(%d)", uint8(m))
}

// Path is one path of a REQ (IBA 12.6.5, the 44-byte primary or
// alternate path).
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Local Port LID         |        Remote Port LID        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Local Port GID (16 bytes)                     |
//	|                 Remote Port GID (16 bytes)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|              Flow Label               |   Rsvd    |PacketRate |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Traffic Class |   Hop Limit   |  SL   |S|Rsv|LocalACKTO|Rsv  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type Path struct {
	LocalLID        uint16
	RemoteLID       uint16
	LocalGID        GID
	RemoteGID       GID
	FlowLabel       uint32 // 20 bits
	PacketRate      uint8  // 6 bits (enum ib_rate)
	TrafficClass    uint8
	HopLimit        uint8
	SL              uint8 // 4 bits
	SubnetLocal     bool
	LocalACKTimeout uint8 // 5 bits: 4.096 µs · 2^n
}

const pathSize = 44

func getPath(b []byte) Path {
	var p Path
	p.LocalLID = binary.BigEndian.Uint16(b)
	p.RemoteLID = binary.BigEndian.Uint16(b[2:])
	copy(p.LocalGID[:], b[4:20])
	copy(p.RemoteGID[:], b[20:36])
	w := binary.BigEndian.Uint32(b[36:])
	p.FlowLabel = w >> 12
	p.PacketRate = uint8(w & 0x3f)
	p.TrafficClass = b[40]
	p.HopLimit = b[41]
	p.SL = getBits(b[42], 7, 4)
	p.SubnetLocal = getBits(b[42], 3, 1) == 1
	p.LocalACKTimeout = getBits(b[43], 7, 5)
	return p
}

// putPath writes p, keeping the reserved bits of b.
func putPath(b []byte, p *Path) {
	binary.BigEndian.PutUint16(b, p.LocalLID)
	binary.BigEndian.PutUint16(b[2:], p.RemoteLID)
	copy(b[4:20], p.LocalGID[:])
	copy(b[20:36], p.RemoteGID[:])
	w := binary.BigEndian.Uint32(b[36:])
	w = w&0xfc0 | (p.FlowLabel&0xfffff)<<12 | uint32(p.PacketRate&0x3f)
	binary.BigEndian.PutUint32(b[36:], w)
	b[40] = p.TrafficClass
	b[41] = p.HopLimit
	setBits(&b[42], 7, 4, p.SL)
	setBits(&b[42], 3, 1, b2u(p.SubnetLocal))
	setBits(&b[43], 7, 5, p.LocalACKTimeout)
}
