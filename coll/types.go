package coll

import (
	"fmt"
	"math"
	"unsafe"
)

// DataType is the element type of a collective's buffers, numbered as
// NCCL numbers ncclDataType_t (ncclInt8 = 0 … ncclBfloat16 = 9), so that a
// trace or a wire dump reads the same.
type DataType uint8

// Element types.
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	BFloat16 DataType = 9
)

// AllDataTypes returns every element type in nccl-tests' order (its "-d
// all").
func AllDataTypes() []DataType {
	return []DataType{Int8, Uint8, Int32, Uint32, Int64, Uint64, Float16, Float32, Float64, BFloat16}
}

// Size returns the size of one element in bytes, 0 for an invalid type.
func (t DataType) Size() int {
	switch t {
	case Int8, Uint8:
		return 1
	case Float16, BFloat16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// Valid reports whether t is one of the element types.
func (t DataType) Valid() bool { return t.Size() != 0 }

// String returns nccl-tests' name of the type (its -d spelling): "int8",
// "uint8", "int32", "uint32", "int64", "uint64", "half", "float",
// "double", "bfloat16".
func (t DataType) String() string {
	switch t {
	case Int8:
		return "int8"
	case Uint8:
		return "uint8"
	case Int32:
		return "int32"
	case Uint32:
		return "uint32"
	case Int64:
		return "int64"
	case Uint64:
		return "uint64"
	case Float16:
		return "half"
	case Float32:
		return "float"
	case Float64:
		return "double"
	case BFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("DataType(%d)", uint8(t))
}

// ParseDataType returns the type named s: nccl-tests' names (String) and
// the Go-style aliases float16, float32, float64.
func ParseDataType(s string) (DataType, error) {
	for _, t := range AllDataTypes() {
		if s == t.String() {
			return t, nil
		}
	}
	switch s {
	case "float16":
		return Float16, nil
	case "float32":
		return Float32, nil
	case "float64":
		return Float64, nil
	}
	return 0, fmt.Errorf("%w: unknown data type %q", ErrInvalidArg, s)
}

// Op is a reduction operation, numbered as ncclRedOp_t (ncclSum = 0 …
// ncclAvg = 4).
type Op uint8

// Reduction operations.
const (
	Sum  Op = 0
	Prod Op = 1
	Max  Op = 2
	Min  Op = 3
	// Avg is the sum divided by the number of ranks, the division made
	// once on the whole sum (integer types: truncated toward zero). NCCL
	// multiplies each float input by 1/n before summing instead; the two
	// agree in exact arithmetic, and dividing once keeps the result the
	// same whatever the order of the sum.
	Avg Op = 4
)

// AllOps returns the operations in nccl-tests' order (its "-o all", less
// mulsum).
func AllOps() []Op { return []Op{Sum, Prod, Max, Min, Avg} }

// Valid reports whether o is one of the operations.
func (o Op) Valid() bool { return o <= Avg }

// String returns nccl-tests' name of the operation: "sum", "prod", "max",
// "min", "avg".
func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Prod:
		return "prod"
	case Max:
		return "max"
	case Min:
		return "min"
	case Avg:
		return "avg"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// ParseOp returns the operation named s (String's names).
func ParseOp(s string) (Op, error) {
	for _, o := range AllOps() {
		if s == o.String() {
			return o, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown reduction %q", ErrInvalidArg, s)
}

// Half is an IEEE 754 binary16 number (CUDA's half, NCCL's ncclFloat16),
// stored as its bits. Reductions compute in float32 and round the result
// to nearest even, as a GPU's half arithmetic does.
type Half uint16

// BF16 is a bfloat16 number (the top 16 bits of a float32; NCCL's
// ncclBfloat16), stored as its bits. Reductions compute in float32 and
// round to nearest even.
type BF16 uint16

// HalfFromFloat32 rounds f to the nearest Half (ties to even); values past
// the largest finite half become infinities, NaN stays NaN.
func HalfFromFloat32(f float32) Half {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xFF
	man := b & 0x7FFFFF
	switch {
	case exp == 0xFF: // Inf or NaN
		if man != 0 {
			return Half(sign | 0x7E00)
		}
		return Half(sign | 0x7C00)
	case exp > 142: // ≥ 2^16: overflow
		return Half(sign | 0x7C00)
	case exp >= 113: // normal half: exponent 1..30
		// 13 mantissa bits drop; round to nearest even.
		h := uint32(exp-112)<<10 | man>>13
		rest := man & 0x1FFF
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++ // may carry into the exponent, up to Inf: correct
		}
		return Half(uint32(sign) | h)
	case exp >= 102: // subnormal half
		m := man | 0x800000 // implicit bit
		shift := uint32(126 - exp)
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && h&1 == 1) {
			h++
		}
		return Half(uint32(sign) | h)
	}
	return Half(sign) // underflow to ±0
}

// Float32 returns h exactly as a float32.
func (h Half) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1F
	man := uint32(h & 0x3FF)
	switch {
	case exp == 0x1F:
		return math.Float32frombits(sign | 0x7F800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: normalise.
		e := uint32(113)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (man&0x3FF)<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// BF16FromFloat32 rounds f to the nearest BF16 (ties to even); NaN stays a
// quiet NaN.
func BF16FromFloat32(f float32) BF16 {
	b := math.Float32bits(f)
	if b&0x7FFFFFFF > 0x7F800000 {
		return BF16(b>>16 | 0x40)
	}
	b += 0x7FFF + (b>>16)&1
	return BF16(b >> 16)
}

// Float32 returns b exactly as a float32.
func (b BF16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// Elem is the constraint of the typed collectives: the Go types of the
// element types.
type Elem interface {
	int8 | uint8 | int32 | uint32 | int64 | uint64 | float32 | float64 | Half | BF16
}

// TypeOf returns the DataType of T.
func TypeOf[T Elem]() DataType {
	switch any((*T)(nil)).(type) {
	case *int8:
		return Int8
	case *uint8:
		return Uint8
	case *int32:
		return Int32
	case *uint32:
		return Uint32
	case *int64:
		return Int64
	case *uint64:
		return Uint64
	case *Half:
		return Float16
	case *float32:
		return Float32
	case *float64:
		return Float64
	case *BF16:
		return BFloat16
	}
	panic("coll: unreachable element type")
}

// Bytes returns the memory of s as bytes, without copying: the buffers a
// collective moves are raw host memory (little-endian on every platform Go
// runs goroce on), as NCCL moves device memory.
func Bytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// view returns b as a slice of T (len(b)/size elements).
func view[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// addr returns the address of b's first byte.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
