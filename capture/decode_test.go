package capture_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/internal/capfmt"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// loadFrames reads every record of a capture into memory (copies, so the
// frames outlive the reader's buffer).
func loadFrames(tb testing.TB, path string) []capture.Frame {
	tb.Helper()
	rd, err := capture.Open(path)
	require.NoError(tb, err)
	defer rd.Close()
	var out []capture.Frame
	for {
		var fr capture.Frame
		err := rd.Next(&fr)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(tb, err)
		fr.Data = bytes.Clone(fr.Data)
		out = append(out, fr)
	}
}

// allCaptures lists every capture file of the repository's testdata.
func allCaptures(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, g := range []string{"testdata/pcaps/*.pcap", "testdata/cap/*.pcap", "testdata/tshark/probe/*.pcap",
		"interop/testdata/*.pcap", "internal/capfmt/testdata/*.pcap"} {
		m, err := filepath.Glob(filepath.Join(root, g))
		require.NoError(tb, err)
		out = append(out, m...)
	}
	require.NotEmpty(tb, out)
	return out
}

// facts is what a decode says about a frame, in the terms of Packet.
type facts struct {
	Kind               capture.Kind
	IP, UDP, Transport []byte
	TransportLen       int
	Cut                bool
	ICRC               capture.ICRCStatus
	Tagged             bool
	TCI                capture.TCI
	MAC                capture.MACControl
}

func ours(p *capture.Packet) facts {
	f := facts{Kind: p.Kind, ICRC: p.ICRC, Tagged: p.Tagged, TCI: p.TCI, MAC: p.MACControl}
	if p.Kind == capture.KindRoCE || p.Kind == capture.KindICMPError {
		f.IP, f.UDP, f.Transport = p.RoCE.IP, p.RoCE.UDP, p.RoCE.Transport
		f.TransportLen, f.Cut = p.TransportLen, p.Cut
	}
	return f
}

// tshark reads the same facts off the tshark emulation's decode. Only
// the items before the InfiniBand protocol count: tshark's payload
// heuristics can find an Ethernet frame, a VLAN tag or an ICMP message
// inside RDMA data (EtherType and EoIB encapsulation), which says
// nothing about the frame itself. nested reports such items.
//
// The length on the wire of a transport packet the snap length cut is
// the UDP length's, as the flow analysis has always taken it.
func tshark(p *capfmt.Packet, fr *capture.Frame) (f facts, nested bool) {
	items := p.Items
	for i, it := range items {
		if it.Field == capfmt.ProtoInfiniband {
			for _, x := range items[i+1:] {
				switch x.Field {
				case capfmt.ProtoEth, capfmt.ProtoVLAN, capfmt.ProtoIP, capfmt.ProtoIPv6, capfmt.ProtoICMP,
					capfmt.ProtoICMPv6, capfmt.ProtoUDP, capfmt.ProtoMACC:
					nested = true
				}
			}
			items = items[:i]
			break
		}
	}
	outer := capfmt.Packet{Items: items}
	switch {
	case p.RoCE && (outer.Has(capfmt.ProtoICMP) || outer.Has(capfmt.ProtoICMPv6)):
		f.Kind = capture.KindICMPError
	case p.RoCE:
		f.Kind = capture.KindRoCE
	case outer.Has(capfmt.ProtoMACC):
		f.Kind = capture.KindMACControl
	}
	if p.RoCE {
		f.IP, f.UDP, f.Transport = p.IPHeader, p.UDPHeader, p.Transport
		f.TransportLen = len(p.Transport)
		if ulen := int(binary.BigEndian.Uint16(p.UDPHeader[4:])); fr.OrigLen > len(fr.Data) && ulen-8 > len(p.Transport) {
			f.TransportLen, f.Cut = ulen-8, true
		}
		switch {
		case p.ICRCChecked && p.ICRCGood:
			f.ICRC = capture.ICRCGood
		case p.ICRCChecked:
			f.ICRC = capture.ICRCBad
		}
	}
	if it, ok := outer.Lookup(capfmt.VLANPriority); ok {
		f.Tagged = true
		dei, _ := outer.Lookup(capfmt.VLANDEI)
		id, _ := outer.Lookup(capfmt.VLANID)
		f.TCI = capture.TCI(it.Value<<13 | dei.Value<<12 | id.Value)
	}
	if op, ok := outer.Lookup(capfmt.MACCOpcode); ok {
		m := &f.MAC
		m.Opcode = capture.MACOpcode(op.Value)
		if v, ok := outer.Lookup(capfmt.MACCPauseTime); ok {
			m.PauseTime, m.Complete = uint16(v.Value), true
		}
		if v, ok := outer.Lookup(capfmt.MACCEnbv); ok {
			m.Enable = uint16(v.Value)
		}
		for c := range m.Times {
			if v, ok := outer.Lookup(capfmt.MACCPauseTimeC0 + capfmt.Field(c)); ok {
				m.Times[c] = uint16(v.Value)
				m.Complete = c == 7
			}
		}
	}
	return f, nested
}

