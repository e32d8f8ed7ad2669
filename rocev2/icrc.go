package rocev2

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// ICRC (IBA 7.8.1, RoCEv2 Annex A17.4.1): CRC-32 (IEEE, reflected polynomial
// 0xEDB88320, the same as Ethernet's FCS) over
//
//	8 bytes of 0xFF  (the masked LRH of IB; rxe seeds with the state after them)
//	IP header        (IPv4: TOS, TTL and header checksum set to all ones;
//	                  IPv6: traffic class, flow label and hop limit all ones)
//	UDP header       (checksum all ones)
//	BTH              (byte 4 — FECN, BECN, Resv6 — all ones)
//	the rest         (extension headers, payload, pad)
//
// complemented and stored least-significant byte first in the last four bytes
// (rxe_icrc.c; doc/rxe.md §7). IPv4 total length, ID and
// fragment field, and the UDP ports and length ARE covered. The golden vectors
// of §H (scapy's UC SEND and a ConnectX-4 Lx CNP) pin the byte order.

// ff8CRC is crc32.ChecksumIEEE of eight 0xFF bytes. Continuing a CRC from it
// with crc32.Update is the same as prefixing the eight bytes (rxe's seed
// 0xdebb20e3 is the un-complemented form of this state).
const ff8CRC = 0x2144df1c

// crcTable is the IEEE table; crc32.Update uses the CLMUL/SSE4.2 path for it
// on amd64.
var crcTable = crc32.IEEETable

// Outer header lengths (IPv4 without options).
const (
	IPv4HeaderLen = 20
	IPv6HeaderLen = 40
	UDPHeaderLen  = 8
	// PseudoHeaderLen is the size of the scratch buffer PseudoHeaders fills:
	// the larger of the two IP headers plus UDP.
	PseudoHeaderLen = IPv6HeaderLen + UDPHeaderLen
)

// The masks of the fields the ICRC does not cover, by byte offset in each
// header: 0xFF (or the bits of a shared byte) where the ICRC sees ones.
var (
	ipv4Mask = [...]byte{1: 0xff, 8: 0xff, 10: 0xff, 11: 0xff}        // TOS, TTL, header checksum
	ipv6Mask = [...]byte{0: 0x0f, 1: 0xff, 2: 0xff, 3: 0xff, 7: 0xff} // traffic class, flow label, hop limit
	udpMask  = [...]byte{6: 0xff, 7: 0xff}                            // checksum
	bthMask  = [...]byte{4: 0xff, 11: 0}                              // FECN, BECN, Resv6
)

// crcSlice8 holds the slicing-by-8 tables of the IEEE CRC: crcSlice8[0] is
// crc32.IEEETable and crcSlice8[k][i] advances entry i through k more zero
// bytes. They are computed once at package initialisation and never written
// again.
var crcSlice8 = func() *[8][256]uint32 {
	t := new([8][256]uint32)
	t[0] = *crcTable
	for i := range 256 {
		c := t[0][i]
		for k := 1; k < 8; k++ {
			c = t[0][byte(c)] ^ c>>8
			t[k][i] = c
		}
	}
	return t
}()

// The masks of the header words the fast paths feed to step8, in the
// little-endian load order (byte 0 of a header is the low byte of its word).
const (
	ipv4Word0Mask = 0xff00             // TOS
	ipv4Word1Mask = 0xffff00ff         // TTL (byte 8), header checksum (10, 11)
	ipv6Word0Mask = 0xff000000ffffff0f // traffic class, flow label, hop limit (byte 7)
	udpWordMask   = 0xffff000000000000 // checksum (bytes 6, 7)
	udpHalfMask   = 0xffff0000         // the checksum in the UDP header's second half
	bthWord1Mask  = 0xff               // byte 4: FECN, BECN, Resv6
)

// ComputeICRC returns the ICRC of a RoCEv2 packet given its IP header (IPv4
// with options, or IPv6 without extension headers), its UDP header and the
// transport part from the BTH up to but excluding the ICRC. It does not
// allocate.
//
// The masked copies of the headers are never built: the headers are fed to
// the CRC eight bytes at a time with their masks ORed in (maskedHeaders),
// and the rest of the transport goes to crcUpdate (hash/crc32, or a
// four-way AVX-512 fold for long payloads). Where the fold runs, the
// masked headers are instead one 64-byte block folded ahead of the
// payload (icrcHead, foldHeaded), with no table lookups at all, which is
// faster still, most of all for a payload out of cache (doc/limits.md §8).
func ComputeICRC(ipHdr, udpHdr, transport []byte) uint32 {
	if hasFold512 && len(transport) >= len(bthMask)+fold512Min {
		var h [64]byte
		if icrcHead(&h, ipHdr, udpHdr, transport[:len(bthMask)], nil) {
			return foldHeaded(&h, transport[len(bthMask):])
		}
	}
	n := min(len(transport), len(bthMask))
	reg := maskedHeaders(ipHdr, udpHdr, transport[:n])
	return crcUpdate(^reg, transport[n:])
}

