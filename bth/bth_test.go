package bth_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
)

// rxeWriteFirst is the BTH of the first RC RDMA WRITE FIRST of
// testdata/pcaps/write_bw_s65536.pcap (frame 20; tshark: opcode 6,
// P_Key 65535, DestQP 0x000015, PSN 3955192).
var rxeWriteFirst = []byte{0x06, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x15, 0x00, 0x3c, 0x59, 0xf8}

func TestParse(t *testing.T) {
	for n := range bth.Size {
		h, err := bth.Parse(make([]byte, n))
		assert.ErrorIs(t, err, bth.ErrTruncated, "len %d", n)
		assert.Nil(t, h)
	}
	b := append(bytes.Clone(rxeWriteFirst), 1, 2, 3)
	h, err := bth.Parse(b)
	require.NoError(t, err)
	assert.Len(t, h, bth.Size)
	assert.Equal(t, bth.Size, cap(h), "three-index slice: no access past the header")
	assert.Equal(t, bth.RCRDMAWriteFirst, h.Opcode())
	assert.Equal(t, uint16(0xffff), h.PKey())
	assert.Equal(t, bth.QPN(0x15), h.DestQP())
	assert.Equal(t, bth.PSN(3955192), h.PSN())
	assert.False(t, h.AckReq())
	assert.Zero(t, h.PadCount())
	assert.Zero(t, h.TVer())
}

func TestFieldsDecode(t *testing.T) {
	// Every bit set, then every bit clear.
	h := bth.Header(bytes.Repeat([]byte{0xff}, bth.Size))
	assert.Equal(t, bth.Fields{
		Opcode: 0xff, SolicitedEvent: true, MigReq: true, PadCount: 3, TVer: 0xf,
		PKey: 0xffff, FECN: true, BECN: true, Resv6: 0x3f, DestQP: 0xffffff,
		AckReq: true, Resv7: 0x7f, PSN: 0xffffff,
	}, h.Fields())
	assert.Equal(t, bth.Fields{}, bth.Header(make([]byte, bth.Size)).Fields())
}

// TestSetters checks that each setter changes only its own bits, keeps the
// reserved bits and masks the value to the field width.
func TestSetters(t *testing.T) {
	tests := []struct {
		name string
		set  func(h bth.Header)
		// bits the setter may change: byte index -> mask.
		owns map[int]byte
		get  func(h bth.Header) any
		want any
	}{
		{"Opcode", func(h bth.Header) { h.SetOpcode(0x0b) }, map[int]byte{0: 0xff},
			func(h bth.Header) any { return h.Opcode() }, bth.Opcode(0x0b)},
		{"SE on", func(h bth.Header) { h.SetSolicitedEvent(true) }, map[int]byte{1: 0x80},
			func(h bth.Header) any { return h.SolicitedEvent() }, true},
		{"SE off", func(h bth.Header) { h.SetSolicitedEvent(false) }, map[int]byte{1: 0x80},
			func(h bth.Header) any { return h.SolicitedEvent() }, false},
		{"MigReq on", func(h bth.Header) { h.SetMigReq(true) }, map[int]byte{1: 0x40},
			func(h bth.Header) any { return h.MigReq() }, true},
		{"MigReq off", func(h bth.Header) { h.SetMigReq(false) }, map[int]byte{1: 0x40},
			func(h bth.Header) any { return h.MigReq() }, false},
		{"PadCount", func(h bth.Header) { h.SetPadCount(2) }, map[int]byte{1: 0x30},
			func(h bth.Header) any { return h.PadCount() }, 2},
		{"PadCount masked", func(h bth.Header) { h.SetPadCount(7) }, map[int]byte{1: 0x30},
			func(h bth.Header) any { return h.PadCount() }, 3},
		{"PadCount 4 masks to 0", func(h bth.Header) { h.SetPadCount(4) }, map[int]byte{1: 0x30},
			func(h bth.Header) any { return h.PadCount() }, 0},
		{"TVer masked", func(h bth.Header) { h.SetTVer(0xf3) }, map[int]byte{1: 0x0f},
			func(h bth.Header) any { return h.TVer() }, uint8(3)},
		{"PKey", func(h bth.Header) { h.SetPKey(0x8001) }, map[int]byte{2: 0xff, 3: 0xff},
			func(h bth.Header) any { return h.PKey() }, uint16(0x8001)},
		{"FECN on", func(h bth.Header) { h.SetFECN(true) }, map[int]byte{4: 0x80},
			func(h bth.Header) any { return h.FECN() }, true},
		{"FECN off", func(h bth.Header) { h.SetFECN(false) }, map[int]byte{4: 0x80},
			func(h bth.Header) any { return h.FECN() }, false},
		{"BECN on", func(h bth.Header) { h.SetBECN(true) }, map[int]byte{4: 0x40},
			func(h bth.Header) any { return h.BECN() }, true},
		{"BECN off", func(h bth.Header) { h.SetBECN(false) }, map[int]byte{4: 0x40},
			func(h bth.Header) any { return h.BECN() }, false},
		{"DestQP", func(h bth.Header) { h.SetDestQP(0x123456) }, map[int]byte{5: 0xff, 6: 0xff, 7: 0xff},
			func(h bth.Header) any { return h.DestQP() }, bth.QPN(0x123456)},
		{"DestQP masked", func(h bth.Header) { h.SetDestQP(0xab123456) }, map[int]byte{5: 0xff, 6: 0xff, 7: 0xff},
			func(h bth.Header) any { return h.DestQP() }, bth.QPN(0x123456)},
		{"AckReq on", func(h bth.Header) { h.SetAckReq(true) }, map[int]byte{8: 0x80},
			func(h bth.Header) any { return h.AckReq() }, true},
		{"AckReq off", func(h bth.Header) { h.SetAckReq(false) }, map[int]byte{8: 0x80},
			func(h bth.Header) any { return h.AckReq() }, false},
		{"PSN", func(h bth.Header) { h.SetPSN(0xabcdef) }, map[int]byte{9: 0xff, 10: 0xff, 11: 0xff},
			func(h bth.Header) any { return h.PSN() }, bth.PSN(0xabcdef)},
		{"PSN masked", func(h bth.Header) { h.SetPSN(0xff000001) }, map[int]byte{9: 0xff, 10: 0xff, 11: 0xff},
			func(h bth.Header) any { return h.PSN() }, bth.PSN(1)},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 200 {
				before := make([]byte, bth.Size)
				for i := range before {
					before[i] = byte(r.Uint32())
				}
				h := bth.Header(bytes.Clone(before))
				tc.set(h)
				assert.Equal(t, tc.want, tc.get(h))
				for i := range bth.Size {
					keep := ^tc.owns[i]
					require.Equal(t, before[i]&keep, h[i]&keep, "byte %d changed outside the field", i)
				}
			}
		})
	}
}

