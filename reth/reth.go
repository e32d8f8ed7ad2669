package reth

import (
	"encoding/binary"
	"errors"
)

// Size is the length of a RETH in bytes (IBA 9.3.3).
const Size = 16

// ErrTruncated is returned by Parse for a buffer shorter than Size.
var ErrTruncated = errors.New("reth: truncated header")

// MaxDMALength is the largest DMA length of one message that the transport
// accepts: rxe checks the RETH length against 2^31 (rxe_resp.c check_length,
// doc/rxe.md §3 step 6).
const MaxDMALength = 1 << 31

// Header is a view of an RDMA Extended Transport Header. It aliases the
// buffer it was parsed from.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Virtual Address (63:32)                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Virtual Address (31:0)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Remote Key                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          DMA Length                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type Header []byte

const (
	offVA     = 0
	offRKey   = 8
	offLength = 12
)

// Parse returns a view of the first Size bytes of b.
func Parse(b []byte) (Header, error) {
	if len(b) < Size {
		return nil, ErrTruncated
	}
	return Header(b[:Size:Size]), nil
}

// VA returns the virtual address.
func (h Header) VA() uint64 { return binary.BigEndian.Uint64(h[offVA:]) }

// SetVA sets the virtual address.
func (h Header) SetVA(v uint64) { binary.BigEndian.PutUint64(h[offVA:], v) }

// RKey returns the remote key.
func (h Header) RKey() uint32 { return binary.BigEndian.Uint32(h[offRKey:]) }

// SetRKey sets the remote key.
func (h Header) SetRKey(v uint32) { binary.BigEndian.PutUint32(h[offRKey:], v) }

// DMALength returns the length of the whole message in bytes.
func (h Header) DMALength() uint32 { return binary.BigEndian.Uint32(h[offLength:]) }

// SetDMALength sets the DMA length.
func (h Header) SetDMALength(v uint32) { binary.BigEndian.PutUint32(h[offLength:], v) }

// Fields is the decoded form of a RETH.
type Fields struct {
	VA        uint64
	RKey      uint32
	DMALength uint32
}

// Fields decodes h.
func (h Header) Fields() Fields {
	return Fields{VA: h.VA(), RKey: h.RKey(), DMALength: h.DMALength()}
}

// Encode writes f into h.
func (h Header) Encode(f *Fields) {
	_ = h[Size-1]
	h.SetVA(f.VA)
	h.SetRKey(f.RKey)
	h.SetDMALength(f.DMALength)
}
