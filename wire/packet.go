package wire

import (
	"errors"
	"fmt"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/reth"
)

// Errors of Parse and Build. They are sentinels so a receive path can count
// drops by reason without allocating; errors.Is matches them.
var (
	ErrTruncated      = errors.New("wire: truncated packet")
	ErrUnknownOpcode  = errors.New("wire: unknown BTH opcode")
	ErrBadVersion     = errors.New("wire: unsupported BTH transport version")
	ErrBadPad         = errors.New("wire: pad count exceeds payload")
	ErrBufferTooSmall = errors.New("wire: buffer too small")
	ErrBadField       = errors.New("wire: field out of range")
)

// Static wrapped errors: context without allocation on the receive path.
var (
	errTruncBTH          = fmt.Errorf("%w: BTH", ErrTruncated)
	errTruncExt          = fmt.Errorf("%w: extension headers", ErrTruncated)
	errTruncICRC         = fmt.Errorf("%w: no room for the ICRC", ErrTruncated)
	errNotEnoughSpace    = fmt.Errorf("%w: for the packet", ErrBufferTooSmall)
	errPayloadNotAllowed = fmt.Errorf("%w: payload on an opcode without one", ErrBadField)
)

// Packet is a parsed InfiniBand transport packet — the UDP payload of a
// RoCEv2 datagram, from the BTH to the ICRC — as views into the one buffer it
// was parsed from, without copying. Nothing is copied, so a Packet must not be
// used after its buffer is reused. A zero Packet is ready for Parse, and one
// Packet may be reused for every packet of a receive loop without allocating.
//
// Views of headers that are absent are nil. After a Parse error the views up
// to the failing header are set, so a decoder can still show them.
type Packet struct {
	// Transport is the whole transport packet: BTH up to and including the ICRC.
	Transport []byte

	BTH  bth.Header
	Info *bth.Info // the opcode table row; nil for an unknown opcode

	RETH         reth.Header
	AETH         aeth.Header
	ImmDt        ext.ImmDt
	IETH         ext.IETH
	DETH         ext.DETH
	AtomicETH    ext.AtomicETH
	AtomicAckETH ext.AtomicAckETH
	FETH         ext.FETH
	CNPPad       []byte

	Payload []byte // without the pad
	Pad     []byte
	ICRC    []byte // four bytes, wire order (LSB first)
}

// Parse parses a transport packet: a UDP payload from the BTH to the ICRC,
// as a UDP socket delivers it. It checks the opcode, TVer 0, that the
// buffer holds the opcode's headers and an ICRC, and that the pad fits in
// the payload; it does not check the ICRC (that needs the IP header, see
// package rocev2). It does not allocate.
//
// Parse owns the views: it leaves p exactly as a parse into a zero Packet
// would, provided p's views were set only by Parse (or p is zero).
func (p *Packet) Parse(b []byte) error {
	// Only the previous opcode's extension views can be set (plus the
	// views every parse sets): clear those the new opcode does not
	// overwrite, instead of all 368 bytes of p (a tenth of ParseFrame).
	var old bth.HeaderMask
	if p.Info != nil {
		old = p.Info.Mask
	}
	if len(b) < bth.Size {
		p.reset(old, b)
		return errTruncBTH
	}
	h := bth.Header(b[:bth.Size:bth.Size])
	in, ok := h.Opcode().Lookup()
	if !ok {
		p.reset(old, b)
		p.BTH = h
		return ErrUnknownOpcode
	}
	hl := in.HeaderLen
	if h.TVer() != 0 || len(b) < hl+bth.ICRCSize {
		p.reset(old, b)
		p.BTH, p.Info = h, in
		switch {
		case h.TVer() != 0:
			return ErrBadVersion
		case len(b) < hl:
			return errTruncExt
		}
		return errTruncICRC
	}
	m := in.Mask
	if stale := old &^ m; stale != 0 {
		p.clearViews(stale)
	}
	p.Transport, p.BTH, p.Info = b, h, in
	if m&bth.MaskRETH != 0 {
		o, _ := in.Offset(bth.MaskRETH)
		p.RETH = reth.Header(b[o : o+reth.Size : o+reth.Size])
	}
	if m&bth.MaskAETH != 0 {
		o, _ := in.Offset(bth.MaskAETH)
		p.AETH = aeth.Header(b[o : o+aeth.Size : o+aeth.Size])
	}
	if m&bth.MaskImmDt != 0 {
		o, _ := in.Offset(bth.MaskImmDt)
		p.ImmDt = ext.ImmDt(b[o : o+ext.ImmDtSize : o+ext.ImmDtSize])
	}
	if m&bth.MaskIETH != 0 {
		o, _ := in.Offset(bth.MaskIETH)
		p.IETH = ext.IETH(b[o : o+ext.IETHSize : o+ext.IETHSize])
	}
	if m&bth.MaskDETH != 0 {
		o, _ := in.Offset(bth.MaskDETH)
		p.DETH = ext.DETH(b[o : o+ext.DETHSize : o+ext.DETHSize])
	}
	if m&bth.MaskAtomicETH != 0 {
		o, _ := in.Offset(bth.MaskAtomicETH)
		p.AtomicETH = ext.AtomicETH(b[o : o+ext.AtomicETHSize : o+ext.AtomicETHSize])
	}
	if m&bth.MaskAtomicAckETH != 0 {
		o, _ := in.Offset(bth.MaskAtomicAckETH)
		p.AtomicAckETH = ext.AtomicAckETH(b[o : o+ext.AtomicAckETHSize : o+ext.AtomicAckETHSize])
	}
	if m&bth.MaskFETH != 0 {
		o, _ := in.Offset(bth.MaskFETH)
		p.FETH = ext.FETH(b[o : o+ext.FETHSize : o+ext.FETHSize])
	}
	if m&bth.MaskCNPPad != 0 {
		o, _ := in.Offset(bth.MaskCNPPad)
		p.CNPPad = b[o : o+bth.CNPPadSize : o+bth.CNPPadSize]
	}
	end := len(b) - bth.ICRCSize
	p.ICRC = b[end:len(b):len(b)]
	pad := h.PadCount()
	// CVE-2026-46043: the pad is attacker-controlled; check it against the
	// payload before any use.
	if pad > end-hl {
		p.Payload, p.Pad = b[hl:end:end], nil
		return ErrBadPad
	}
	p.Payload = b[hl : end-pad : end-pad]
	p.Pad = b[end-pad : end : end]
	return nil
}

