package capture

import (
	"encoding/binary"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/internal/tvbuf"
	"github.com/goroce/goroce/reth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// tvb is a byte range as Wireshark sees it, captured bytes and reported
// length (package tvbuf).
type tvb = tvbuf.TVB

// Header sizes, EtherTypes and protocol numbers the decoder follows
// (IEEE 802.3, 802.1Q, RFC 791, RFC 8200, RFC 768; RoCEv2 Annex A17).
const (
	ethHeaderLen = 14
	vlanTagLen   = 4
	sllHeaderLen = 16 // Linux cooked capture v1
	sll2HeadLen  = 20 // Linux cooked capture v2
	udpHeaderLen = 8

	etIPv4       = 0x0800
	etIPv6       = 0x86dd
	etVLAN       = 0x8100 // IEEE 802.1Q
	etQinQ       = 0x88a8 // IEEE 802.1ad service tag
	etQinQOld    = 0x9100 // the pre-802.1ad service tag
	etMACControl = 0x8808 // IEEE 802.3 clause 31: PAUSE, PFC

	protoICMP  = 1
	protoUDP   = 17
	protoICMP6 = 58

	// maxTags bounds the VLAN tags followed, maxQuoted the ICMP errors
	// quoting ICMP errors: the decoder's work per frame stays bounded.
	maxTags   = 16
	maxQuoted = 32
	// maxExtHeaders bounds the IPv6 extension headers followed.
	maxExtHeaders = 8
)

// decoder walks one frame down to its RoCEv2 packet.
type decoder struct {
	p    *Packet
	f    *Frame
	err  error // the transport's parse error
	netw int   // offset of the network header in an Ethernet frame
}

// frame dispatches on the link type.
func (d *decoder) frame() {
	f := d.f
	t := tvb{B: f.Data, Rep: f.WireLen()}
	switch f.LinkType {
	case LinkEthernet:
		if t.Has(0, ethHeaderLen) {
			d.etherType(binary.BigEndian.Uint16(t.B[12:]), t.From(ethHeaderLen), ethHeaderLen)
		}
	case LinkRaw:
		d.rawIP(t)
	case LinkIPv4:
		d.ipv4(t, 0)
	case LinkIPv6:
		d.ipv6(t, 0)
	case LinkLinuxSLL:
		if t.Has(0, sllHeaderLen) {
			d.sllProtocol(binary.BigEndian.Uint16(t.B[14:]), t.From(sllHeaderLen))
		}
	case LinkSLL2:
		if t.Has(0, sll2HeadLen) {
			d.sllProtocol(binary.BigEndian.Uint16(t.B), t.From(sll2HeadLen))
		}
	case LinkNull, LinkLoop:
		if t.Has(0, 4) {
			af := binary.LittleEndian.Uint32(t.B)
			if f.LinkType == LinkLoop || af > 0xffff {
				af = binary.BigEndian.Uint32(t.B)
			}
			switch af {
			case 2: // AF_INET
				d.ipv4(t.From(4), 0)
			case 10, 24, 28, 30: // AF_INET6 of Linux, NetBSD/OpenBSD, FreeBSD, macOS
				d.ipv6(t.From(4), 0)
			}
		}
	}
	if p := d.p; p.Kind == KindRoCE && f.LinkType == LinkEthernet {
		p.RoCE.Eth = f.Data[:d.netw:d.netw]
		p.RoCE.VLANs = p.Tags
	}
}

// etherType follows an EtherType (and the VLAN tags after it); off is the
// offset of t in an Ethernet frame.
func (d *decoder) etherType(et uint16, t tvb, off int) {
	switch et {
	case etIPv4:
		d.netw = off
		d.ipv4(t, 0)
	case etIPv6:
		d.netw = off
		d.ipv6(t, 0)
	case etMACControl:
		d.macControl(t)
	case etVLAN, etQinQ, etQinQOld:
		for range maxTags {
			d.p.Tags++
			if et != etQinQ {
				d.vlanTag(t)
			}
			if !t.Has(0, vlanTagLen) {
				return
			}
			et = binary.BigEndian.Uint16(t.B[2:])
			t, off = t.From(vlanTagLen), off+vlanTagLen
			switch et {
			case etVLAN, etQinQ, etQinQOld:
				continue
			case etIPv4, etIPv6, etMACControl:
				d.etherType(et, t, off)
			}
			return
		}
	}
}

// vlanTag records the first 802.1Q tag whose TCI was captured; t begins
// with the TCI.
func (d *decoder) vlanTag(t tvb) {
	if d.p.Tagged || !t.Has(0, 2) {
		return
	}
	d.p.Tagged, d.p.TCI = true, TCI(binary.BigEndian.Uint16(t.B))
}

// macControl decodes a MAC Control frame: the opcode once two bytes
// exist, then the fields of PAUSE and PFC as far as they were captured.
func (d *decoder) macControl(t tvb) {
	if !t.Has(0, 2) {
		return
	}
	p := d.p
	p.Kind = KindMACControl
	m := &p.MACControl
	b := t.B
	m.Opcode = MACOpcode(binary.BigEndian.Uint16(b))
	switch m.Opcode {
	case MACPause:
		if t.Has(2, 2) {
			m.PauseTime = binary.BigEndian.Uint16(b[2:])
			m.Complete = true
		}
	case MACPFC:
		if !t.Has(2, 2) {
			return
		}
		m.Enable = binary.BigEndian.Uint16(b[2:])
		if !t.Has(4, 2*len(m.Times)) {
			return
		}
		for c := range m.Times {
			m.Times[c] = binary.BigEndian.Uint16(b[4+2*c:])
		}
		m.Complete = true
	}
}

// sllProtocol follows the protocol field of a Linux cooked capture: an
// EtherType, or small values for non-Ethernet framing.
func (d *decoder) sllProtocol(proto uint16, t tvb) {
	if proto > 1500 {
		d.etherType(proto, t, -1)
	}
}

// rawIP follows LINKTYPE_RAW as tshark does: it first rules out Linux PPP
// remnants (and so needs 8 bytes), then looks at the IP version.
func (d *decoder) rawIP(t tvb) {
	if !t.Has(0, 8) {
		return
	}
	b := t.B
	if binary.BigEndian.Uint16(b) == 0xff03 || binary.BigEndian.Uint16(b[6:]) == 0xff03 {
		return // PPP
	}
	if t.Has(0, 10) && string(b[:10]) == "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" {
		return
	}
	switch b[0] >> 4 {
	case 4:
		d.ipv4(t, 0)
	case 6:
		d.ipv6(t, 0)
	}
}

// ipv4 follows an IPv4 header to its UDP or ICMP payload. depth counts
// the ICMP errors around it.
func (d *decoder) ipv4(t tvb, depth int) {
	if !t.Has(0, 1) {
		return
	}
	b := t.B
	switch b[0] >> 4 {
	case 4:
	case 6: // a bogus IPv4 version that tshark hands to IPv6
		d.ipv6(t, depth)
		return
	default:
		return
	}
	hlen := int(b[0]&0x0f) * 4
	if hlen < rocev2.IPv4HeaderLen || !t.Has(1, 3) {
		return
	}
	ipLen := int(binary.BigEndian.Uint16(b[2:]))
	if ipLen < hlen {
		if ipLen != 0 {
			return // bogus length
		}
		ipLen = t.Rep // TSO: the datagram is the captured packet
	}
	t = t.Shrink(ipLen)
	b = t.B
	// The options must have been captured. tshark also walks them for a
	// source route, and stops where an option's bytes are missing; every
	// byte it reads lies within the header and the two bytes after it,
	// which the UDP or ICMP header needs anyway, so that walk never
	// changes what is found.
	if !t.Has(16, hlen-16) {
		return
	}
	if binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
		return // a fragment
	}
	hdr := b[:hlen:hlen]
	switch b[9] {
	case protoUDP:
		d.udp(t.From(hlen), hdr, depth)
	case protoICMP:
		d.icmp(t.From(hlen), depth, false)
	}
}

