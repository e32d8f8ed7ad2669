// Package collcheck makes the data of collective correctness checks, as
// nccl-tests' verifiable does: every rank's input is a function of (rank,
// seed, index) chosen so that any order of reduction gives the same bits,
// so a collective's output can be compared bit for bit with the expected
// value computed locally, whatever algorithm made it.
//
// The values, per reduction:
//
//   - sum and avg: integers in [-m, m] (unsigned: [0, m]) with n·m inside
//     the range the type holds exactly (float16 2048, bfloat16 256,
//     float32 2^24, float64 2^53), so that every partial sum is exact;
//     the integer types wrap, and wrapping addition is associative too;
//     avg divides the exact sum once;
//   - prod: 1, except that one rank per index contributes 2 and (signed
//     types) another -1, so every partial product is exact;
//   - min and max: any values of the type's exact integers.
package collcheck

import (
	"encoding/binary"
	"math"

	"github.com/goroce/goroce/coll"
)

// exactLimit is the largest integer magnitude every partial result of dt
// must stay within.
func exactLimit(dt coll.DataType) int64 {
	switch dt {
	case coll.Float16:
		return 2048
	case coll.BFloat16:
		return 256
	case coll.Float32:
		return 1 << 24
	case coll.Float64:
		return 1 << 53
	}
	return math.MaxInt32 // integers wrap: any bound works; keep the values readable
}

func signed(dt coll.DataType) bool {
	switch dt {
	case coll.Uint8, coll.Uint32, coll.Uint64:
		return false
	}
	return true
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// Value returns rank's input element at index i for op over nranks ranks
// with seed, as an integer (every value is one).
func Value(dt coll.DataType, op coll.Op, nranks, rank int, seed uint64, i int) int64 {
	h := mix(seed ^ mix(uint64(rank)+1) ^ mix(uint64(i)<<20^0x5bd1e995))
	switch op {
	case coll.Prod:
		switch {
		case i%nranks == rank:
			return 2
		case signed(dt) && nranks > 1 && (i+1)%nranks == rank && (i/nranks)%3 == 0:
			return -1
		}
		return 1
	case coll.Sum, coll.Avg:
		m := max(1, exactLimit(dt)/int64(nranks))
		m = min(m, 100)
		if !signed(dt) {
			return int64(h % uint64(m+1))
		}
		return int64(h%uint64(2*m+1)) - m
	}
	m := min(exactLimit(dt), 1000)
	if dt.Size() == 1 {
		m = 100 // inside int8 and uint8: min and max compare the values as stored
	}
	if !signed(dt) {
		return int64(h % uint64(m))
	}
	return int64(h%uint64(2*m)) - m
}

// put stores integer v as element i of b.
func put(b []byte, dt coll.DataType, i int, v int64) {
	le := binary.LittleEndian
	switch dt {
	case coll.Int8, coll.Uint8:
		b[i] = byte(v)
	case coll.Int32, coll.Uint32:
		le.PutUint32(b[4*i:], uint32(v))
	case coll.Int64, coll.Uint64:
		le.PutUint64(b[8*i:], uint64(v))
	case coll.Float16:
		le.PutUint16(b[2*i:], uint16(coll.HalfFromFloat32(float32(v))))
	case coll.BFloat16:
		le.PutUint16(b[2*i:], uint16(coll.BF16FromFloat32(float32(v))))
	case coll.Float32:
		le.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case coll.Float64:
		le.PutUint64(b[8*i:], math.Float64bits(float64(v)))
	}
}

// Input fills b (whole elements of dt) with rank's input: element i is
// Value(…, offset+i).
func Input(b []byte, dt coll.DataType, op coll.Op, nranks, rank int, seed uint64, offset int) {
	for i := range len(b) / dt.Size() {
		put(b, dt, i, Value(dt, op, nranks, rank, seed, offset+i))
	}
}

// Expected fills b with the reduction by op over ranks 0 … nranks-1 of
// their Input at offset.
func Expected(b []byte, dt coll.DataType, op coll.Op, nranks int, seed uint64, offset int) {
	for i := range len(b) / dt.Size() {
		acc := Value(dt, op, nranks, 0, seed, offset+i)
		for r := 1; r < nranks; r++ {
			v := Value(dt, op, nranks, r, seed, offset+i)
			switch op {
			case coll.Sum, coll.Avg:
				acc += v
			case coll.Prod:
				acc *= v
			case coll.Max:
				acc = max(acc, v)
			case coll.Min:
				acc = min(acc, v)
			}
		}
		put(b, dt, i, acc)
	}
	if op == coll.Avg {
		divide(b, dt, nranks)
	}
}

// divide divides every element of b by n as the collective's last step
// does: integers in their own width (truncating), floats in their own
// precision.
func divide(b []byte, dt coll.DataType, n int) {
	le := binary.LittleEndian
	for i := range len(b) / dt.Size() {
		switch dt {
		case coll.Int8:
			b[i] = byte(int8(b[i]) / int8(n))
		case coll.Uint8:
			b[i] /= uint8(n)
		case coll.Int32:
			le.PutUint32(b[4*i:], uint32(int32(le.Uint32(b[4*i:]))/int32(n)))
		case coll.Uint32:
			le.PutUint32(b[4*i:], le.Uint32(b[4*i:])/uint32(n))
		case coll.Int64:
			le.PutUint64(b[8*i:], uint64(int64(le.Uint64(b[8*i:]))/int64(n)))
		case coll.Uint64:
			le.PutUint64(b[8*i:], le.Uint64(b[8*i:])/uint64(n))
		case coll.Float16:
			h := coll.Half(le.Uint16(b[2*i:]))
			le.PutUint16(b[2*i:], uint16(coll.HalfFromFloat32(h.Float32()/float32(n))))
		case coll.BFloat16:
			h := coll.BF16(le.Uint16(b[2*i:]))
			le.PutUint16(b[2*i:], uint16(coll.BF16FromFloat32(h.Float32()/float32(n))))
		case coll.Float32:
			f := math.Float32frombits(le.Uint32(b[4*i:]))
			le.PutUint32(b[4*i:], math.Float32bits(f/float32(n)))
		case coll.Float64:
			f := math.Float64frombits(le.Uint64(b[8*i:]))
			le.PutUint64(b[8*i:], math.Float64bits(f/float64(n)))
		}
	}
}

// Wrong returns how many elements of got differ from want in any bit
// (nccl-tests' #wrong).
func Wrong(got, want []byte, dt coll.DataType) int64 {
	sz := dt.Size()
	var n int64
	for i := 0; i+sz <= len(got) && i+sz <= len(want); i += sz {
		for j := i; j < i+sz; j++ {
			if got[j] != want[j] {
				n++
				break
			}
		}
	}
	if len(got) != len(want) {
		n += int64((max(len(got), len(want)) - min(len(got), len(want))) / sz)
	}
	return n
}
