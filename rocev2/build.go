package rocev2

import (
	"encoding/binary"
	"net/netip"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/wire"
)

// Encap describes the outer headers of a RoCEv2 packet: Ethernet (optional),
// IPv4 or IPv6, and UDP. Its zero value plus two addresses is what rxe sends:
// UDP destination port 4791, UDP checksum 0, IPv4 DF set, TTL/hop limit 64.
type Encap struct {
	// Ethernet adds a 14-byte Ethernet header with the two MACs.
	Ethernet bool
	SrcMAC   [6]byte
	DstMAC   [6]byte

	// Src and Dst give the IP addresses and UDP ports. Both addresses are
	// IPv4 (or IPv4-mapped IPv6, sent as IPv4) or both IPv6. A zero
	// destination port means 4791.
	Src netip.AddrPort
	Dst netip.AddrPort

	// TOS is the IPv4 TOS byte or IPv6 traffic class: DSCP << 2 | ECN.
	TOS uint8
	// TTL is the IPv4 TTL or IPv6 hop limit; 0 means 64.
	TTL uint8
	// ID is the IPv4 identification (covered by the ICRC).
	ID uint16
	// AllowFragment clears the IPv4 DF bit that rxe always sets.
	AllowFragment bool
	// FlowLabel is the IPv6 flow label (20 bits).
	FlowLabel uint32
}

func (e *Encap) is4() bool { a := e.Src.Addr(); return a.Is4() || a.Is4In6() }

// HeaderLen returns the length of the outer headers e describes.
func (e *Encap) HeaderLen() int {
	n := UDPHeaderLen
	if e.Ethernet {
		n += ethHdrLen
	}
	if e.is4() {
		n += IPv4HeaderLen
	} else {
		n += IPv6HeaderLen
	}
	return n
}

// Build writes a whole packet — outer headers from e, the transport packet
// from f and payload — into buf, computes the ICRC and returns the length.
// It does not allocate.
func (e *Encap) Build(buf []byte, f *wire.Fields, payload []byte) (int, error) {
	hl := e.HeaderLen()
	if len(buf) < hl {
		return 0, errNotEnoughSpace
	}
	tn, err := wire.Build(buf[hl:], f, payload)
	if err != nil {
		return 0, err
	}
	ip, udp := e.writeOuter(buf[:hl], tn)
	t := buf[hl : hl+tn]
	PutICRC(t[tn-bth.ICRCSize:], ComputeICRC(ip, udp, t[:tn-bth.ICRCSize]))
	return hl + tn, nil
}

// Seal writes the outer headers for an already built transport packet of
// length tn that sits right after them (at buf[e.HeaderLen():]), and fills
// in its ICRC.
func (e *Encap) Seal(buf []byte, tn int) (int, error) {
	hl := e.HeaderLen()
	if tn < bth.Size+bth.ICRCSize || len(buf) < hl+tn {
		return 0, errNotEnoughSpace
	}
	ip, udp := e.writeOuter(buf[:hl], tn)
	t := buf[hl : hl+tn]
	PutICRC(t[tn-bth.ICRCSize:], ComputeICRC(ip, udp, t[:tn-bth.ICRCSize]))
	return hl + tn, nil
}

func (e *Encap) writeOuter(b []byte, tn int) (ip, udp []byte) {
	off := 0
	is4 := e.is4()
	if e.Ethernet {
		copy(b[0:6], e.DstMAC[:])
		copy(b[6:12], e.SrcMAC[:])
		et := uint16(EtherTypeIPv6)
		if is4 {
			et = EtherTypeIPv4
		}
		binary.BigEndian.PutUint16(b[12:], et)
		off = ethHdrLen
	}
	ttl := e.TTL
	if ttl == 0 {
		ttl = defaultHopLimit
	}
	if is4 {
		h := b[off : off+IPv4HeaderLen]
		h[0] = 0x45
		h[1] = e.TOS
		binary.BigEndian.PutUint16(h[2:], uint16(IPv4HeaderLen+UDPHeaderLen+tn))
		binary.BigEndian.PutUint16(h[4:], e.ID)
		var frag uint16 = ipv4FlagDF
		if e.AllowFragment {
			frag = 0
		}
		binary.BigEndian.PutUint16(h[6:], frag)
		h[8] = ttl
		h[9] = ipProtoUDP
		h[10], h[11] = 0, 0
		s, d := e.Src.Addr().Unmap().As4(), e.Dst.Addr().Unmap().As4()
		copy(h[12:16], s[:])
		copy(h[16:20], d[:])
		binary.BigEndian.PutUint16(h[10:], IPv4Checksum(h))
		ip = h
		off += IPv4HeaderLen
	} else {
		h := b[off : off+IPv6HeaderLen]
		binary.BigEndian.PutUint32(h[0:], 6<<28|uint32(e.TOS)<<20|e.FlowLabel&0xfffff)
		binary.BigEndian.PutUint16(h[4:], uint16(UDPHeaderLen+tn))
		h[6] = ipProtoUDP
		h[7] = ttl
		s, d := e.Src.Addr().As16(), e.Dst.Addr().As16()
		copy(h[8:24], s[:])
		copy(h[24:40], d[:])
		ip = h
		off += IPv6HeaderLen
	}
	udp = b[off : off+UDPHeaderLen]
	dport := e.Dst.Port()
	if dport == 0 {
		dport = UDPPort
	}
	binary.BigEndian.PutUint16(udp[0:], e.Src.Port())
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(UDPHeaderLen+tn))
	udp[6], udp[7] = 0, 0 // checksum 0, as rxe (prepare_udp_hdr)
	return ip, udp
}

// IPv4Checksum returns the Internet checksum (RFC 1071) of an IPv4 header
// h whose checksum field is zero (or, for a check, of a whole header: 0
// means it is right). It is the project's one implementation.
func IPv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// CNPFields returns the transport fields of a RoCEv2 Congestion Notification
// Packet for the flow whose requester QP is destQP (Annex A17.9.2): opcode
// 0x81, BECN set, PSN 0, P_Key 0xFFFF, followed by 16 reserved bytes.
func CNPFields(destQP bth.QPN) wire.Fields {
	return wire.Fields{BTH: bth.Fields{
		Opcode: bth.CNP,
		PKey:   0xffff,
		BECN:   true,
		DestQP: destQP,
	}}
}

// DefaultPKey is the default partition key (IBA 10.9.1.2): full member of
// the default partition, the only P_Key rxe's table holds.
const DefaultPKey = 0xffff
