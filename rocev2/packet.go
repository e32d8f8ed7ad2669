package rocev2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/wire"
)

// UDPPort is the UDP destination port of RoCEv2, assigned by IANA (RoCEv2
// Annex A17; rxe_net.c ROCE_V2_UDP_DPORT). It is the project's one constant
// for it.
const UDPPort = 4791

// EtherTypes the parser understands.
const (
	EtherTypeIPv4   = 0x0800
	EtherTypeIPv6   = 0x86dd
	EtherTypeVLAN   = 0x8100
	EtherTypeQinQ   = 0x88a8
	ethHdrLen       = 14
	vlanTagLen      = 4
	maxVLANTags     = 2
	ipProtoUDP      = 17
	ipv4FlagDF      = 0x4000
	ipv4FragMask    = 0x3fff // MF and fragment offset
	defaultHopLimit = 64
)

// Errors of the Parse methods beyond the transport-level ones, which are
// package wire's sentinels (wire.wire.ErrTruncated, wire.ErrUnknownOpcode, …) and
// are returned as they are. All are sentinels, so the receive path can count
// drops by reason without allocating.
var (
	ErrNotRoCE  = errors.New("rocev2: not a RoCEv2 packet")
	ErrBadICRC  = errors.New("rocev2: ICRC mismatch")
	ErrFragment = errors.New("rocev2: IP fragment")
)

// Static wrapped errors: context without allocation on the receive path.
var (
	errTruncEth       = fmt.Errorf("%w: Ethernet header", wire.ErrTruncated)
	errTruncIPv4      = fmt.Errorf("%w: IPv4 header", wire.ErrTruncated)
	errTruncIPv6      = fmt.Errorf("%w: IPv6 header", wire.ErrTruncated)
	errTruncUDP       = fmt.Errorf("%w: UDP header", wire.ErrTruncated)
	errNotIP          = fmt.Errorf("%w: EtherType is not IPv4 or IPv6", ErrNotRoCE)
	errNotUDP         = fmt.Errorf("%w: IP protocol is not UDP", ErrNotRoCE)
	errNotPort        = fmt.Errorf("%w: UDP destination port is not 4791", ErrNotRoCE)
	errIPVersion      = fmt.Errorf("%w: bad IP version", ErrNotRoCE)
	errIPv4Len        = fmt.Errorf("%w: IPv4 total length", wire.ErrTruncated)
	errUDPLen         = fmt.Errorf("%w: UDP length", wire.ErrTruncated)
	errIPv4HeaderLen  = fmt.Errorf("%w: IPv4 header length below 20", ErrNotRoCE)
	errVLANDepth      = fmt.Errorf("%w: more than two VLAN tags", ErrNotRoCE)
	errNoIPForICRC    = errors.New("rocev2: ICRC needs the IP and UDP headers")
	errNotEnoughSpace = fmt.Errorf("%w: for the packet", wire.ErrBufferTooSmall)
)

// Packet is a parsed RoCEv2 packet: zero-copy views into the one buffer it
// was parsed from. Nothing is copied, so a Packet must not be used after
// its buffer is reused; copy out with the Fields methods of the views or
// bytes.Clone first. A zero Packet is ready for Parse*, and one Packet may be
// reused for every packet of a receive loop without allocating.
//
// Views of headers that are absent are nil. After a Parse error the views up
// to the failing layer are set, so a decoder can still show them.
type Packet struct {
	// Outer headers. Eth is nil when parsing started at the IP or BTH layer.
	Eth       []byte
	VLANs     int    // number of VLAN tags skipped
	EtherType uint16 // of the IP header that follows (after VLAN tags)
	IP        []byte // IPv4 header (with options) or IPv6 header; nil for transport-only parses
	UDP       []byte

	// Packet holds the transport part: BTH up to and including the ICRC.
	wire.Packet
}

// Reset clears p for reuse.
func (p *Packet) Reset() { *p = Packet{} }

