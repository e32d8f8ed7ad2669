package roce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/reth"
)

// UDPPort is the IANA port of RoCEv2 (Annex A17.2.1).
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

// Errors of Parse. They are sentinels so the receive path can count drops by
// reason without allocating; errors.Is matches them.
var (
	ErrTruncated      = errors.New("roce: truncated packet")
	ErrNotRoCE        = errors.New("roce: not a RoCEv2 packet")
	ErrUnknownOpcode  = errors.New("roce: unknown BTH opcode")
	ErrBadVersion     = errors.New("roce: unsupported BTH transport version")
	ErrBadPad         = errors.New("roce: pad count exceeds payload")
	ErrBadICRC        = errors.New("roce: ICRC mismatch")
	ErrFragment       = errors.New("roce: IP fragment")
	ErrBufferTooSmall = errors.New("roce: buffer too small")
	ErrBadField       = errors.New("roce: field out of range")
)

// Static wrapped errors: context without allocation on the receive path.
var (
	errTruncEth       = fmt.Errorf("%w: Ethernet header", ErrTruncated)
	errTruncIPv4      = fmt.Errorf("%w: IPv4 header", ErrTruncated)
	errTruncIPv6      = fmt.Errorf("%w: IPv6 header", ErrTruncated)
	errTruncUDP       = fmt.Errorf("%w: UDP header", ErrTruncated)
	errTruncBTH       = fmt.Errorf("%w: BTH", ErrTruncated)
	errTruncExt       = fmt.Errorf("%w: extension headers", ErrTruncated)
	errTruncICRC      = fmt.Errorf("%w: no room for the ICRC", ErrTruncated)
	errNotIP          = fmt.Errorf("%w: EtherType is not IPv4 or IPv6", ErrNotRoCE)
	errNotUDP         = fmt.Errorf("%w: IP protocol is not UDP", ErrNotRoCE)
	errNotPort        = fmt.Errorf("%w: UDP destination port is not 4791", ErrNotRoCE)
	errIPVersion      = fmt.Errorf("%w: bad IP version", ErrNotRoCE)
	errIPv4Len        = fmt.Errorf("%w: IPv4 total length", ErrTruncated)
	errUDPLen         = fmt.Errorf("%w: UDP length", ErrTruncated)
	errIPv4HeaderLen  = fmt.Errorf("%w: IPv4 header length below 20", ErrNotRoCE)
	errNoIPForICRC    = errors.New("roce: ICRC needs the IP and UDP headers")
	errNotEnoughSpace = fmt.Errorf("%w: for the packet", ErrBufferTooSmall)
)

// Packet is a parsed RoCEv2 packet: views into the one buffer it was parsed
// from (STYLE.md §3). Nothing is copied, so a Packet must not be used after
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

	// Transport is the UDP payload: BTH up to and including the ICRC.
	Transport []byte

	BTH  bth.Header
	Info *bth.Info // the opcode table row; nil for an unknown opcode

	RETH         reth.Header
	AETH         aeth.Header
	ImmDt        ext.ImmDt
	IETH         ext.IETH
	DETH         ext.DETH
	AtomicETH    ext.AtomicETH
	AtomicAckETH ext.AtomicAckETH
	FETH         ext.FETH
	CNPPad       []byte

	Payload []byte // without the pad
	Pad     []byte
	ICRC    []byte // four bytes, wire order
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
	*p = Packet{}
	if len(b) < ethHdrLen {
		return errTruncEth
	}
	off := 12
	et := binary.BigEndian.Uint16(b[off:])
	for et == EtherTypeVLAN || et == EtherTypeQinQ {
		if p.VLANs == maxVLANTags || len(b) < off+2+vlanTagLen {
			return errTruncEth
		}
		p.VLANs++
		off += vlanTagLen
		et = binary.BigEndian.Uint16(b[off:])
	}
	off += 2
	p.Eth = b[:off:off]
	p.EtherType = et
	if et != EtherTypeIPv4 && et != EtherTypeIPv6 {
		return errNotIP
	}
	return p.parseIP(b[off:])
}

