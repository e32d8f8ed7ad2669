package capfmt

import (
	"encoding/binary"
	"time"

	"github.com/goroce/goroce/internal/tvbuf"
)

// tvb is a byte range as Wireshark sees it, captured bytes and reported
// length (package tvbuf).
type tvb = tvbuf.TVB

// Decoder turns capture frames into Packets the way tshark 4.0.17 dissects
// them, as far as the fields of this package go (see doc.go for the exact
// scope). It is stateful: frame.time_relative counts from the first frame
// it decodes, and tshark's RPC-over-RDMA heuristic reassembles SEND
// messages across frames (FORMATS.md §4.4). Use one Decoder per file, from
// one goroutine.
type Decoder struct {
	cfg       DecoderConfig
	p         *Packet
	items     []Item // p.Items while decoding
	first     time.Time
	haveFirst bool
	rpc       rpcState
	heur      heurList
	// inErr counts the ICMP error packets being dissected: inside one,
	// tshark catches bounds errors at every call_dissector boundary.
	inErr int
}

// DecoderConfig configures a Decoder. The zero value decodes everything.
type DecoderConfig struct {
	// SkipICRC leaves out goroce's ICRC check (roce.icrc.status,
	// roce.icrc.computed, Packet.ICRCChecked) for callers that show
	// neither, such as a tshark-equivalent -T fields run; it saves a CRC
	// over every packet.
	SkipICRC bool
}

// NewDecoder returns a Decoder ready for the first frame of a file.
func NewDecoder(cfg DecoderConfig) *Decoder {
	return &Decoder{cfg: cfg}
}

// Decode decodes f into p, replacing p's previous contents. p's slices
// alias f.Data. Decode never panics on any input and, once p's item buffer
// has grown to fit, does not allocate for frames that are not RC SEND
// fragments.
func (d *Decoder) Decode(f *Frame, p *Packet) {
	p.reset()
	p.Number = f.Number
	p.Time = f.Time
	d.p = p
	d.items = p.Items[:0]
	if !d.haveFirst {
		d.first, d.haveFirst = f.Time, true
	}
	d.emit(ProtoFrame, 0, 0, nil)
	d.emit(FrameTimeRelative, 1, uint64(int64(f.Time.Sub(d.first))), nil)
	d.emit(FrameNumber, 1, uint64(f.Number), nil)
	d.emit(FrameLen, 1, uint64(max(f.OrigLen, len(f.Data))), nil)
	d.emit(FrameCapLen, 1, uint64(len(f.Data)), nil)

	t := tvb{B: f.Data, Rep: max(f.OrigLen, len(f.Data))}
	switch f.LinkType {
	case LinkEthernet:
		d.ethernet(t, 0)
	case LinkRaw:
		d.rawIP(t, 0)
	case LinkIPv4:
		d.ipv4(t, 0)
	case LinkIPv6:
		d.ipv6(t, 0)
	case LinkLinuxSLL:
		if t.Has(0, 16) {
			d.sllProtocol(binary.BigEndian.Uint16(t.B[14:]), t.From(16), 0)
		}
	case LinkSLL2:
		if t.Has(0, 20) {
			d.sllProtocol(binary.BigEndian.Uint16(t.B[0:]), t.From(20), 0)
		}
	case LinkNull, LinkLoop:
		if t.Has(0, 4) {
			af := binary.LittleEndian.Uint32(t.B)
			if f.LinkType == LinkLoop || af > 0xffff {
				af = binary.BigEndian.Uint32(t.B)
			}
			switch af {
			case 2:
				d.ipv4(t.From(4), 0)
			case 10, 24, 28, 30:
				d.ipv6(t.From(4), 0)
			}
		}
	}
	p.Items = d.items
	d.p, d.items = nil, nil
}

// emit appends one item to the packet being decoded.
func (d *Decoder) emit(f Field, depth int, v uint64, b []byte) {
	d.items = append(d.items, Item{Field: f, Depth: uint8(depth), Value: v, Bytes: b})
}

