package rocev2_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// Offsets in a frame built by testFrame: Ethernet, IPv4 (20 bytes), UDP.
const (
	offIP  = 14
	offUDP = offIP + 20
	offBTH = offUDP + 8
)

// testFrame builds an Ethernet/IPv4 RoCEv2 frame of op with n payload bytes.
func testFrame(tb testing.TB, op bth.Opcode, n int) []byte {
	tb.Helper()
	e := rocev2.Encap{
		Ethernet: true,
		Src:      netip.MustParseAddrPort("10.77.0.3:49593"),
		Dst:      netip.MustParseAddrPort("10.77.0.2:4791"),
	}
	f := wire.Fields{BTH: bth.Fields{Opcode: op, PKey: 0xffff, DestQP: 0x15, PSN: 100}}
	buf := make([]byte, 9000)
	m, err := e.Build(buf, &f, bytes.Repeat([]byte{0xab}, n))
	require.NoError(tb, err)
	return bytes.Clone(buf[:m])
}

// testFrame6 is testFrame over IPv6.
func testFrame6(tb testing.TB, op bth.Opcode, n int) []byte {
	tb.Helper()
	e := rocev2.Encap{
		Ethernet: true,
		Src:      netip.MustParseAddrPort("[fd00::3]:49593"),
		Dst:      netip.MustParseAddrPort("[fd00::2]:4791"),
	}
	f := wire.Fields{BTH: bth.Fields{Opcode: op, PKey: 0xffff, DestQP: 0x15, PSN: 100}}
	buf := make([]byte, 9000)
	m, err := e.Build(buf, &f, bytes.Repeat([]byte{0xab}, n))
	require.NoError(tb, err)
	return bytes.Clone(buf[:m])
}

func edit(b []byte, fn func(b []byte)) []byte {
	b = bytes.Clone(b)
	fn(b)
	return b
}

// refreshIPv4Checksum recomputes the IPv4 header checksum of a frame built
// by testFrame after an edit, so the edit is the only fault.
func refreshIPv4Checksum(b []byte) {
	h := b[offIP : offIP+20]
	h[10], h[11] = 0, 0
	var s uint32
	for i := 0; i < 20; i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	binary.BigEndian.PutUint16(h[10:], ^uint16(s))
}

// allSentinels lists the parse sentinels of rocev2.
var allSentinels = []error{
	wire.ErrTruncated, rocev2.ErrNotRoCE, wire.ErrUnknownOpcode, wire.ErrBadVersion,
	wire.ErrBadPad, rocev2.ErrBadICRC, rocev2.ErrFragment,
}

