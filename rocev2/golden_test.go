package rocev2_test

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// scapyUC is scapy's test/contrib/roce.uts "RoCE layer" vector: a UC SEND
// ONLY from 192.168.0.7 to itself, MigReq=1, PadCnt=2, whose ICRC scapy
// computes as wire bytes 78 f3 53 f3 (doc/rxe.md §11.1). Confirmed
// independently by scapy's own ICRC code.
//
//	0000  24 8a 07 a8 fa 22 24 8a 07 a8 fa 22 08 00        Ethernet
//	000e  45 01 00 40 04 78 40 00 40 11 b4 d5 c0 a8 00 07  IPv4 TOS 0x01 ID 1144 DF TTL 64
//	      c0 a8 00 07
//	0022  c0 00 12 b7 00 2c ac a2                          UDP 49152 -> 4791 len 44
//	002a  24 60 ff ff 00 00 00 d3 00 cf 17 10              BTH UC_SEND_ONLY M=1 pad=2 QP 211 PSN 13571856
//	0036  46 30 81 8b e2 89 35 d9 0e 9a 95 50 54 01 be 88  payload (18) + pad (2)
//	      5e 50 00 00
//	004a  78 f3 53 f3                                      ICRC
const scapyUC = `
248a07a8fa22 248a07a8fa22 0800
4501 0040 0478 4000 4011 b4d5 c0a80007 c0a80007
c000 12b7 002c aca2
2460ffff 000000d3 00cf1710
4630818be28935d90e9a95505401be885e500000
78f353f3`

// cx4CNP is the ConnectX-4 Lx CNP capture of scapy's roce.uts
// (doc/rxe.md §11.2, doc/dcqcn.md §7.2): ICRC wire bytes 82 fd 00 2a.
const cx4CNP = `
e41d2dab2bc2 7cfe90643b32 0800
45c2 003c 718c 4000 4011 9161 0a001101 0a001201
0000 12b7 0028 0000
8100ffff 40000118 00000000
00000000000000000000000000000000
82fd002a`

func TestGoldenScapyUCSend(t *testing.T) {
	frame := unhex(t, scapyUC)
	var p rocev2.Packet
	require.NoError(t, p.ParseFrame(frame))
	require.NoError(t, p.VerifyICRC())
	assert.Equal(t, bth.UCSendOnly, p.Opcode())
	assert.True(t, p.BTH.MigReq())
	assert.Equal(t, 2, p.BTH.PadCount())
	assert.Equal(t, bth.QPN(211), p.BTH.DestQP())
	assert.Equal(t, bth.PSN(13571856), p.BTH.PSN())
	assert.Len(t, p.Payload, 18)
	assert.Equal(t, []byte{0x78, 0xf3, 0x53, 0xf3}, []byte(p.ICRC))

	// Rebuild the transport part from the decoded fields; the ICRC over the
	// captured IP/UDP headers must equal the captured bytes.
	f := p.Fields()
	buf := make([]byte, 256)
	n, err := wire.Build(buf, &f, p.Payload)
	require.NoError(t, err)
	rocev2.PutICRC(buf[n-4:n], rocev2.ComputeICRC(p.IP, p.UDP, buf[:n-4]))
	assert.Equal(t, []byte(p.Transport), buf[:n])

	// The whole frame, rebuilt through Encap, differs from scapy's only in
	// the UDP checksum, which we send as 0 like rxe and which the ICRC masks.
	e := p.Encap()
	m, err := e.Build(buf, &f, p.Payload)
	require.NoError(t, err)
	want := bytes.Clone(frame)
	want[14+20+6], want[14+20+7] = 0, 0
	assert.Equal(t, want, buf[:m])
}

// TestComputeICRCGather checks the CRC continuation over three parts
// against ComputeICRC of their concatenation, for every pair of cut points
// in the golden UC SEND (the BTH split as well) and in a 4 KiB WRITE, and
// the golden bytes themselves.
func TestComputeICRCGather(t *testing.T) {
	frame := unhex(t, scapyUC)
	var p rocev2.Packet
	require.NoError(t, p.ParseFrame(frame))
	body := p.Transport[:len(p.Transport)-4]
	want := rocev2.ReadICRC(p.ICRC)
	for i := 0; i <= len(body); i++ {
		for j := i; j <= len(body); j++ {
			got := rocev2.ComputeICRCGather(p.IP, p.UDP, body[:i], body[i:j], body[j:])
			require.Equal(t, want, got, "cuts %d, %d", i, j)
		}
	}
	e, f, payload := write4K()
	buf := make([]byte, 9000)
	n, err := e.Build(buf, &f, payload)
	require.NoError(t, err)
	require.NoError(t, p.ParseFrame(buf[:n]))
	body = p.Body()
	want = rocev2.ComputeICRC(p.IP, p.UDP, body)
	for _, cut := range [][2]int{{28, len(body)}, {28, len(body) - 3}, {0, 0}, {5, 4000}, {len(body), len(body)}} {
		got := rocev2.ComputeICRCGather(p.IP, p.UDP, body[:cut[0]], body[cut[0]:cut[1]], body[cut[1]:])
		assert.Equal(t, want, got, "cuts %v", cut)
	}
	body[100] ^= 1
	assert.NotEqual(t, want, rocev2.ComputeICRCGather(p.IP, p.UDP, body[:28], body[28:len(body)-2], body[len(body)-2:]))
}