// agree decodes fr both ways and reports the first difference.
func agree(dec *capfmt.Decoder, fr *capture.Frame) (nested bool, diff string) {
	var (
		tp capfmt.Packet
		cp capture.Packet
	)
	dec.Decode(fr, &tp)
	err := cp.Decode(fr)
	want, nested := tshark(&tp, fr)
	got := ours(&cp)
	switch {
	case fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want):
		return nested, fmt.Sprintf("capture: %+v\ncapfmt:  %+v", got, want)
	case cp.Kind == capture.KindRoCE && err == nil && cp.Cut:
		return nested, "a cut packet decoded without ErrCut"
	case cp.Kind != capture.KindRoCE && !errors.Is(err, capture.ErrNotRoCE):
		return nested, fmt.Sprintf("kind %v, error %v", cp.Kind, err)
	}
	return nested, ""
}

// variants derives frames of every link type, VLAN tag stack, snap cut,
// ICMP quote and corrupted header byte from an Ethernet frame, the
// corners where decoders part ways.
func variants(fr capture.Frame, flips bool) []capture.Frame {
	d := fr.Data
	var out []capture.Frame
	add := func(lt capture.LinkType, b []byte, orig int) {
		out = append(out, capture.Frame{Number: fr.Number, Time: fr.Time, LinkType: lt, Data: b, OrigLen: max(orig, len(b))})
	}
	add(capture.LinkEthernet, d, fr.OrigLen)
	if len(d) < 14 {
		return out
	}
	et, net := d[12:14], d[14:]
	cuts := []int{0, 13, 14, 15, 16, 18, 20, 30, 33, 34, 35, 38, 41, 42, 43, 46, 50, 54, 57, 58, 62, 70, 90}
	if flips {
		cuts = cuts[:0]
		for n := range min(len(d), 96) {
			cuts = append(cuts, n)
		}
	}
	for _, n := range cuts {
		if n < len(d) {
			add(capture.LinkEthernet, d[:n], len(d))                  // snap-length cut
			add(capture.LinkEthernet, d[:n], n)                       // a short frame
			add(capture.LinkEthernet, d[:n], len(d)+(n%3)*(len(d)-n)) // a length field claiming more
		}
	}
	tag := func(tags ...uint16) []byte {
		b := append([]byte(nil), d[:12]...)
		for i := 0; i < len(tags); i += 2 {
			b = binary.BigEndian.AppendUint16(b, tags[i])
			b = binary.BigEndian.AppendUint16(b, tags[i+1])
		}
		return append(b, d[12:]...)
	}
	for _, t := range [][]uint16{{0x8100, 5<<13 | 0x1000 | 100}, {0x88a8, 7, 0x8100, 3<<13 | 200}, {0x9100, 6 << 13},
		{0x8100, 1 << 13, 0x8100, 2 << 13, 0x8100, 3 << 13}} {
		b := tag(t...)
		add(capture.LinkEthernet, b, len(b))
		add(capture.LinkEthernet, b[:16], len(b))
		add(capture.LinkEthernet, b[:19], len(b))
	}
	// Ethernet padding after the IP datagram.
	add(capture.LinkEthernet, append(bytes.Clone(d), make([]byte, 8)...), 0)
	if len(net) >= 28 && net[0]>>4 == 4 && net[0]&0x0f == 5 {
		ip, l4 := net[:20], net[20:]
		v4 := func(mod func(h []byte) []byte) {
			h := mod(bytes.Clone(ip))
			h[0] = 0x40 | byte(len(h)/4)
			binary.BigEndian.PutUint16(h[2:], uint16(len(h)+len(l4)))
			b := append(append(bytes.Clone(d[:14]), h...), l4...)
			add(capture.LinkEthernet, b, 0)
			for n := 14 + 20; n <= 14+len(h)+8; n++ {
				add(capture.LinkEthernet, b[:n], len(b)) // cut in the options
			}
		}
		v4(func(h []byte) []byte { h[6] |= 0x20; return h })                       // more fragments
		v4(func(h []byte) []byte { h[7] = 1; return h })                           // fragment offset
		v4(func(h []byte) []byte { h[6] = 0; return h })                           // DF clear
		v4(func(h []byte) []byte { return append(h, 1, 1, 1, 0) })                 // NOPs, EOL
		v4(func(h []byte) []byte { return append(h, 0x83, 7, 4, 10, 0, 0, 5, 0) }) // loose source route
		v4(func(h []byte) []byte { return append(h, 0x89, 7, 8, 10, 0, 0, 5, 0) }) // strict, pointer past the end
		v4(func(h []byte) []byte { return append(h, 0x44, 40, 5, 0) })             // timestamp, length past the header
		// The same datagram over IPv6, with extension headers.
		v6 := func(nh byte, ext []byte, pad int) {
			h := make([]byte, 40, 40+len(ext)+len(l4)+pad)
			h[0], h[6], h[7] = 0x60, nh, 64
			copy(h[8:], "\xfe\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01")
			copy(h[24:], "\xfe\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02")
			// A negative pad: the payload length says less than the UDP
			// datagram holds (the datagram ends early).
			binary.BigEndian.PutUint16(h[4:], uint16(len(ext)+len(l4)+min(pad, 0)))
			pad = max(pad, 0)
			b := append(append(append(h, ext...), l4...), make([]byte, pad)...)
			add(capture.LinkEthernet, append(append(bytes.Clone(d[:12]), 0x86, 0xdd), b...), 0)
			add(capture.LinkIPv6, b, 0)
		}
		v6(17, nil, 0)
		v6(17, nil, 8)
		v6(17, nil, -4)
		v6(0, []byte{17, 0, 1, 4, 0, 0, 0, 0}, 0)  // hop-by-hop with a PadN
		v6(60, []byte{17, 0, 1, 9, 0, 0, 0, 0}, 0) // an option running past the header
		v6(43, []byte{17, 0, 0, 0, 0, 0, 0, 0}, 0) // routing
		v6(44, []byte{17, 0, 0, 0, 0, 0, 0, 1}, 0) // atomic fragment
		v6(44, []byte{17, 0, 0, 8, 0, 0, 0, 1}, 0) // a real fragment
		v6(6, nil, 0)
	}
	sll := append([]byte{0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0}, et...)
	add(capture.LinkLinuxSLL, append(sll, net...), 0)
	sll2 := append(append([]byte(nil), et...), 0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0)
	add(capture.LinkSLL2, append(sll2, net...), 0)
	add(capture.LinkRaw, net, 0)
	add(capture.LinkIPv4, net, 0)
	add(capture.LinkIPv6, net, 0)
	add(capture.LinkNull, append([]byte{2, 0, 0, 0}, net...), 0)
	add(capture.LinkLoop, append([]byte{0, 0, 0, 2}, net...), 0)
	add(capture.LinkNull, append([]byte{0, 0, 0, 30}, net...), 0)
	// ICMP messages quoting the IP packet: the errors (destination
	// unreachable, source quench, redirect, time exceeded, parameter
	// problem; ICMPv6 1 to 4) and others (echo) that quote nothing.
	for _, ty := range []byte{0, 1, 2, 3, 4, 5, 8, 11, 12, 128} {
		if len(net) == 0 {
			break
		}
		q := net[:min(len(net), 20+8+64)]
		icmp := append([]byte{ty, 3, 0, 0, 0, 0, 0, 0}, q...)
		ip := []byte{0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 1, 0, 0, 10, 0, 0, 9, 10, 0, 0, 1}
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(icmp)))
		add(capture.LinkIPv4, append(ip, icmp...), 0)
		icmp6 := append([]byte{ty, 4, 0, 0, 0, 0, 0, 0}, q...)
		ip6 := make([]byte, 40)
		ip6[0], ip6[6], ip6[7] = 0x60, 58, 64
		binary.BigEndian.PutUint16(ip6[4:], uint16(len(icmp6)))
		add(capture.LinkIPv6, append(ip6, icmp6...), 0)
	}
	if flips {
		for i := range min(len(d), 96) {
			for _, v := range []byte{0x00, 0xff, d[i] ^ 0x01, d[i] ^ 0x40, 0x88} {
				b := bytes.Clone(d)
				b[i] = v
				add(capture.LinkEthernet, b, fr.OrigLen)
			}
		}
	}
	return out
}