// TestParseErrors produces every parse sentinel and checks it with
// errors.Is; each error matches exactly one sentinel.
func TestParseErrors(t *testing.T) {
	send := testFrame(t, bth.RCSendOnly, 64)
	ack := testFrame(t, bth.RCAcknowledge, 0)
	send6 := testFrame6(t, bth.RCSendOnly, 64)
	tests := []struct {
		name  string
		frame []byte
		want  error
		icrc  bool // the error comes from VerifyICRC
	}{
		{"empty frame", nil, wire.ErrTruncated, false},
		{"short Ethernet", send[:13], wire.ErrTruncated, false},
		{"short VLAN tag", edit(send[:16], func(b []byte) { b[12], b[13] = 0x81, 0x00 }), wire.ErrTruncated, false},
		{"no IP header", send[:14], wire.ErrTruncated, false},
		{"short IPv4", send[:offIP+19], wire.ErrTruncated, false},
		{"IPv4 total length past the frame", send[:len(send)-1], wire.ErrTruncated, false},
		{"IPv4 total length below IHL", edit(send, func(b []byte) { b[offIP+2], b[offIP+3] = 0, 19 }), wire.ErrTruncated, false},
		{"IPv4 options past the frame", edit(send[:offIP+22], func(b []byte) { b[offIP] = 0x46 }), wire.ErrTruncated, false},
		{"UDP header cut", edit(send[:offUDP+4], func(b []byte) { b[offIP+2], b[offIP+3] = 0, 24 }), wire.ErrTruncated, false},
		{"UDP length past IP", edit(send, func(b []byte) { b[offUDP+5]++ }), wire.ErrTruncated, false},
		{"UDP length below 8", edit(send, func(b []byte) { b[offUDP+4], b[offUDP+5] = 0, 7 }), wire.ErrTruncated, false},
		{"short IPv6", send6[:offIP+39], wire.ErrTruncated, false},
		{"IPv6 payload length past the frame", send6[:len(send6)-1], wire.ErrTruncated, false},
		{"short BTH", edit(send, func(b []byte) { b[offUDP+4], b[offUDP+5] = 0, 8+11 }), wire.ErrTruncated, false},
		{"short RETH", truncTransport(t, testFrame(t, bth.RCRDMAWriteOnly, 8), 12+15), wire.ErrTruncated, false},
		{"no room for ICRC", truncTransport(t, ack, 12+4+3), wire.ErrTruncated, false},

		{"ARP", edit(send, func(b []byte) { b[12], b[13] = 0x08, 0x06 }), rocev2.ErrNotRoCE, false},
		{"three VLAN tags", append(append(bytes.Clone(send[:12]), 0x81, 0, 0, 1, 0x81, 0, 0, 2, 0x81, 0, 0, 3), send[12:]...), rocev2.ErrNotRoCE, false},
		{"two VLAN tags then ARP", append(append(bytes.Clone(send[:12]), 0x88, 0xa8, 0, 1, 0x81, 0, 0, 2, 0x08, 0x06), send[14:]...), rocev2.ErrNotRoCE, false},
		{"IP version 5", edit(send, func(b []byte) { b[offIP] = 0x55 }), rocev2.ErrNotRoCE, false},
		{"IPv4 IHL 4", edit(send, func(b []byte) { b[offIP] = 0x44 }), rocev2.ErrNotRoCE, false},
		{"TCP", edit(send, func(b []byte) { b[offIP+9] = 6 }), rocev2.ErrNotRoCE, false},
		{"IPv6 next header not UDP", edit(send6, func(b []byte) { b[offIP+6] = 0 }), rocev2.ErrNotRoCE, false},
		{"UDP port 4790", edit(send, func(b []byte) { b[offUDP+3]-- }), rocev2.ErrNotRoCE, false},

		{"unknown opcode 0x15", edit(send, func(b []byte) { b[offBTH] = 0x15 }), wire.ErrUnknownOpcode, false},
		{"native IB CNP 0x80", edit(send, func(b []byte) { b[offBTH] = 0x80 }), wire.ErrUnknownOpcode, false},
		{"RD opcode", edit(send, func(b []byte) { b[offBTH] = 0x44 }), wire.ErrUnknownOpcode, false},
		{"TVer 1", edit(send, func(b []byte) { b[offBTH+1] |= 1 }), wire.ErrBadVersion, false},
		{"TVer 15", edit(send, func(b []byte) { b[offBTH+1] |= 0xf }), wire.ErrBadVersion, false},
		{"pad on an ACK", edit(ack, func(b []byte) { b[offBTH+1] |= 1 << 4 }), wire.ErrBadPad, false},
		{"pad 3 over 2 payload bytes", edit(truncTransport(t, testFrame(t, bth.RCSendOnly, 8), 12+2+4),
			func(b []byte) { b[offBTH+1] |= 3 << 4 }), wire.ErrBadPad, false},

		{"MF set", edit(send, func(b []byte) { b[offIP+6] |= 0x20; refreshIPv4Checksum(b) }), rocev2.ErrFragment, false},
		{"fragment offset", edit(send, func(b []byte) { b[offIP+7] = 1; refreshIPv4Checksum(b) }), rocev2.ErrFragment, false},

		{"payload bit flipped", edit(send, func(b []byte) { b[offBTH+20] ^= 1 }), rocev2.ErrBadICRC, true},
		{"ICRC bit flipped", edit(send, func(b []byte) { b[len(b)-1] ^= 0x80 }), rocev2.ErrBadICRC, true},
		{"IPv4 ID changed", edit(send, func(b []byte) { b[offIP+5]++; refreshIPv4Checksum(b) }), rocev2.ErrBadICRC, true},
		{"UDP source port changed (NAT)", edit(send, func(b []byte) { b[offUDP+1]++ }), rocev2.ErrBadICRC, true},
		{"IPv6 payload bit flipped", edit(send6, func(b []byte) { b[len(b)-6] ^= 4 }), rocev2.ErrBadICRC, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p rocev2.Packet
			err := p.ParseFrame(tc.frame)
			if tc.icrc {
				if tc.want == rocev2.ErrBadICRC {
					require.NoError(t, err)
					err = p.VerifyICRC()
				}
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			for _, s := range allSentinels {
				if s != tc.want {
					assert.False(t, errors.Is(err, s), "%v also matches %v", err, s)
				}
			}
		})
	}
}