func TestGoldenCX4CNP(t *testing.T) {
	frame := unhex(t, cx4CNP)
	var p rocev2.Packet
	require.NoError(t, p.ParseFrame(frame))
	require.NoError(t, p.VerifyICRC())
	require.Equal(t, bth.CNP, p.Opcode())
	assert.True(t, p.BTH.BECN())
	assert.Len(t, p.CNPPad, 16)

	// The CNP builder reproduces the capture byte for byte.
	e := rocev2.Encap{
		Ethernet: true,
		DstMAC:   [6]byte{0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2},
		SrcMAC:   [6]byte{0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32},
		Src:      netip.MustParseAddrPort("10.0.17.1:0"),
		Dst:      netip.MustParseAddrPort("10.0.18.1:4791"),
		TOS:      0xc2,
		TTL:      64,
		ID:       0x718c,
	}
	f := rocev2.CNPFields(0x118)
	buf := make([]byte, 128)
	n, err := e.Build(buf, &f, nil)
	require.NoError(t, err)
	assert.Equal(t, frame, buf[:n])
}

// TestICRCMasksVariantFields checks that the fields the ICRC masks (TOS/ECN,
// TTL, IP checksum, UDP checksum, FECN/BECN) can change without breaking
// it, and that covered fields cannot.
func TestICRCMasksVariantFields(t *testing.T) {
	base := unhex(t, scapyUC)
	variant := []int{14 + 1, 14 + 8, 14 + 10, 14 + 11, 34 + 6, 34 + 7, 42 + 4}
	for _, off := range variant {
		b := bytes.Clone(base)
		b[off] ^= 0xa5
		var p rocev2.Packet
		require.NoError(t, p.ParseFrame(b))
		assert.NoError(t, p.VerifyICRC(), "masked byte %d", off)
	}
	covered := []int{14 + 4, 14 + 5, 14 + 12, 14 + 19, 34 + 0, 34 + 1, 42 + 0, 42 + 5, 42 + 11, 60}
	for _, off := range covered {
		b := bytes.Clone(base)
		b[off] ^= 0x01
		var p rocev2.Packet
		if err := p.ParseFrame(b); err != nil {
			continue // e.g. the opcode became unknown
		}
		assert.ErrorIs(t, p.VerifyICRC(), rocev2.ErrBadICRC, "covered byte %d", off)
	}
}

func TestICRCIPv6(t *testing.T) {
	e := rocev2.Encap{
		Src: netip.MustParseAddrPort("[fd00::1]:49153"),
		Dst: netip.MustParseAddrPort("[fd00::2]:4791"),
		TOS: 0x02, TTL: 7, FlowLabel: 0x12345,
	}
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: 17, PSN: 5}}
	buf := make([]byte, 256)
	n, err := e.Build(buf, &f, []byte("hello, ipv6"))
	require.NoError(t, err)
	var p rocev2.Packet
	require.NoError(t, p.ParseIP(buf[:n]))
	require.True(t, p.IPv6())
	require.NoError(t, p.VerifyICRC())
	assert.Equal(t, uint8(2), p.ECN())
	// Traffic class, flow label and hop limit are masked.
	buf[1] ^= 0xff
	buf[3] ^= 0x11
	buf[7] = 1
	require.NoError(t, p.ParseIP(buf[:n]))
	assert.NoError(t, p.VerifyICRC())
	// The payload length is covered.
	buf[n-5] ^= 1
	require.NoError(t, p.ParseIP(buf[:n]))
	assert.ErrorIs(t, p.VerifyICRC(), rocev2.ErrBadICRC)
}

// TestPseudoHeadersMatchEncap checks that the ICRC a UDP-socket sender
// computes from addresses alone equals the one over real headers with IPv4
// ID 0, which Linux uses for unconnected DF datagrams.
func TestPseudoHeadersMatchEncap(t *testing.T) {
	for _, pair := range [][2]string{
		{"127.0.0.1:49152", "127.0.0.2:4791"},
		{"[::1]:50000", "[::1]:4791"},
	} {
		e := rocev2.Encap{Src: netip.MustParseAddrPort(pair[0]), Dst: netip.MustParseAddrPort(pair[1]), TOS: 2}
		f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCRDMAWriteOnly, PKey: 0xffff, DestQP: 0x11, PSN: 99}}
		f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = 0x1000, 0xdeadbeef, 5
		buf := make([]byte, 256)
		n, err := e.Build(buf, &f, []byte("abcde"))
		require.NoError(t, err)
		hl := e.HeaderLen()
		tr := buf[hl:n]

		var ph [48]byte
		ip, udp := rocev2.PseudoHeaders(&ph, e.Src, e.Dst, 0, len(tr))
		assert.Equal(t, rocev2.ReadICRC(tr[len(tr)-4:]), rocev2.ComputeICRC(ip, udp, tr[:len(tr)-4]), pair[0])
	}
}