// EtherTypes and IP protocol numbers the decoder follows.
const (
	etIPv4    = 0x0800
	etIPv6    = 0x86dd
	etVLAN    = 0x8100
	etQinQ    = 0x88a8
	etQinQOld = 0x9100
	// etMACControl is IEEE 802.3 clause 31 MAC Control: PAUSE, PFC, MPCP.
	etMACControl = 0x8808
	protoICMP    = 1
	protoUDP     = 17
	protoICMP6   = 58
	roceV2Port   = 4791
)

// ethernet dissects an Ethernet II frame. It reports false when the
// 14-byte header itself is missing: the one exception that escapes the
// Ethernet dissector (everything after the EtherType is caught by it).
func (d *Decoder) ethernet(t tvb, depth int) bool {
	if !t.Has(0, 14) {
		return false
	}
	d.emit(ProtoEth, depth, 0, nil)
	et := binary.BigEndian.Uint16(t.B[12:])
	d.etherType(et, t.From(14), depth)
	return true
}

// etherType dissects the payload of an EtherType (with VLAN tags) and
// reports whether tshark has a dissector that accepts it. A VLAN tag is
// accepted whatever follows it.
func (d *Decoder) etherType(et uint16, t tvb, depth int) bool {
	switch et {
	case etIPv4:
		d.ipv4(t, depth)
		return true
	case etIPv6:
		return d.ipv6(t, depth)
	case etVLAN, etQinQ, etQinQOld:
		for range 16 { // stacked tags; each one is a VLAN dissector call
			if et != etQinQ {
				d.vlanTag(t, depth)
			}
			if !t.Has(0, 4) {
				return true
			}
			et = binary.BigEndian.Uint16(t.B[2:])
			t = t.From(4)
			switch et {
			case etVLAN, etQinQ, etQinQOld:
				continue
			case etIPv4:
				d.ipv4(t, depth)
			case etIPv6:
				d.ipv6(t, depth)
			case etMACControl:
				d.macControl(t, depth)
			}
			return true
		}
		return true
	case etMACControl:
		d.macControl(t, depth)
		return true
	}
	return knownEtherType(et)
}

// vlanTag emits the fields of the 802.1Q tag at the start of t (t begins
// with the TCI; the TPID was the EtherType before it). tshark 4.0 adds the
// TCI's three fields together once two bytes exist, and the type once all
// four do (and the protocol item only with the TCI); a type of at most 1500 is an 802.3 length (vlan.len). The DEI
// bit is vlan.dei: vlan.cfi needs a non-default preference.
func (d *Decoder) vlanTag(t tvb, depth int) {
	if !t.Has(0, 2) {
		return // the protocol item itself needs the TCI (-Y vlan is false)
	}
	d.emit(ProtoVLAN, depth, 0, nil)
	tci := binary.BigEndian.Uint16(t.B)
	d.emit(VLANPriority, depth+1, uint64(tci>>13), nil)
	d.emit(VLANDEI, depth+1, uint64(tci>>12&1), nil)
	d.emit(VLANID, depth+1, uint64(tci&0x0fff), nil)
	if !t.Has(2, 2) {
		return
	}
	if et := binary.BigEndian.Uint16(t.B[2:]); et <= 1500 {
		d.emit(VLANLen, depth+1, uint64(et), nil)
	} else {
		d.emit(VLANEType, depth+1, uint64(et), nil)
	}
}

// MAC Control opcodes (IEEE 802.3 Annex 31A).
const (
	maccPause   = 0x0001 // 802.3x PAUSE: one pause_time (Annex 31B)
	maccGate    = 0x0002 // EPON MPCP (clause 64) GATE
	maccReport  = 0x0003 // MPCP REPORT
	maccRegReq  = 0x0004 // MPCP REGISTER_REQ
	maccReg     = 0x0005 // MPCP REGISTER
	maccRegAck  = 0x0006 // MPCP REGISTER_ACK
	maccPFC     = 0x0101 // 802.1Qbb PFC: class-enable vector and 8 quanta (Annex 31D)
	pfcQuantaSz = 16     // eight 2-byte per-class pause times
)