// truncTransport shortens the transport of a testFrame frame to n bytes,
// fixing the IP and UDP lengths, so only the transport is short.
func truncTransport(tb testing.TB, fr []byte, n int) []byte {
	tb.Helper()
	b := bytes.Clone(fr[:offBTH+n])
	binary.BigEndian.PutUint16(b[offIP+2:], uint16(20+8+n))
	binary.BigEndian.PutUint16(b[offUDP+4:], uint16(8+n))
	return b
}

// TestParseTransportErrors covers the transport-only entry point.
func TestParseTransportErrors(t *testing.T) {
	tr := func(op bth.Opcode, n int) []byte { return testFrame(t, op, n)[offBTH:] }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, wire.ErrTruncated},
		{"11 bytes", tr(bth.RCSendOnly, 0)[:11], wire.ErrTruncated},
		{"BTH without ICRC", tr(bth.RCSendOnly, 0)[:12], wire.ErrTruncated},
		{"WRITE FIRST with a short RETH", tr(bth.RCRDMAWriteFirst, 0)[:27], wire.ErrTruncated},
		{"CMP SWAP with a short AtomicETH", tr(bth.RCCompareSwap, 0)[:39], wire.ErrTruncated},
		{"CNP without its reserved bytes", tr(bth.CNP, 0)[:12+4], wire.ErrTruncated},
		{"unknown opcode", edit(tr(bth.RCSendOnly, 4), func(b []byte) { b[0] = 0xff }), wire.ErrUnknownOpcode},
		{"TVer 2", edit(tr(bth.RCSendOnly, 4), func(b []byte) { b[1] |= 2 }), wire.ErrBadVersion},
		{"pad past the payload", edit(tr(bth.RCAcknowledge, 0), func(b []byte) { b[1] |= 0x30 }), wire.ErrBadPad},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p rocev2.Packet
			err := p.ParseTransport(tc.b)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

// TestParseErrorKeepsViews checks the documented partial result: the views
// up to the failing layer are set.
func TestParseErrorKeepsViews(t *testing.T) {
	var p rocev2.Packet
	bad := edit(testFrame(t, bth.RCSendOnly, 8), func(b []byte) { b[offBTH+1] |= 1 })
	require.ErrorIs(t, p.ParseFrame(bad), wire.ErrBadVersion)
	assert.Len(t, p.Eth, 14)
	assert.Len(t, p.IP, 20)
	assert.Len(t, p.UDP, 8)
	assert.Len(t, p.BTH, 12)
	assert.Equal(t, bth.RCSendOnly, p.Opcode())

	require.ErrorIs(t, p.ParseFrame(edit(bad, func(b []byte) { b[offUDP+3] = 0 })), rocev2.ErrNotRoCE)
	assert.Len(t, p.UDP, 8)
	assert.Nil(t, p.BTH, "views of the previous parse are cleared")
	assert.Equal(t, bth.Opcode(0), p.Opcode())
}

