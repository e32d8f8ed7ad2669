package bth

import (
	"encoding/binary"
	"errors"
)

// Size is the length of a Base Transport Header in bytes (IBA 9.2).
const Size = 12

// Sizes of the extension headers, in bytes (IBA 9.3). They are constants here
// so the opcode table can compute header lengths without importing the
// extension-header packages; an external test cross-checks them against
// reth.Size, aeth.Size and the ext package.
const (
	RETHSize         = 16 // IBA 9.3.3 RDMA Extended Transport Header
	AETHSize         = 4  // IBA 9.3.5 ACK Extended Transport Header
	ImmDtSize        = 4  // IBA 9.3.6 Immediate Data Extended Transport Header
	IETHSize         = 4  // IBA 9.3.7 Invalidate Extended Transport Header
	DETHSize         = 8  // IBA 9.3.2 Datagram Extended Transport Header
	AtomicETHSize    = 28 // IBA 9.3.4 Atomic Extended Transport Header
	AtomicAckETHSize = 8  // IBA 9.5.3 Atomic Acknowledge Extended Transport Header
	FETHSize         = 4  // IBA 1.5 (memory placement extensions) Flush Extended Transport Header
	CNPPadSize       = 16 // RoCEv2 Annex A17.9.2: a CNP carries 16 reserved bytes after the BTH
	ICRCSize         = 4  // IBA 7.8.1 Invariant CRC
)

// Errors returned by Parse and by the opcode table. They are wrapped with %w
// by callers that add context.
var (
	ErrTruncated     = errors.New("bth: truncated header")
	ErrUnknownOpcode = errors.New("bth: unknown opcode")
	ErrBadVersion    = errors.New("bth: unsupported transport header version")
)

// Header is a view of a Base Transport Header. It aliases the buffer it was
// parsed from: it must not be kept past that buffer's lifetime.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    OpCode     |S|M|Pad|  TVer |         Partition Key         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|F|B|   Resv6   |          Destination QP                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|   Resv7     |          Packet Sequence Number               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// S = SolicitedEvent, M = MigReq, Pad = PadCnt, F = FECN, B = BECN (RoCEv2
// Annex A17 uses the top bits of the IBA "Resv8a" byte), A = AckReq.
type Header []byte

// Offsets and masks of the BTH fields (IBA 9.2).
const (
	offOpcode = 0
	offFlags  = 1 // SE, M, PadCnt, TVer
	offPKey   = 2
	offResv8a = 4 // FECN, BECN, Resv6
	offDestQP = 5
	offAck    = 8 // AckReq, Resv7
	offPSN    = 9

	maskSE     = 0x80
	maskMigReq = 0x40
	maskPad    = 0x30
	shiftPad   = 4
	maskTVer   = 0x0f
	maskFECN   = 0x80
	maskBECN   = 0x40
	maskResv6  = 0x3f
	maskAckReq = 0x80
	maskResv7  = 0x7f
)

// Parse returns a view of the first Size bytes of b. It fails only when b is
// too short; field values are checked by the callers that give them meaning
// (the opcode table, the transport).
func Parse(b []byte) (Header, error) {
	if len(b) < Size {
		return nil, ErrTruncated
	}
	return Header(b[:Size:Size]), nil
}

// Opcode returns the BTH OpCode.
func (h Header) Opcode() Opcode { return Opcode(h[offOpcode]) }

// SetOpcode sets the BTH OpCode.
func (h Header) SetOpcode(op Opcode) { h[offOpcode] = byte(op) }

// SolicitedEvent reports the SE bit.
func (h Header) SolicitedEvent() bool { return h[offFlags]&maskSE != 0 }

// SetSolicitedEvent sets the SE bit.
func (h Header) SetSolicitedEvent(v bool) { setBit(&h[offFlags], maskSE, v) }

// MigReq reports the M (migration state) bit. Hardware sets it to 1 where
// rxe sends 0; receivers must not validate it (doc/rxe.md §10 item 9).
func (h Header) MigReq() bool { return h[offFlags]&maskMigReq != 0 }

// SetMigReq sets the M bit.
func (h Header) SetMigReq(v bool) { setBit(&h[offFlags], maskMigReq, v) }

// PadCount returns the number of pad bytes (0–3) that follow the payload
// (IBA 9.2: the payload is padded to a multiple of 4 bytes).
func (h Header) PadCount() int { return int(h[offFlags]&maskPad) >> shiftPad }

// SetPadCount sets PadCnt; n is masked to two bits.
func (h Header) SetPadCount(n int) {
	h[offFlags] = h[offFlags]&^maskPad | byte(n<<shiftPad)&maskPad
}

