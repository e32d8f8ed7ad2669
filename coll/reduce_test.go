package coll

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHalfConversion checks HalfFromFloat32 against the exact rule on
// every half: each half converts to float32 and back unchanged, and the
// float32s halfway between neighbours round to the even one.
func TestHalfConversion(t *testing.T) {
	for h := range 1 << 16 {
		x := Half(h)
		f := x.Float32()
		if f != f { // NaN stays NaN
			assert.True(t, HalfFromFloat32(f)&0x7C00 == 0x7C00 && HalfFromFloat32(f)&0x3FF != 0, "%#x", h)
			continue
		}
		require.Equal(t, x, HalfFromFloat32(f), "%#x → %v", h, f)
	}
	tests := []struct {
		f    float32
		want Half
	}{
		{1, 0x3C00}, {-2, 0xC000}, {65504, 0x7BFF}, {65520, 0x7C00}, {1e9, 0x7C00},
		{float32(math.Inf(-1)), 0xFC00}, {5.960464477539063e-08, 0x0001}, {2.9e-08, 0x0000},
		{1 + 1.0/2048, 0x3C00}, // halfway between 1 and 1+2^-10: to even (1)
		{1 + 3.0/2048, 0x3C02}, // halfway between 1+2^-10 and 1+2^-9: to even
		{2049, 0x6800},         // 2048 and 2050 are halves: 2049 rounds to even 2048
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, HalfFromFloat32(tc.f), "%v", tc.f)
	}
}

func TestBF16Conversion(t *testing.T) {
	for h := range 1 << 16 {
		x := BF16(h)
		f := x.Float32()
		if f != f {
			continue
		}
		require.Equal(t, x, BF16FromFloat32(f), "%#x", h)
	}
	assert.Equal(t, BF16(0x3F80), BF16FromFloat32(1))
	assert.Equal(t, BF16(0x4380), BF16FromFloat32(257)) // between 256 (even) and 258: to 256
	assert.Equal(t, BF16(0x4382), BF16FromFloat32(259)) // between 258 and 260 (even): to 260
}

// refReduce is the element-by-element reference of reduce.
func refReduce(dt DataType, op Op, a, b []byte) []byte {
	out := make([]byte, len(a))
	reduceUnaligned(dt, op, out, a, b)
	return out
}

// TestReduceKernels compares every typed kernel with the element-wise
// reference (and so the SWAR byte sum with plain byte addition), on
// lengths that exercise the unrolled loops' tails, aligned and not.
func TestReduceKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range AllDataTypes() {
		for _, op := range AllOps() {
			for _, n := range []int{0, 1, 7, 8, 9, 63, 1000} {
				sz := dt.Size()
				a, b := make([]byte, n*sz+8), make([]byte, n*sz+8)
				for i := range a {
					a[i], b[i] = byte(rng.Uint32()), byte(rng.Uint32())
				}
				if dt == Float16 || dt == BFloat16 || dt == Float32 || dt == Float64 {
					// Finite values: NaN payloads are not compared bit for bit.
					for i := 0; i < n; i++ {
						putFloat(a, dt, i, rng.Float64()*200-100)
						putFloat(b, dt, i, rng.Float64()*200-100)
					}
				}
				want := refReduce(dt, op, a[:n*sz], b[:n*sz])
				got := make([]byte, n*sz)
				reduce(dt, op, got, a[:n*sz], b[:n*sz])
				require.Equal(t, want, got, "%v %v n=%d", dt, op, n)
				// In place, and misaligned by one byte.
				if n > 0 {
					ma, mb := make([]byte, n*sz+1), make([]byte, n*sz+1)
					copy(ma[1:], a[:n*sz])
					copy(mb[1:], b[:n*sz])
					reduce(dt, op, ma[1:], ma[1:], mb[1:])
					require.Equal(t, want, ma[1:], "%v %v n=%d misaligned in place", dt, op, n)
				}
			}
		}
	}
}

func putFloat(b []byte, dt DataType, i int, v float64) {
	switch dt {
	case Float16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(HalfFromFloat32(float32(v))))
	case BFloat16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(BF16FromFloat32(float32(v))))
	case Float32:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case Float64:
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
}

func TestDivide(t *testing.T) {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint32(b, uint32(0xFFFFFFF9)) // -7
	binary.LittleEndian.PutUint32(b[4:], 9)
	divide(Int32, b[:8], 2)
	assert.Equal(t, int32(-3), int32(binary.LittleEndian.Uint32(b))) // truncated toward zero
	assert.Equal(t, int32(4), int32(binary.LittleEndian.Uint32(b[4:])))
	putFloat(b, Float64, 0, 3)
	divide(Float64, b[:8], 4)
	assert.Equal(t, 0.75, math.Float64frombits(binary.LittleEndian.Uint64(b)))
}

// BenchmarkReduce reports each kernel's speed in GB/s of output per core
// (b.SetBytes: the bytes of one operand), on 256 KiB operands, about a
// channel's staging slot and in cache like one.
func BenchmarkReduce(b *testing.B) {
	const size = 256 << 10
	for _, dt := range AllDataTypes() {
		for _, op := range []Op{Sum, Max, Prod} {
			b.Run(fmt.Sprintf("%v/%v", dt, op), func(b *testing.B) {
				x, y, d := make([]byte, size), make([]byte, size), make([]byte, size)
				for i := range x {
					x[i], y[i] = byte(i), byte(i>>3)
				}
				if dt == Float16 || dt == BFloat16 || dt == Float32 || dt == Float64 {
					// Normal numbers, as gradients are (no NaN, no subnormal).
					for i := range size / dt.Size() {
						putFloat(x, dt, i, float64(i%200)-99.5)
						putFloat(y, dt, i, float64(i%7)+0.25)
					}
				}
				b.SetBytes(size)
				b.ReportAllocs()
				for b.Loop() {
					reduce(dt, op, d, x, y)
				}
			})
		}
	}
}
