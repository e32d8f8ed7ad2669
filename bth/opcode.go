package bth

import (
	"fmt"
	"math/bits"
)

// Opcode is the 8-bit BTH OpCode (IBA 9.2.1, Table 38). The top three bits
// select the transport service (RC, UC, RD, UD, CNP, XRC), the low five the
// operation.
type Opcode uint8

// Transport is the service class encoded in an opcode's top three bits.
type Transport uint8

// Transport classes (IBA 9.2.1, Table 38; RoCEv2 Annex A17.9.2 for CNP).
const (
	TransportRC  Transport = 0 // 000: Reliable Connection
	TransportUC  Transport = 1 // 001: Unreliable Connection
	TransportRD  Transport = 2 // 010: Reliable Datagram
	TransportUD  Transport = 3 // 011: Unreliable Datagram
	TransportCNP Transport = 4 // 100: Congestion Notification
	TransportXRC Transport = 5 // 101: Extended Reliable Connection
)

// Transport returns the service class of op.
func (op Opcode) Transport() Transport { return Transport(op >> 5) }

// String returns a short name of the transport class.
func (t Transport) String() string {
	switch t {
	case TransportRC:
		return "RC"
	case TransportUC:
		return "UC"
	case TransportRD:
		return "RD"
	case TransportUD:
		return "UD"
	case TransportCNP:
		return "CNP"
	case TransportXRC:
		return "XRC"
	}
	return fmt.Sprintf("Transport(%d)", uint8(t))
}

// RC opcodes (IBA 9.2.1 Table 38, plus FLUSH and ATOMIC WRITE of the IBA 1.5
// memory placement extensions).
const (
	RCSendFirst                  Opcode = 0x00
	RCSendMiddle                 Opcode = 0x01
	RCSendLast                   Opcode = 0x02
	RCSendLastWithImmediate      Opcode = 0x03
	RCSendOnly                   Opcode = 0x04
	RCSendOnlyWithImmediate      Opcode = 0x05
	RCRDMAWriteFirst             Opcode = 0x06
	RCRDMAWriteMiddle            Opcode = 0x07
	RCRDMAWriteLast              Opcode = 0x08
	RCRDMAWriteLastWithImmediate Opcode = 0x09
	RCRDMAWriteOnly              Opcode = 0x0A
	RCRDMAWriteOnlyWithImmediate Opcode = 0x0B
	RCRDMAReadRequest            Opcode = 0x0C
	RCRDMAReadResponseFirst      Opcode = 0x0D
	RCRDMAReadResponseMiddle     Opcode = 0x0E
	RCRDMAReadResponseLast       Opcode = 0x0F
	RCRDMAReadResponseOnly       Opcode = 0x10
	RCAcknowledge                Opcode = 0x11
	RCAtomicAcknowledge          Opcode = 0x12
	RCCompareSwap                Opcode = 0x13
	RCFetchAdd                   Opcode = 0x14
	RCSendLastWithInvalidate     Opcode = 0x16
	RCSendOnlyWithInvalidate     Opcode = 0x17
	RCFlush                      Opcode = 0x1C
	RCAtomicWrite                Opcode = 0x1D
	UCSendFirst                  Opcode = 0x20
	UCSendMiddle                 Opcode = 0x21
	UCSendLast                   Opcode = 0x22
	UCSendLastWithImmediate      Opcode = 0x23
	UCSendOnly                   Opcode = 0x24
	UCSendOnlyWithImmediate      Opcode = 0x25
	UCRDMAWriteFirst             Opcode = 0x26
	UCRDMAWriteMiddle            Opcode = 0x27
	UCRDMAWriteLast              Opcode = 0x28
	UCRDMAWriteLastWithImmediate Opcode = 0x29
	UCRDMAWriteOnly              Opcode = 0x2A
	UCRDMAWriteOnlyWithImmediate Opcode = 0x2B
	UDSendOnly                   Opcode = 0x64
	UDSendOnlyWithImmediate      Opcode = 0x65
	CNP                          Opcode = 0x81 // RoCEv2 Annex A17.9.2
	opcodeTableSize                     = 256
)

