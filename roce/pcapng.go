package roce

import "encoding/binary"

// The pcapng blocks a capture writes (draft-ietf-opsawg-pcapng): one
// section header, an interface description per device and an enhanced
// packet block per packet, little-endian. Written by hand rather than with
// gopacket's pcapgo, which the house style keeps out of library packages,
// and so that a packet costs no allocation on the writer's side either.
const (
	ngBlockSection   = 0x0A0D0D0A
	ngBlockInterface = 0x00000001
	ngBlockEnhanced  = 0x00000006
	ngByteOrderMagic = 0x1A2B3C4D

	ngOptEnd       = 0
	ngOptUserAppl  = 4 // shb_userappl
	ngOptIfName    = 2 // if_name
	ngOptIfTsresol = 9 // if_tsresol
	ngOptEpbFlags  = 2 // epb_flags

	// epb_flags direction bits (0-1).
	ngInbound  = 1
	ngOutbound = 2

	linkTypeEthernet = 1
)

// ngPad rounds n up to a multiple of 4.
func ngPad(n int) int { return (n + 3) &^ 3 }

// ngOption appends an option (code, length, value padded to 4 bytes).
func ngOption(b []byte, code uint16, v []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, code)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
	b = append(b, v...)
	for i := len(v); i%4 != 0; i++ {
		b = append(b, 0)
	}
	return b
}

// ngBlock frames body as a block of type typ: type, total length, body
// (a multiple of 4 bytes), total length.
func ngBlock(typ uint32, body []byte) []byte {
	n := 12 + len(body)
	b := make([]byte, 0, n)
	b = binary.LittleEndian.AppendUint32(b, typ)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, uint32(n))
}

// ngSection returns a section header block naming goroce as the writer.
func ngSection() []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, ngByteOrderMagic)
	b = binary.LittleEndian.AppendUint16(b, 1) // major
	b = binary.LittleEndian.AppendUint16(b, 0) // minor
	b = binary.LittleEndian.AppendUint64(b, ^uint64(0))
	b = ngOption(b, ngOptUserAppl, []byte("goroce"))
	b = ngOption(b, ngOptEnd, nil)
	return ngBlock(ngBlockSection, b)
}

// ngInterface returns an interface description block: Ethernet, the
// snap length, the name, nanosecond timestamps.
func ngInterface(name string, snaplen int) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint16(b, linkTypeEthernet)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(snaplen))
	b = ngOption(b, ngOptIfName, []byte(name))
	b = ngOption(b, ngOptIfTsresol, []byte{9})
	b = ngOption(b, ngOptEnd, nil)
	return ngBlock(ngBlockInterface, b)
}

// Enhanced packet block layout: a 28-byte header before the frame; after
// it, padding to 4 bytes and a 16-byte trailer (epb_flags, the end of
// options, the total length).
const (
	ngPacketHeader  = 28
	ngPacketTrailer = 16
)

// ngPacketBlock completes the enhanced packet block around the frame of
// caplen bytes that the caller wrote at blk[ngPacketHeader:]: the frame of
// a packet origLen long, on interface id, at ts nanoseconds since the
// epoch, marked inbound or outbound. blk must have room for the padding
// and the trailer. It returns the block; it does not allocate.
func ngPacketBlock(blk []byte, caplen int, id uint32, ts int64, origLen int, out bool) []byte {
	end := ngPacketHeader + ngPad(caplen)
	total := end + ngPacketTrailer
	h := blk[:ngPacketHeader]
	binary.LittleEndian.PutUint32(h[0:], ngBlockEnhanced)
	binary.LittleEndian.PutUint32(h[4:], uint32(total))
	binary.LittleEndian.PutUint32(h[8:], id)
	binary.LittleEndian.PutUint32(h[12:], uint32(uint64(ts)>>32))
	binary.LittleEndian.PutUint32(h[16:], uint32(ts))
	binary.LittleEndian.PutUint32(h[20:], uint32(caplen))
	binary.LittleEndian.PutUint32(h[24:], uint32(origLen))
	clear(blk[ngPacketHeader+caplen : end])
	dir := uint32(ngInbound)
	if out {
		dir = ngOutbound
	}
	t := blk[end:total]
	binary.LittleEndian.PutUint16(t[0:], ngOptEpbFlags)
	binary.LittleEndian.PutUint16(t[2:], 4)
	binary.LittleEndian.PutUint32(t[4:], dir)
	binary.LittleEndian.PutUint32(t[8:], ngOptEnd) // code and length 0
	binary.LittleEndian.PutUint32(t[12:], uint32(total))
	return blk[:total]
}
