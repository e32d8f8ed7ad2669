//go:build !amd64 || purego

package rocev2

import "hash/crc32"

const hasFold512 = false

// fold512Min is the amd64 fold's threshold (unused here).
const fold512Min = 512

// crcUpdate is crc32.Update with the IEEE table.
func crcUpdate(crc uint32, p []byte) uint32 { return crc32.Update(crc, crcTable, p) }

// foldHeaded returns the CRC of head | p from a zero register (the
// amd64 fold's counterpart; not called while hasFold512 is false).
func foldHeaded(head *[64]byte, p []byte) uint32 {
	return crc32.Update(crc32.Update(0xffffffff, crcTable, head[:]), crcTable, p)
}
