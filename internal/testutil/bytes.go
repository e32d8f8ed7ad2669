package testutil

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// SHA256 returns the SHA-256 digest of b, for the "source digest equals
// destination digest" check of the integrity oracle.
func SHA256(b []byte) [32]byte { return sha256.Sum256(b) }

// Pattern returns n deterministic pseudo-random bytes for seed. Different
// seeds give unrelated contents, so a misplaced or stale block is caught.
func Pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	FillPattern(b, seed)
	return b
}

// FillPattern fills b with the bytes Pattern(seed, len(b)) returns.
func FillPattern(b []byte, seed uint64) {
	src := rand.NewPCG(splitmix64(seed), splitmix64(^seed))
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, src.Uint64())
		b = b[8:]
	}
	if len(b) > 0 {
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], src.Uint64())
		copy(b, tail[:])
	}
}

// FirstDiff returns the first offset at which a and b differ, len of the
// shorter one if one is a prefix of the other, and -1 if they are equal.
func FirstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	// Compare 8 bytes at a time: buffers here are up to a GiB.
	i := 0
	for ; i+8 <= n; i += 8 {
		if binary.LittleEndian.Uint64(a[i:]) != binary.LittleEndian.Uint64(b[i:]) {
			break
		}
	}
	for ; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return n
	}
	return -1
}

// RequireSameBytes fails t immediately unless got equals want. The message
// gives both lengths, the first differing offset, the bytes around it and
// both digests, instead of dumping megabytes.
func RequireSameBytes(t testing.TB, want, got []byte) {
	t.Helper()
	off := FirstDiff(want, got)
	if off < 0 {
		return
	}
	lo := max(0, off-8)
	window := func(b []byte) []byte { return b[min(lo, len(b)):min(off+24, len(b))] }
	t.Fatalf("bytes differ at offset %d (0x%x): len(want) = %d, len(got) = %d\n"+
		"want[%d:] = % x\ngot[%d:]  = % x\nsha256(want) = %x\nsha256(got)  = %x",
		off, off, len(want), len(got), lo, window(want), lo, window(got), SHA256(want), SHA256(got))
}
