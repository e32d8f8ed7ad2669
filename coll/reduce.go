package coll

import (
	"encoding/binary"
	"math"
	"sync"
	"unsafe"
)

// The reduction kernels. Go's compiler does not vectorize loops, so the
// hot ones are written so that it emits tight scalar code: the operands
// re-sliced to one length (no bounds checks in the loop), the body
// unrolled eight times for sums, and eight bytes at a time (SWAR) for the
// byte types. BenchmarkReduce reports GB/s per core for each type and
// operation (doc/coll.md §5).

// num is the element types the generic kernels take directly.
type num interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// reduce sets dst[i] = a[i] op b[i] for the elements of dt in the three
// buffers, which have the same length; dst may be a or b (the same
// memory, not a shifted overlap). Avg reduces as Sum (the division is
// scale's, once on the whole sum).
func reduce(dt DataType, op Op, dst, a, b []byte) {
	if len(dst) == 0 {
		return
	}
	if !aligned(dst, dt) || !aligned(a, dt) || !aligned(b, dt) {
		reduceUnaligned(dt, op, dst, a, b)
		return
	}
	switch dt {
	case Int8:
		if op == Sum || op == Avg {
			sumBytes(dst, a, b)
			return
		}
		reduceNum(op, view[int8](dst), view[int8](a), view[int8](b))
	case Uint8:
		if op == Sum || op == Avg {
			sumBytes(dst, a, b)
			return
		}
		reduceNum(op, view[uint8](dst), view[uint8](a), view[uint8](b))
	case Int32:
		reduceNum(op, view[int32](dst), view[int32](a), view[int32](b))
	case Uint32:
		reduceNum(op, view[uint32](dst), view[uint32](a), view[uint32](b))
	case Int64:
		reduceNum(op, view[int64](dst), view[int64](a), view[int64](b))
	case Uint64:
		reduceNum(op, view[uint64](dst), view[uint64](a), view[uint64](b))
	case Float32:
		reduceNum(op, view[float32](dst), view[float32](a), view[float32](b))
	case Float64:
		reduceNum(op, view[float64](dst), view[float64](a), view[float64](b))
	case Float16:
		reduceHalf(op, view[Half](dst), view[Half](a), view[Half](b))
	case BFloat16:
		reduceBF16(op, view[BF16](dst), view[BF16](a), view[BF16](b))
	}
}

// aligned reports whether b starts on a multiple of dt's size (the typed
// views need it; checkptr refuses a misaligned pointer).
func aligned(b []byte, dt DataType) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(dt.Size()) == 0
}

func reduceNum[T num](op Op, d, a, b []T) {
	switch op {
	case Sum, Avg:
		sum(d, a, b)
	case Prod:
		n := len(d)
		a, b = a[:n], b[:n]
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case Max:
		n := len(d)
		a, b = a[:n], b[:n]
		for i := range d {
			d[i] = max(a[i], b[i])
		}
	case Min:
		n := len(d)
		a, b = a[:n], b[:n]
		for i := range d {
			d[i] = min(a[i], b[i])
		}
	}
}

// sum is the unrolled sum: eight independent additions per iteration.
func sum[T num](d, a, b []T) {
	n := len(d)
	a, b = a[:n], b[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		aa, bb, dd := a[i:i+8:i+8], b[i:i+8:i+8], d[i:i+8:i+8]
		dd[0] = aa[0] + bb[0]
		dd[1] = aa[1] + bb[1]
		dd[2] = aa[2] + bb[2]
		dd[3] = aa[3] + bb[3]
		dd[4] = aa[4] + bb[4]
		dd[5] = aa[5] + bb[5]
		dd[6] = aa[6] + bb[6]
		dd[7] = aa[7] + bb[7]
	}
	for ; i < n; i++ {
		d[i] = a[i] + b[i]
	}
}

