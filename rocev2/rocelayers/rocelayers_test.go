package rocelayers_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/rocelayers"
	"github.com/goroce/goroce/wire"
)

// goldenFrames returns one RoCEv2 frame per (capture, opcode) of the rxe
// captures in testdata/pcaps, and the scapy CNP vector (the captures hold no
// CNP).
func goldenFrames(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob("../../testdata/pcaps/*.pcap")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out [][]byte
	var p rocev2.Packet
	for _, fn := range files {
		f, err := os.Open(fn)
		require.NoError(t, err)
		r, err := pcapgo.NewReader(f)
		require.NoError(t, err)
		seen := map[bth.Opcode]bool{}
		for {
			data, _, err := r.ReadPacketData()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			if p.ParseFrame(data) == nil && !seen[p.Opcode()] {
				seen[p.Opcode()] = true
				out = append(out, bytes.Clone(data))
			}
		}
		f.Close()
	}
	// The ConnectX-4 Lx CNP of scapy's roce.uts (rocev2/golden_test.go).
	cnp := []byte{
		0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08, 0x00,
		0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00, 0x12, 0x01,
		0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00,
		0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x82, 0xfd, 0x00, 0x2a,
	}
	return append(out, cnp)
}

// wantLayers lists the layer types gopacket must find for p, in order.
func wantLayers(p *rocev2.Packet) []gopacket.LayerType {
	ts := []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeUDP, rocelayers.LayerTypeBTH}
	for _, h := range []struct {
		present bool
		typ     gopacket.LayerType
	}{ // IBA 9.3 wire order
		{p.DETH != nil, rocelayers.LayerTypeDETH},
		{p.FETH != nil, rocelayers.LayerTypeFETH},
		{p.RETH != nil, rocelayers.LayerTypeRETH},
		{p.AtomicETH != nil, rocelayers.LayerTypeAtomicETH},
		{p.AETH != nil, rocelayers.LayerTypeAETH},
		{p.AtomicAckETH != nil, rocelayers.LayerTypeAtomicAckETH},
		{p.ImmDt != nil, rocelayers.LayerTypeImmDt},
		{p.IETH != nil, rocelayers.LayerTypeIETH},
		{p.CNPPad != nil, rocelayers.LayerTypeCNPPad},
	} {
		if h.present {
			ts = append(ts, h.typ)
		}
	}
	return append(ts, rocelayers.LayerTypeIBPayload)
}

// checkTransport compares the decoded layers with rocev2.Packet's views.
func checkTransport(t *testing.T, p *rocev2.Packet, tr *rocelayers.Transport, ip, udp []byte) {
	t.Helper()
	assert.Equal(t, p.BTH.Fields(), tr.BTH.Fields())
	assert.Same(t, p.Info, tr.BTH.Info)
	assert.Equal(t, []byte(p.Transport), tr.BTH.Transport())
	if p.RETH != nil {
		assert.Equal(t, p.RETH.Fields(), tr.RETH.Fields())
	}
	if p.AETH != nil {
		assert.Equal(t, p.AETH.Fields(), tr.AETH.Fields())
	}
	if p.ImmDt != nil {
		assert.Equal(t, p.ImmDt.Imm(), tr.ImmDt.Imm())
	}
	if p.IETH != nil {
		assert.Equal(t, p.IETH.RKey(), tr.IETH.RKey())
	}
	if p.DETH != nil {
		assert.Equal(t, p.DETH.Fields(), tr.DETH.Fields())
	}
	if p.AtomicETH != nil {
		assert.Equal(t, p.AtomicETH.Fields(), tr.AtomicETH.Fields())
	}
	if p.AtomicAckETH != nil {
		assert.Equal(t, p.AtomicAckETH.OrigRemData(), tr.AtomicAckETH.OrigRemData())
	}
	if p.FETH != nil {
		assert.Equal(t, p.FETH.Fields(), tr.FETH.Fields())
	}
	if p.CNPPad != nil {
		assert.Equal(t, []byte(p.CNPPad), tr.CNPPad.LayerContents())
	}
	assert.Equal(t, []byte(p.Payload), tr.Payload.Data)
	assert.Equal(t, []byte(p.Pad), tr.Payload.Pad)
	assert.Equal(t, []byte(p.ICRC), tr.Payload.ICRC)
	// The ICRC over gopacket's IP and UDP headers verifies.
	body := tr.BTH.Transport()[:len(tr.BTH.Transport())-4]
	assert.Equal(t, rocev2.ReadICRC(tr.Payload.ICRC), rocev2.ComputeICRC(ip, udp, body))
}

