//go:build amd64 && !purego

package rocev2

import (
	"hash/crc32"

	"golang.org/x/sys/cpu"
)

// hasFold512 says fold512x4 can run: AVX512F (VPTERNLOGD, VEXTRACTI32X4,
// the Z registers), AVX512VL (VPTERNLOGD on X registers) and VPCLMULQDQ.
var hasFold512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ

//go:noescape
func fold512x4(reg uint32, head *[64]byte, p []byte) (n int, crc uint32)

// fold512Min is the length from which crcUpdate folds with fold512x4:
// from 256 to 511 bytes hash/crc32, which runs four SSE chains there, is
// as fast (BenchmarkCRCUpdate, doc/limits.md §8).
const fold512Min = 512

// crcUpdate is crc32.Update with the IEEE table. From fold512Min bytes on
// machines with AVX-512 VPCLMULQDQ it folds four 64-byte blocks at a time
// (fold512x4), faster than hash/crc32, whose AVX-512 loop keeps one
// multiplication chain (doc/limits.md §8); the fold ends in the
// 32-bit register by carry-less multiplication too (no table lookups,
// whose tables a payload streaming through the cache pushes out), and the
// last len(p) mod 16 bytes go through hash/crc32.
func crcUpdate(crc uint32, p []byte) uint32 {
	if hasFold512 && len(p) >= fold512Min {
		return crcFold(crc, p)
	}
	return crc32.Update(crc, crcTable, p)
}

// crcFold is crcUpdate's fold, apart so that crcUpdate stays small enough
// to inline: a call to a function holding the fold's frame is a cost short
// packets would pay (doc/limits.md §8).
func crcFold(crc uint32, p []byte) uint32 {
	n, reg := fold512x4(^crc, nil, p)
	return foldEnd(reg, p[n:])
}

// foldHeaded returns the CRC of head | p from a zero register, head being
// a block that holds the ICRC's initial register and masked headers
// (icrcHead): the headers fold with the payload in one pass. len(p) must
// be at least fold512Min.
func foldHeaded(head *[64]byte, p []byte) uint32 {
	n, reg := fold512x4(0, head, p)
	return foldEnd(reg, p[n:])
}

// foldEnd returns the CRC from the register reg over the rest of p the
// fold left (fewer than 16 bytes).
func foldEnd(reg uint32, rest []byte) uint32 {
	if len(rest) == 0 {
		return ^reg
	}
	return crc32.Update(^reg, crcTable, rest)
}