// macControl dissects a MAC Control frame as tshark 4.0 does: the opcode
// once two bytes exist, then each field of the opcode's layout while its
// bytes exist. PFC's eight quanta sit in one 16-byte subtree that is
// added, with all of them, only when the 16 bytes were captured. Unknown
// opcodes show the opcode alone; the padding to 64 bytes is ignored.
func (d *Decoder) macControl(t tvb, depth int) {
	if !t.Has(0, 2) {
		return // no opcode: tshark adds no macc item at all (-Y macc is false)
	}
	d.emit(ProtoMACC, depth, 0, nil)
	b := t.B
	op := binary.BigEndian.Uint16(b)
	d.emit(MACCOpcode, depth+1, uint64(op), nil)
	u16 := func(f Field, off int) bool {
		if !t.Has(off, 2) {
			return false
		}
		d.emit(f, depth+1, uint64(binary.BigEndian.Uint16(b[off:])), nil)
		return true
	}
	u8 := func(f Field, off int) bool {
		if !t.Has(off, 1) {
			return false
		}
		d.emit(f, depth+1, uint64(b[off]), nil)
		return true
	}
	switch op {
	case maccPause:
		u16(MACCPauseTime, 2)
	case maccPFC:
		if !t.Has(2, 2) {
			return
		}
		v := binary.BigEndian.Uint16(b[2:])
		d.emit(MACCEnbv, depth+1, uint64(v), nil)
		for c := range 8 {
			d.emit(MACCEnbvC0+Field(c), depth+2, uint64(v>>c&1), nil)
		}
		if !t.Has(4, pfcQuantaSz) {
			return
		}
		for c := range 8 {
			// tshark groups them in a text subtree ("CBFC Class Pause
			// Times") that has no field name; here they are macc's children.
			d.emit(MACCPauseTimeC0+Field(c), depth+1, uint64(binary.BigEndian.Uint16(b[4+2*c:])), nil)
		}
	case maccGate, maccReport, maccRegReq, maccReg, maccRegAck:
		if !t.Has(2, 4) {
			return
		}
		d.emit(MACCTimestamp, depth+1, uint64(binary.BigEndian.Uint32(b[2:])), nil)
		switch op {
		case maccRegReq:
			_ = u8(MACCRegFlags, 6) && u8(MACCRegReqGrants, 7)
		case maccReg:
			_ = u16(MACCRegAssignedPort, 6) && u8(MACCRegFlags, 8) &&
				u16(MACCRegSyncTime, 9) && u8(MACCRegGrants, 11)
		case maccRegAck:
			_ = u8(MACCRegFlags, 6) && u16(MACCRegAckAssignedPort, 7) && u16(MACCRegAckSyncTime, 9)
		}
	}
}

// sllProtocol dissects the payload of a Linux cooked capture by its
// protocol field (an EtherType, or small values for non-Ethernet framing).
func (d *Decoder) sllProtocol(proto uint16, t tvb, depth int) {
	if proto > 1500 {
		d.etherType(proto, t, depth)
	}
}

// rawIP dissects LINKTYPE_RAW like tshark's "raw" dissector, which first
// looks for Linux PPP remnants (and so needs 8 bytes), then at the IP
// version.
func (d *Decoder) rawIP(t tvb, depth int) {
	if !t.Has(0, 8) {
		return
	}
	b := t.B
	if binary.BigEndian.Uint16(b) == 0xff03 || binary.BigEndian.Uint16(b[6:]) == 0xff03 {
		return // PPP
	}
	if t.Has(0, 10) && string(b[:10]) == "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" {
		return // an ISDN placeholder
	}
	switch t.B[0] >> 4 {
	case 4:
		d.ipv4(t, depth)
	case 6:
		d.ipv6(t, depth)
	}
}

