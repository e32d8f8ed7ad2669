//go:build !amd64 || purego

package rocev2

import "hash/crc32"

const hasFold512 = false

// crcUpdate is crc32.Update with the IEEE table.
func crcUpdate(crc uint32, p []byte) uint32 { return crc32.Update(crc, crcTable, p) }
