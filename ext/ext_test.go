package ext_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/ext"
)

// Extension headers captured from rdma_rxe (testdata/pcaps, values as
// tshark 4.0 decodes them).
var (
	// rc_imm.pcap frame 10, RDMA WRITE ONLY WITH IMMEDIATE: immdt 0x11223344.
	rxeImmDt = []byte{0x11, 0x22, 0x33, 0x44}
	// ud_pingpong.pcap frame 12: Q_Key 0x11111111, source QP 0x000013.
	rxeDETH = []byte{0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x13}
	// atomic_fadd.pcap frame 20, FETCH ADD: VA 0x5607f205f000, R_Key
	// 0xb63, add 1, compare 0.
	rxeAtomicETH = []byte{
		0x00, 0x00, 0x56, 0x07, 0xf2, 0x05, 0xf0, 0x00,
		0x00, 0x00, 0x0b, 0x63,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	}
	// atomic_fadd.pcap frame 25, ATOMIC ACKNOWLEDGE: original data.
	rxeAtomicAckETH = []byte{0xf2, 0x9f, 0x18, 0x40, 0x78, 0x45, 0x5b, 0x66}
)

// parsers lists every header of the package with its size and parser.
var parsers = []struct {
	name  string
	size  int
	parse func([]byte) (int, error) // the view length, see checkView
}{
	{"ImmDt", ext.ImmDtSize, func(b []byte) (int, error) { h, err := ext.ParseImmDt(b); return checkView(h, err) }},
	{"IETH", ext.IETHSize, func(b []byte) (int, error) { h, err := ext.ParseIETH(b); return checkView(h, err) }},
	{"DETH", ext.DETHSize, func(b []byte) (int, error) { h, err := ext.ParseDETH(b); return checkView(h, err) }},
	{"AtomicETH", ext.AtomicETHSize, func(b []byte) (int, error) { h, err := ext.ParseAtomicETH(b); return checkView(h, err) }},
	{"AtomicAckETH", ext.AtomicAckETHSize, func(b []byte) (int, error) { h, err := ext.ParseAtomicAckETH(b); return checkView(h, err) }},
	{"FETH", ext.FETHSize, func(b []byte) (int, error) { h, err := ext.ParseFETH(b); return checkView(h, err) }},
}

// checkView returns the view's length, or -1 when its capacity lets
// accessors reach past it.
func checkView[H ~[]byte](h H, err error) (int, error) {
	if err != nil {
		if h != nil {
			return -2, err
		}
		return 0, err
	}
	if cap(h) != len(h) {
		return -1, nil
	}
	return len(h), nil
}

func TestParse(t *testing.T) {
	for _, p := range parsers {
		t.Run(p.name, func(t *testing.T) {
			b := make([]byte, p.size+3)
			for n := range p.size {
				l, err := p.parse(b[:n])
				assert.ErrorIs(t, err, ext.ErrTruncated, "len %d", n)
				assert.Zero(t, l, "nil view on error")
			}
			l, err := p.parse(b)
			require.NoError(t, err)
			assert.Equal(t, p.size, l, "view of exactly the header, three-index slice")
		})
	}
}

func TestImmDt(t *testing.T) {
	h, err := ext.ParseImmDt(rxeImmDt)
	require.NoError(t, err)
	assert.Equal(t, uint32(0x11223344), h.Imm())
	b := make([]byte, 4)
	ext.ImmDt(b).SetImm(0x0badf00d)
	assert.Equal(t, []byte{0x0b, 0xad, 0xf0, 0x0d}, b)
}

func TestIETH(t *testing.T) {
	b := make([]byte, 4)
	h, err := ext.ParseIETH(b)
	require.NoError(t, err)
	h.SetRKey(0x00001234)
	assert.Equal(t, uint32(0x1234), h.RKey())
	assert.Equal(t, []byte{0, 0, 0x12, 0x34}, b)
}

