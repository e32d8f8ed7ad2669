package aeth_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/aeth"
)

// rxeACK is the AETH of an RC ATOMIC ACKNOWLEDGE in
// testdata/pcaps/atomic_fadd.pcap (frame 25; tshark: syndrome 0x1f = ACK
// with credit count 31, MSN 1): rxe always sends credit 0x1F.
var rxeACK = []byte{0x1f, 0x00, 0x00, 0x01}

func TestParse(t *testing.T) {
	for n := range aeth.Size {
		h, err := aeth.Parse(rxeACK[:n])
		assert.ErrorIs(t, err, aeth.ErrTruncated, "len %d", n)
		assert.Nil(t, h)
	}
	h, err := aeth.Parse(append(bytes.Clone(rxeACK), 9))
	require.NoError(t, err)
	assert.Len(t, h, aeth.Size)
	assert.Equal(t, aeth.Size, cap(h))
	assert.Equal(t, aeth.Fields{Syndrome: aeth.ACKUnlimited, MSN: 1}, h.Fields())
	assert.True(t, h.Syndrome().IsACK())
}

func TestSetters(t *testing.T) {
	b := bytes.Clone(rxeACK)
	h, _ := aeth.Parse(b)
	h.SetMSN(0xff123456) // masked to 24 bits, syndrome kept
	assert.Equal(t, aeth.Fields{Syndrome: aeth.ACKUnlimited, MSN: 0x123456}, h.Fields())
	h.SetSyndrome(aeth.NAKRemoteAccessError) // MSN kept
	assert.Equal(t, aeth.Fields{Syndrome: aeth.NAKRemoteAccessError, MSN: 0x123456}, h.Fields())
	assert.Equal(t, []byte{0x62, 0x12, 0x34, 0x56}, b)
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 10_000 {
		b := make([]byte, aeth.Size)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		h, err := aeth.Parse(b)
		require.NoError(t, err)
		f := h.Fields()
		out := make(aeth.Header, aeth.Size)
		out.Encode(&f)
		require.Equal(t, b, []byte(out))
	}
	// Encode masks an out-of-range MSN.
	out := make(aeth.Header, aeth.Size)
	out.Encode(&aeth.Fields{Syndrome: aeth.RNR(3), MSN: 0x01000007})
	assert.Equal(t, aeth.Fields{Syndrome: 0x23, MSN: 7}, out.Fields())
}

