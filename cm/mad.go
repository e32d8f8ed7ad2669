package cm

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MAD sizes (IBA 13.4.2; ib_mad.h IB_MGMT_MAD_SIZE, IB_MGMT_MAD_HDR,
// IB_MGMT_MAD_DATA).
const (
	MADSize    = 256 // a whole CM MAD
	HeaderSize = 24  // the MAD common header
	DataSize   = 232 // the CM message after the header
)

// MAD common header values a CM MAD carries (IBA 13.4.3, 12.6.1).
const (
	BaseVersion     = 1
	MgmtClassCM     = 0x07
	ClassVersionCM  = 2
	MethodSend      = 0x03 // CM uses Send for every message (IBA 12.6.1)
	QP1QKey         = 0x80010000
	offBaseVersion  = 0
	offMgmtClass    = 1
	offClassVersion = 2
	offMethod       = 3
	offStatus       = 4
	offClassSpec    = 6
	offTID          = 8
	offAttrID       = 16
	offAttrMod      = 20
)

// Parse errors.
var (
	// ErrTruncated is returned for a buffer shorter than MADSize.
	ErrTruncated = errors.New("cm: truncated MAD")
	// ErrNotCM is returned for a MAD that is not a CM class-version-2
	// MAD (base version 1, class 0x07, class version 2).
	ErrNotCM = errors.New("cm: not a CM MAD")
)

// AttrID is the MAD attribute ID, which names the CM message (IBA
// 12.6.4, table 104).
type AttrID uint16

// CM attribute IDs.
const (
	AttrClassPortInfo AttrID = 0x0001
	AttrREQ           AttrID = 0x0010
	AttrMRA           AttrID = 0x0011
	AttrREJ           AttrID = 0x0012
	AttrREP           AttrID = 0x0013
	AttrRTU           AttrID = 0x0014
	AttrDREQ          AttrID = 0x0015
	AttrDREP          AttrID = 0x0016
	AttrSIDRREQ       AttrID = 0x0017
	AttrSIDRREP       AttrID = 0x0018
	AttrLAP           AttrID = 0x0019
	AttrAPR           AttrID = 0x001A
)

var attrNames = map[AttrID]string{
	AttrClassPortInfo: "ClassPortInfo", AttrREQ: "REQ", AttrMRA: "MRA", AttrREJ: "REJ",
	AttrREP: "REP", AttrRTU: "RTU", AttrDREQ: "DREQ", AttrDREP: "DREP",
	AttrSIDRREQ: "SIDR_REQ", AttrSIDRREP: "SIDR_REP", AttrLAP: "LAP", AttrAPR: "APR",
}

// String returns the message name ("REQ", "REP", ...).
func (a AttrID) String() string {
	if s, ok := attrNames[a]; ok {
		return s
	}
	return fmt.Sprintf("AttrID(%#04x)", uint16(a))
}

// MAD is a view of a 256-byte CM MAD; its accessors read the common
// header (IBA 13.4.3).
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  BaseVersion  |   MgmtClass   | ClassVersion  |R|   Method    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Status             |         ClassSpecific         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         TransactionID                         |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          AttributeID          |           Reserved            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       AttributeModifier                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  CM data (232 bytes) ...                      |
//
// A MAD aliases its buffer; copy it (bytes.Clone) before keeping it.
type MAD []byte

// ParseMAD checks that b holds at least MADSize bytes and returns a view
// of the first MADSize. It does not check the class: see Parse.
func ParseMAD(b []byte) (MAD, error) {
	if len(b) < MADSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrTruncated, len(b))
	}
	return MAD(b[:MADSize:MADSize]), nil
}

// Parse returns a view of the CM MAD at the start of b: at least MADSize
// bytes, base version 1, management class 0x07, class version 2. The
// method and attribute are not checked; switch on AttrID.
func Parse(b []byte) (MAD, error) {
	m, err := ParseMAD(b)
	if err != nil {
		return nil, err
	}
	if m.BaseVersion() != BaseVersion || m.MgmtClass() != MgmtClassCM || m.ClassVersion() != ClassVersionCM {
		return nil, fmt.Errorf("%w: base %d class %#x version %d", ErrNotCM,
			m.BaseVersion(), m.MgmtClass(), m.ClassVersion())
	}
	return m, nil
}

// BaseVersion returns the MAD base version (1).
func (m MAD) BaseVersion() uint8 { return m[offBaseVersion] }

// MgmtClass returns the management class (0x07 for CM).
func (m MAD) MgmtClass() uint8 { return m[offMgmtClass] }

// ClassVersion returns the class version (2 for CM).
func (m MAD) ClassVersion() uint8 { return m[offClassVersion] }

// Method returns the method, including the response bit (0x80).
func (m MAD) Method() uint8 { return m[offMethod] }