// reset clears p for a failed parse of b: the extension views of mask
// old (the previous opcode's) and the views every parse sets.
func (p *Packet) reset(old bth.HeaderMask, b []byte) {
	if old != 0 {
		p.clearViews(old)
	}
	p.Transport, p.BTH, p.Info, p.Payload, p.Pad, p.ICRC = b, nil, nil, nil, nil, nil
}

// clearViews sets the extension views of mask m to nil.
func (p *Packet) clearViews(m bth.HeaderMask) {
	if m&bth.MaskRETH != 0 {
		p.RETH = nil
	}
	if m&bth.MaskAETH != 0 {
		p.AETH = nil
	}
	if m&bth.MaskImmDt != 0 {
		p.ImmDt = nil
	}
	if m&bth.MaskIETH != 0 {
		p.IETH = nil
	}
	if m&bth.MaskDETH != 0 {
		p.DETH = nil
	}
	if m&bth.MaskAtomicETH != 0 {
		p.AtomicETH = nil
	}
	if m&bth.MaskAtomicAckETH != 0 {
		p.AtomicAckETH = nil
	}
	if m&bth.MaskFETH != 0 {
		p.FETH = nil
	}
	if m&bth.MaskCNPPad != 0 {
		p.CNPPad = nil
	}
}

// Fields decodes every transport header of p into a Fields value, the
// inverse of Build: Build(buf, &f, p.Payload) rebuilds p.Transport (with the
// ICRC left zero).
func (p *Packet) Fields() Fields {
	var f Fields
	if p.BTH == nil {
		return f
	}
	f.BTH = p.BTH.Fields()
	if p.RETH != nil {
		f.RETH = p.RETH.Fields()
	}
	if p.AETH != nil {
		f.AETH = p.AETH.Fields()
	}
	if p.ImmDt != nil {
		f.ImmDt = p.ImmDt.Imm()
	}
	if p.IETH != nil {
		f.IETH = p.IETH.RKey()
	}
	if p.DETH != nil {
		f.DETH = p.DETH.Fields()
	}
	if p.AtomicETH != nil {
		f.AtomicETH = p.AtomicETH.Fields()
	}
	if p.AtomicAckETH != nil {
		f.AtomicAckETH = p.AtomicAckETH.OrigRemData()
	}
	if p.FETH != nil {
		f.FETH = p.FETH.Fields()
	}
	return f
}

// Opcode returns the BTH opcode, or 0 when no BTH was parsed.
func (p *Packet) Opcode() bth.Opcode {
	if p.BTH == nil {
		return 0
	}
	return p.BTH.Opcode()
}

// Body returns the packet without its ICRC: the bytes the ICRC covers after
// the BTH's masked copy.
func (p *Packet) Body() []byte {
	if len(p.Transport) < bth.ICRCSize {
		return nil
	}
	return p.Transport[:len(p.Transport)-bth.ICRCSize]
}
