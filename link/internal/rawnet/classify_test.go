package rawnet

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

var (
	macA  = [6]byte{2, 0, 0, 0, 0, 0xa}
	macB  = [6]byte{2, 0, 0, 0, 0, 0xb}
	v4A   = netip.MustParseAddr("10.0.0.1")
	v4B   = netip.MustParseAddr("10.0.0.2")
	v6A   = netip.MustParseAddr("fd00::1")
	v6B   = netip.MustParseAddr("fd00::2")
	sport = uint16(0xc123)
)

// frame builds a RoCEv2 frame from B to A with rocev2.Encap.
func frame(t testing.TB, src, dst netip.Addr, n int, id uint16, tos uint8) []byte {
	e := rocev2.Encap{Ethernet: true, SrcMAC: macB, DstMAC: macA, Src: netip.AddrPortFrom(src, sport),
		Dst: netip.AddrPortFrom(dst, 4791), ID: id, TOS: tos}
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: 0x123, PSN: 7}}
	b := make([]byte, e.HeaderLen()+wire.TransportLen(bth.RCSendOnly, n))
	m, err := e.Build(b, &f, make([]byte, n))
	require.NoError(t, err)
	return b[:m]
}

func TestClassify(t *testing.T) {
	good4 := frame(t, v4B, v4A, 100, 0x4321, 0x03)
	good6 := frame(t, v6B, v6A, 100, 0, 0x02)
	mut := func(b []byte, f func(b []byte) []byte) []byte { return f(slices.Clone(b)) }
	tests := []struct {
		name  string
		b     []byte
		local netip.Addr
		want  Drop
	}{
		{"ipv4", good4, v4A, Deliver},
		{"ipv4 with Ethernet padding", append(slices.Clone(good4), 0, 0, 0, 0), v4A, Deliver},
		{"ipv6", good6, v6A, Deliver},
		{"empty", nil, v4A, DropTruncated},
		{"13 bytes", good4[:13], v4A, DropTruncated},
		{"ethernet only", good4[:14], v4A, DropTruncated},
		{"ipv4 header cut", good4[:30], v4A, DropTruncated},
		{"ipv4 total length beyond frame", mut(good4, func(b []byte) []byte { binary.BigEndian.PutUint16(b[16:], 2000); return b }), v4A, DropTruncated},
		{"ipv4 total length below headers", mut(good4, func(b []byte) []byte { binary.BigEndian.PutUint16(b[16:], 27); return b }), v4A, DropTruncated},
		{"udp length beyond datagram", mut(good4, func(b []byte) []byte { binary.BigEndian.PutUint16(b[38:], 2000); return b }), v4A, DropTruncated},
		{"udp length below header", mut(good4, func(b []byte) []byte { binary.BigEndian.PutUint16(b[38:], 7); return b }), v4A, DropTruncated},
		{"vlan", mut(good4, func(b []byte) []byte { return slices.Concat(b[:12], []byte{0x81, 0, 0, 1}, b[12:]) }), v4A, Deliver},
		{"vlan stacked", mut(good4, func(b []byte) []byte {
			return slices.Concat(b[:12], []byte{0x81, 0, 0, 1, 0x81, 0, 0, 2}, b[12:])
		}), v4A, DropVLAN},
		{"vlan runt", mut(good4, func(b []byte) []byte { return slices.Concat(b[:12], []byte{0x81, 0}) }), v4A, DropTruncated},
		{"qinq", mut(good4, func(b []byte) []byte { return slices.Concat(b[:12], []byte{0x88, 0xa8, 0, 1}, b[12:]) }), v4A, DropVLAN},
		{"arp", mut(good4, func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b }), v4A, DropNotIP},
		{"ipv4 ethertype, version 6", mut(good4, func(b []byte) []byte { b[14] = 0x65; return b }), v4A, DropNotIP},
		{"ipv4 options", mut(good4, func(b []byte) []byte { b[14] = 0x46; return b }), v4A, DropIPOptions},
		{"fragment offset", mut(good4, func(b []byte) []byte { b[20], b[21] = 0x00, 0x10; return b }), v4A, DropFragment},
		{"more fragments", mut(good4, func(b []byte) []byte { b[20] = 0x20; return b }), v4A, DropFragment},
		{"tcp", mut(good4, func(b []byte) []byte { b[23] = 6; return b }), v4A, DropNotUDP},
		{"other address", good4, v4B, DropOtherAddr},
		{"ipv4 frame, ipv6 link", good4, v6A, DropOtherAddr},
		{"ipv6 frame, ipv4 link", good6, v4A, DropOtherAddr},
		{"other port", mut(good4, func(b []byte) []byte { binary.BigEndian.PutUint16(b[36:], 4792); return b }), v4A, DropNotRoCE},
		{"ipv6 header cut", good6[:50], v6A, DropTruncated},
		{"ipv6 payload length beyond frame", mut(good6, func(b []byte) []byte { binary.BigEndian.PutUint16(b[18:], 2000); return b }), v6A, DropTruncated},
		{"ipv6 extension header", mut(good6, func(b []byte) []byte { b[20] = 0; return b }), v6A, DropNotUDP},
		{"ipv6 other address", good6, v6B, DropOtherAddr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f Frame
			got := Classify(tc.b, tc.local, 4791, &f)
			assert.Equal(t, tc.want, got, got.String())
		})
	}

	var f Frame
	require.Equal(t, Deliver, Classify(good4, v4A, 4791, &f))
	assert.Equal(t, netip.AddrPortFrom(v4B, sport), f.Src)
	assert.Equal(t, netip.AddrPortFrom(v4A, 4791), f.Dst)
	assert.Equal(t, macB, f.SrcMAC)
	assert.Equal(t, uint16(0x4321), f.IPID)
	assert.Equal(t, uint8(3), f.ECN)
	assert.Equal(t, good4[42:], f.Payload)
	require.Equal(t, Deliver, Classify(good6, v6A, 4791, &f))
	assert.Equal(t, uint8(2), f.ECN)
	assert.Equal(t, good6[62:], f.Payload)
	var p rocev2.Packet
	require.NoError(t, p.ParseTransport(f.Payload))
}