// IPv6 reports whether the packet came over IPv6.
func (p *Packet) IPv6() bool { return len(p.IP) > 0 && p.IP[0]>>4 == 6 }

// ECN returns the two ECN bits of the IP header (RFC 3168), 0 when there is
// no IP header.
func (p *Packet) ECN() uint8 {
	switch {
	case len(p.IP) == 0:
		return 0
	case p.IPv6():
		return (p.IP[1] >> 4) & 3
	default:
		return p.IP[1] & 3
	}
}

// ParseFrame parses an Ethernet frame (with up to two VLAN tags) carrying
// IPv4 or IPv6, UDP to port 4791 and a RoCEv2 transport packet. Trailing
// Ethernet padding is ignored (the IP length bounds the packet).
func (p *Packet) ParseFrame(b []byte) error {
	t, err := p.parseFrame(b)
	if err != nil {
		p.Packet = wire.Packet{}
		return err
	}
	return p.Packet.Parse(t) // clears the transport views itself
}

// parseFrame sets the outer views of p and returns the UDP payload. Each
// Parse method clears every field of p once: the outer ones here, the
// transport ones in wire.Packet.Parse or, on error, in the caller.
func (p *Packet) parseFrame(b []byte) ([]byte, error) {
	p.clearOuter()
	if len(b) < ethHdrLen {
		return nil, errTruncEth
	}
	off := 12
	et := binary.BigEndian.Uint16(b[off:])
	for et == EtherTypeVLAN || et == EtherTypeQinQ {
		if p.VLANs == maxVLANTags {
			return nil, errVLANDepth
		}
		if len(b) < off+2+vlanTagLen {
			return nil, errTruncEth
		}
		p.VLANs++
		off += vlanTagLen
		et = binary.BigEndian.Uint16(b[off:])
	}
	off += 2
	p.Eth = b[:off:off]
	p.EtherType = et
	if et != EtherTypeIPv4 && et != EtherTypeIPv6 {
		return nil, errNotIP
	}
	return p.parseIP(b[off:])
}

// ParseIP parses a packet that starts at its IPv4 or IPv6 header (pcap
// link type RAW, or a raw socket).
func (p *Packet) ParseIP(b []byte) error {
	p.clearOuter()
	t, err := p.parseIP(b)
	if err != nil {
		p.Packet = wire.Packet{}
		return err
	}
	return p.Packet.Parse(t)
}

func (p *Packet) clearOuter() {
	p.Eth, p.VLANs, p.EtherType, p.IP, p.UDP = nil, 0, 0, nil, nil
}

// parseIP sets the IP and UDP views of p and returns the UDP payload.
func (p *Packet) parseIP(b []byte) ([]byte, error) {
	if len(b) < 1 {
		return nil, errTruncIPv4
	}
	var l4 []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < IPv4HeaderLen {
			return nil, errTruncIPv4
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < IPv4HeaderLen {
			return nil, errIPv4HeaderLen
		}
		if len(b) < ihl {
			return nil, errTruncIPv4
		}
		total := int(binary.BigEndian.Uint16(b[2:]))
		if total < ihl || total > len(b) {
			p.IP = b[:ihl:ihl]
			p.EtherType = EtherTypeIPv4
			return nil, errIPv4Len
		}
		p.IP = b[:ihl:ihl]
		p.EtherType = EtherTypeIPv4
		if b[9] != ipProtoUDP {
			return nil, errNotUDP
		}
		if binary.BigEndian.Uint16(b[6:])&ipv4FragMask != 0 {
			return nil, ErrFragment
		}
		l4 = b[ihl:total]
	case 6:
		if len(b) < IPv6HeaderLen {
			return nil, errTruncIPv6
		}
		p.IP = b[:IPv6HeaderLen:IPv6HeaderLen]
		p.EtherType = EtherTypeIPv6
		if b[6] != ipProtoUDP {
			return nil, errNotUDP // extension headers are not used by RoCEv2 senders
		}
		plen := int(binary.BigEndian.Uint16(b[4:]))
		if IPv6HeaderLen+plen > len(b) {
			return nil, errTruncIPv6
		}
		l4 = b[IPv6HeaderLen : IPv6HeaderLen+plen]
	default:
		return nil, errIPVersion
	}
	if len(l4) < UDPHeaderLen {
		return nil, errTruncUDP
	}
	p.UDP = l4[:UDPHeaderLen:UDPHeaderLen]
	ulen := int(binary.BigEndian.Uint16(l4[4:]))
	if ulen < UDPHeaderLen || ulen > len(l4) {
		return nil, errUDPLen
	}
	if binary.BigEndian.Uint16(l4[2:]) != UDPPort {
		return nil, errNotPort
	}
	return l4[UDPHeaderLen:ulen], nil
}

