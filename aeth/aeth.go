package aeth

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Size is the length of an AETH in bytes (IBA 9.3.5).
const Size = 4

// ErrTruncated is returned by Parse for a buffer shorter than Size.
var ErrTruncated = errors.New("aeth: truncated header")

// Header is a view of an ACK Extended Transport Header.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Syndrome    |              Message Sequence Number          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Syndrome: bit 7 reserved (0), bits 6-5 the type (00 ACK, 01 RNR NAK,
// 10 reserved, 11 NAK), bits 4-0 the value (credit count, RNR timer code or
// NAK code) — IBA 9.7.5.1, Table 46.
type Header []byte

// Parse returns a view of the first Size bytes of b.
func Parse(b []byte) (Header, error) {
	if len(b) < Size {
		return nil, ErrTruncated
	}
	return Header(b[:Size:Size]), nil
}

// Syndrome returns the syndrome byte.
func (h Header) Syndrome() Syndrome { return Syndrome(h[0]) }

// SetSyndrome sets the syndrome byte.
func (h Header) SetSyndrome(s Syndrome) { h[0] = byte(s) }

// MSN returns the 24-bit message sequence number (IBA 9.7.5.1.2).
func (h Header) MSN() uint32 { return binary.BigEndian.Uint32(h) & 0x00ffffff }

// SetMSN sets the MSN (masked to 24 bits).
func (h Header) SetMSN(v uint32) {
	h[1] = byte(v >> 16)
	h[2] = byte(v >> 8)
	h[3] = byte(v)
}

// Fields is the decoded form of an AETH.
type Fields struct {
	Syndrome Syndrome
	MSN      uint32
}

// Fields decodes h.
func (h Header) Fields() Fields { return Fields{Syndrome: h.Syndrome(), MSN: h.MSN()} }

// Encode writes f into h.
func (h Header) Encode(f *Fields) {
	_ = h[Size-1]
	h.SetSyndrome(f.Syndrome)
	h.SetMSN(f.MSN)
}

// Syndrome is the AETH syndrome byte (IBA 9.7.5.1, Table 46).
type Syndrome uint8

// Kind is the syndrome type, bits 6-5 of the syndrome.
type Kind uint8

// Syndrome kinds.
const (
	KindACK      Kind = 0 // 00: ACK, low bits = credit count
	KindRNR      Kind = 1 // 01: RNR NAK, low bits = RNR timer code
	KindReserved Kind = 2 // 10: reserved
	KindNAK      Kind = 3 // 11: NAK, low bits = NAK code
)

// Well-known syndromes. rxe always sends ACKs with credit 0x1F ("invalid",
// i.e. unlimited: end-to-end credits are not used) and the four NAK codes
// below (rxe_hdr.h, doc/rxe.md §5).
const (
	ACKUnlimited              Syndrome = 0x1f // ACK, credit field 0x1F
	RNRBase                   Syndrome = 0x20 // RNR NAK; OR the timer code
	NAKPSNSequenceError       Syndrome = 0x60 // C9-100: PSN sequence error
	NAKInvalidRequest         Syndrome = 0x61 // invalid request
	NAKRemoteAccessError      Syndrome = 0x62 // remote access error
	NAKRemoteOperationalError Syndrome = 0x63 // remote operational error
	NAKInvalidRDRequest       Syndrome = 0x64 // invalid RD request (RD only)
)

// ACK returns an ACK syndrome with the given 5-bit credit count.
func ACK(credit uint8) Syndrome { return Syndrome(credit & 0x1f) }

// RNR returns an RNR NAK syndrome with the given 5-bit timer code.
func RNR(timer uint8) Syndrome { return RNRBase | Syndrome(timer&0x1f) }

// Kind returns the syndrome type.
func (s Syndrome) Kind() Kind { return Kind(s>>5) & 3 }

// Reserved returns bit 7, which IBA reserves (0 on the wire).
func (s Syndrome) Reserved() uint8 { return uint8(s >> 7) }

// Value returns the low five bits: the credit count, RNR timer code or NAK
// code.
func (s Syndrome) Value() uint8 { return uint8(s) & 0x1f }

// IsACK reports an ACK.
func (s Syndrome) IsACK() bool { return s.Kind() == KindACK && s.Reserved() == 0 }

// IsRNR reports an RNR NAK.
func (s Syndrome) IsRNR() bool { return s.Kind() == KindRNR && s.Reserved() == 0 }

// IsNAK reports a NAK (of any code).
func (s Syndrome) IsNAK() bool { return s.Kind() == KindNAK && s.Reserved() == 0 }

// Credit returns the credit count of an ACK.
func (s Syndrome) Credit() uint8 { return s.Value() }

// Timer returns the RNR timer code of an RNR NAK.
func (s Syndrome) Timer() uint8 { return s.Value() }

// String names the syndrome.
func (s Syndrome) String() string {
	switch {
	case s.Reserved() != 0:
		return fmt.Sprintf("Syndrome(0x%02x, reserved bit set)", uint8(s))
	case s.IsACK():
		return fmt.Sprintf("ACK(credit=%d)", s.Credit())
	case s.IsRNR():
		return fmt.Sprintf("RNR-NAK(timer=%d)", s.Timer())
	case s.IsNAK():
		switch s {
		case NAKPSNSequenceError:
			return "NAK(PSN sequence error)"
		case NAKInvalidRequest:
			return "NAK(invalid request)"
		case NAKRemoteAccessError:
			return "NAK(remote access error)"
		case NAKRemoteOperationalError:
			return "NAK(remote operational error)"
		case NAKInvalidRDRequest:
			return "NAK(invalid RD request)"
		}
		return fmt.Sprintf("NAK(reserved code %d)", s.Value())
	}
	return fmt.Sprintf("Syndrome(0x%02x, reserved type)", uint8(s))
}
