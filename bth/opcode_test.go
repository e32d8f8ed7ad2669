package bth_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
)

// position of an opcode inside a message.
type position uint8

const (
	first position = iota + 1
	middle
	last
	only
)

// Header lengths written out from IBA 9.2/9.3 (and rxe_opcode.c) rather than
// computed, so the table is checked against independent numbers.
const (
	bthLen  = 12
	rethLen = 16
	aethLen = 4
	immLen  = 4
	iethLen = 4
	dethLen = 8
	atomLen = 28
	aackLen = 8
	fethLen = 4
	cnpLen  = 16
)

// extHdr is one expected extension header: its mask bit and offset from the
// start of the BTH.
type extHdr struct {
	mask bth.HeaderMask
	off  int
}

type opcodeCase struct {
	op        bth.Opcode
	value     uint8
	name      string
	headerLen int
	exts      []extHdr
	pos       position
	request   bool
	payload   bool
	transport bth.Transport
}

// opcodeCases lists every opcode goroce knows, with the IBA 9.2.1 Table 38
// value, the rxe name and the header layout of IBA 9.3 (FLUSH: FETH then
// RETH, IBA 1.5 A19; CNP: RoCEv2 Annex A17.9.2).
func opcodeCases() []opcodeCase {
	var cs []opcodeCase
	for _, tr := range []struct {
		base uint8
		pfx  string
		t    bth.Transport
	}{{0x00, "RC", bth.TransportRC}, {0x20, "UC", bth.TransportUC}} {
		add := func(low uint8, name string, hl int, exts []extHdr, pos position, req, payload bool) {
			op := bth.Opcode(tr.base | low)
			cs = append(cs, opcodeCase{op, tr.base | low, tr.pfx + "_" + name, hl, exts, pos, req, payload, tr.t})
		}
		add(0x00, "SEND_FIRST", bthLen, nil, first, true, true)
		add(0x01, "SEND_MIDDLE", bthLen, nil, middle, true, true)
		add(0x02, "SEND_LAST", bthLen, nil, last, true, true)
		add(0x03, "SEND_LAST_WITH_IMMEDIATE", bthLen+immLen, []extHdr{{bth.MaskImmDt, 12}}, last, true, true)
		add(0x04, "SEND_ONLY", bthLen, nil, only, true, true)
		add(0x05, "SEND_ONLY_WITH_IMMEDIATE", bthLen+immLen, []extHdr{{bth.MaskImmDt, 12}}, only, true, true)
		add(0x06, "RDMA_WRITE_FIRST", bthLen+rethLen, []extHdr{{bth.MaskRETH, 12}}, first, true, true)
		add(0x07, "RDMA_WRITE_MIDDLE", bthLen, nil, middle, true, true)
		add(0x08, "RDMA_WRITE_LAST", bthLen, nil, last, true, true)
		add(0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE", bthLen+immLen, []extHdr{{bth.MaskImmDt, 12}}, last, true, true)
		add(0x0A, "RDMA_WRITE_ONLY", bthLen+rethLen, []extHdr{{bth.MaskRETH, 12}}, only, true, true)
		add(0x0B, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", bthLen+rethLen+immLen,
			[]extHdr{{bth.MaskRETH, 12}, {bth.MaskImmDt, 28}}, only, true, true)
		if tr.t != bth.TransportRC {
			continue
		}
		add(0x0C, "RDMA_READ_REQUEST", bthLen+rethLen, []extHdr{{bth.MaskRETH, 12}}, only, true, false)
		add(0x0D, "RDMA_READ_RESPONSE_FIRST", bthLen+aethLen, []extHdr{{bth.MaskAETH, 12}}, first, false, true)
		add(0x0E, "RDMA_READ_RESPONSE_MIDDLE", bthLen, nil, middle, false, true)
		add(0x0F, "RDMA_READ_RESPONSE_LAST", bthLen+aethLen, []extHdr{{bth.MaskAETH, 12}}, last, false, true)
		add(0x10, "RDMA_READ_RESPONSE_ONLY", bthLen+aethLen, []extHdr{{bth.MaskAETH, 12}}, only, false, true)
		add(0x11, "ACKNOWLEDGE", bthLen+aethLen, []extHdr{{bth.MaskAETH, 12}}, only, false, false)
		add(0x12, "ATOMIC_ACKNOWLEDGE", bthLen+aethLen+aackLen,
			[]extHdr{{bth.MaskAETH, 12}, {bth.MaskAtomicAckETH, 16}}, only, false, false)
		add(0x13, "COMPARE_SWAP", bthLen+atomLen, []extHdr{{bth.MaskAtomicETH, 12}}, only, true, false)
		add(0x14, "FETCH_ADD", bthLen+atomLen, []extHdr{{bth.MaskAtomicETH, 12}}, only, true, false)
		add(0x16, "SEND_LAST_WITH_INVALIDATE", bthLen+iethLen, []extHdr{{bth.MaskIETH, 12}}, last, true, true)
		add(0x17, "SEND_ONLY_WITH_INVALIDATE", bthLen+iethLen, []extHdr{{bth.MaskIETH, 12}}, only, true, true)
		add(0x1C, "FLUSH", bthLen+fethLen+rethLen, []extHdr{{bth.MaskFETH, 12}, {bth.MaskRETH, 16}}, only, true, false)
		add(0x1D, "ATOMIC_WRITE", bthLen+rethLen, []extHdr{{bth.MaskRETH, 12}}, only, true, true)
	}
	cs = append(cs,
		opcodeCase{bth.UDSendOnly, 0x64, "UD_SEND_ONLY", bthLen + dethLen,
			[]extHdr{{bth.MaskDETH, 12}}, only, true, true, bth.TransportUD},
		opcodeCase{bth.UDSendOnlyWithImmediate, 0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", bthLen + dethLen + immLen,
			[]extHdr{{bth.MaskDETH, 12}, {bth.MaskImmDt, 20}}, only, true, true, bth.TransportUD},
		opcodeCase{bth.CNP, 0x81, "CNP", bthLen + cnpLen,
			[]extHdr{{bth.MaskCNPPad, 12}}, only, false, false, bth.TransportCNP},
	)
	return cs
}

var allExtMasks = []bth.HeaderMask{
	bth.MaskDETH, bth.MaskFETH, bth.MaskRETH, bth.MaskAtomicETH, bth.MaskAETH,
	bth.MaskAtomicAckETH, bth.MaskImmDt, bth.MaskIETH, bth.MaskCNPPad,
}

func TestOpcodeTable(t *testing.T) {
	cases := opcodeCases()
	require.Len(t, cases, 40) // RC 25, UC 12, UD 2, CNP 1
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.op
			require.Equal(t, tc.value, uint8(op), "opcode value (IBA Table 38)")
			in, ok := op.Lookup()
			require.True(t, ok)
			require.NotNil(t, in)
			assert.True(t, op.Known())
			assert.Equal(t, tc.name, in.Name)
			assert.Equal(t, tc.name, op.String())
			assert.Equal(t, tc.headerLen, in.HeaderLen)
			assert.Equal(t, tc.headerLen, op.HeaderLen())
			assert.Equal(t, in.Mask, op.Mask())
			assert.Equal(t, tc.transport, op.Transport())

			// Extension headers: exactly the expected ones, at the
			// expected offsets, contiguous from the end of the BTH.
			want := map[bth.HeaderMask]int{}
			end := bth.Size
			for _, e := range tc.exts {
				want[e.mask] = e.off
				assert.Equal(t, end, e.off, "headers are contiguous")
				end = e.off + extSize(e.mask)
			}
			assert.Equal(t, tc.headerLen, end, "header length = sum of the header sizes")
			for _, m := range allExtMasks {
				off, has := in.Offset(m)
				wantOff, wantHas := want[m]
				assert.Equal(t, wantHas, has, "mask %#x present", uint32(m))
				assert.Equal(t, wantHas, in.Mask.Has(m), "mask bit %#x", uint32(m))
				assert.Equal(t, wantOff, off, "offset of %#x", uint32(m))
			}
			_, has := in.Offset(bth.MaskPayload) // not an extension header
			assert.False(t, has)

			// Position: exactly one of First/Middle/Last/Only.
			assert.Equal(t, tc.pos == first, op.IsFirst(), "IsFirst")
			assert.Equal(t, tc.pos == middle, op.IsMiddle(), "IsMiddle")
			assert.Equal(t, tc.pos == last, op.IsLast(), "IsLast")
			assert.Equal(t, tc.pos == only, op.IsOnly(), "IsOnly")
			assert.Equal(t, tc.pos == first || tc.pos == only, in.Mask.Has(bth.MaskFirst))
			assert.Equal(t, tc.pos == last || tc.pos == only, in.Mask.Has(bth.MaskLast))

			// Role and payload.
			if tc.transport != bth.TransportCNP {
				assert.Equal(t, tc.request, op.IsRequest(), "IsRequest")
				assert.Equal(t, !tc.request, op.IsResponse(), "IsResponse")
			} else {
				assert.False(t, op.IsRequest())
				assert.False(t, op.IsResponse())
				assert.True(t, in.Mask.Has(bth.MaskCNP))
			}
			assert.Equal(t, tc.payload, op.HasPayload(), "HasPayload")
			assert.Equal(t, tc.payload, in.Mask.Has(bth.MaskPayload))
		})
	}
}