// TestTruncateEveryLength parses every prefix of one frame per (capture,
// opcode): a frame cut anywhere before the end of its IP packet is
// ErrTruncated; a transport cut anywhere parses without panicking and
// fails with ErrTruncated when shorter than its headers and ICRC.
func TestTruncateEveryLength(t *testing.T) {
	frames := samplePerOpcode(t)
	frames = append(frames,
		testFrame(t, bth.CNP, 0), testFrame(t, bth.RCFlush, 0),
		testFrame6(t, bth.RCRDMAWriteOnlyWithImmediate, 33), testFrame6(t, bth.UDSendOnlyWithImmediate, 5))
	var p rocev2.Packet
	for _, fr := range frames {
		require.NoError(t, p.ParseFrame(fr))
		ipEnd := len(p.Eth) + len(p.IP) + len(p.UDP) + len(p.Transport)
		hl := p.Info.HeaderLen
		tr := bytes.Clone(p.Transport)
		ip := bytes.Clone(fr[len(p.Eth):ipEnd])
		for n := range ipEnd {
			b := bytes.Clone(fr[:n]) // exact capacity: reslicing past len would panic
			require.ErrorIs(t, p.ParseFrame(b), wire.ErrTruncated, "frame cut at %d of %d", n, ipEnd)
		}
		for n := range len(ip) {
			require.ErrorIs(t, p.ParseIP(bytes.Clone(ip[:n])), wire.ErrTruncated, "IP packet cut at %d", n)
		}
		for n := range len(tr) {
			err := p.ParseTransport(bytes.Clone(tr[:n]))
			switch {
			case n < hl+bth.ICRCSize:
				require.ErrorIs(t, err, wire.ErrTruncated, "transport cut at %d", n)
			case err == nil:
				// Without the IP/UDP lengths a short transport looks like
				// a shorter payload; only the ICRC can tell.
				require.Equal(t, n, hl+len(p.Payload)+len(p.Pad)+bth.ICRCSize)
			default:
				require.ErrorIs(t, err, wire.ErrBadPad, "transport cut at %d", n)
			}
		}
	}
}

// TestVLANTags checks that one or two 802.1Q/802.1ad tags are skipped and
// that a third is refused as not RoCE (it used to be reported as a
// truncated Ethernet header).
func TestVLANTags(t *testing.T) {
	send := testFrame(t, bth.RCSendOnly, 16)
	tag := func(tags ...byte) []byte {
		return append(append(bytes.Clone(send[:12]), tags...), send[12:]...)
	}
	tests := []struct {
		name  string
		frame []byte
		vlans int
		err   error
	}{
		{"none", send, 0, nil},
		{"802.1Q", tag(0x81, 0x00, 0x00, 0x05), 1, nil},
		{"QinQ", tag(0x88, 0xa8, 0x00, 0x05, 0x81, 0x00, 0x00, 0x06), 2, nil},
		{"three tags", tag(0x81, 0, 0, 1, 0x81, 0, 0, 2, 0x81, 0, 0, 3), 2, rocev2.ErrNotRoCE},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p rocev2.Packet
			err := p.ParseFrame(tc.frame)
			assert.Equal(t, tc.vlans, p.VLANs)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				assert.NotErrorIs(t, err, wire.ErrTruncated)
				return
			}
			require.NoError(t, err)
			assert.NoError(t, p.VerifyICRC())
			assert.Len(t, p.Eth, 14+4*tc.vlans)
			assert.Equal(t, uint16(rocev2.EtherTypeIPv4), p.EtherType)
			e := p.Encap()
			assert.True(t, e.Ethernet)
		})
	}
}