// TestDecodeMatchesTsharkEmulation decodes every frame of every capture
// in testdata, and thousands of variants of them (other link types,
// VLAN stacks, snap cuts, ICMP quotes, a corrupted byte at every offset
// of the headers), with Packet.Decode and with the tshark emulation of
// "goroce cap" (internal/capfmt): both must find the same RoCEv2 packet
// (the same IP, UDP and transport bytes), the same ICRC verdict, the same
// 802.1Q tag and the same PAUSE/PFC fields. The flow analysis and the
// linter read captures through Decode, and "goroce cap -T fields"
// through the emulation; this is what keeps them in step.
func TestDecodeMatchesTsharkEmulation(t *testing.T) {
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var n, roce, nestedN, failed int
	for _, path := range allCaptures(t) {
		frames := loadFrames(t, path)
		for i, fr := range frames {
			// Every frame as is, the variants of the first 12 of each file
			// and of every 50th.
			vs := []capture.Frame{fr}
			if i < 12 || i%50 == 0 {
				vs = variants(fr, i < 4)
			}
			for j := range vs {
				n++
				nested, diff := agree(dec, &vs[j])
				if nested {
					nestedN++
				}
				if diff != "" {
					failed++
					if failed <= 10 {
						t.Errorf("%s frame %d variant %d (link %v, %d of %d bytes): %s",
							filepath.Base(path), fr.Number, j, vs[j].LinkType, len(vs[j].Data), vs[j].OrigLen, diff)
					}
				}
				var p capture.Packet
				if p.Decode(&vs[j]) == nil {
					roce++
				}
			}
		}
	}
	t.Logf("%d frames decoded both ways, %d RoCEv2 packets that parse, %d with tshark payload heuristics' items", n, roce, nestedN)
	assert.Zero(t, failed, "frames decoded differently")
	assert.Greater(t, n, 50000)
	assert.Greater(t, roce, 5000)
}