// sumBytes adds bytes modulo 256, eight per uint64 (SWAR): the low seven
// bits of each byte are added without carrying into the next byte, and the
// top bit is the XOR of the operands' top bits and that carry.
func sumBytes(d, a, b []byte) {
	const hi = 0x8080808080808080
	n := len(d)
	a, b = a[:n], b[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		x := binary.LittleEndian.Uint64(a[i:])
		y := binary.LittleEndian.Uint64(b[i:])
		binary.LittleEndian.PutUint64(d[i:], ((x&^hi)+(y&^hi))^((x^y)&hi))
	}
	for ; i < n; i++ {
		d[i] = a[i] + b[i]
	}
}

// reduceHalf and reduceBF16 convert to float32, compute, and round back,
// one loop per operation so that the loop body has no branch on op; the
// conversions take their fast path (normal numbers) inline.
func reduceHalf(op Op, d, a, b []Half) {
	n := len(d)
	a, b = a[:n], b[:n]
	t := halfTable()
	switch op {
	case Prod:
		for i := range d {
			r := t[a[i]] * t[b[i]]
			h, ok := halfFast(r)
			if !ok {
				h = HalfFromFloat32(r)
			}
			d[i] = h
		}
	case Max:
		for i := range d {
			r := max(t[a[i]], t[b[i]])
			h, ok := halfFast(r)
			if !ok {
				h = HalfFromFloat32(r)
			}
			d[i] = h
		}
	case Min:
		for i := range d {
			r := min(t[a[i]], t[b[i]])
			h, ok := halfFast(r)
			if !ok {
				h = HalfFromFloat32(r)
			}
			d[i] = h
		}
	default:
		for i := range d {
			r := t[a[i]] + t[b[i]]
			h, ok := halfFast(r)
			if !ok {
				h = HalfFromFloat32(r)
			}
			d[i] = h
		}
	}
}

// halfTable is every half's float32 (256 KiB), made on first use and
// never changed: the conversion is a load, where computing it takes a
// branch per class of number.
var halfTable = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = Half(h).Float32()
	}
	return &t
})

func reduceBF16(op Op, d, a, b []BF16) {
	n := len(d)
	a, b = a[:n], b[:n]
	switch op {
	case Prod:
		for i := range d {
			d[i] = bf16Of(a[i].Float32() * b[i].Float32())
		}
	case Max:
		for i := range d {
			d[i] = bf16Of(max(a[i].Float32(), b[i].Float32()))
		}
	case Min:
		for i := range d {
			d[i] = bf16Of(min(a[i].Float32(), b[i].Float32()))
		}
	default:
		for i := range d {
			d[i] = bf16Of(a[i].Float32() + b[i].Float32())
		}
	}
}

// halfOf is HalfFromFloat32 with the normal halves' path inline: the
// exponent rebiased, the 13 dropped bits rounded to nearest even by
// adding 0xFFF plus the kept lowest bit (a carry runs into the exponent,
// up to infinity, as it should).
func halfOf(f float32) Half {
	if h, ok := halfFast(f); ok {
		return h
	}
	return HalfFromFloat32(f)
}

// halfFast is halfOf's inline part: ok is false outside the normal
// halves (then HalfFromFloat32 rounds).
func halfFast(f float32) (Half, bool) {
	b := math.Float32bits(f)
	m := b & 0x7FFFFFFF
	return Half(b>>16&0x8000 | (m-112<<23+0xFFF+m>>13&1)>>13), (b>>23)&0xFF-113 < 30
}

// bf16Of is BF16FromFloat32 with the non-NaN path inline.
func bf16Of(f float32) BF16 {
	b := math.Float32bits(f)
	if b&0x7FFFFFFF <= 0x7F800000 {
		return BF16((b + 0x7FFF + (b>>16)&1) >> 16)
	}
	return BF16FromFloat32(f)
}

func op32(op Op, x, y float32) float32 {
	switch op {
	case Prod:
		return x * y
	case Max:
		return max(x, y)
	case Min:
		return min(x, y)
	}
	return x + y
}

