package capture

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// Errors of Packet.Decode beyond the transport errors of package wire.
// Check them with errors.Is.
var (
	// ErrNotRoCE: the frame holds no RoCEv2 packet of its own (Packet.Kind
	// says what it holds). It is rocev2.ErrNotRoCE.
	ErrNotRoCE = rocev2.ErrNotRoCE
	// ErrCut: the snap length cut the frame inside the transport packet;
	// the headers that were captured whole are decoded (Packet.Cut). It
	// matches wire.ErrTruncated.
	ErrCut = fmt.Errorf("capture: transport packet cut by the snap length: %w", wire.ErrTruncated)
)

// Kind says what a decoded frame holds.
type Kind uint8

//go:generate stringer -type=Kind -trimprefix=Kind -output=kind_string.go

// Kinds of frames.
const (
	// KindOther is a frame without a RoCEv2 packet or a MAC Control
	// frame (ARP, TCP, a UDP datagram to another port, a header cut
	// short before its UDP payload …).
	KindOther Kind = iota
	// KindRoCE is a frame that carries a RoCEv2 packet: a UDP datagram
	// from or to port 4791 with at least one byte of payload.
	KindRoCE
	// KindICMPError is an ICMP or ICMPv6 error message quoting a RoCEv2
	// packet (Packet.RoCE holds the quoted packet, as far as quoted).
	KindICMPError
	// KindMACControl is an IEEE 802.3 MAC Control frame (EtherType
	// 0x8808): 802.3x PAUSE, 802.1Qbb PFC or another opcode.
	KindMACControl
)

// ICRCStatus is the verdict on a RoCEv2 packet's ICRC.
type ICRCStatus uint8

//go:generate stringer -type=ICRCStatus -trimprefix=ICRC -output=icrcstatus_string.go

// ICRC verdicts.
const (
	// ICRCUnchecked: the transport packet was not captured whole (or is
	// shorter than a BTH and an ICRC), so the ICRC cannot be computed.
	ICRCUnchecked ICRCStatus = iota
	// ICRCGood: the ICRC matches the packet (IBA 7.8.1, RoCEv2 Annex
	// A17.4.1, computed with rocev2.ComputeICRC).
	ICRCGood
	// ICRCBad: the ICRC does not match.
	ICRCBad
)

// TCI is the tag control information of an 802.1Q tag (IEEE 802.1Q
// 9.6): priority code point, drop eligible indicator and VLAN ID.
//
//	 0               1
//	 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7
//	+-----+-+-----------------------+
//	| PCP |D|        VLAN ID        |
//	+-----+-+-----------------------+
type TCI uint16

// PCP returns the priority code point, the priority a switch queues the
// frame by (and PFC pauses).
func (t TCI) PCP() uint8 { return uint8(t >> 13) }

// DEI reports the drop eligible indicator.
func (t TCI) DEI() bool { return t&0x1000 != 0 }

// VID returns the VLAN ID.
func (t TCI) VID() uint16 { return uint16(t) & 0x0fff }

// MACOpcode is an IEEE 802.3 MAC Control opcode (Annex 31A).
type MACOpcode uint16

//go:generate stringer -type=MACOpcode -trimprefix=MAC -output=macopcode_string.go

// MAC Control opcodes with fields Packet.MACControl decodes.
const (
	// MACPause is 802.3x PAUSE (Annex 31B): one pause time for the link.
	MACPause MACOpcode = 0x0001
	// MACPFC is priority-based flow control (IEEE 802.1Qbb, 802.3 Annex
	// 31D): a class-enable vector and a pause time per priority.
	MACPFC MACOpcode = 0x0101
)

// MACControl is what a MAC Control frame asks. Pause times are in
// quanta of 512 bit times; 0 resumes at once (XON).
type MACControl struct {
	// Opcode is the frame's opcode: MACPause, MACPFC or another one.
	Opcode MACOpcode
	// Complete reports that the opcode's fields were captured: a PAUSE
	// frame's pause time, a PFC frame's class-enable vector and all eight
	// pause times. A frame the snap length cut has them partly or not.
	Complete bool
	// PauseTime is a PAUSE frame's pause time.
	PauseTime uint16
	// Enable is a PFC frame's class-enable vector: bit n enables (acts
	// on) priority n.
	Enable uint16
	// Times holds a PFC frame's pause time of each priority.
	Times [8]uint16
}