// ParseIP parses a packet that starts at its IPv4 or IPv6 header (pcap
// link type RAW, or a raw socket).
func (p *Packet) ParseIP(b []byte) error {
	*p = Packet{}
	return p.parseIP(b)
}

func (p *Packet) parseIP(b []byte) error {
	if len(b) < 1 {
		return errTruncIPv4
	}
	var l4 []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < ipv4HdrMin {
			return errTruncIPv4
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < ipv4HdrMin {
			return errIPv4HeaderLen
		}
		if len(b) < ihl {
			return errTruncIPv4
		}
		total := int(binary.BigEndian.Uint16(b[2:]))
		if total < ihl || total > len(b) {
			p.IP = b[:ihl:ihl]
			p.EtherType = EtherTypeIPv4
			return errIPv4Len
		}
		p.IP = b[:ihl:ihl]
		p.EtherType = EtherTypeIPv4
		if b[9] != ipProtoUDP {
			return errNotUDP
		}
		if binary.BigEndian.Uint16(b[6:])&ipv4FragMask != 0 {
			return ErrFragment
		}
		l4 = b[ihl:total]
	case 6:
		if len(b) < ipv6HdrLen {
			return errTruncIPv6
		}
		p.IP = b[:ipv6HdrLen:ipv6HdrLen]
		p.EtherType = EtherTypeIPv6
		if b[6] != ipProtoUDP {
			return errNotUDP // extension headers are not used by RoCEv2 senders
		}
		plen := int(binary.BigEndian.Uint16(b[4:]))
		if ipv6HdrLen+plen > len(b) {
			return errTruncIPv6
		}
		l4 = b[ipv6HdrLen : ipv6HdrLen+plen]
	default:
		return errIPVersion
	}
	if len(l4) < udpHdrLen {
		return errTruncUDP
	}
	p.UDP = l4[:udpHdrLen:udpHdrLen]
	ulen := int(binary.BigEndian.Uint16(l4[4:]))
	if ulen < udpHdrLen || ulen > len(l4) {
		return errUDPLen
	}
	if binary.BigEndian.Uint16(l4[2:]) != UDPPort {
		return errNotPort
	}
	return p.parseTransport(l4[udpHdrLen:ulen])
}

// ParseTransport parses a RoCEv2 transport packet: a UDP payload from the
// BTH to the ICRC, as a UDP socket delivers it. The outer views stay nil.
func (p *Packet) ParseTransport(b []byte) error {
	*p = Packet{}
	return p.parseTransport(b)
}

