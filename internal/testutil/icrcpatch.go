package testutil

import (
	"encoding/binary"
	"hash/crc32"
)

// PatchICRC fixes the ICRC of a RoCEv2 transport packet (BTH up to and
// including the ICRC, as link.Datagram.Buf holds it) after a test edited
// bytes before the ICRC: orig is the packet as it was, pkt the edited one,
// of the same length. CRC-32 is affine over a fixed length (crc(a^d) =
// crc(a) ^ crc(d) ^ crc(0)), so the new ICRC follows from the old one and
// the edit alone, without the IP and UDP headers the ICRC also covers
// (which the kernel writes on a UDP socket). It lets hostile-peer tests
// send what the stack never would (a REQ with a reserved path MTU) through
// a link that still computes a valid ICRC. It panics if the lengths differ
// or pkt is shorter than an ICRC.
func PatchICRC(pkt, orig []byte) {
	if len(pkt) != len(orig) || len(pkt) < 4 {
		panic("testutil.PatchICRC: packets of different or too short length")
	}
	n := len(pkt) - 4
	// crc(d) ^ crc(0) is the linear part of the CRC of the edit d; the
	// bytes before the transport (0xFF prefix, masked headers) are equal
	// in both packets, so their zero delta adds nothing to it.
	delta := make([]byte, n)
	for i := range n {
		delta[i] = pkt[i] ^ orig[i]
	}
	fix := crc32.ChecksumIEEE(delta) ^ crc32.ChecksumIEEE(make([]byte, n))
	old := binary.LittleEndian.Uint32(orig[n:])
	binary.LittleEndian.PutUint32(pkt[n:], old^fix)
}
