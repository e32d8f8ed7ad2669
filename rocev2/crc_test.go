package rocev2

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
)

// xpowMod returns x^n mod P for the CRC-32 polynomial in its normal
// (unreflected) form, bit by bit.
func xpowMod(n int) uint64 {
	const p = 0x104c11db7
	r := uint64(1)
	for range n {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= p
		}
	}
	return r
}

// foldConstant is the multiplier of a fold across d bits for the lane
// half whose exponent is d+e: x^(d+e) mod P, bit-reflected in 32 bits and
// shifted left by one (Intel's PCLMULQDQ CRC paper).
func foldConstant(d, e int) uint64 {
	v := xpowMod(d + e)
	var r uint64
	for i := range 32 {
		if v>>i&1 != 0 {
			r |= 1 << (31 - i)
		}
	}
	return r << 1
}

// TestFoldConstants derives the constants of crc_amd64.s, and checks the
// derivation against hash/crc32's for 512 and 128 bits.
func TestFoldConstants(t *testing.T) {
	for _, tc := range []struct {
		d      int
		lo, hi uint64
	}{
		{128, 0x1751997d0, 0x0ccaa009e},  // hash/crc32's r4r3
		{512, 0x154442bd4, 0x1c6e41596},  // hash/crc32's r2r1
		{2048, 0x11542778a, 0x1322d1430}, // ours
	} {
		if lo, hi := foldConstant(tc.d, 32), foldConstant(tc.d, -32); lo != tc.lo || hi != tc.hi {
			t.Errorf("D=%d: derived %#x, %#x; in use %#x, %#x", tc.d, lo, hi, tc.lo, tc.hi)
		}
	}
}

// reflect returns the low n bits of v in reverse order.
func reflect(v uint64, n int) uint64 {
	var r uint64
	for i := range n {
		if v>>i&1 != 0 {
			r |= 1 << (n - 1 - i)
		}
	}
	return r
}

// TestReductionConstants derives the constants of crc_amd64.s's last
// step, the 64-bit value to the 32-bit register (k5, barrett): x^64 mod P
// as the folds' constants are, and Barrett's P and floor(x^64 / P), both
// 33 bits, bit-reflected.
func TestReductionConstants(t *testing.T) {
	const p = 0x104c11db7
	if k5 := foldConstant(32, 32); k5 != 0x163cd6124 {
		t.Errorf("k5: derived %#x, in use 0x163cd6124", k5)
	}
	// Long division of x^64 by P over GF(2).
	var q uint64
	rem := [2]uint64{0, 1} // x^64: bit 64 set (lo, hi words)
	for i := 64; i >= 32; i-- {
		var bit uint64
		if i >= 64 {
			bit = rem[1] >> (i - 64) & 1
		} else {
			bit = rem[0] >> i & 1
		}
		if bit == 0 {
			continue
		}
		q |= 1 << (i - 32)
		// Subtract P·x^(i-32).
		sh := i - 32
		lo := uint64(p) << sh
		var hi uint64
		if sh > 0 {
			hi = uint64(p) >> (64 - sh) // the bits shifted past bit 63
		}
		rem[0] ^= lo
		rem[1] ^= hi
	}
	if mu := reflect(q, 33); mu != 0x1f7011641 {
		t.Errorf("Barrett floor(x^64/P): derived %#x, in use 0x1f7011641", mu)
	}
	if pr := reflect(p, 33); pr != 0x1db710641 {
		t.Errorf("Barrett P: derived %#x, in use 0x1db710641", pr)
	}
}

// TestCRCUpdateMatchesCRC32 compares crcUpdate with hash/crc32 at every
// length around the fold's boundaries and at random lengths, offsets and
// starting values.
func TestCRCUpdateMatchesCRC32(t *testing.T) {
	if !hasFold512 {
		t.Log("no AVX-512 VPCLMULQDQ here: crcUpdate is hash/crc32")
	}
	r := rand.New(rand.NewPCG(4791, 15))
	buf := make([]byte, 20000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	check := func(crc uint32, p []byte) {
		t.Helper()
		if got, want := crcUpdate(crc, p), crc32.Update(crc, crcTable, p); got != want {
			t.Fatalf("crcUpdate(%#x, %d bytes) = %#x, hash/crc32 %#x", crc, len(p), got, want)
		}
	}
	for n := 0; n <= 1100; n++ {
		check(0, buf[:n])
		check(0xffffffff, buf[3:3+n])
	}
	for _, n := range []int{4096, 4096 + 16, 4096 + 28, 8192, 9000, 16384 + 63} {
		check(r.Uint32(), buf[:n])
	}
	for range 3000 {
		off := r.IntN(64)
		n := r.IntN(len(buf) - off)
		check(r.Uint32(), buf[off:off+n])
	}
	zero := make([]byte, 4096)
	check(0, zero)
	check(0xdeadbeef, zero)
}

// TestCRCUpdateNoAlloc: the 16-byte fold result stays on the stack.
func TestCRCUpdateNoAlloc(t *testing.T) {
	buf := make([]byte, 4096)
	if n := testing.AllocsPerRun(100, func() { _ = crcUpdate(1, buf) }); n != 0 {
		t.Fatalf("crcUpdate allocates %v times", n)
	}
}

// BenchmarkCRCUpdate compares crcUpdate with hash/crc32 in one run, at
// the sizes where the fold takes over (fold512Min) and at a 4 KiB
// payload.
func BenchmarkCRCUpdate(b *testing.B) {
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, n := range []int{256, 512, 1040, 2048, 4096} {
		for _, f := range []struct {
			name string
			fn   func(uint32, []byte) uint32
		}{
			{"crcUpdate", crcUpdate},
			{"crc32.Update", func(c uint32, p []byte) uint32 { return crc32.Update(c, crcTable, p) }},
		} {
			b.Run(f.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					sinkReg += f.fn(sinkReg, buf[:n])
				}
			})
		}
	}
}