// FuzzDecode checks Decode against the tshark emulation on any frame of
// any link type: no panic, and the same findings.
func FuzzDecode(f *testing.F) {
	for _, p := range []string{"testdata/pcaps/rc_imm.pcap", "testdata/pcaps/ud_pingpong.pcap", "testdata/cap/impaired.pcap",
		"testdata/tshark/probe/probe_vlan.pcap", "testdata/tshark/probe/probe_ip.pcap", "testdata/tshark/probe/probe_macc.pcap"} {
		for i, fr := range loadFrames(f, filepath.Join(root, p)) {
			if i%4 == 0 {
				f.Add(uint8(0), fr.Data, uint16(0))
			}
		}
	}
	links := []capture.LinkType{capture.LinkEthernet, capture.LinkRaw, capture.LinkIPv4, capture.LinkIPv6,
		capture.LinkLinuxSLL, capture.LinkSLL2, capture.LinkNull, capture.LinkLoop}
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	f.Fuzz(func(t *testing.T, link uint8, data []byte, extra uint16) {
		fr := capture.Frame{Number: 1, LinkType: links[int(link)%len(links)], Data: data, OrigLen: len(data) + int(extra%256)}
		if _, diff := agree(dec, &fr); diff != "" {
			t.Fatal(diff)
		}
	})
}