// ipv6 follows an IPv6 header and the extension headers a RoCEv2 sender
// could put before UDP (RFC 8200 4): hop-by-hop, routing and destination
// options, and an atomic fragment header.
func (d *decoder) ipv6(t tvb, depth int) {
	if t.Has(0, 1) && t.B[0]>>4 != 6 {
		return
	}
	if !t.Has(0, rocev2.IPv6HeaderLen) {
		return
	}
	b := t.B
	if plen := int(binary.BigEndian.Uint16(b[4:])); plen != 0 {
		t = t.Shrink(rocev2.IPv6HeaderLen + plen)
		b = t.B
	}
	hdr := b[:rocev2.IPv6HeaderLen:rocev2.IPv6HeaderLen]
	nxt, off := b[6], rocev2.IPv6HeaderLen
	for range maxExtHeaders {
		switch nxt {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if !t.Has(off, 2) {
				return
			}
			n := (int(b[off+1]) + 1) * 8
			if !t.Has(off, n) || (nxt != 43 && !ipv6OptionsOK(b, off+2, off+n)) {
				return
			}
			nxt, off = b[off], off+n
			continue
		case 44: // fragment: only an atomic fragment is followed
			if !t.Has(off, 8) || binary.BigEndian.Uint16(b[off+2:])&0xfff9 != 0 {
				return
			}
			nxt, off = b[off], off+8
			continue
		case protoUDP:
			d.udp(t.From(off), hdr, depth)
		case protoICMP6:
			d.icmp(t.From(off), depth, true)
		}
		return
	}
}

// ipv6OptionsOK walks the TLV options of a hop-by-hop or destination
// options header in b[i:end]; false when an option runs past the header.
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