// HeaderMask describes an opcode: which extension headers follow the BTH and
// what the packet means. It is the analogue of rxe's RXE_*_MASK bits
// (rxe_opcode.h); it is its own type so it can never be confused with an
// Opcode (rxe once indexed a mask table with an opcode).
type HeaderMask uint32

// Header-presence bits, in the order the headers follow the BTH (IBA 9.3:
// DETH, FETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH), and
// semantic bits.
const (
	MaskDETH HeaderMask = 1 << iota
	MaskFETH
	MaskRETH
	MaskAtomicETH
	MaskAETH
	MaskAtomicAckETH
	MaskImmDt
	MaskIETH
	MaskCNPPad // 16 reserved bytes of a RoCEv2 CNP

	MaskPayload     // the packet may carry a payload
	MaskRequest     // sent by a requester
	MaskResponse    // sent by a responder (ACK, READ response, ATOMIC ACK)
	MaskFirst       // first packet of a multi-packet message
	MaskMiddle      // middle packet
	MaskLast        // last packet
	MaskSend        // SEND family
	MaskWrite       // RDMA WRITE family
	MaskRead        // RDMA READ request or response
	MaskAtomic      // CmpSwap / FetchAdd (request or ATOMIC ACK)
	MaskFlush       // FLUSH
	MaskAtomicWrite // ATOMIC WRITE
	MaskRecvWR      // consumes a receive WQE at the responder (SEND, WRITE with immediate)
	MaskCNP         // congestion notification

	// MaskOnly marks single-packet messages.
	MaskOnly = MaskFirst | MaskLast

	extMasks = MaskDETH | MaskFETH | MaskRETH | MaskAtomicETH | MaskAETH |
		MaskAtomicAckETH | MaskImmDt | MaskIETH | MaskCNPPad
)

// Has reports whether every bit of want is set in m.
func (m HeaderMask) Has(want HeaderMask) bool { return m&want == want }

// Any reports whether any bit of want is set in m.
func (m HeaderMask) Any(want HeaderMask) bool { return m&want != 0 }

// extOrder lists the extension headers in wire order with their sizes.
var extOrder = [...]struct {
	mask HeaderMask
	size int
}{
	{MaskDETH, DETHSize},
	{MaskFETH, FETHSize},
	{MaskRETH, RETHSize},
	{MaskAtomicETH, AtomicETHSize},
	{MaskAETH, AETHSize},
	{MaskAtomicAckETH, AtomicAckETHSize},
	{MaskImmDt, ImmDtSize},
	{MaskIETH, IETHSize},
	{MaskCNPPad, CNPPadSize},
}

// Info is one row of the opcode table: everything the codec and the
// transport need to know about an opcode.
type Info struct {
	// Name is the IBA name of the opcode, as rxe spells it without the
	// IB_OPCODE_ prefix (for example "RC_SEND_FIRST").
	Name string
	// Mask holds the header-presence and semantic bits.
	Mask HeaderMask
	// HeaderLen is the length of the BTH plus every extension header.
	HeaderLen int
	// offsets of the extension headers from the start of the BTH, in
	// extOrder order; 0 where absent.
	offsets [len(extOrder)]uint8
}

// Offset returns the offset of the extension header ext (one Mask*ETH bit)
// from the start of the BTH, and false when this opcode has no such header.
// It is a table lookup: the header-presence bits are 1<<i for extOrder[i]
// (checked by TestExtOrderMatchesMaskBits).
func (in *Info) Offset(ext HeaderMask) (int, bool) {
	if ext&extMasks == 0 || ext&(ext-1) != 0 || in.Mask&ext == 0 {
		return 0, false
	}
	return int(in.offsets[bits.TrailingZeros32(uint32(ext))]), true
}

func entry(name string, m HeaderMask) Info {
	in := Info{Name: name, Mask: m, HeaderLen: Size}
	for i, e := range extOrder {
		if m&e.mask != 0 {
			in.offsets[i] = uint8(in.HeaderLen)
			in.HeaderLen += e.size
		}
	}
	return in
}

// Common mask combinations.
const (
	sendReq  = MaskRequest | MaskSend | MaskPayload | MaskRecvWR
	writeReq = MaskRequest | MaskWrite | MaskPayload
	readResp = MaskResponse | MaskRead | MaskPayload
)

