package ext

import (
	"encoding/binary"
	"errors"
)

// Sizes of the small extension headers in bytes.
const (
	ImmDtSize        = 4  // IBA 9.3.6
	IETHSize         = 4  // IBA 9.3.7
	DETHSize         = 8  // IBA 9.3.2
	AtomicETHSize    = 28 // IBA 9.3.4
	AtomicAckETHSize = 8  // IBA 9.5.3
	FETHSize         = 4  // IBA 1.5, A19 (memory placement extensions)
)

// ErrTruncated is returned by the Parse functions for a short buffer.
var ErrTruncated = errors.New("ext: truncated header")

func view(b []byte, n int) ([]byte, error) {
	if len(b) < n {
		return nil, ErrTruncated
	}
	return b[:n:n], nil
}

// ImmDt is a view of the Immediate Data Extended Transport Header: four bytes
// the requester hands to the receiver's completion (IBA 9.3.6).
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Immediate Data                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type ImmDt []byte

// ParseImmDt returns a view of the first ImmDtSize bytes of b.
func ParseImmDt(b []byte) (ImmDt, error) {
	v, err := view(b, ImmDtSize)
	return ImmDt(v), err
}

// Imm returns the immediate data, its four bytes read big-endian: the
// number the sender's SetImm wrote.
func (h ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(h) }

// SetImm sets the immediate data.
func (h ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(h, v) }

// IETH is a view of the Invalidate Extended Transport Header: the rkey that
// SEND WITH INVALIDATE invalidates at the responder (IBA 9.3.7).
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           R_Key                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IETH []byte

// ParseIETH returns a view of the first IETHSize bytes of b.
func ParseIETH(b []byte) (IETH, error) {
	v, err := view(b, IETHSize)
	return IETH(v), err
}

// RKey returns the rkey to invalidate.
func (h IETH) RKey() uint32 { return binary.BigEndian.Uint32(h) }

// SetRKey sets the rkey to invalidate.
func (h IETH) SetRKey(v uint32) { binary.BigEndian.PutUint32(h, v) }

// DETH is a view of the Datagram Extended Transport Header (IBA 9.3.2),
// carried by every UD packet.
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           Q_Key                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Reserved    |                Source QP                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type DETH []byte

// ParseDETH returns a view of the first DETHSize bytes of b.
func ParseDETH(b []byte) (DETH, error) {
	v, err := view(b, DETHSize)
	return DETH(v), err
}

// QKey returns the queue key.
func (h DETH) QKey() uint32 { return binary.BigEndian.Uint32(h) }

// SetQKey sets the queue key.
func (h DETH) SetQKey(v uint32) { binary.BigEndian.PutUint32(h, v) }

// Reserved returns the reserved byte.
func (h DETH) Reserved() uint8 { return h[4] }

// SrcQP returns the 24-bit source QP number.
func (h DETH) SrcQP() uint32 { return binary.BigEndian.Uint32(h[4:]) & 0x00ffffff }

// SetSrcQP sets the source QP number (masked to 24 bits), keeping the
// reserved byte.
func (h DETH) SetSrcQP(v uint32) {
	h[5], h[6], h[7] = byte(v>>16), byte(v>>8), byte(v)
}

// DETHFields is the decoded form of a DETH.
type DETHFields struct {
	QKey     uint32
	Reserved uint8
	SrcQP    uint32
}

// Fields decodes h.
func (h DETH) Fields() DETHFields {
	return DETHFields{QKey: h.QKey(), Reserved: h.Reserved(), SrcQP: h.SrcQP()}
}

// Encode writes f into h.
func (h DETH) Encode(f *DETHFields) {
	_ = h[DETHSize-1]
	h.SetQKey(f.QKey)
	h[4] = f.Reserved
	h.SetSrcQP(f.SrcQP)
}

// AtomicETH is a view of the Atomic Extended Transport Header (IBA 9.3.4),
// carried by COMPARE SWAP and FETCH ADD requests.
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   Virtual Address (63:0), 2 words             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           R_Key                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Swap (or Add) Data (63:0), 2 words                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Compare Data (63:0), 2 words                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type AtomicETH []byte