func TestDecodingLayerParser(t *testing.T) {
	rocelayers.Register()
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
		tr  rocelayers.Transport
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		append([]gopacket.DecodingLayer{&eth, &ip4, &udp}, tr.DecodingLayers()...)...)
	var decoded []gopacket.LayerType
	var p rocev2.Packet
	for _, fr := range goldenFrames(t) {
		require.NoError(t, p.ParseFrame(fr))
		t.Run(p.Opcode().String(), func(t *testing.T) {
			require.NoError(t, parser.DecodeLayers(fr, &decoded))
			assert.False(t, parser.Truncated)
			assert.Equal(t, wantLayers(&p), decoded)
			checkTransport(t, &p, &tr, ip4.Contents, udp.Contents)
		})
	}
}

// TestDecodingLayerParserLinkedByHand uses the layers of a NewTransport
// one by one, as in gopacket's usual NewDecodingLayerParser(first, &a, &b …)
// form.
func TestDecodingLayerParserLinkedByHand(t *testing.T) {
	rocelayers.Register()
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
	)
	tr := rocelayers.NewTransport()
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		&eth, &ip4, &udp, &tr.BTH, &tr.RETH, &tr.AETH, &tr.Payload)
	var decoded []gopacket.LayerType
	var p rocev2.Packet
	for _, fr := range goldenFrames(t) {
		require.NoError(t, p.ParseFrame(fr))
		err := parser.DecodeLayers(fr, &decoded)
		if p.DETH != nil || p.ImmDt != nil || p.AtomicETH != nil || p.AtomicAckETH != nil || p.CNPPad != nil {
			// No layer was given for that header.
			assert.IsType(t, gopacket.UnsupportedLayerType(0), err, p.Opcode().String())
			continue
		}
		require.NoError(t, err, p.Opcode().String())
		assert.Equal(t, wantLayers(&p), decoded)
		checkTransport(t, &p, tr, ip4.Contents, udp.Contents)
	}
}

func TestNewPacket(t *testing.T) {
	rocelayers.Register()
	var p rocev2.Packet
	for _, fr := range goldenFrames(t) {
		require.NoError(t, p.ParseFrame(fr))
		t.Run(p.Opcode().String(), func(t *testing.T) {
			gp := gopacket.NewPacket(fr, layers.LayerTypeEthernet, gopacket.Default)
			require.Nil(t, gp.ErrorLayer())
			var types []gopacket.LayerType
			for _, l := range gp.Layers() {
				types = append(types, l.LayerType())
			}
			assert.Equal(t, wantLayers(&p), types)

			b := gp.Layer(rocelayers.LayerTypeBTH).(*rocelayers.BTH)
			assert.Equal(t, p.BTH.Fields(), b.Fields())
			assert.Equal(t, "BTH", rocelayers.LayerTypeBTH.String())
			if p.RETH != nil {
				r := gp.Layer(rocelayers.LayerTypeRETH).(*rocelayers.RETH)
				assert.Equal(t, p.RETH.Fields(), r.Fields())
			}
			if p.AETH != nil {
				a := gp.Layer(rocelayers.LayerTypeAETH).(*rocelayers.AETH)
				assert.Equal(t, p.AETH.Fields(), a.Fields())
			}
			if p.DETH != nil {
				d := gp.Layer(rocelayers.LayerTypeDETH).(*rocelayers.DETH)
				assert.Equal(t, p.DETH.Fields(), d.Fields())
			}
			app := gp.ApplicationLayer()
			require.NotNil(t, app)
			assert.Equal(t, rocelayers.LayerTypeIBPayload, app.LayerType())
			assert.Equal(t, []byte(p.Payload), app.Payload())
		})
	}
}

func TestRegisterIdempotent(t *testing.T) {
	rocelayers.Register()
	rocelayers.Register()
	assert.Equal(t, "RETH", rocelayers.LayerTypeRETH.String())
	assert.Equal(t, rocelayers.LayerTypeBTH, layers.UDPPort(4791).LayerType())
}