// TestOpcodeSemanticBits checks the family bits of each opcode against its
// name, and that exactly the SEND and WRITE-with-immediate opcodes consume a
// receive WQE (IBA 9.7.3, rxe RXE_RWR_MASK).
func TestOpcodeSemanticBits(t *testing.T) {
	families := []struct {
		mask bth.HeaderMask
		has  func(name string) bool
	}{
		{bth.MaskSend, func(n string) bool { return contains(n, "_SEND_") }},
		{bth.MaskWrite, func(n string) bool { return contains(n, "_RDMA_WRITE_") }},
		{bth.MaskRead, func(n string) bool { return contains(n, "_RDMA_READ_") }},
		{bth.MaskAtomic, func(n string) bool {
			return contains(n, "COMPARE_SWAP") || contains(n, "FETCH_ADD") || contains(n, "ATOMIC_ACK")
		}},
		{bth.MaskFlush, func(n string) bool { return contains(n, "FLUSH") }},
		{bth.MaskAtomicWrite, func(n string) bool { return contains(n, "ATOMIC_WRITE") }},
		{bth.MaskCNP, func(n string) bool { return n == "CNP" }},
		{bth.MaskRecvWR, func(n string) bool {
			return contains(n, "_SEND_") || contains(n, "WRITE_ONLY_WITH_IMM") || contains(n, "WRITE_LAST_WITH_IMM")
		}},
	}
	for _, tc := range opcodeCases() {
		m := tc.op.Mask()
		for _, f := range families {
			assert.Equal(t, f.has(tc.name), m.Has(f.mask), "%s: mask %#x", tc.name, uint32(f.mask))
		}
		// Only immediate opcodes carry ImmDt, only invalidate ones IETH.
		assert.Equal(t, contains(tc.name, "WITH_IMMEDIATE"), m.Has(bth.MaskImmDt), tc.name)
		assert.Equal(t, contains(tc.name, "WITH_INVALIDATE"), m.Has(bth.MaskIETH), tc.name)
	}
}