func TestDETH(t *testing.T) {
	h, err := ext.ParseDETH(rxeDETH)
	require.NoError(t, err)
	assert.Equal(t, ext.DETHFields{QKey: 0x11111111, SrcQP: 0x13}, h.Fields())

	// SetSrcQP masks to 24 bits and keeps the reserved byte.
	b := bytes.Clone(rxeDETH)
	b[4] = 0xa5
	h, _ = ext.ParseDETH(b)
	h.SetSrcQP(0xff123456)
	assert.Equal(t, ext.DETHFields{QKey: 0x11111111, Reserved: 0xa5, SrcQP: 0x123456}, h.Fields())
	h.SetQKey(0x80010000)
	assert.Equal(t, []byte{0x80, 0x01, 0x00, 0x00, 0xa5, 0x12, 0x34, 0x56}, b)

	out := make(ext.DETH, ext.DETHSize)
	out.Encode(&ext.DETHFields{QKey: 1, Reserved: 2, SrcQP: 0x7f000003})
	assert.Equal(t, ext.DETHFields{QKey: 1, Reserved: 2, SrcQP: 3}, out.Fields())
}

func TestAtomicETH(t *testing.T) {
	h, err := ext.ParseAtomicETH(rxeAtomicETH)
	require.NoError(t, err)
	f := h.Fields()
	assert.Equal(t, ext.AtomicETHFields{VA: 0x5607f205f000, RKey: 0xb63, SwapData: 1, CompareData: 0}, f)
	out := make(ext.AtomicETH, ext.AtomicETHSize)
	out.Encode(&f)
	assert.Equal(t, rxeAtomicETH, []byte(out))
}

func TestAtomicAckETH(t *testing.T) {
	h, err := ext.ParseAtomicAckETH(rxeAtomicAckETH)
	require.NoError(t, err)
	assert.Equal(t, uint64(0xf29f184078455b66), h.OrigRemData())
	b := make([]byte, 8)
	ext.AtomicAckETH(b).SetOrigRemData(0x0102030405060708)
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, b)
}

// TestFETH checks the FETH layout of IBA 1.5 A19.4.1 / rxe_hdr.h
// (FETH_PLT_MASK 0x0f, FETH_SEL_MASK 0x30).
func TestFETH(t *testing.T) {
	tests := []struct {
		b    []byte
		want ext.FETHFields
	}{
		{[]byte{0, 0, 0, 0x01}, ext.FETHFields{PlacementType: 1}},                 // global visibility
		{[]byte{0, 0, 0, 0x02}, ext.FETHFields{PlacementType: 2}},                 // persistence
		{[]byte{0, 0, 0, 0x13}, ext.FETHFields{Selectivity: 1, PlacementType: 3}}, // MR-wide
		{[]byte{0, 0, 0, 0x3f}, ext.FETHFields{Selectivity: 3, PlacementType: 0xf}},
		{[]byte{0, 0, 0, 0xc0}, ext.FETHFields{Reserved: 3}},
		{[]byte{0xff, 0xff, 0xff, 0xc0}, ext.FETHFields{Reserved: 1<<26 - 1}},
	}
	for _, tc := range tests {
		h, err := ext.ParseFETH(tc.b)
		require.NoError(t, err)
		assert.Equal(t, tc.want, h.Fields(), "% x", tc.b)
		out := make(ext.FETH, ext.FETHSize)
		out.Encode(&tc.want)
		assert.Equal(t, tc.b, []byte(out))
	}
	// Encode masks each field to its width.
	out := make(ext.FETH, ext.FETHSize)
	out.Encode(&ext.FETHFields{Reserved: 0xffffffff, Selectivity: 0xff, PlacementType: 0xff})
	assert.Equal(t, []byte{0xff, 0xff, 0xff, 0xff}, []byte(out))
	out.Encode(&ext.FETHFields{Selectivity: 0xfc, PlacementType: 0xf0})
	assert.Equal(t, []byte{0, 0, 0, 0}, []byte(out))
}