// reduceUnaligned is reduce for buffers that do not start on an element
// boundary (nccl-tests' -u): element by element through encoding/binary.
func reduceUnaligned(dt DataType, op Op, dst, a, b []byte) {
	sz := dt.Size()
	le := binary.LittleEndian
	for i := 0; i+sz <= len(dst); i += sz {
		switch dt {
		case Int8:
			dst[i] = byte(opInt(op, int64(int8(a[i])), int64(int8(b[i]))))
		case Uint8:
			dst[i] = byte(opUint(op, uint64(a[i]), uint64(b[i])))
		case Int32:
			le.PutUint32(dst[i:], uint32(opInt(op, int64(int32(le.Uint32(a[i:]))), int64(int32(le.Uint32(b[i:]))))))
		case Uint32:
			le.PutUint32(dst[i:], uint32(opUint(op, uint64(le.Uint32(a[i:])), uint64(le.Uint32(b[i:])))))
		case Int64:
			le.PutUint64(dst[i:], uint64(opInt(op, int64(le.Uint64(a[i:])), int64(le.Uint64(b[i:])))))
		case Uint64:
			le.PutUint64(dst[i:], opUint(op, le.Uint64(a[i:]), le.Uint64(b[i:])))
		case Float32:
			x, y := math.Float32frombits(le.Uint32(a[i:])), math.Float32frombits(le.Uint32(b[i:]))
			le.PutUint32(dst[i:], math.Float32bits(op32(op, x, y)))
		case Float64:
			x, y := math.Float64frombits(le.Uint64(a[i:])), math.Float64frombits(le.Uint64(b[i:]))
			var r float64
			switch op {
			case Prod:
				r = x * y
			case Max:
				r = max(x, y)
			case Min:
				r = min(x, y)
			default:
				r = x + y
			}
			le.PutUint64(dst[i:], math.Float64bits(r))
		case Float16:
			x, y := Half(le.Uint16(a[i:])).Float32(), Half(le.Uint16(b[i:])).Float32()
			le.PutUint16(dst[i:], uint16(HalfFromFloat32(op32(op, x, y))))
		case BFloat16:
			x, y := BF16(le.Uint16(a[i:])).Float32(), BF16(le.Uint16(b[i:])).Float32()
			le.PutUint16(dst[i:], uint16(BF16FromFloat32(op32(op, x, y))))
		}
	}
}

func opInt(op Op, x, y int64) int64 {
	switch op {
	case Prod:
		return x * y
	case Max:
		return max(x, y)
	case Min:
		return min(x, y)
	}
	return x + y
}

func opUint(op Op, x, y uint64) uint64 {
	switch op {
	case Prod:
		return x * y
	case Max:
		return max(x, y)
	case Min:
		return min(x, y)
	}
	return x + y
}

// divide divides every element of b by n in place: the last step of Avg.
// Integers truncate toward zero (Go's and C's division), floats divide in
// their own precision (half and bfloat16 in float32, then rounded).
func divide(dt DataType, b []byte, n int) {
	if len(b) == 0 || n == 1 {
		return
	}
	if !aligned(b, dt) {
		tmp := make([]byte, len(b)) // nccl-tests' -u only: not a hot path
		copy(tmp, b)
		divide(dt, tmp, n)
		copy(b, tmp)
		return
	}
	switch dt {
	case Int8:
		divNum(view[int8](b), int8(n))
	case Uint8:
		divNum(view[uint8](b), uint8(n))
	case Int32:
		divNum(view[int32](b), int32(n))
	case Uint32:
		divNum(view[uint32](b), uint32(n))
	case Int64:
		divNum(view[int64](b), int64(n))
	case Uint64:
		divNum(view[uint64](b), uint64(n))
	case Float32:
		divNum(view[float32](b), float32(n))
	case Float64:
		divNum(view[float64](b), float64(n))
	case Float16:
		v := view[Half](b)
		for i := range v {
			v[i] = HalfFromFloat32(v[i].Float32() / float32(n))
		}
	case BFloat16:
		v := view[BF16](b)
		for i := range v {
			v[i] = BF16FromFloat32(v[i].Float32() / float32(n))
		}
	}
}

// divNum divides by n; for the byte types n is taken modulo 256 by the
// conversion, so a communicator of 256 ranks or more divides int8 and
// uint8 by n mod 256 (NCCL's avg has the same limit: its divisor is the
// element type).
func divNum[T num](v []T, n T) {
	if n == 0 {
		return
	}
	for i := range v {
		v[i] /= n
	}
}