// ParseTransport parses a transport packet (BTH to ICRC, a UDP payload as
// a UDP socket delivers it); the outer views stay nil. See wire.Packet.Parse.
func (p *Packet) ParseTransport(b []byte) error {
	p.clearOuter()
	return p.Packet.Parse(b)
}

// HasOuter reports whether the IP and UDP headers are known, so the ICRC can
// be checked.
func (p *Packet) HasOuter() bool { return len(p.IP) > 0 && len(p.UDP) == UDPHeaderLen }

// ComputedICRC returns the ICRC the packet should carry. It needs the IP and
// UDP headers (ParseFrame or ParseIP).
func (p *Packet) ComputedICRC() (uint32, error) {
	if !p.HasOuter() || len(p.Transport) < bth.Size+bth.ICRCSize {
		return 0, errNoIPForICRC
	}
	return ComputeICRC(p.IP, p.UDP, p.Body()), nil
}

// VerifyICRC checks the packet's ICRC and returns nil, ErrBadICRC, or an
// error saying why it cannot be checked.
func (p *Packet) VerifyICRC() error {
	c, err := p.ComputedICRC()
	if err != nil {
		return err
	}
	if ReadICRC(p.ICRC) != c {
		return ErrBadICRC
	}
	return nil
}

// Encap returns the outer-header description of p, the inverse of
// Encap.Build for the fields Encap models (MACs, addresses, ports, TOS,
// TTL, IPv4 ID and DF, IPv6 flow label).
func (p *Packet) Encap() Encap {
	var e Encap
	if len(p.Eth) >= ethHdrLen {
		e.Ethernet = true
		copy(e.DstMAC[:], p.Eth[0:6])
		copy(e.SrcMAC[:], p.Eth[6:12])
	}
	var sport, dport uint16
	if len(p.UDP) == UDPHeaderLen {
		sport = binary.BigEndian.Uint16(p.UDP[0:])
		dport = binary.BigEndian.Uint16(p.UDP[2:])
	}
	switch {
	case p.IPv6():
		s, _ := netip.AddrFromSlice(p.IP[8:24])
		d, _ := netip.AddrFromSlice(p.IP[24:40])
		e.Src, e.Dst = netip.AddrPortFrom(s, sport), netip.AddrPortFrom(d, dport)
		v := binary.BigEndian.Uint32(p.IP[0:])
		e.TOS = uint8(v >> 20)
		e.FlowLabel = v & 0xfffff
		e.TTL = p.IP[7]
	case len(p.IP) >= IPv4HeaderLen:
		s, _ := netip.AddrFromSlice(p.IP[12:16])
		d, _ := netip.AddrFromSlice(p.IP[16:20])
		e.Src, e.Dst = netip.AddrPortFrom(s, sport), netip.AddrPortFrom(d, dport)
		e.TOS = p.IP[1]
		e.TTL = p.IP[8]
		e.ID = binary.BigEndian.Uint16(p.IP[4:])
		e.AllowFragment = binary.BigEndian.Uint16(p.IP[6:])&ipv4FlagDF == 0
	}
	return e
}