// Status returns the MAD status word.
func (m MAD) Status() uint16 { return binary.BigEndian.Uint16(m[offStatus:]) }

// ClassSpecific returns the class-specific word.
func (m MAD) ClassSpecific() uint16 { return binary.BigEndian.Uint16(m[offClassSpec:]) }

// TID returns the transaction ID. A CM reply echoes the TID of the
// message it answers (REP and REJ the REQ's, DREP the DREQ's).
func (m MAD) TID() uint64 { return binary.BigEndian.Uint64(m[offTID:]) }

// AttrID returns the attribute ID (the CM message type).
func (m MAD) AttrID() AttrID { return AttrID(binary.BigEndian.Uint16(m[offAttrID:])) }

// AttrMod returns the attribute modifier.
func (m MAD) AttrMod() uint32 { return binary.BigEndian.Uint32(m[offAttrMod:]) }

// Data returns the 232 bytes of CM data after the header.
func (m MAD) Data() []byte { return m[HeaderSize:MADSize:MADSize] }

// SetBaseVersion sets the base version.
func (m MAD) SetBaseVersion(v uint8) { m[offBaseVersion] = v }

// SetMgmtClass sets the management class.
func (m MAD) SetMgmtClass(v uint8) { m[offMgmtClass] = v }

// SetClassVersion sets the class version.
func (m MAD) SetClassVersion(v uint8) { m[offClassVersion] = v }

// SetMethod sets the method.
func (m MAD) SetMethod(v uint8) { m[offMethod] = v }

// SetStatus sets the status word.
func (m MAD) SetStatus(v uint16) { binary.BigEndian.PutUint16(m[offStatus:], v) }

// SetClassSpecific sets the class-specific word.
func (m MAD) SetClassSpecific(v uint16) { binary.BigEndian.PutUint16(m[offClassSpec:], v) }

// SetTID sets the transaction ID.
func (m MAD) SetTID(v uint64) { binary.BigEndian.PutUint64(m[offTID:], v) }

// SetAttrID sets the attribute ID.
func (m MAD) SetAttrID(v AttrID) { binary.BigEndian.PutUint16(m[offAttrID:], uint16(v)) }

// SetAttrMod sets the attribute modifier.
func (m MAD) SetAttrMod(v uint32) { binary.BigEndian.PutUint32(m[offAttrMod:], v) }

// HeaderFields is the MAD common header in decoded form.
type HeaderFields struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8
	Status        uint16
	ClassSpecific uint16
	TID           uint64
	AttrID        AttrID
	AttrMod       uint32
}

// Header returns the common header's fields.
func (m MAD) Header() HeaderFields {
	return HeaderFields{
		BaseVersion: m.BaseVersion(), MgmtClass: m.MgmtClass(), ClassVersion: m.ClassVersion(),
		Method: m.Method(), Status: m.Status(), ClassSpecific: m.ClassSpecific(),
		TID: m.TID(), AttrID: m.AttrID(), AttrMod: m.AttrMod(),
	}
}

// EncodeHeader writes h; the reserved bytes 18–19 are cleared.
func (m MAD) EncodeHeader(h *HeaderFields) {
	m.SetBaseVersion(h.BaseVersion)
	m.SetMgmtClass(h.MgmtClass)
	m.SetClassVersion(h.ClassVersion)
	m.SetMethod(h.Method)
	m.SetStatus(h.Status)
	m.SetClassSpecific(h.ClassSpecific)
	m.SetTID(h.TID)
	m.SetAttrID(h.AttrID)
	m[18], m[19] = 0, 0
	m.SetAttrMod(h.AttrMod)
}

// cmHeader returns the header of a CM Send MAD with the given TID and
// attribute, as the kernel's cm_format_mad_hdr builds it.
func cmHeader(tid uint64, a AttrID) HeaderFields {
	return HeaderFields{BaseVersion: BaseVersion, MgmtClass: MgmtClassCM, ClassVersion: ClassVersionCM,
		Method: MethodSend, TID: tid, AttrID: a}
}

// bit-field helpers over the whole MAD (offsets include the header).
func be24(b []byte) uint32     { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }
func put24(b []byte, v uint32) { b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v) }

// getBits returns the field of width w bits whose most significant bit is
// at bit position hi (7 = MSB) of byte b.
func getBits(b byte, hi, w uint) uint8 { return (b >> (hi + 1 - w)) & (1<<w - 1) }

// setBits writes v (masked to w bits) into that field, keeping the others.
func setBits(b *byte, hi, w uint, v uint8) {
	sh := hi + 1 - w
	mask := byte(1<<w-1) << sh
	*b = *b&^mask | (v<<sh)&mask
}

func b2u(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}
