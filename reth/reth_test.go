package reth_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/reth"
)

// rxeRETH is the RETH of the first RDMA WRITE FIRST of
// testdata/pcaps/write_bw_s65536.pcap (frame 20; tshark: VA
// 0x00007f8e3b588000, R_Key 0x000006ac, DMA length 65536).
var rxeRETH = []byte{
	0x00, 0x00, 0x7f, 0x8e, 0x3b, 0x58, 0x80, 0x00,
	0x00, 0x00, 0x06, 0xac,
	0x00, 0x01, 0x00, 0x00,
}

func TestParse(t *testing.T) {
	for n := range reth.Size {
		h, err := reth.Parse(rxeRETH[:n])
		assert.ErrorIs(t, err, reth.ErrTruncated, "len %d", n)
		assert.Nil(t, h)
	}
	h, err := reth.Parse(append(bytes.Clone(rxeRETH), 0xaa, 0xbb))
	require.NoError(t, err)
	assert.Len(t, h, reth.Size)
	assert.Equal(t, reth.Size, cap(h))
	assert.Equal(t, reth.Fields{VA: 0x00007f8e3b588000, RKey: 0x6ac, DMALength: 65536}, h.Fields())
}

func TestSetters(t *testing.T) {
	tests := []struct {
		name     string
		set      func(reth.Header)
		want     reth.Fields
		from, to int // bytes the setter owns
	}{
		{"VA", func(h reth.Header) { h.SetVA(0x0102030405060708) },
			reth.Fields{VA: 0x0102030405060708, RKey: 0x6ac, DMALength: 65536}, 0, 8},
		{"RKey", func(h reth.Header) { h.SetRKey(0xdeadbeef) },
			reth.Fields{VA: 0x00007f8e3b588000, RKey: 0xdeadbeef, DMALength: 65536}, 8, 12},
		{"DMALength", func(h reth.Header) { h.SetDMALength(0xffffffff) },
			reth.Fields{VA: 0x00007f8e3b588000, RKey: 0x6ac, DMALength: 0xffffffff}, 12, 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(rxeRETH)
			h, err := reth.Parse(b)
			require.NoError(t, err)
			tc.set(h)
			assert.Equal(t, tc.want, h.Fields())
			assert.Equal(t, rxeRETH[:tc.from], b[:tc.from])
			assert.Equal(t, rxeRETH[tc.to:], b[tc.to:])
		})
	}
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 10_000 {
		b := make([]byte, reth.Size)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		h, err := reth.Parse(b)
		require.NoError(t, err)
		f := h.Fields()
		out := make(reth.Header, reth.Size)
		out.Encode(&f)
		require.Equal(t, b, []byte(out))
		require.Equal(t, f, out.Fields())
	}
	assert.EqualValues(t, 1<<31, reth.MaxDMALength)
}

func FuzzParse(f *testing.F) {
	f.Add(rxeRETH)
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := reth.Parse(b)
		if (err != nil) != (len(b) < reth.Size) {
			t.Fatalf("Parse(len %d): %v", len(b), err)
		}
		if err != nil {
			return
		}
		f := h.Fields()
		out := make(reth.Header, reth.Size)
		out.Encode(&f)
		if !bytes.Equal(out, b[:reth.Size]) || out.Fields() != f {
			t.Fatalf("round trip: %x -> %+v -> %x", b[:reth.Size], f, []byte(out))
		}
	})
}