// ComputeICRCGather returns the ICRC ComputeICRC would return for the
// transport part head | payload | tail (BTH up to but excluding the ICRC)
// without joining the three: the CRC runs on from one part to the next (a
// CRC over a concatenation is the CRC of the first part continued over the
// second). It serves packets sent from a memory region with iovecs
// (link.Datagram's two-part form), whose headers and payload lie in
// different buffers. Any part may be empty, and the BTH may straddle them.
// It does not allocate.
func ComputeICRCGather(ipHdr, udpHdr, head, payload, tail []byte) uint32 {
	if len(head) >= len(bthMask) { // the BTH is in head: the common case
		if hasFold512 && len(payload) >= fold512Min {
			var h [64]byte
			if icrcHead(&h, ipHdr, udpHdr, head[:len(bthMask)], head[len(bthMask):]) {
				return crcUpdate(foldHeaded(&h, payload), tail)
			}
		}
		crc := ^maskedHeaders(ipHdr, udpHdr, head[:len(bthMask)])
		crc = crcUpdate(crc, head[len(bthMask):])
		crc = crcUpdate(crc, payload)
		return crcUpdate(crc, tail)
	}
	reg := maskedIPUDP(ipHdr, udpHdr)
	off := 0 // bytes of the BTH mask applied so far
	var crc uint32
	for _, p := range [...][]byte{head, payload, tail} {
		if off < len(bthMask) {
			n := min(len(bthMask)-off, len(p))
			reg = updateMasked(reg, p[:n], bthMask[off:])
			off += n
			if off < len(bthMask) {
				continue
			}
			crc = ^reg
			p = p[n:]
		}
		crc = crcUpdate(crc, p)
	}
	if off < len(bthMask) { // shorter than a BTH: all of it was masked
		crc = ^reg
	}
	return crc
}

// maskedHeaders returns the (uncomplemented) CRC register after the eight
// 0xFF bytes and the masked IP header, UDP header and BTH part bthPart (at
// most a BTH). The packets every path sends and receives — an IPv4 header
// without options or an IPv6 header, an 8-byte UDP header, a whole BTH —
// take a fast path of five or seven slicing-by-8 steps on words loaded
// straight from the headers, the masks ORed in as constants; anything else
// takes the byte-exact general path (maskedIPUDP, updateMasked). Both give
// the same register (TestMaskedHeadersMatchReference).
func maskedHeaders(ipHdr, udpHdr, bthPart []byte) uint32 {
	if len(udpHdr) == UDPHeaderLen && len(bthPart) == len(bthMask) {
		switch {
		case len(ipHdr) == IPv4HeaderLen && ipHdr[0]>>4 != 6:
			return maskedIPv4(ipHdr, udpHdr, bthPart)
		case len(ipHdr) == IPv6HeaderLen && ipHdr[0]>>4 == 6:
			return maskedIPv6(ipHdr, udpHdr, bthPart)
		}
	}
	return updateMasked(maskedIPUDP(ipHdr, udpHdr), bthPart, bthMask[:])
}

