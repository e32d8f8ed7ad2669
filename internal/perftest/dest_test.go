package perftest

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The client's key message of pcaps/write_bw_s8.pcap (doc/oob.md §3.2).
const oobKeyExample = "0000:0001:00001d:9e7bf9:00000eea:0000559840165000:" +
	"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:03:00000000:\x00"

func TestDestGolden(t *testing.T) {
	d, err := ParseDest([]byte(oobKeyExample))
	require.NoError(t, err)
	assert.Equal(t, Dest{
		LID: 0, OutReads: 1, QPN: 0x1d, PSN: 0x9e7bf9, RKey: 0xeea, VAddr: 0x0000559840165000,
		GID: GIDFromAddr(netip.MustParseAddr("10.77.0.3")),
	}, d)
	assert.Equal(t, netip.MustParseAddr("10.77.0.3"), d.Addr())
	b, err := d.Marshal()
	require.NoError(t, err)
	assert.Equal(t, oobKeyExample, string(b))
	assert.Len(t, b, DestSize)
}

func TestDestRoundTrip(t *testing.T) {
	d := Dest{LID: 0xffff, OutReads: 0x80, QPN: 0xffffff, PSN: 0xabcdef, RKey: 0xdeadbeef,
		VAddr: 0xffffffffffffffff, GID: [16]byte{0xfe, 0x80, 15: 0x01}, SRQN: 0x12345678}
	b, err := d.Marshal()
	require.NoError(t, err)
	got, err := ParseDest(b)
	require.NoError(t, err)
	assert.Equal(t, d, got)
}

func TestDestMarshalRange(t *testing.T) {
	_, err := (&Dest{QPN: 1 << 24}).Marshal()
	assert.Error(t, err)
	_, err = (&Dest{PSN: 1 << 24}).Marshal()
	assert.Error(t, err)
}

func TestParseDestGarbled(t *testing.T) {
	ok := []byte(oobKeyExample)
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), ok...)) }
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"short", ok[:60]},
		{"long", append(append([]byte(nil), ok...), 0)},
		{"no NUL", mod(func(b []byte) []byte { b[107] = ':'; return b })},
		{"not hex", mod(func(b []byte) []byte { b[5] = 'x'; return b })},
		{"missing colon", mod(func(b []byte) []byte { b[4] = '0'; return b })},
		{"sign", mod(func(b []byte) []byte { b[0] = '+'; return b })},
		{"IB form", append([]byte("0000:0001:00001d:9e7bf9:00000eea:0000559840165000:00000000"), 0)},
		{"pingpong message", append([]byte("0000:00001a:d48084:00000000000000000000ffff0a4d0003"), 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDest(tc.in)
			assert.ErrorIs(t, err, ErrGarbled)
		})
	}
}

func TestGIDAddr(t *testing.T) {
	v4 := GIDFromAddr(netip.MustParseAddr("10.77.0.2"))
	a, err := GIDAddr(v4, "-x")
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("10.77.0.2"), a)

	tests := []struct {
		name, gid, want string
	}{
		{"zero", "::", "run without -x"},
		{"link-local (index 0)", "fe80::5054:ff:fe77:2", "link-local GID (rxe GID index 0)"},
		{"global IPv6", "fd00::2", "IPv6 GID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := GIDAddr(netip.MustParseAddr(tc.gid).As16(), "-x")
			assert.ErrorIs(t, err, ErrGID)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestMessages(t *testing.T) {
	assert.Equal(t, []byte("6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), marshalVersion(Version))
	v, f, err := parseVersion(marshalVersion("6.06"))
	require.NoError(t, err)
	assert.Equal(t, "6.06", v)
	assert.InDelta(t, 6.06, f, 1e-9)
	_, _, err = parseVersion(marshalVersion("5.60"))
	assert.ErrorContains(t, err, "older than")
	_, _, err = parseVersion([]byte("GET / HTTP/1.1\r\n"))
	assert.ErrorIs(t, err, ErrGarbled)

	assert.Equal(t, []byte("3\x00"), marshalMTU(3))
	for _, bad := range []string{"6\x00", "0\x00", "33", "3 "} {
		_, err := parseMTU([]byte(bad))
		assert.ErrorIs(t, err, ErrGarbled, "%q", bad)
	}

	// The client's results of pcaps/write_bw_s8.pcap: size 8, 5 iterations.
	r := Report{Size: 8, Iters: 5, BWPeak: 1.25, BWAvg: 1, MsgRate: 0.002}
	f5 := r.fields()
	assert.Equal(t, "0000000000000008", hexs(f5[0][:]))
	assert.Equal(t, "0000000000000005", hexs(f5[1][:]))
	assert.Equal(t, "3ff4000000000000", hexs(f5[2][:]))
	var back Report
	for i := range f5 {
		back.setField(i, f5[i][:])
	}
	assert.Equal(t, r, back)
}

func hexs(b []byte) string {
	const h = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, h[c>>4], h[c&15])
	}
	return string(out)
}