func TestClassifyAllocs(t *testing.T) {
	b := frame(t, v6B, v6A, 4096, 0, 0)
	var f Frame
	n := testing.AllocsPerRun(100, func() { Classify(b, v6A, 4791, &f) })
	require.Zero(t, n)
}

// FuzzClassify: no panic, and a delivered payload lies inside the frame
// and is what the UDP header says.
func FuzzClassify(f *testing.F) {
	f.Add(frame(f, v4B, v4A, 64, 1, 0))
	f.Add(frame(f, v6B, v6A, 64, 0, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, local := range []netip.Addr{v4A, v6A} {
			var fr Frame
			if Classify(b, local, 4791, &fr) != Deliver {
				continue
			}
			if len(fr.Payload) > len(b) {
				t.Fatalf("payload %d > frame %d", len(fr.Payload), len(b))
			}
			if fr.Dst.Addr() != local {
				t.Fatalf("delivered to %v", fr.Dst)
			}
			// The first 64 bytes suffice to classify a frame of any length.
			var fh Frame
			d, off, n := ClassifyHead(b[:min(len(b), 64)], len(b), local, 4791, &fh)
			if d != Deliver || n != len(fr.Payload) || n > 0 && &b[off] != &fr.Payload[0] || fh.Src != fr.Src {
				t.Fatalf("ClassifyHead %v %d+%d, Classify %d bytes", d, off, n, len(fr.Payload))
			}
		}
	})
}