// TestSyndrome checks kind, value and String of the syndromes IBA 9.7.5.1
// Table 46 defines, and of the reserved ones.
func TestSyndrome(t *testing.T) {
	tests := []struct {
		s     aeth.Syndrome
		kind  aeth.Kind
		value uint8
		resv  uint8
		str   string
	}{
		{0x00, aeth.KindACK, 0, 0, "ACK(credit=0)"},
		{0x01, aeth.KindACK, 1, 0, "ACK(credit=1)"},
		{aeth.ACKUnlimited, aeth.KindACK, 31, 0, "ACK(credit=31)"},
		{aeth.RNRBase, aeth.KindRNR, 0, 0, "RNR-NAK(timer=0)"},
		{0x21, aeth.KindRNR, 1, 0, "RNR-NAK(timer=1)"},
		{0x39, aeth.KindRNR, 25, 0, "RNR-NAK(timer=25)"},
		{0x3f, aeth.KindRNR, 31, 0, "RNR-NAK(timer=31)"},
		{0x40, aeth.KindReserved, 0, 0, "Syndrome(0x40, reserved type)"},
		{0x5f, aeth.KindReserved, 31, 0, "Syndrome(0x5f, reserved type)"},
		{aeth.NAKPSNSequenceError, aeth.KindNAK, 0, 0, "NAK(PSN sequence error)"},
		{aeth.NAKInvalidRequest, aeth.KindNAK, 1, 0, "NAK(invalid request)"},
		{aeth.NAKRemoteAccessError, aeth.KindNAK, 2, 0, "NAK(remote access error)"},
		{aeth.NAKRemoteOperationalError, aeth.KindNAK, 3, 0, "NAK(remote operational error)"},
		{aeth.NAKInvalidRDRequest, aeth.KindNAK, 4, 0, "NAK(invalid RD request)"},
		{0x65, aeth.KindNAK, 5, 0, "NAK(reserved code 5)"},
		{0x7f, aeth.KindNAK, 31, 0, "NAK(reserved code 31)"},
		{0x80, aeth.KindACK, 0, 1, "Syndrome(0x80, reserved bit set)"},
		{0xe0, aeth.KindNAK, 0, 1, "Syndrome(0xe0, reserved bit set)"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%#02x", uint8(tc.s)), func(t *testing.T) {
			assert.Equal(t, tc.kind, tc.s.Kind())
			assert.Equal(t, tc.value, tc.s.Value())
			assert.Equal(t, tc.resv, tc.s.Reserved())
			assert.Equal(t, tc.str, tc.s.String())
			ok := tc.resv == 0
			assert.Equal(t, ok && tc.kind == aeth.KindACK, tc.s.IsACK())
			assert.Equal(t, ok && tc.kind == aeth.KindRNR, tc.s.IsRNR())
			assert.Equal(t, ok && tc.kind == aeth.KindNAK, tc.s.IsNAK())
		})
	}
	// Every byte: at most one of IsACK/IsRNR/IsNAK, none with bit 7 set,
	// Kind/Value reassemble the byte.
	for v := range 256 {
		s := aeth.Syndrome(v)
		n := 0
		for _, b := range []bool{s.IsACK(), s.IsRNR(), s.IsNAK()} {
			if b {
				n++
			}
		}
		want := 1
		if v&0x80 != 0 || s.Kind() == aeth.KindReserved {
			want = 0
		}
		assert.Equal(t, want, n, "%#02x", v)
		assert.Equal(t, uint8(v), s.Reserved()<<7|uint8(s.Kind())<<5|s.Value())
		assert.NotEmpty(t, s.String())
	}
	assert.Equal(t, aeth.Syndrome(0x1f), aeth.ACK(0xff), "credit masked to 5 bits")
	assert.Equal(t, uint8(7), aeth.ACK(7).Credit())
	assert.Equal(t, aeth.Syndrome(0x3f), aeth.RNR(0xff), "timer masked to 5 bits")
	assert.Equal(t, uint8(14), aeth.RNR(14).Timer())
}

// TestRNRDelay checks the RNR timer against IBA 9.7.5.2.8 Table 45 (in
// milliseconds), including code 25 = 61.44 ms where rxe's table has 61.41.
func TestRNRDelay(t *testing.T) {
	ms := []float64{
		655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12,
		0.16, 0.24, 0.32, 0.48, 0.64, 0.96, 1.28, 1.92,
		2.56, 3.84, 5.12, 7.68, 10.24, 15.36, 20.48, 30.72,
		40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52,
	}
	require.Len(t, ms, 32)
	for code, want := range ms {
		d := time.Duration(want*1000+0.5) * time.Microsecond
		assert.Equal(t, d, aeth.RNRDelay(uint8(code)), "code %d", code)
		assert.Equal(t, d, aeth.RNRDelay(uint8(code)|0xe0), "code %d masked", code)
		if code > 1 {
			assert.Greater(t, aeth.RNRDelay(uint8(code)), aeth.RNRDelay(uint8(code-1)))
		}
	}
	assert.Equal(t, 61440*time.Microsecond, aeth.RNRDelay(25))
	assert.Equal(t, 655360*time.Microsecond, aeth.RNRDelay(0))
}

func FuzzParse(f *testing.F) {
	f.Add(rxeACK)
	f.Add([]byte{0x62, 0, 0, 9})
	f.Add([]byte{0x20})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := aeth.Parse(b)
		if (err != nil) != (len(b) < aeth.Size) {
			t.Fatalf("Parse(len %d): %v", len(b), err)
		}
		if err != nil {
			return
		}
		f := h.Fields()
		_ = f.Syndrome.String()
		_ = aeth.RNRDelay(f.Syndrome.Timer())
		out := make(aeth.Header, aeth.Size)
		out.Encode(&f)
		if !bytes.Equal(out, b[:aeth.Size]) || out.Fields() != f {
			t.Fatalf("round trip: %x -> %+v -> %x", b[:aeth.Size], f, []byte(out))
		}
	})
}