// ipv4 follows tshark's dissect_ip_v4: the order of the header items
// decides which of ip.dsfield.ecn, ip.src and ip.dst exist when the header
// is cut short or bogus.
func (d *Decoder) ipv4(t tvb, depth int) {
	if !t.Has(0, 1) {
		return
	}
	b := t.B
	d.emit(ProtoIP, depth, 0, nil)
	switch b[0] >> 4 {
	case 4:
	case 6: // "bogus IPv4 version", handed to IPv6 anyway
		d.ipv6(t, depth)
		return
	default:
		return
	}
	hlen := int(b[0]&0x0f) * 4
	if hlen < 20 {
		return
	}
	if !t.Has(1, 1) {
		return
	}
	d.emit(IPDSFieldDSCP, depth+2, uint64(b[1]>>2), nil)
	d.emit(IPDSFieldECN, depth+2, uint64(b[1]&3), nil)
	if !t.Has(2, 2) {
		return
	}
	ipLen := int(binary.BigEndian.Uint16(b[2:]))
	if ipLen < hlen {
		if ipLen != 0 {
			return // bogus length
		}
		ipLen = t.Rep // TSO: the length is the captured packet
	}
	t = t.Shrink(ipLen) // only when the datagram is not longer than the data
	b = t.B
	if !t.Has(4, 8) || !t.Has(12, 4) { // id, flags, TTL, protocol, checksum; source
		return
	}
	d.emit(IPSrc, depth+1, 0, b[12:16:16])
	dstOff := 0
	if hlen > 20 {
		var ok bool
		if dstOff, ok = ipv4DstOffset(b, hlen-20); !ok {
			return
		}
	}
	if !t.Has(16+dstOff, 4) {
		return
	}
	if dstOff == 0 {
		d.emit(IPDst, depth+1, 0, b[16:20:20])
	}
	if !t.Has(20, hlen-20) { // the options themselves
		return
	}
	if dstOff != 0 {
		// With a loose or strict source route the header shows the
		// current hop; the route option adds ip.dst, the final one.
		d.emit(IPDst, depth+2, 0, b[16+dstOff:20+dstOff:20+dstOff])
	}
	if binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
		return // a fragment: tshark would reassemble; see doc.go
	}
	hdr := b[:hlen:hlen]
	payload := t.From(hlen)
	if depth == 0 {
		d.p.ipProto, d.p.l4 = b[9], payload.B
	}
	switch b[9] {
	case protoUDP:
		d.udp(payload, depth, hdr)
	case protoICMP:
		d.icmp(payload, depth)
	}
}

// ipv4DstOffset is get_dst_offset of packet-ip.c: it walks the options
// looking for a loose or strict source route and returns how far past the
// header's destination field the final destination is (0 without one). ok
// is false where tshark throws (an option byte was not captured).
func ipv4DstOffset(b []byte, length int) (int, bool) {
	const (
		eol = 0x00
		nop = 0x01
		lsr = 0x83
		ssr = 0x89
	)
	off := 20
	for length > 0 {
		if off >= len(b) {
			return 0, false
		}
		opt := b[off]
		length--
		if opt != eol && opt != nop {
			if length == 0 {
				return 0, true
			}
			if off+1 >= len(b) {
				return 0, false
			}
			n := int(b[off+1])
			length--
			if n < 2 || n-2 > length {
				return 0, true
			}
			if opt == ssr || opt == lsr {
				if off+2 >= len(b) {
					return 0, false
				}
				ptr := int(b[off+2])
				if ptr < 4 || ptr&3 != 0 || ptr > n {
					return 0, true
				}
				return (off - 20) + 4 + (n - 4), true
			}
			off += n
			length -= n - 2
		} else {
			off++
		}
		if opt == eol {
			return 0, true
		}
	}
	return 0, true
}