// ParseAtomicETH returns a view of the first AtomicETHSize bytes of b.
func ParseAtomicETH(b []byte) (AtomicETH, error) {
	v, err := view(b, AtomicETHSize)
	return AtomicETH(v), err
}

// VA returns the remote virtual address of the 8-byte operand.
func (h AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(h) }

// RKey returns the remote key.
func (h AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(h[8:]) }

// SwapData returns the swap value (CmpSwap) or the addend (FetchAdd).
func (h AtomicETH) SwapData() uint64 { return binary.BigEndian.Uint64(h[12:]) }

// CompareData returns the compare value (CmpSwap only).
func (h AtomicETH) CompareData() uint64 { return binary.BigEndian.Uint64(h[20:]) }

// AtomicETHFields is the decoded form of an AtomicETH.
type AtomicETHFields struct {
	VA          uint64
	RKey        uint32
	SwapData    uint64
	CompareData uint64
}

// Fields decodes h.
func (h AtomicETH) Fields() AtomicETHFields {
	return AtomicETHFields{VA: h.VA(), RKey: h.RKey(), SwapData: h.SwapData(), CompareData: h.CompareData()}
}

// Encode writes f into h.
func (h AtomicETH) Encode(f *AtomicETHFields) {
	_ = h[AtomicETHSize-1]
	binary.BigEndian.PutUint64(h, f.VA)
	binary.BigEndian.PutUint32(h[8:], f.RKey)
	binary.BigEndian.PutUint64(h[12:], f.SwapData)
	binary.BigEndian.PutUint64(h[20:], f.CompareData)
}

// AtomicAckETH is a view of the Atomic Acknowledge Extended Transport Header
// (IBA 9.5.3): the original remote value returned by an ATOMIC ACKNOWLEDGE.
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|              Original Remote Data (63:0), 2 words             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type AtomicAckETH []byte

// ParseAtomicAckETH returns a view of the first AtomicAckETHSize bytes of b.
func ParseAtomicAckETH(b []byte) (AtomicAckETH, error) {
	v, err := view(b, AtomicAckETHSize)
	return AtomicAckETH(v), err
}

// OrigRemData returns the original remote value.
func (h AtomicAckETH) OrigRemData() uint64 { return binary.BigEndian.Uint64(h) }

// SetOrigRemData sets the original remote value.
func (h AtomicAckETH) SetOrigRemData(v uint64) { binary.BigEndian.PutUint64(h, v) }

// FETH is a view of the Flush Extended Transport Header (IBA 1.5, A19.4.1),
// carried by RC FLUSH.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Reserved                       |SEL|  PLT  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// SEL is the selectivity level, PLT the placement type (bit 0 global
// visibility, bit 1 persistence), as in rxe's FETH_SEL_MASK/FETH_PLT_MASK.
type FETH []byte

// ParseFETH returns a view of the first FETHSize bytes of b.
func ParseFETH(b []byte) (FETH, error) {
	v, err := view(b, FETHSize)
	return FETH(v), err
}

// Selectivity returns the 2-bit selectivity level.
func (h FETH) Selectivity() uint8 { return (h[3] >> 4) & 3 }

// PlacementType returns the 4-bit placement type.
func (h FETH) PlacementType() uint8 { return h[3] & 0x0f }

// Reserved returns the 26 reserved bits.
func (h FETH) Reserved() uint32 { return binary.BigEndian.Uint32(h) >> 6 }

// FETHFields is the decoded form of a FETH.
type FETHFields struct {
	Reserved      uint32
	Selectivity   uint8
	PlacementType uint8
}

// Fields decodes h.
func (h FETH) Fields() FETHFields {
	return FETHFields{Reserved: h.Reserved(), Selectivity: h.Selectivity(), PlacementType: h.PlacementType()}
}

// Encode writes f into h.
func (h FETH) Encode(f *FETHFields) {
	v := f.Reserved<<6 | uint32(f.Selectivity&3)<<4 | uint32(f.PlacementType&0x0f)
	binary.BigEndian.PutUint32(h, v)
}