func (p *Packet) parseTransport(b []byte) error {
	p.Transport = b
	if len(b) < bth.Size {
		return errTruncBTH
	}
	h := bth.Header(b[:bth.Size:bth.Size])
	p.BTH = h
	in, ok := h.Opcode().Lookup()
	if !ok {
		return ErrUnknownOpcode
	}
	p.Info = in
	if h.TVer() != 0 {
		return ErrBadVersion
	}
	hl := in.HeaderLen
	if len(b) < hl {
		return errTruncExt
	}
	if len(b) < hl+bth.ICRCSize {
		return errTruncICRC
	}
	m := in.Mask
	if m&bth.MaskRETH != 0 {
		o, _ := in.Offset(bth.MaskRETH)
		p.RETH = reth.Header(b[o : o+reth.Size : o+reth.Size])
	}
	if m&bth.MaskAETH != 0 {
		o, _ := in.Offset(bth.MaskAETH)
		p.AETH = aeth.Header(b[o : o+aeth.Size : o+aeth.Size])
	}
	if m&bth.MaskImmDt != 0 {
		o, _ := in.Offset(bth.MaskImmDt)
		p.ImmDt = ext.ImmDt(b[o : o+ext.ImmDtSize : o+ext.ImmDtSize])
	}
	if m&bth.MaskIETH != 0 {
		o, _ := in.Offset(bth.MaskIETH)
		p.IETH = ext.IETH(b[o : o+ext.IETHSize : o+ext.IETHSize])
	}
	if m&bth.MaskDETH != 0 {
		o, _ := in.Offset(bth.MaskDETH)
		p.DETH = ext.DETH(b[o : o+ext.DETHSize : o+ext.DETHSize])
	}
	if m&bth.MaskAtomicETH != 0 {
		o, _ := in.Offset(bth.MaskAtomicETH)
		p.AtomicETH = ext.AtomicETH(b[o : o+ext.AtomicETHSize : o+ext.AtomicETHSize])
	}
	if m&bth.MaskAtomicAckETH != 0 {
		o, _ := in.Offset(bth.MaskAtomicAckETH)
		p.AtomicAckETH = ext.AtomicAckETH(b[o : o+ext.AtomicAckETHSize : o+ext.AtomicAckETHSize])
	}
	if m&bth.MaskFETH != 0 {
		o, _ := in.Offset(bth.MaskFETH)
		p.FETH = ext.FETH(b[o : o+ext.FETHSize : o+ext.FETHSize])
	}
	if m&bth.MaskCNPPad != 0 {
		o, _ := in.Offset(bth.MaskCNPPad)
		p.CNPPad = b[o : o+bth.CNPPadSize : o+bth.CNPPadSize]
	}
	end := len(b) - bth.ICRCSize
	p.ICRC = b[end:len(b):len(b)]
	pad := h.PadCount()
	// CVE-2026-46043: the pad is attacker-controlled; check it against the
	// payload before any use.
	if pad > end-hl {
		p.Payload = b[hl:end:end]
		return ErrBadPad
	}
	p.Payload = b[hl : end-pad : end-pad]
	p.Pad = b[end-pad : end : end]
	return nil
}

// HasOuter reports whether the IP and UDP headers are known, so the ICRC can
// be checked.
func (p *Packet) HasOuter() bool { return len(p.IP) > 0 && len(p.UDP) == udpHdrLen }

// ComputedICRC returns the ICRC the packet should carry. It needs the IP and
// UDP headers (ParseFrame or ParseIP).
func (p *Packet) ComputedICRC() (uint32, error) {
	if !p.HasOuter() || len(p.Transport) < bth.Size+bth.ICRCSize {
		return 0, errNoIPForICRC
	}
	return ComputeICRC(p.IP, p.UDP, p.Transport[:len(p.Transport)-bth.ICRCSize]), nil
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

// Opcode returns the BTH opcode, or 0 when no BTH was parsed.
func (p *Packet) Opcode() bth.Opcode {
	if p.BTH == nil {
		return 0
	}
	return p.BTH.Opcode()
}

// Fields decodes every transport header of p into a Fields value, the
// inverse of BuildTransport: BuildTransport(buf, &f, p.Payload) rebuilds
// p.Transport (with the ICRC left zero).
func (p *Packet) Fields() Fields {
	var f Fields
	if p.BTH == nil {
		return f
	}
	f.BTH = p.BTH.Fields()
	if p.RETH != nil {
		f.RETH = p.RETH.Fields()
	}
	if p.AETH != nil {
		f.AETH = p.AETH.Fields()
	}
	if p.ImmDt != nil {
		f.ImmDt = p.ImmDt.Imm()
	}
	if p.IETH != nil {
		f.IETH = p.IETH.RKey()
	}
	if p.DETH != nil {
		f.DETH = p.DETH.Fields()
	}
	if p.AtomicETH != nil {
		f.AtomicETH = p.AtomicETH.Fields()
	}
	if p.AtomicAckETH != nil {
		f.AtomicAckETH = p.AtomicAckETH.OrigRemData()
	}
	if p.FETH != nil {
		f.FETH = p.FETH.Fields()
	}
	return f
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
	if len(p.UDP) == udpHdrLen {
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
	case len(p.IP) >= ipv4HdrMin:
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