// icrcHead fills h with the start of the ICRC's input as one block for
// the fold (foldHeaded), and reports whether it fits. The ICRC is the CRC,
// from the all-ones register, of eight 0xFF bytes (the masked LRH
// stand-in) and the masked headers; from a zero register the same CRC
// comes out of the input with the initial ones XORed into its first four
// bytes, which leaves four 0xFF bytes, and zero bytes in front change
// nothing. So h, which must be zero (a new array), is: zero bytes, four
// 0xFF bytes, the masked IP header (IPv4 without options, or IPv6), the
// masked UDP header, the masked BTH b and the transport bytes that follow
// it in the packet's header buffer, if any: extra, a RETH or nothing. An
// IPv4 packet's take 44 of the 64 bytes, an IPv6 packet's all 64, so only
// an IPv4 packet's RETH fits. The words are those maskedHeaders feeds to
// step8.
func icrcHead(h *[64]byte, ip, udp, b, extra []byte) bool {
	if len(udp) != UDPHeaderLen || len(b) != len(bthMask) || (len(extra) != 0 && len(extra) != rethLen) {
		return false
	}
	le := binary.LittleEndian
	udp, b = udp[:UDPHeaderLen], b[:12]
	var o int // where the UDP header goes
	switch {
	case len(ip) == IPv4HeaderLen && ip[0]>>4 != 6:
		ip = ip[:IPv4HeaderLen]
		i := 20 // 64 - 44: zero bytes first (h is new, so zero)
		if len(extra) == rethLen {
			i = 4
		}
		le.PutUint32(h[i:], 0xffffffff)
		le.PutUint64(h[i+4:], le.Uint64(ip[0:])|ipv4Word0Mask)
		le.PutUint64(h[i+12:], le.Uint64(ip[8:])|ipv4Word1Mask)
		le.PutUint32(h[i+20:], le.Uint32(ip[16:]))
		o = i + 24
	case len(ip) == IPv6HeaderLen && ip[0]>>4 == 6 && len(extra) == 0:
		ip = ip[:IPv6HeaderLen]
		le.PutUint32(h[0:], 0xffffffff)
		le.PutUint64(h[4:], le.Uint64(ip[0:])|ipv6Word0Mask)
		le.PutUint64(h[12:], le.Uint64(ip[8:]))
		le.PutUint64(h[20:], le.Uint64(ip[16:]))
		le.PutUint64(h[28:], le.Uint64(ip[24:]))
		le.PutUint64(h[36:], le.Uint64(ip[32:]))
		o = 44
	default:
		return false
	}
	le.PutUint64(h[o:], le.Uint64(udp)|udpWordMask)
	le.PutUint32(h[o+8:], le.Uint32(b[0:]))
	le.PutUint64(h[o+12:], le.Uint64(b[4:])|bthWord1Mask)
	if len(extra) == rethLen {
		le.PutUint64(h[o+20:], le.Uint64(extra[0:]))
		le.PutUint64(h[o+28:], le.Uint64(extra[8:]))
	}
	return true
}

// rethLen is the length of a RETH, the one extra icrcHead takes.
const rethLen = 16

// maskedIPv4 is maskedHeaders for a 20-byte IPv4 header, an 8-byte UDP
// header and a 12-byte BTH: 40 bytes, five words.
func maskedIPv4(ip, udp, b []byte) uint32 {
	le := binary.LittleEndian
	ip, udp, b = ip[:IPv4HeaderLen], udp[:UDPHeaderLen], b[:12]
	reg := step8(^uint32(ff8CRC), le.Uint64(ip[0:])|ipv4Word0Mask)
	reg = step8(reg, le.Uint64(ip[8:])|ipv4Word1Mask)
	reg = step8(reg, uint64(le.Uint32(ip[16:]))|uint64(le.Uint32(udp[0:]))<<32)
	reg = step8(reg, uint64(le.Uint32(udp[4:])|udpHalfMask)|uint64(le.Uint32(b[0:]))<<32)
	return step8(reg, le.Uint64(b[4:])|bthWord1Mask)
}

// maskedIPv6 is maskedHeaders for a 40-byte IPv6 header, an 8-byte UDP
// header and a 12-byte BTH: 60 bytes, seven words and a half.
func maskedIPv6(ip, udp, b []byte) uint32 {
	le := binary.LittleEndian
	ip, udp, b = ip[:IPv6HeaderLen], udp[:UDPHeaderLen], b[:12]
	reg := step8(^uint32(ff8CRC), le.Uint64(ip[0:])|ipv6Word0Mask)
	reg = step8(reg, le.Uint64(ip[8:]))
	reg = step8(reg, le.Uint64(ip[16:]))
	reg = step8(reg, le.Uint64(ip[24:]))
	reg = step8(reg, le.Uint64(ip[32:]))
	reg = step8(reg, le.Uint64(udp)|udpWordMask)
	reg = step8(reg, uint64(le.Uint32(b[0:]))|uint64(le.Uint32(b[4:])|bthWord1Mask)<<32)
	return step4(reg, le.Uint32(b[8:]))
}