// TVer returns the transport header version; IBA 9.2 defines only 0.
func (h Header) TVer() uint8 { return h[offFlags] & maskTVer }

// SetTVer sets TVer; v is masked to four bits.
func (h Header) SetTVer(v uint8) { h[offFlags] = h[offFlags]&^maskTVer | v&maskTVer }

// PKey returns the partition key.
func (h Header) PKey() uint16 { return binary.BigEndian.Uint16(h[offPKey:]) }

// SetPKey sets the partition key.
func (h Header) SetPKey(v uint16) { binary.BigEndian.PutUint16(h[offPKey:], v) }

// FECN reports the forward explicit congestion notification bit.
func (h Header) FECN() bool { return h[offResv8a]&maskFECN != 0 }

// SetFECN sets the FECN bit.
func (h Header) SetFECN(v bool) { setBit(&h[offResv8a], maskFECN, v) }

// BECN reports the backward explicit congestion notification bit; a RoCEv2
// CNP sets it (Annex A17.9.2).
func (h Header) BECN() bool { return h[offResv8a]&maskBECN != 0 }

// SetBECN sets the BECN bit.
func (h Header) SetBECN(v bool) { setBit(&h[offResv8a], maskBECN, v) }

// Resv6 returns the six reserved bits after FECN/BECN.
func (h Header) Resv6() uint8 { return h[offResv8a] & maskResv6 }

// DestQP returns the destination queue pair number.
func (h Header) DestQP() QPN { return QPN(be24(h[offDestQP:])) }

// SetDestQP sets the destination QPN (masked to 24 bits).
func (h Header) SetDestQP(q QPN) { put24(h[offDestQP:], uint32(q)) }

// AckReq reports the A bit: the requester asks for an acknowledgement
// (IBA 9.2, C9-8).
func (h Header) AckReq() bool { return h[offAck]&maskAckReq != 0 }

// SetAckReq sets the A bit.
func (h Header) SetAckReq(v bool) { setBit(&h[offAck], maskAckReq, v) }

// Resv7 returns the seven reserved bits after AckReq.
func (h Header) Resv7() uint8 { return h[offAck] & maskResv7 }

// PSN returns the packet sequence number.
func (h Header) PSN() PSN { return PSN(be24(h[offPSN:])) }

// SetPSN sets the packet sequence number (masked to 24 bits).
func (h Header) SetPSN(p PSN) { put24(h[offPSN:], uint32(p)) }

// Fields is the decoded form of a BTH, for building, logs and tests.
type Fields struct {
	Opcode         Opcode
	SolicitedEvent bool
	MigReq         bool
	PadCount       int
	TVer           uint8
	PKey           uint16
	FECN           bool
	BECN           bool
	Resv6          uint8
	DestQP         QPN
	AckReq         bool
	Resv7          uint8
	PSN            PSN
}

// Fields decodes every field of h.
func (h Header) Fields() Fields {
	return Fields{
		Opcode:         h.Opcode(),
		SolicitedEvent: h.SolicitedEvent(),
		MigReq:         h.MigReq(),
		PadCount:       h.PadCount(),
		TVer:           h.TVer(),
		PKey:           h.PKey(),
		FECN:           h.FECN(),
		BECN:           h.BECN(),
		Resv6:          h.Resv6(),
		DestQP:         h.DestQP(),
		AckReq:         h.AckReq(),
		Resv7:          h.Resv7(),
		PSN:            h.PSN(),
	}
}

// Encode writes every field of f into h (all 12 bytes, reserved bits
// included, so a Header decoded with Fields re-encodes to the same bytes).
func (h Header) Encode(f *Fields) {
	_ = h[Size-1]
	h[offOpcode] = byte(f.Opcode)
	var b1 byte
	if f.SolicitedEvent {
		b1 |= maskSE
	}
	if f.MigReq {
		b1 |= maskMigReq
	}
	b1 |= byte(f.PadCount<<shiftPad) & maskPad
	b1 |= f.TVer & maskTVer
	h[offFlags] = b1
	binary.BigEndian.PutUint16(h[offPKey:], f.PKey)
	b4 := f.Resv6 & maskResv6
	if f.FECN {
		b4 |= maskFECN
	}
	if f.BECN {
		b4 |= maskBECN
	}
	h[offResv8a] = b4
	put24(h[offDestQP:], uint32(f.DestQP))
	b8 := f.Resv7 & maskResv7
	if f.AckReq {
		b8 |= maskAckReq
	}
	h[offAck] = b8
	put24(h[offPSN:], uint32(f.PSN))
}

func setBit(b *byte, mask byte, v bool) {
	if v {
		*b |= mask
	} else {
		*b &^= mask
	}
}

func be24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}

func put24(b []byte, v uint32) {
	_ = b[2]
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}