// table is the one static opcode table (the rxe_opcode.c analogue). It is
// never written after package initialisation. Opcodes not listed have a zero
// Info and are unknown.
var table = [opcodeTableSize]Info{
	RCSendFirst:                  entry("RC_SEND_FIRST", sendReq|MaskFirst),
	RCSendMiddle:                 entry("RC_SEND_MIDDLE", sendReq|MaskMiddle),
	RCSendLast:                   entry("RC_SEND_LAST", sendReq|MaskLast),
	RCSendLastWithImmediate:      entry("RC_SEND_LAST_WITH_IMMEDIATE", sendReq|MaskLast|MaskImmDt),
	RCSendOnly:                   entry("RC_SEND_ONLY", sendReq|MaskOnly),
	RCSendOnlyWithImmediate:      entry("RC_SEND_ONLY_WITH_IMMEDIATE", sendReq|MaskOnly|MaskImmDt),
	RCRDMAWriteFirst:             entry("RC_RDMA_WRITE_FIRST", writeReq|MaskFirst|MaskRETH),
	RCRDMAWriteMiddle:            entry("RC_RDMA_WRITE_MIDDLE", writeReq|MaskMiddle),
	RCRDMAWriteLast:              entry("RC_RDMA_WRITE_LAST", writeReq|MaskLast),
	RCRDMAWriteLastWithImmediate: entry("RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", writeReq|MaskLast|MaskImmDt|MaskRecvWR),
	RCRDMAWriteOnly:              entry("RC_RDMA_WRITE_ONLY", writeReq|MaskOnly|MaskRETH),
	RCRDMAWriteOnlyWithImmediate: entry("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", writeReq|MaskOnly|MaskRETH|MaskImmDt|MaskRecvWR),
	RCRDMAReadRequest:            entry("RC_RDMA_READ_REQUEST", MaskRequest|MaskRead|MaskOnly|MaskRETH),
	RCRDMAReadResponseFirst:      entry("RC_RDMA_READ_RESPONSE_FIRST", readResp|MaskFirst|MaskAETH),
	RCRDMAReadResponseMiddle:     entry("RC_RDMA_READ_RESPONSE_MIDDLE", readResp|MaskMiddle),
	RCRDMAReadResponseLast:       entry("RC_RDMA_READ_RESPONSE_LAST", readResp|MaskLast|MaskAETH),
	RCRDMAReadResponseOnly:       entry("RC_RDMA_READ_RESPONSE_ONLY", readResp|MaskOnly|MaskAETH),
	RCAcknowledge:                entry("RC_ACKNOWLEDGE", MaskResponse|MaskOnly|MaskAETH),
	RCAtomicAcknowledge:          entry("RC_ATOMIC_ACKNOWLEDGE", MaskResponse|MaskAtomic|MaskOnly|MaskAETH|MaskAtomicAckETH),
	RCCompareSwap:                entry("RC_COMPARE_SWAP", MaskRequest|MaskAtomic|MaskOnly|MaskAtomicETH),
	RCFetchAdd:                   entry("RC_FETCH_ADD", MaskRequest|MaskAtomic|MaskOnly|MaskAtomicETH),
	RCSendLastWithInvalidate:     entry("RC_SEND_LAST_WITH_INVALIDATE", sendReq|MaskLast|MaskIETH),
	RCSendOnlyWithInvalidate:     entry("RC_SEND_ONLY_WITH_INVALIDATE", sendReq|MaskOnly|MaskIETH),
	// FLUSH carries FETH then RETH and no payload (rxe_opcode.c, IBA 1.5 A19).
	RCFlush: entry("RC_FLUSH", MaskRequest|MaskFlush|MaskOnly|MaskFETH|MaskRETH),
	// ATOMIC WRITE carries a RETH and an 8-byte payload (IBA 1.5 A19).
	RCAtomicWrite: entry("RC_ATOMIC_WRITE", MaskRequest|MaskAtomicWrite|MaskOnly|MaskRETH|MaskPayload),

	UCSendFirst:                  entry("UC_SEND_FIRST", sendReq|MaskFirst),
	UCSendMiddle:                 entry("UC_SEND_MIDDLE", sendReq|MaskMiddle),
	UCSendLast:                   entry("UC_SEND_LAST", sendReq|MaskLast),
	UCSendLastWithImmediate:      entry("UC_SEND_LAST_WITH_IMMEDIATE", sendReq|MaskLast|MaskImmDt),
	UCSendOnly:                   entry("UC_SEND_ONLY", sendReq|MaskOnly),
	UCSendOnlyWithImmediate:      entry("UC_SEND_ONLY_WITH_IMMEDIATE", sendReq|MaskOnly|MaskImmDt),
	UCRDMAWriteFirst:             entry("UC_RDMA_WRITE_FIRST", writeReq|MaskFirst|MaskRETH),
	UCRDMAWriteMiddle:            entry("UC_RDMA_WRITE_MIDDLE", writeReq|MaskMiddle),
	UCRDMAWriteLast:              entry("UC_RDMA_WRITE_LAST", writeReq|MaskLast),
	UCRDMAWriteLastWithImmediate: entry("UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", writeReq|MaskLast|MaskImmDt|MaskRecvWR),
	UCRDMAWriteOnly:              entry("UC_RDMA_WRITE_ONLY", writeReq|MaskOnly|MaskRETH),
	UCRDMAWriteOnlyWithImmediate: entry("UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", writeReq|MaskOnly|MaskRETH|MaskImmDt|MaskRecvWR),

	UDSendOnly:              entry("UD_SEND_ONLY", sendReq|MaskOnly|MaskDETH),
	UDSendOnlyWithImmediate: entry("UD_SEND_ONLY_WITH_IMMEDIATE", sendReq|MaskOnly|MaskDETH|MaskImmDt),

	// RoCEv2 CNP: BTH (BECN set, PSN 0) then 16 reserved bytes (Annex A17.9.2).
	CNP: entry("CNP", MaskCNP|MaskOnly|MaskCNPPad),
}