// maskedIPUDP returns the register after the eight 0xFF bytes and the
// masked IP and UDP headers, for any lengths (IPv4 with options, or
// headers a fuzzer made up).
func maskedIPUDP(ipHdr, udpHdr []byte) uint32 {
	reg := ^uint32(ff8CRC) // register after the eight 0xFF bytes
	if len(ipHdr) > 0 && ipHdr[0]>>4 == 6 {
		reg = updateMasked(reg, ipHdr, ipv6Mask[:])
	} else {
		reg = updateMasked(reg, ipHdr, ipv4Mask[:])
	}
	return updateMasked(reg, udpHdr, udpMask[:])
}

// step8 advances the (uncomplemented) CRC register reg over the eight bytes
// of w, least significant first (slicing-by-8). Only the low four bytes
// meet the register: the high four are looked up and combined first, and
// the XORs are paired, so that the chain from one step's register to the
// next is one load and two XORs deep (Go does not reassociate them).
func step8(reg uint32, w uint64) uint32 {
	t := crcSlice8
	hi := (t[3][byte(w>>32)] ^ t[2][byte(w>>40)]) ^ (t[1][byte(w>>48)] ^ t[0][w>>56])
	lo := uint32(w) ^ reg
	return hi ^ ((t[7][byte(lo)] ^ t[6][byte(lo>>8)]) ^ (t[5][byte(lo>>16)] ^ t[4][lo>>24]))
}

// step4 advances reg over the four bytes of w, least significant first.
func step4(reg uint32, w uint32) uint32 {
	t := crcSlice8
	w ^= reg
	return (t[3][byte(w)] ^ t[2][byte(w>>8)]) ^ (t[1][byte(w>>16)] ^ t[0][w>>24])
}

// updateMasked advances the (uncomplemented) CRC register reg over b with
// mask ORed in; mask may be shorter than b.
func updateMasked(reg uint32, b, mask []byte) uint32 {
	i := 0
	for ; i+4 <= len(b); i += 4 {
		w := binary.LittleEndian.Uint32(b[i:])
		if i+4 <= len(mask) {
			w |= binary.LittleEndian.Uint32(mask[i:])
		}
		reg = step4(reg, w)
	}
	t := crcSlice8
	for ; i < len(b); i++ {
		c := b[i]
		if i < len(mask) {
			c |= mask[i]
		}
		reg = t[0][byte(reg)^c] ^ reg>>8
	}
	return reg
}

// PutICRC stores crc in the four bytes of b in wire order (LSB first).
func PutICRC(b []byte, crc uint32) { binary.LittleEndian.PutUint32(b, crc) }

// ReadICRC reads an ICRC stored in wire order.
func ReadICRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// PseudoHeaders writes into dst the IP and UDP headers a packet with the
// given addressing would carry, as far as the ICRC covers them, and returns
// the IP and UDP header slices. It serves the UDP-socket path, where the
// kernel builds the real headers: Linux sends an unconnected DF datagram with
// IPv4 ID 0 (ip_select_ident_segs), so ipID is 0 there. transportLen is the
// UDP payload length, ICRC included.
func PseudoHeaders(dst *[PseudoHeaderLen]byte, src, dstAddr netip.AddrPort, ipID uint16, transportLen int) (ip, udp []byte) {
	if src.Addr().Is4() || src.Addr().Is4In6() {
		h := dst[:IPv4HeaderLen]
		h[0] = 0x45
		h[1] = 0xff
		binary.BigEndian.PutUint16(h[2:], uint16(IPv4HeaderLen+UDPHeaderLen+transportLen))
		binary.BigEndian.PutUint16(h[4:], ipID)
		binary.BigEndian.PutUint16(h[6:], 0x4000) // DF
		h[8] = 0xff
		h[9] = 17
		h[10], h[11] = 0xff, 0xff
		s4, d4 := src.Addr().Unmap().As4(), dstAddr.Addr().Unmap().As4()
		copy(h[12:16], s4[:])
		copy(h[16:20], d4[:])
		ip = h
	} else {
		h := dst[:IPv6HeaderLen]
		h[0], h[1], h[2], h[3] = 0x6f, 0xff, 0xff, 0xff
		binary.BigEndian.PutUint16(h[4:], uint16(UDPHeaderLen+transportLen))
		h[6] = 17
		h[7] = 0xff
		s16, d16 := src.Addr().As16(), dstAddr.Addr().As16()
		copy(h[8:24], s16[:])
		copy(h[24:40], d16[:])
		ip = h
	}
	udp = dst[len(ip) : len(ip)+UDPHeaderLen]
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dstAddr.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(UDPHeaderLen+transportLen))
	udp[6], udp[7] = 0xff, 0xff
	return ip, udp
}
