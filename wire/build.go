package wire

import (
	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/reth"
)

// Fields holds the transport headers of one packet for building. Only the
// headers the opcode carries (per the opcode table) are written; the others
// are ignored. The BTH pad count is always computed from the payload length.
type Fields struct {
	BTH          bth.Fields
	RETH         reth.Fields
	AETH         aeth.Fields
	ImmDt        uint32 // written big-endian (ext.ImmDt.SetImm)
	IETH         uint32 // rkey to invalidate
	DETH         ext.DETHFields
	AtomicETH    ext.AtomicETHFields
	AtomicAckETH uint64
	FETH         ext.FETHFields
}

// PadFor returns the pad that rounds n up to a multiple of 4 (IBA 9.2 PadCnt).
func PadFor(n int) int { return -n & 3 }

// TransportLen returns the length of a transport packet (BTH, extension
// headers, payload, pad and ICRC) of opcode op with a payload of n bytes, or
// 0 for an unknown opcode.
func TransportLen(op bth.Opcode, n int) int {
	hl := op.HeaderLen()
	if hl == 0 {
		return 0
	}
	return hl + n + PadFor(n) + bth.ICRCSize
}

// Build writes the transport packet described by f with the given payload
// into buf and returns its length. The ICRC bytes are left zero: they cover
// the IP and UDP headers, which are known only where the packet is
// encapsulated (package rocev2). It does not allocate.
func Build(buf []byte, f *Fields, payload []byte) (int, error) {
	n, pl, err := BuildHeader(buf, f, len(payload))
	if err != nil {
		return 0, err
	}
	copy(pl, payload)
	return n, nil
}

// BuildHeader writes the headers of a packet described by f with an n-byte
// payload into buf, zeroes the pad and ICRC, and returns the packet length
// and the payload slice of buf for the caller to fill in place (a requester
// gathers straight from its memory regions into it). It does not allocate.
func BuildHeader(buf []byte, f *Fields, payloadLen int) (int, []byte, error) {
	op := f.BTH.Opcode
	in, ok := op.Lookup()
	if !ok {
		return 0, nil, ErrUnknownOpcode
	}
	if payloadLen < 0 || payloadLen > 0 && in.Mask&bth.MaskPayload == 0 {
		return 0, nil, errPayloadNotAllowed
	}
	pad := PadFor(payloadLen)
	n := in.HeaderLen + payloadLen + pad + bth.ICRCSize
	if len(buf) < n {
		return 0, nil, errNotEnoughSpace
	}
	b := buf[:n:n]
	bf := f.BTH
	bf.PadCount = pad
	bth.Header(b[:bth.Size]).Encode(&bf)
	m := in.Mask
	if m&bth.MaskRETH != 0 {
		o, _ := in.Offset(bth.MaskRETH)
		reth.Header(b[o : o+reth.Size]).Encode(&f.RETH)
	}
	if m&bth.MaskAETH != 0 {
		o, _ := in.Offset(bth.MaskAETH)
		aeth.Header(b[o : o+aeth.Size]).Encode(&f.AETH)
	}
	if m&bth.MaskImmDt != 0 {
		o, _ := in.Offset(bth.MaskImmDt)
		ext.ImmDt(b[o : o+ext.ImmDtSize]).SetImm(f.ImmDt)
	}
	if m&bth.MaskIETH != 0 {
		o, _ := in.Offset(bth.MaskIETH)
		ext.IETH(b[o : o+ext.IETHSize]).SetRKey(f.IETH)
	}
	if m&bth.MaskDETH != 0 {
		o, _ := in.Offset(bth.MaskDETH)
		ext.DETH(b[o : o+ext.DETHSize]).Encode(&f.DETH)
	}
	if m&bth.MaskAtomicETH != 0 {
		o, _ := in.Offset(bth.MaskAtomicETH)
		ext.AtomicETH(b[o : o+ext.AtomicETHSize]).Encode(&f.AtomicETH)
	}
	if m&bth.MaskAtomicAckETH != 0 {
		o, _ := in.Offset(bth.MaskAtomicAckETH)
		ext.AtomicAckETH(b[o : o+ext.AtomicAckETHSize]).SetOrigRemData(f.AtomicAckETH)
	}
	if m&bth.MaskFETH != 0 {
		o, _ := in.Offset(bth.MaskFETH)
		ext.FETH(b[o : o+ext.FETHSize]).Encode(&f.FETH)
	}
	if m&bth.MaskCNPPad != 0 {
		o, _ := in.Offset(bth.MaskCNPPad)
		clear(b[o : o+bth.CNPPadSize])
	}
	end := in.HeaderLen + payloadLen
	clear(b[end:]) // pad and ICRC placeholder
	return n, b[in.HeaderLen:end:end], nil
}