// ipv6 follows tshark's IPv6 dissector, including the extension headers a
// RoCEv2 sender could plausibly use before UDP.
//
// It reports false when the dissector rejects the packet (version not 6):
// tshark keeps the protocol item but counts the EtherType as not handled.
func (d *Decoder) ipv6(t tvb, depth int) bool {
	d.emit(ProtoIPv6, depth, 0, nil)
	if t.Has(0, 1) && t.B[0]>>4 != 6 {
		return false
	}
	if !t.Has(0, 8) {
		return true
	}
	b := t.B
	if !t.Has(8, 16) {
		return true
	}
	d.emit(IPv6Src, depth+1, 0, b[8:24:24])
	if !t.Has(24, 16) {
		return true
	}
	d.emit(IPv6Dst, depth+1, 0, b[24:40:40])
	if plen := int(binary.BigEndian.Uint16(b[4:])); plen != 0 {
		t = t.Shrink(40 + plen)
		b = t.B
	}
	hdr := b[:40:40]
	nxt, off := b[6], 40
	for range 8 {
		switch nxt {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if !t.Has(off, 2) {
				return true
			}
			n := (int(b[off+1]) + 1) * 8
			if !t.Has(off, n) {
				return true
			}
			if nxt != 43 && !ipv6OptionsOK(b, off+2, off+n) {
				return true
			}
			nxt, off = b[off], off+n
			continue
		case 44: // fragment: only an atomic fragment is followed
			if !t.Has(off, 8) {
				return true
			}
			if binary.BigEndian.Uint16(b[off+2:])&0xfff9 != 0 {
				return true
			}
			nxt, off = b[off], off+8
			continue
		case protoUDP:
			if depth == 0 {
				d.p.ipProto, d.p.l4 = nxt, t.From(off).B
			}
			d.udp(t.From(off), depth, hdr)
		case protoICMP6:
			d.icmpv6(t.From(off), depth)
		default:
			if depth == 0 {
				d.p.ipProto, d.p.l4 = nxt, t.From(off).B
			}
		}
		return true
	}
	return true
}

// ipv6OptionsOK walks the TLV options of a hop-by-hop or destination
// options header in b[i:end]; false is where tshark's option parser throws
// (an option runs past the header).
func ipv6OptionsOK(b []byte, i, end int) bool {
	for i < end {
		if b[i] == 0 { // Pad1
			i++
			continue
		}
		if i+1 >= len(b) {
			return false
		}
		i += 2 + int(b[i+1])
		if i > end {
			return false
		}
	}
	return true
}

// udp dissects a UDP datagram and hands port 4791 to the InfiniBand
// dissector. ipHdr is the enclosing IP header, kept for the ICRC check.
func (d *Decoder) udp(t tvb, depth int, ipHdr []byte) {
	if !t.Has(0, 4) { // tshark reads both ports before adding anything
		return
	}
	d.emit(ProtoUDP, depth, 0, nil)
	b := t.B
	sport := binary.BigEndian.Uint16(b)
	d.emit(UDPSrcPort, depth+1, uint64(sport), nil)
	dport := binary.BigEndian.Uint16(b[2:])
	d.emit(UDPDstPort, depth+1, uint64(dport), nil)
	if !t.Has(4, 4) {
		return
	}
	ulen := int(binary.BigEndian.Uint16(b[4:]))
	if ulen < 8 {
		return // bogus length: tshark stops here
	}
	if ulen > t.Rep {
		ulen = t.Rep
	}
	// The "UDP payload" item covers the rest of the captured bytes, and
	// such an item throws when there is not one: no payload, no
	// sub-dissector.
	payload := t.Sub(8, ulen-8)
	if len(payload.B) == 0 {
		return
	}
	// tshark tries the lower port first, then the higher one, skipping 0;
	// among the ports this decoder knows only 4791 leads anywhere.
	if sport != roceV2Port && dport != roceV2Port {
		return
	}
	d.infiniband(payload, depth, ipHdr, b[:8:8])
}

// icmp dissects ICMP and, for error messages, the IP packet they quote.
func (d *Decoder) icmp(t tvb, depth int) {
	if !t.Has(0, 4) { // type, code and checksum are read first
		return
	}
	d.emit(ProtoICMP, depth, 0, nil)
	switch t.B[0] {
	case 3, 4, 5, 11, 12: // unreachable, source quench, redirect, time exceeded, parameter problem
		if !t.Has(4, 4) {
			return
		}
		d.inErr++
		d.ipv4(t.From(8), depth+1)
		d.inErr--
	}
}

// icmpv6 dissects ICMPv6 and, for error messages, the packet they quote.
func (d *Decoder) icmpv6(t tvb, depth int) {
	if !t.Has(0, 4) {
		return
	}
	d.emit(ProtoICMPv6, depth, 0, nil)
	switch t.B[0] {
	case 1, 2, 3, 4: // unreachable, too big, time exceeded, parameter problem
		if !t.Has(4, 4) {
			return
		}
		d.inErr++
		d.ipv6(t.From(8), depth+1)
		d.inErr--
	}
}