// TestRoundTrip checks Encode(Fields()) == bytes for random bytes of every
// header with a Fields form, and Set/get for the ones without.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	rnd := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for range 10_000 {
		b := rnd(ext.DETHSize)
		d, _ := ext.ParseDETH(b)
		df := d.Fields()
		od := make(ext.DETH, ext.DETHSize)
		od.Encode(&df)
		require.Equal(t, b, []byte(od))

		b = rnd(ext.AtomicETHSize)
		a, _ := ext.ParseAtomicETH(b)
		af := a.Fields()
		oa := make(ext.AtomicETH, ext.AtomicETHSize)
		oa.Encode(&af)
		require.Equal(t, b, []byte(oa))

		b = rnd(ext.FETHSize)
		f, _ := ext.ParseFETH(b)
		ff := f.Fields()
		of := make(ext.FETH, ext.FETHSize)
		of.Encode(&ff)
		require.Equal(t, b, []byte(of))

		b = rnd(ext.ImmDtSize)
		i, _ := ext.ParseImmDt(b)
		oi := make(ext.ImmDt, ext.ImmDtSize)
		oi.SetImm(i.Imm())
		require.Equal(t, b, []byte(oi))

		b = rnd(ext.IETHSize)
		ie, _ := ext.ParseIETH(b)
		oie := make(ext.IETH, ext.IETHSize)
		oie.SetRKey(ie.RKey())
		require.Equal(t, b, []byte(oie))

		b = rnd(ext.AtomicAckETHSize)
		aa, _ := ext.ParseAtomicAckETH(b)
		oaa := make(ext.AtomicAckETH, ext.AtomicAckETHSize)
		oaa.SetOrigRemData(aa.OrigRemData())
		require.Equal(t, b, []byte(oaa))
	}
}

// FuzzParse parses the input as every extension header: Parse fails
// exactly on short input and the decoded form re-encodes to the same bytes.
func FuzzParse(f *testing.F) {
	for _, s := range [][]byte{rxeImmDt, rxeDETH, rxeAtomicETH, rxeAtomicAckETH, {0, 0, 0, 0x13}, {1}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range parsers {
			l, err := p.parse(b)
			if (err != nil) != (len(b) < p.size) || (err == nil && l != p.size) {
				t.Fatalf("%s: Parse(len %d) = %d, %v", p.name, len(b), l, err)
			}
		}
		if d, err := ext.ParseDETH(b); err == nil {
			f := d.Fields()
			o := make(ext.DETH, ext.DETHSize)
			o.Encode(&f)
			if !bytes.Equal(o, d) {
				t.Fatalf("DETH round trip %x -> %x", []byte(d), []byte(o))
			}
		}
		if a, err := ext.ParseAtomicETH(b); err == nil {
			f := a.Fields()
			o := make(ext.AtomicETH, ext.AtomicETHSize)
			o.Encode(&f)
			if !bytes.Equal(o, a) {
				t.Fatalf("AtomicETH round trip %x -> %x", []byte(a), []byte(o))
			}
		}
		if fe, err := ext.ParseFETH(b); err == nil {
			f := fe.Fields()
			o := make(ext.FETH, ext.FETHSize)
			o.Encode(&f)
			if !bytes.Equal(o, fe) {
				t.Fatalf("FETH round trip %x -> %x", []byte(fe), []byte(o))
			}
		}
		if i, err := ext.ParseImmDt(b); err == nil {
			o := make(ext.ImmDt, ext.ImmDtSize)
			o.SetImm(i.Imm())
			if !bytes.Equal(o, i) {
				t.Fatal("ImmDt round trip")
			}
		}
		if ie, err := ext.ParseIETH(b); err == nil {
			o := make(ext.IETH, ext.IETHSize)
			o.SetRKey(ie.RKey())
			if !bytes.Equal(o, ie) {
				t.Fatal("IETH round trip")
			}
		}
		if aa, err := ext.ParseAtomicAckETH(b); err == nil {
			o := make(ext.AtomicAckETH, ext.AtomicAckETHSize)
			o.SetOrigRemData(aa.OrigRemData())
			if !bytes.Equal(o, aa) {
				t.Fatal("AtomicAckETH round trip")
			}
		}
	})
}