func TestOpcodeUnknown(t *testing.T) {
	known := map[bth.Opcode]bool{}
	for _, tc := range opcodeCases() {
		known[tc.op] = true
	}
	n := 0
	for v := range 256 {
		op := bth.Opcode(v)
		if known[op] {
			continue
		}
		n++
		in, ok := op.Lookup()
		assert.False(t, ok, "%#02x", v)
		require.NotNil(t, in, "Lookup never returns nil")
		assert.Empty(t, in.Name)
		assert.False(t, op.Known(), "%#02x", v)
		assert.Zero(t, op.HeaderLen(), "%#02x", v)
		assert.Zero(t, op.Mask(), "%#02x", v)
		assert.Equal(t, fmt.Sprintf("Opcode(0x%02x)", v), op.String())
		assert.False(t, op.IsFirst() || op.IsMiddle() || op.IsLast() || op.IsOnly())
		assert.False(t, op.IsRequest() || op.IsResponse() || op.HasPayload())
	}
	assert.Equal(t, 256-40, n)
	// The native-IB CNP value is not a RoCEv2 opcode.
	assert.False(t, bth.Opcode(0x80).Known())
}

func TestOpcodes(t *testing.T) {
	var want []bth.Opcode
	for v := range 256 {
		if bth.Opcode(v).Known() {
			want = append(want, bth.Opcode(v))
		}
	}
	assert.Equal(t, want, bth.Opcodes())
	assert.Len(t, want, 40)
}

func TestTransportString(t *testing.T) {
	tests := []struct {
		tr   bth.Transport
		want string
	}{
		{bth.TransportRC, "RC"}, {bth.TransportUC, "UC"}, {bth.TransportRD, "RD"},
		{bth.TransportUD, "UD"}, {bth.TransportCNP, "CNP"}, {bth.TransportXRC, "XRC"},
		{6, "Transport(6)"}, {7, "Transport(7)"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, tc.tr.String())
	}
	assert.Equal(t, bth.TransportXRC, bth.Opcode(0xa0).Transport())
	assert.Equal(t, bth.TransportRD, bth.Opcode(0x40).Transport())
}

func TestHeaderMaskHasAny(t *testing.T) {
	m := bth.MaskRETH | bth.MaskImmDt
	assert.True(t, m.Has(bth.MaskRETH))
	assert.True(t, m.Has(bth.MaskRETH|bth.MaskImmDt))
	assert.False(t, m.Has(bth.MaskRETH|bth.MaskAETH))
	assert.True(t, m.Any(bth.MaskRETH|bth.MaskAETH))
	assert.False(t, m.Any(bth.MaskAETH|bth.MaskDETH))
	assert.True(t, bth.MaskOnly.Has(bth.MaskFirst))
	assert.True(t, bth.MaskOnly.Has(bth.MaskLast))
}

func extSize(m bth.HeaderMask) int {
	switch m {
	case bth.MaskDETH:
		return dethLen
	case bth.MaskFETH:
		return fethLen
	case bth.MaskRETH:
		return rethLen
	case bth.MaskAtomicETH:
		return atomLen
	case bth.MaskAETH:
		return aethLen
	case bth.MaskAtomicAckETH:
		return aackLen
	case bth.MaskImmDt:
		return immLen
	case bth.MaskIETH:
		return iethLen
	case bth.MaskCNPPad:
		return cnpLen
	}
	panic(fmt.Sprintf("not an extension header mask: %#x", uint32(m)))
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