func TestTemplate(t *testing.T) {
	for _, pair := range [][2]netip.Addr{{v4A, v4B}, {v6A, v6B}} {
		src, dst := netip.AddrPortFrom(pair[0], 4791), netip.AddrPortFrom(pair[1], 4791)
		tp, err := NewTemplate(macA, macB, src, dst, 0x88, 64)
		require.NoError(t, err)
		// A transport packet sealed as the device does: pseudo headers with
		// ID 0 and the link's address and port.
		f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: 9, PSN: 1}}
		tb := make([]byte, wire.TransportLen(bth.RCSendOnly, 300))
		tn, err := wire.Build(tb, &f, make([]byte, 300))
		require.NoError(t, err)
		var ph [IPv6Len + UDPLen]byte
		ip, udp := rocev2.PseudoHeaders(&ph, src, dst, 0, tn)
		rocev2.PutICRC(tb[tn-4:], rocev2.ComputeICRC(ip, udp, tb[:tn-4]))

		b := make([]byte, MaxHdrLen+tn)
		hl := tp.Write(b, &link.Datagram{Buf: tb[:tn], Src: src, ECN: 1})
		copy(b[hl:], tb[:tn])
		b = b[:hl+tn]
		var p rocev2.Packet
		require.NoError(t, p.ParseFrame(b))
		require.NoError(t, p.VerifyICRC(), "the frame verifies against the device's ICRC")
		e := p.Encap()
		assert.Equal(t, src, e.Src)
		assert.Equal(t, dst, e.Dst)
		assert.Equal(t, macA, e.SrcMAC)
		assert.Equal(t, macB, e.DstMAC)
		assert.Equal(t, uint8(1), p.ECN())
		assert.Equal(t, uint8(0x89), e.TOS)
		if pair[0].Is4() {
			assert.False(t, e.AllowFragment, "DF set")
			assert.Zero(t, rocev2.IPv4Checksum(b[EthLen:EthLen+IPv4Len]), "IPv4 header checksum")
		}
		var fr Frame
		require.Equal(t, Deliver, Classify(b, dst.Addr(), 4791, &fr))
		assert.Equal(t, tb[:tn], fr.Payload)
	}
	_, err := NewTemplate(macA, macB, netip.AddrPortFrom(v4A, 1), netip.AddrPortFrom(v6B, 1), 0, 0)
	require.ErrorIs(t, err, ErrAddrFamily)
}

// TestTemplateTagged: per-datagram source port, DSCP, flow label and, with
// an 802.1Q tag, PCP; the ICRC the device sealed over the carried port
// verifies, rocev2 parses the tagged frame back, and Classify reports the
// tag.
func TestTemplateTagged(t *testing.T) {
	for _, pair := range [][2]netip.Addr{{v4A, v4B}, {v6A, v6B}} {
		for _, tagged := range []bool{false, true} {
			src, dst := netip.AddrPortFrom(pair[0], 4791), netip.AddrPortFrom(pair[1], 4791)
			tp, err := NewTemplate(macA, macB, src, dst, 0x88, 64)
			require.NoError(t, err)
			if tagged {
				tp.Tag(100)
			}
			qpSrc := netip.AddrPortFrom(pair[0], 49593) // rxe's 0x15 ↔ 0x15
			f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: 0x15, PSN: 1}}
			tb := make([]byte, wire.TransportLen(bth.RCSendOnly, 64))
			tn, err := wire.Build(tb, &f, make([]byte, 64))
			require.NoError(t, err)
			var ph [IPv6Len + UDPLen]byte
			ip, udp := rocev2.PseudoHeaders(&ph, qpSrc, dst, 7, tn)
			rocev2.PutICRC(tb[tn-4:], rocev2.ComputeICRC(ip, udp, tb[:tn-4]))

			b := make([]byte, MaxHdrLen+tn)
			dg := link.Datagram{Buf: tb[:tn], Src: qpSrc, ECN: link.ECT0, DSCP: 26, Priority: 3, IPID: 7, FlowLabel: 0x54321}
			hl := tp.Write(b, &dg)
			copy(b[hl:], tb[:tn])
			b = b[:hl+tn]
			var p rocev2.Packet
			require.NoError(t, p.ParseFrame(b))
			require.NoError(t, p.VerifyICRC(), "sealed over the carried source port")
			e := p.Encap()
			assert.Equal(t, qpSrc, e.Src)
			assert.Equal(t, uint8(26<<2|link.ECT0), e.TOS)
			var fr Frame
			require.Equal(t, Deliver, Classify(b, dst.Addr(), 4791, &fr))
			assert.Equal(t, tb[:tn], fr.Payload)
			assert.Equal(t, qpSrc, fr.Src)
			assert.Equal(t, uint8(26), fr.DSCP)
			assert.Equal(t, link.ECT0, fr.ECN)
			assert.Equal(t, tagged, fr.Tagged)
			if tagged {
				assert.Equal(t, 1, p.VLANs)
				assert.Equal(t, uint8(3), fr.Priority)
				assert.Equal(t, uint16(100), fr.VLAN)
				assert.Equal(t, []byte{0x81, 0x00, 0x60, 100}, b[12:16], "TPID, PCP 3, VID 100")
			}
			if pair[0].Is6() {
				assert.Equal(t, uint32(0x54321), e.FlowLabel)
			} else {
				assert.Zero(t, rocev2.IPv4Checksum(b[hl-UDPLen-IPv4Len:hl-UDPLen]), "IPv4 header checksum")
			}
		}
	}
}