// Lookup returns the table row of op, and false for an opcode this package
// does not know (reserved, RD, XRC and manufacturer-specific opcodes). The
// returned Info must not be modified.
func (op Opcode) Lookup() (*Info, bool) {
	in := &table[op]
	return in, in.Name != ""
}

// Known reports whether op is in the opcode table.
func (op Opcode) Known() bool { return table[op].Name != "" }

// Mask returns the header mask of op, 0 for an unknown opcode.
func (op Opcode) Mask() HeaderMask { return table[op].Mask }

// HeaderLen returns the length of the BTH and extension headers of op, or 0
// for an unknown opcode.
func (op Opcode) HeaderLen() int { return table[op].HeaderLen }

// String returns the IBA name of op, or "Opcode(0xNN)" when unknown.
func (op Opcode) String() string {
	if in := &table[op]; in.Name != "" {
		return in.Name
	}
	return fmt.Sprintf("Opcode(0x%02x)", uint8(op))
}

// IsFirst reports a FIRST packet (not ONLY).
func (op Opcode) IsFirst() bool { m := op.Mask(); return m&MaskOnly == MaskFirst }

// IsMiddle reports a MIDDLE packet.
func (op Opcode) IsMiddle() bool { return op.Mask()&MaskMiddle != 0 }

// IsLast reports a LAST packet (not ONLY).
func (op Opcode) IsLast() bool { m := op.Mask(); return m&MaskOnly == MaskLast }

// IsOnly reports a single-packet message.
func (op Opcode) IsOnly() bool { return op.Mask()&MaskOnly == MaskOnly }

// IsRequest reports an opcode sent by a requester.
func (op Opcode) IsRequest() bool { return op.Mask()&MaskRequest != 0 }

// IsResponse reports an opcode sent by a responder.
func (op Opcode) IsResponse() bool { return op.Mask()&MaskResponse != 0 }

// HasPayload reports whether packets of op may carry a payload.
func (op Opcode) HasPayload() bool { return op.Mask()&MaskPayload != 0 }

// Opcodes returns every opcode of the table in numeric order. It allocates;
// it is meant for tests and tools.
func Opcodes() []Opcode {
	var ops []Opcode
	for i := range table {
		if table[i].Name != "" {
			ops = append(ops, Opcode(i))
		}
	}
	return ops
}
