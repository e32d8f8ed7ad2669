package rocev2_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// TestRecoverIPv4ID builds packets with random IPv4 IDs (as rxe sends) and
// checks that the ICRC computed with ID 0 plus the recovered ID verifies,
// that the recovered ID is the real one, and that corrupted packets are
// rejected.
func TestRecoverIPv4ID(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := netip.MustParseAddrPort("10.77.0.2:49152")
	dst := netip.MustParseAddrPort("10.77.0.1:4791")
	buf := make([]byte, 5000)
	rejected := 0
	for i := 0; i < 2000; i++ {
		id := uint16(r.Uint32())
		e := rocev2.Encap{Src: src, Dst: dst, ID: id, TOS: uint8(r.Uint32())}
		payload := make([]byte, r.IntN(4097))
		f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCRDMAWriteMiddle, PKey: 0xffff, DestQP: 0x11, PSN: bth.PSN(i)}}
		n, err := e.Build(buf, &f, payload)
		require.NoError(t, err)
		tr := buf[e.HeaderLen():n]
		var ph [48]byte
		ip, udp := rocev2.PseudoHeaders(&ph, src, dst, 0, len(tr))
		got := rocev2.ComputeICRC(ip, udp, tr[:len(tr)-4])
		want := rocev2.ReadICRC(tr[len(tr)-4:])
		rid, ok := rocev2.RecoverIPv4ID(got, want, len(tr))
		require.True(t, ok, "packet %d id %#x", i, id)
		require.Equal(t, id, rid)

		// One corrupted byte in the covered part: rejected unless the
		// difference happens to look like an ID change (2^-16).
		tr[12+r.IntN(len(tr)-16)] ^= byte(1 + r.IntN(255))
		got = rocev2.ComputeICRC(ip, udp, tr[:len(tr)-4])
		if _, ok := rocev2.RecoverIPv4ID(got, want, len(tr)); !ok {
			rejected++
		}
	}
	require.GreaterOrEqual(t, rejected, 1995)
}

// TestRecoverIPv4IDFromGuess: an ICRC computed with a wrong guess of the
// ID (the device tries the link's guess first) still leads to the real ID:
// RecoverIPv4ID returns guess XOR id, by the CRC's linearity.
func TestRecoverIPv4IDFromGuess(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := netip.MustParseAddrPort("10.77.0.2:49152")
	dst := netip.MustParseAddrPort("10.77.0.1:4791")
	buf := make([]byte, 5000)
	for i := 0; i < 500; i++ {
		id, guess := uint16(r.Uint32()), uint16(r.IntN(64))
		e := rocev2.Encap{Src: src, Dst: dst, ID: id}
		f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCRDMAWriteMiddle, PKey: 0xffff, DestQP: 0x11, PSN: bth.PSN(i)}}
		n, err := e.Build(buf, &f, make([]byte, r.IntN(4097)))
		require.NoError(t, err)
		tr := buf[e.HeaderLen():n]
		var ph [48]byte
		ip, udp := rocev2.PseudoHeaders(&ph, src, dst, guess, len(tr))
		got := rocev2.ComputeICRC(ip, udp, tr[:len(tr)-4])
		d, ok := rocev2.RecoverIPv4ID(got, rocev2.ReadICRC(tr[len(tr)-4:]), len(tr))
		require.True(t, ok, "packet %d id %#x guess %d", i, id, guess)
		require.Equal(t, id, guess^d)
	}
}

func BenchmarkRecoverIPv4ID(b *testing.B) {
	src := netip.MustParseAddrPort("10.77.0.2:49152")
	dst := netip.MustParseAddrPort("10.77.0.1:4791")
	e := rocev2.Encap{Src: src, Dst: dst, ID: 0xbeef}
	buf := make([]byte, 5000)
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCRDMAWriteMiddle, PKey: 0xffff, DestQP: 0x11}}
	n, _ := e.Build(buf, &f, make([]byte, 1024))
	tr := buf[e.HeaderLen():n]
	var ph [48]byte
	ip, udp := rocev2.PseudoHeaders(&ph, src, dst, 0, len(tr))
	got := rocev2.ComputeICRC(ip, udp, tr[:len(tr)-4])
	want := rocev2.ReadICRC(tr[len(tr)-4:])
	b.ReportAllocs()
	for b.Loop() {
		rocev2.RecoverIPv4ID(got, want, len(tr))
	}
}