// TestDecodeErrors checks that bad transports fail with roce's sentinels
// and that layers used without their BTH fail instead of guessing.
func TestDecodeErrors(t *testing.T) {
	var tr rocelayers.Transport
	dl := tr.DecodingLayers()
	ack := []byte{0x11, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 1, 0x1f, 0, 0, 1, 1, 2, 3, 4}
	require.NoError(t, tr.BTH.DecodeFromBytes(ack, gopacket.NilDecodeFeedback))
	assert.Equal(t, rocelayers.LayerTypeAETH, tr.BTH.NextLayerType())
	require.NoError(t, dl[2].DecodeFromBytes(tr.BTH.LayerPayload(), gopacket.NilDecodeFeedback))
	assert.Equal(t, rocelayers.LayerTypeIBPayload, tr.AETH.NextLayerType())
	// An ACK has no RETH.
	assert.Error(t, tr.RETH.DecodeFromBytes(tr.BTH.LayerPayload(), gopacket.NilDecodeFeedback))

	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", ack[:15], wire.ErrTruncated},
		{"unknown opcode", append([]byte{0x15}, ack[1:]...), wire.ErrUnknownOpcode},
		{"TVer", append([]byte{0x11, 1}, ack[2:]...), wire.ErrBadVersion},
		{"pad", append([]byte{0x11, 0x30}, ack[2:]...), wire.ErrBadPad},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b rocelayers.BTH
			assert.ErrorIs(t, b.DecodeFromBytes(tc.b, gopacket.NilDecodeFeedback), tc.want)
			assert.Equal(t, gopacket.LayerTypeZero, b.NextLayerType())
		})
	}

	var lone rocelayers.RETH
	assert.Error(t, lone.DecodeFromBytes(make([]byte, 32), gopacket.NilDecodeFeedback))
	assert.Equal(t, gopacket.LayerTypeZero, lone.NextLayerType())
	var pl rocelayers.Payload
	assert.Error(t, pl.DecodeFromBytes(make([]byte, 8), gopacket.NilDecodeFeedback))
}

// TestDecodingLayerParserTruncated checks that a short RoCEv2 packet sets
// the parser's Truncated flag.
func TestDecodingLayerParserTruncated(t *testing.T) {
	rocelayers.Register()
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
		tr  rocelayers.Transport
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		append([]gopacket.DecodingLayer{&eth, &ip4, &udp}, tr.DecodingLayers()...)...)
	fr := goldenFrames(t)[0]
	var p rocev2.Packet
	require.NoError(t, p.ParseFrame(fr))
	// Cut the transport to 10 bytes, keeping the IP and UDP lengths
	// consistent, so only the BTH is short.
	n := len(p.Eth) + len(p.IP) + len(p.UDP) + 10
	b := bytes.Clone(fr[:n])
	ipOff := len(p.Eth)
	b[ipOff+2], b[ipOff+3] = byte((n-ipOff)>>8), byte(n-ipOff)
	u := ipOff + len(p.IP)
	b[u+4], b[u+5] = 0, 18
	var decoded []gopacket.LayerType
	err := parser.DecodeLayers(b, &decoded)
	assert.ErrorIs(t, err, wire.ErrTruncated)
	assert.True(t, parser.Truncated)
}

// TestDecodingLayerParserZeroAllocs checks that decoding a packet through
// the DecodingLayers allocates nothing, like gopacket's own layers.
func TestDecodingLayerParserZeroAllocs(t *testing.T) {
	rocelayers.Register()
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
		tr  rocelayers.Transport
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		append([]gopacket.DecodingLayer{&eth, &ip4, &udp}, tr.DecodingLayers()...)...)
	decoded := make([]gopacket.LayerType, 0, 16)
	for _, fr := range goldenFrames(t) {
		n := testing.AllocsPerRun(100, func() {
			if err := parser.DecodeLayers(fr, &decoded); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, n, "%v", decoded)
	}
}

// BenchmarkDecodingLayerParser decodes an rxe RDMA WRITE FIRST (Ethernet,
// IPv4, UDP, BTH, RETH, 1 KiB payload) through gopacket.
func BenchmarkDecodingLayerParser(b *testing.B) {
	rocelayers.Register()
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
		tr  rocelayers.Transport
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		append([]gopacket.DecodingLayer{&eth, &ip4, &udp}, tr.DecodingLayers()...)...)
	decoded := make([]gopacket.LayerType, 0, 16)
	var fr []byte
	var p rocev2.Packet
	for _, f := range goldenFrames(b) {
		if p.ParseFrame(f) == nil && p.Opcode() == bth.RCRDMAWriteFirst {
			fr = f
		}
	}
	require.NotNil(b, fr)
	b.ReportAllocs()
	for b.Loop() {
		if err := parser.DecodeLayers(fr, &decoded); err != nil {
			b.Fatal(err)
		}
	}
}
