//go:build amd64 && !purego

package rocev2

import (
	"encoding/binary"
	"hash/crc32"

	"golang.org/x/sys/cpu"
)

// hasFold512 says fold512x4 can run: AVX512F (VPTERNLOGD, VEXTRACTI32X4,
// the Z registers), AVX512VL (VPTERNLOGD on X registers) and VPCLMULQDQ.
var hasFold512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ

//go:noescape
func fold512x4(reg uint32, p []byte, out *[16]byte) int

// fold512Min is the length from which crcUpdate folds with fold512x4
// (BenchmarkCRCUpdate: 1.3 to 1.65 times hash/crc32's rate from 512 bytes
// to 4 KiB; at 256 to 511 bytes, where hash/crc32 runs four SSE chains,
// the two end up level).
const fold512Min = 512

// crcUpdate is crc32.Update with the IEEE table. From fold512Min bytes on
// machines with AVX-512 VPCLMULQDQ it folds four 64-byte blocks at a time
// (fold512x4), 1.65 times hash/crc32's rate on a 4 KiB payload, whose
// AVX-512 loop keeps one multiplication chain; the 16-byte remainder goes
// through the slicing table, and the last len(p) mod 16 bytes through
// hash/crc32.
func crcUpdate(crc uint32, p []byte) uint32 {
	if hasFold512 && len(p) >= fold512Min {
		return crcFold(crc, p)
	}
	return crc32.Update(crc, crcTable, p)
}

// crcFold is crcUpdate's fold, apart so that crcUpdate stays small enough
// to inline: a call to a function holding the fold's frame costs short
// packets a fifth of their ICRC (BenchmarkComputeICRCSmall).
func crcFold(crc uint32, p []byte) uint32 {
	var v [16]byte
	n := fold512x4(^crc, p, &v)
	reg := step8(0, binary.LittleEndian.Uint64(v[0:]))
	reg = step8(reg, binary.LittleEndian.Uint64(v[8:]))
	if n == len(p) {
		return ^reg
	}
	return crc32.Update(^reg, crcTable, p[n:])
}