// icmp follows an ICMP (v6: ICMPv6) error message to the packet it
// quotes: destination unreachable, source quench, redirect, time exceeded
// and parameter problem (RFC 792); for ICMPv6 destination unreachable,
// packet too big, time exceeded and parameter problem (RFC 4443).
func (d *decoder) icmp(t tvb, depth int, v6 bool) {
	if !t.Has(0, 8) || depth >= maxQuoted {
		return
	}
	switch ty := t.B[0]; {
	case v6 && ty >= 1 && ty <= 4:
		d.ipv6(t.From(8), depth+1)
	case !v6 && (ty == 3 || ty == 4 || ty == 5 || ty == 11 || ty == 12):
		d.ipv4(t.From(8), depth+1)
	}
}

// udp takes a UDP datagram from or to port 4791 with a payload as
// RoCEv2 (as tshark hands it to the InfiniBand dissector). ipHdr is the
// IP header around it, for the ICRC.
func (d *decoder) udp(t tvb, ipHdr []byte, depth int) {
	if !t.Has(0, udpHeaderLen) {
		return
	}
	b := t.B
	ulen := int(binary.BigEndian.Uint16(b[4:]))
	if ulen < udpHeaderLen {
		return // bogus length
	}
	payload := t.Sub(udpHeaderLen, min(ulen, t.Rep)-udpHeaderLen)
	if len(payload.B) == 0 {
		return
	}
	if binary.BigEndian.Uint16(b) != rocev2.UDPPort && binary.BigEndian.Uint16(b[2:]) != rocev2.UDPPort {
		return
	}
	d.roce(payload, ipHdr, b[:udpHeaderLen:udpHeaderLen], ulen, depth)
}

// roce records the RoCEv2 packet in payload: the outer views, the
// length on the wire, the ICRC verdict and the transport views.
func (d *decoder) roce(payload tvb, ipHdr, udpHdr []byte, ulen, depth int) {
	p := d.p
	p.Kind = KindRoCE
	if depth > 0 {
		p.Kind = KindICMPError
	}
	r := &p.RoCE
	r.IP, r.UDP = ipHdr, udpHdr
	r.EtherType = etIPv4
	if ipHdr[0]>>4 == 6 {
		r.EtherType = etIPv6
	}
	t := payload.B
	p.TransportLen = len(t)
	if d.f.OrigLen > len(d.f.Data) && ulen-udpHeaderLen > len(t) {
		p.TransportLen, p.Cut = ulen-udpHeaderLen, true
	}
	if len(t) == payload.Rep && len(t) >= bth.Size+bth.ICRCSize {
		n := len(t) - bth.ICRCSize
		p.ICRC = ICRCBad
		if rocev2.ReadICRC(t[n:]) == rocev2.ComputeICRC(ipHdr, udpHdr, t[:n]) {
			p.ICRC = ICRCGood
		}
	}
	err := r.Packet.Parse(t)
	if err == nil && !p.Cut {
		return
	}
	transportViews(&r.Packet, t)
	d.err = err
	if p.Cut {
		d.err = ErrCut
	}
}

// transportViews sets the views of the transport headers captured whole
// in t: the BTH, its opcode's table row and extension headers; payload,
// pad and ICRC stay nil.
func transportViews(w *wire.Packet, t []byte) {
	*w = wire.Packet{Transport: t}
	h, err := bth.Parse(t)
	if err != nil {
		return
	}
	w.BTH = h
	in, ok := h.Opcode().Lookup()
	if !ok {
		return
	}
	w.Info = in
	at := func(m bth.HeaderMask) []byte {
		if o, ok := in.Offset(m); ok && o <= len(t) {
			return t[o:]
		}
		return nil
	}
	m := in.Mask
	if m&bth.MaskRETH != 0 {
		w.RETH, _ = reth.Parse(at(bth.MaskRETH))
	}
	if m&bth.MaskAETH != 0 {
		w.AETH, _ = aeth.Parse(at(bth.MaskAETH))
	}
	if m&bth.MaskImmDt != 0 {
		w.ImmDt, _ = ext.ParseImmDt(at(bth.MaskImmDt))
	}
	if m&bth.MaskIETH != 0 {
		w.IETH, _ = ext.ParseIETH(at(bth.MaskIETH))
	}
	if m&bth.MaskDETH != 0 {
		w.DETH, _ = ext.ParseDETH(at(bth.MaskDETH))
	}
	if m&bth.MaskAtomicETH != 0 {
		w.AtomicETH, _ = ext.ParseAtomicETH(at(bth.MaskAtomicETH))
	}
	if m&bth.MaskAtomicAckETH != 0 {
		w.AtomicAckETH, _ = ext.ParseAtomicAckETH(at(bth.MaskAtomicAckETH))
	}
	if m&bth.MaskFETH != 0 {
		w.FETH, _ = ext.ParseFETH(at(bth.MaskFETH))
	}
	if b := at(bth.MaskCNPPad); m&bth.MaskCNPPad != 0 && len(b) >= bth.CNPPadSize {
		w.CNPPad = b[:bth.CNPPadSize:bth.CNPPadSize]
	}
}