func randomFields(r *rand.Rand) bth.Fields {
	return bth.Fields{
		Opcode:         bth.Opcode(r.Uint32()),
		SolicitedEvent: r.IntN(2) == 1,
		MigReq:         r.IntN(2) == 1,
		PadCount:       r.IntN(4),
		TVer:           uint8(r.IntN(16)),
		PKey:           uint16(r.Uint32()),
		FECN:           r.IntN(2) == 1,
		BECN:           r.IntN(2) == 1,
		Resv6:          uint8(r.IntN(64)),
		DestQP:         bth.QPN(r.Uint32() & bth.QPNMask),
		AckReq:         r.IntN(2) == 1,
		Resv7:          uint8(r.IntN(128)),
		PSN:            bth.PSN(r.Uint32() & bth.PSNMask),
	}
}

// TestEncodeRoundTrip checks Encode(Fields()) == bytes for random headers
// and Fields(Encode(f)) == f for random in-range fields.
func TestEncodeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100_000 {
		b := make([]byte, bth.Size)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f := bth.Header(b).Fields()
		out := make(bth.Header, bth.Size)
		out.Encode(&f)
		if !bytes.Equal(b, out) {
			t.Fatalf("Encode(Fields(%x)) = %x", b, []byte(out))
		}

		f = randomFields(r)
		for i := range out {
			out[i] = byte(r.Uint32()) // Encode writes every byte
		}
		out.Encode(&f)
		if got := out.Fields(); got != f {
			t.Fatalf("Fields(Encode(%+v)) = %+v", f, got)
		}
	}
}

// TestEncodeMasks checks that out-of-range Fields values are masked to the
// field width instead of spilling into neighbours.
func TestEncodeMasks(t *testing.T) {
	f := bth.Fields{PadCount: 7, TVer: 0xff, Resv6: 0xff, DestQP: 0xff000000, Resv7: 0xff, PSN: 0xff000000}
	h := make(bth.Header, bth.Size)
	h.Encode(&f)
	assert.Equal(t, bth.Fields{PadCount: 3, TVer: 0xf, Resv6: 0x3f, Resv7: 0x7f}, h.Fields())
}