// TestDecodeErrors checks what Decode returns for each kind of frame,
// and the transport views of a frame the snap length cut.
func TestDecodeErrors(t *testing.T) {
	frames := loadFrames(t, filepath.Join(root, "testdata/pcaps/read_bw_s8.pcap"))
	var req capture.Frame // the first RDMA READ request
	for _, fr := range frames {
		var p capture.Packet
		if p.Decode(&fr) == nil && p.RoCE.RETH != nil && p.RoCE.AETH == nil {
			req = fr
			break
		}
	}
	require.NotNil(t, req.Data)
	cut := req
	cut.Data = req.Data[:14+20+8+12+8] // BTH and part of the RETH
	cutRETH := req
	cutRETH.Data = req.Data[:14+20+8+12+16+2] // the RETH whole, not the ICRC
	short := req
	short.Data, short.OrigLen = req.Data[:14+20+8+6], 14+20+8+6 // less than a BTH, not cut
	pause := capture.Frame{LinkType: capture.LinkEthernet, Data: append(make([]byte, 12), 0x88, 0x08, 0x00, 0x01, 0x12, 0x34)}
	arp := capture.Frame{LinkType: capture.LinkEthernet, Data: append(make([]byte, 12), 0x08, 0x06, 0, 1)}

	tests := []struct {
		name string
		fr   capture.Frame
		kind capture.Kind
		err  error
		bth  bool
		reth bool
	}{
		{"whole", req, capture.KindRoCE, nil, true, true},
		{"cut in the RETH", cut, capture.KindRoCE, capture.ErrCut, true, false},
		{"cut after the RETH", cutRETH, capture.KindRoCE, capture.ErrCut, true, true},
		{"shorter than a BTH", short, capture.KindRoCE, wire.ErrTruncated, false, false},
		{"PAUSE", pause, capture.KindMACControl, capture.ErrNotRoCE, false, false},
		{"ARP", arp, capture.KindOther, capture.ErrNotRoCE, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p capture.Packet
			err := p.Decode(&tc.fr)
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.err)
			}
			assert.Equal(t, tc.kind, p.Kind)
			assert.Equal(t, tc.bth, p.RoCE.BTH != nil, "BTH")
			assert.Equal(t, tc.reth, p.RoCE.RETH != nil, "RETH")
			if tc.err == capture.ErrCut {
				assert.True(t, p.Cut)
				assert.Equal(t, len(req.Data)-14-20-8, p.TransportLen, "the length on the wire")
				assert.Equal(t, capture.ICRCUnchecked, p.ICRC)
				assert.Nil(t, p.RoCE.Payload)
				assert.Nil(t, p.RoCE.ICRC)
			}
		})
	}

	// The outer facts agree with rocev2's own parse of the frame.
	var p capture.Packet
	require.NoError(t, p.Decode(&req))
	assert.Equal(t, capture.ICRCGood, p.ICRC)
	var rp rocev2.Packet
	require.NoError(t, rp.ParseFrame(req.Data))
	require.NoError(t, rp.VerifyICRC())
	e := rp.Encap()
	assert.Equal(t, e.Src, p.Src())
	assert.Equal(t, e.Dst, p.Dst())
	assert.Equal(t, e.TOS>>2, p.DSCP())
	assert.Equal(t, e.TOS&3, p.ECN())
	assert.Equal(t, rp.Transport, p.RoCE.Transport)
	assert.Equal(t, rp.Eth, p.RoCE.Eth)

	require.ErrorIs(t, p.Decode(&pause), capture.ErrNotRoCE)
	assert.Equal(t, capture.MACControl{Opcode: capture.MACPause, Complete: true, PauseTime: 0x1234}, p.MACControl)
	assert.False(t, p.Src().IsValid())
}

// TestDecodeAllocs pins Decode at zero allocations per frame.
func TestDecodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	frames := loadFrames(t, filepath.Join(root, "testdata/pcaps/write_bw_s65536.pcap"))
	var p capture.Packet
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		_ = p.Decode(&frames[i%len(frames)])
		i++
	})
	assert.Zero(t, allocs)
}

// BenchmarkDecode measures Decode over a 64 KiB RDMA WRITE stream (ICRC
// check included). ns/op is per frame.
func BenchmarkDecode(b *testing.B) {
	frames := loadFrames(b, filepath.Join(root, "testdata/pcaps/write_bw_s65536.pcap"))
	var p capture.Packet
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = p.Decode(&frames[i%len(frames)])
	}
}

// BenchmarkReadDecode measures the whole path from file bytes: the pcap
// reader and Decode. ns/op is per frame.
func BenchmarkReadDecode(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(root, "testdata/pcaps/write_bw_s65536.pcap"))
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		rd, err := capture.NewReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		var (
			fr capture.Frame
			p  capture.Packet
		)
		for n < b.N && rd.Next(&fr) == nil {
			_ = p.Decode(&fr)
			n++
		}
	}
}