// Packet is a capture frame decoded for RoCEv2: the RoCEv2 packet as a
// rocev2.Packet of views, what the link layer says about it (VLAN tags),
// the ICRC verdict, and for MAC Control frames the pause they ask for.
//
// Every view aliases the decoded Frame's Data: a Packet is valid until
// the Frame's buffer is reused (the Source's next Next). A zero Packet is
// ready for Decode, and one Packet can be reused for every frame of a
// capture: Decode overwrites all of it and does not allocate.
type Packet struct {
	// Kind says what the frame holds; the fields below are set as far as
	// it has them.
	Kind Kind
	// Tags counts the VLAN tags (802.1Q 0x8100, 802.1ad 0x88a8, and
	// 0x9100) in front of the network header.
	Tags int
	// Tagged reports an 802.1Q tag, and TCI is the first one's: the tag
	// a switch queues the frame by (IEEE 802.1Q 6.9.3). An 802.1ad
	// service tag (0x88a8) is counted in Tags but is not this tag.
	Tagged bool
	TCI    TCI
	// MACControl is set for KindMACControl.
	MACControl MACControl

	// RoCE is the RoCEv2 packet (KindRoCE), or the one an ICMP error
	// quotes (KindICMPError). Eth is the frame's Ethernet header with its
	// VLAN tags (nil for other link types); IP is the IPv4 header with
	// its options or the 40-byte IPv6 header, UDP the UDP header, and
	// Transport the UDP payload as far as it was captured: the BTH to the
	// ICRC, or less when the snap length cut the frame. The transport
	// views are those of rocev2.Packet.ParseFrame when the packet parses;
	// otherwise those of the headers captured whole (BTH, its opcode
	// table row, the extension headers), without payload, pad or ICRC.
	RoCE rocev2.Packet
	// TransportLen is the transport packet's length on the wire: the UDP
	// length field's payload when the snap length cut the frame (Cut),
	// len(RoCE.Transport) otherwise.
	TransportLen int
	// Cut reports that the snap length cut the frame inside the
	// transport packet.
	Cut bool
	// ICRC is the ICRC verdict; ICRCUnchecked unless the whole transport
	// packet was captured.
	ICRC ICRCStatus
}

// Decode decodes f into p, replacing what p held. It returns nil for a
// frame with a RoCEv2 packet whose transport headers parse
// (rocev2.Packet.ParseFrame's checks, the ICRC aside: see p.ICRC).
// Otherwise it returns, with p decoded as far as the frame goes:
//   - ErrNotRoCE for a frame without a RoCEv2 packet of its own (p.Kind
//     says whether it is a MAC Control frame or an ICMP error quoting a
//     RoCEv2 packet);
//   - ErrCut for a RoCEv2 packet the snap length cut (p.Cut);
//   - a transport error of package wire (wire.ErrTruncated,
//     wire.ErrUnknownOpcode, wire.ErrBadVersion, wire.ErrBadPad) for a
//     RoCEv2 packet whose headers do not parse.
//
// Decode finds RoCEv2 the way tshark 4.0 does (and "goroce cap" with
// it): behind Ethernet (up to 16 802.1Q/802.1ad tags), Linux cooked
// captures (SLL, SLL2), raw IP and the BSD loopback link types; over IPv4
// with or without options (unfragmented datagrams only: RoCEv2 senders
// set DF, and tshark would reassemble fragments) or IPv6 (with
// hop-by-hop, routing, destination options and atomic fragment headers);
// in a UDP datagram whose source or destination port is 4791. It never
// panics and does not allocate.
func (p *Packet) Decode(f *Frame) error {
	*p = Packet{}
	d := decoder{p: p, f: f}
	d.frame()
	if p.Kind == KindRoCE {
		return d.err
	}
	return ErrNotRoCE
}

// Src returns the source address and UDP port of the RoCEv2 packet; the
// zero AddrPort without one.
func (p *Packet) Src() netip.AddrPort { return p.addrPort(0) }

// Dst returns the destination address and UDP port of the RoCEv2
// packet; the zero AddrPort without one.
func (p *Packet) Dst() netip.AddrPort { return p.addrPort(1) }

func (p *Packet) addrPort(i int) netip.AddrPort {
	ip, udp := p.RoCE.IP, p.RoCE.UDP
	if len(udp) < rocev2.UDPHeaderLen {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(udp[2*i:])
	switch {
	case p.RoCE.IPv6() && len(ip) >= rocev2.IPv6HeaderLen:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(ip[8+16*i:24+16*i])), port)
	case len(ip) >= rocev2.IPv4HeaderLen:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12+4*i:16+4*i])), port)
	}
	return netip.AddrPort{}
}

// DSCP returns the differentiated services codepoint of the RoCEv2
// packet's IP header (RFC 2474): the upper six bits of the IPv4 TOS or
// the IPv6 traffic class; 0 without an IP header.
func (p *Packet) DSCP() uint8 {
	ip := p.RoCE.IP
	switch {
	case len(ip) < 2:
		return 0
	case p.RoCE.IPv6():
		return (ip[0]&0x0f)<<2 | ip[1]>>6
	default:
		return ip[1] >> 2
	}
}

// ECN returns the two ECN bits of the RoCEv2 packet's IP header (RFC
// 3168; 3 is Congestion Experienced), 0 without an IP header.
func (p *Packet) ECN() uint8 { return p.RoCE.ECN() }
