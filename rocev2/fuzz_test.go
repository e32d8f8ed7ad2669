package rocev2_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/reth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// fuzzFrames returns the seed frames: the two scapy golden vectors and one
// rxe frame per (capture, opcode).
func fuzzFrames(f *testing.F) [][]byte {
	frames := [][]byte{unhex(f, scapyUC), unhex(f, cx4CNP)}
	return append(frames, samplePerOpcode(f)...)
}

// checkTransport checks the invariants of a successful transport parse:
// the lengths add up and the views sit where the opcode table says.
func checkTransport(t *testing.T, p *rocev2.Packet) {
	t.Helper()
	if p.Info == nil || p.BTH == nil || len(p.ICRC) != bth.ICRCSize {
		t.Fatalf("parsed packet without BTH, Info or ICRC: %+v", p)
	}
	if got := p.Info.HeaderLen + len(p.Payload) + len(p.Pad) + bth.ICRCSize; got != len(p.Transport) {
		t.Fatalf("HeaderLen %d + payload %d + pad %d + 4 = %d, transport %d",
			p.Info.HeaderLen, len(p.Payload), len(p.Pad), got, len(p.Transport))
	}
	if len(p.Pad) != p.BTH.PadCount() {
		t.Fatalf("pad %d bytes, PadCnt %d", len(p.Pad), p.BTH.PadCount())
	}
	m := p.Info.Mask
	for _, h := range []struct {
		mask bth.HeaderMask
		view []byte
		size int
	}{
		{bth.MaskRETH, p.RETH, reth.Size}, {bth.MaskAETH, p.AETH, aeth.Size},
		{bth.MaskImmDt, p.ImmDt, ext.ImmDtSize}, {bth.MaskIETH, p.IETH, ext.IETHSize},
		{bth.MaskDETH, p.DETH, ext.DETHSize}, {bth.MaskAtomicETH, p.AtomicETH, ext.AtomicETHSize},
		{bth.MaskAtomicAckETH, p.AtomicAckETH, ext.AtomicAckETHSize}, {bth.MaskFETH, p.FETH, ext.FETHSize},
		{bth.MaskCNPPad, p.CNPPad, bth.CNPPadSize},
	} {
		off, has := p.Info.Offset(h.mask)
		if has != m.Has(h.mask) || has != (h.view != nil) {
			t.Fatalf("mask %#x: Offset %v, Mask %v, view %v", uint32(h.mask), has, m.Has(h.mask), h.view != nil)
		}
		if has && (len(h.view) != h.size || cap(h.view) != h.size || &h.view[0] != &p.Transport[off]) {
			t.Fatalf("mask %#x: view of %d bytes (cap %d) not at offset %d", uint32(h.mask), len(h.view), cap(h.view), off)
		}
	}
}

// checkRebuild checks that re-encoding a parsed transport is stable: the
// first rebuild normalises (pad from the payload length, zero pad bytes,
// zero ICRC, zero CNP reserved bytes), and rebuilding the rebuilt packet
// gives the same bytes. A canonical input is rebuilt byte for byte, apart
// from the ICRC.
func checkRebuild(t *testing.T, p *rocev2.Packet) {
	t.Helper()
	f := p.Fields()
	buf := make([]byte, len(p.Transport)+8)
	n, err := wire.Build(buf, &f, p.Payload)
	if !p.Info.Mask.Has(bth.MaskPayload) && len(p.Payload) > 0 {
		// The parser is lenient (it leaves length rules to the
		// transport), the builder strict.
		if err == nil {
			t.Fatalf("built %v with a %d-byte payload", p.Opcode(), len(p.Payload))
		}
		return
	}
	if err != nil {
		t.Fatalf("BuildTransport(Fields()): %v", err)
	}
	b1 := buf[:n]
	// Fields does not model the values of the pad bytes or of a CNP's 16
	// reserved bytes (the builder writes zeros, receivers ignore them).
	canonical := p.BTH.PadCount() == -len(p.Payload)&3 && allZero(p.Pad) && allZero(p.CNPPad)
	if canonical && !bytes.Equal(b1[:n-4], p.Transport[:len(p.Transport)-4]) {
		t.Fatalf("canonical packet rebuilt differently:\n%x\n%x", p.Transport, b1)
	}
	var q rocev2.Packet
	if err := q.ParseTransport(b1); err != nil {
		t.Fatalf("rebuilt packet does not parse: %v", err)
	}
	want := f
	want.BTH.PadCount = -len(p.Payload) & 3
	if q.Fields() != want || !bytes.Equal(q.Payload, p.Payload) {
		t.Fatalf("rebuilt fields %+v, want %+v", q.Fields(), want)
	}
	f2 := q.Fields()
	buf2 := make([]byte, n)
	n2, err := wire.Build(buf2, &f2, q.Payload)
	if err != nil || !bytes.Equal(buf2[:n2], b1) {
		t.Fatalf("second rebuild differs (%v)", err)
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// FuzzParseTransport feeds arbitrary UDP payloads to ParseTransport.
func FuzzParseTransport(f *testing.F) {
	var p rocev2.Packet
	for _, fr := range fuzzFrames(f) {
		if p.ParseFrame(fr) == nil {
			f.Add(bytes.Clone(p.Transport))
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p rocev2.Packet
		if err := p.ParseTransport(b); err != nil {
			if p.Payload != nil && p.Pad != nil {
				t.Fatalf("error %v with payload and pad views set", err)
			}
			return
		}
		checkTransport(t, &p)
		if p.HasOuter() || p.VerifyICRC() == nil {
			t.Fatal("transport-only parse claims outer headers")
		}
		checkRebuild(t, &p)
	})
}

// FuzzParseFrame feeds arbitrary frames to ParseFrame. A packet that parses
// satisfies the transport invariants, its outer headers agree with
// gopacket's decoding, and rebuilding it through Encap gives a packet whose
// ICRC verifies and which rebuilds to the same bytes.
func FuzzParseFrame(f *testing.F) {
	for _, fr := range fuzzFrames(f) {
		f.Add(fr)
	}
	f.Add(testFrame6(f, bth.RCRDMAWriteOnlyWithImmediate, 13))
	f.Add(testFrame(f, bth.RCFlush, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p rocev2.Packet
		err := p.ParseFrame(b)
		if err != nil {
			return
		}
		checkTransport(t, &p)
		if !p.HasOuter() {
			t.Fatal("no outer headers after ParseFrame")
		}
		icrcErr := p.VerifyICRC()
		if icrcErr != nil && icrcErr != rocev2.ErrBadICRC {
			t.Fatalf("VerifyICRC: %v", icrcErr)
		}
		compareGopacket(t, b, &p)
		checkRebuild(t, &p)

		// Rebuild the whole frame through Encap.
		if !p.Info.Mask.Has(bth.MaskPayload) && len(p.Payload) > 0 {
			return
		}
		e := p.Encap()
		fl := p.Fields()
		buf := make([]byte, len(b)+64)
		n, err := e.Build(buf, &fl, p.Payload)
		if err != nil {
			t.Fatalf("Encap.Build: %v", err)
		}
		var q rocev2.Packet
		if err := q.ParseFrame(buf[:n]); err != nil {
			t.Fatalf("rebuilt frame: %v", err)
		}
		if err := q.VerifyICRC(); err != nil {
			t.Fatalf("rebuilt frame: %v", err)
		}
		if e.TTL == 0 {
			e.TTL = 64 // Encap's zero TTL means the default, 64
		}
		if q.Encap() != e {
			t.Fatalf("Encap %+v, rebuilt %+v", e, q.Encap())
		}
	})
}

// compareGopacket decodes b with gopacket and, when gopacket decodes it
// without error, checks that it sees the same IP and UDP headers and the
// same UDP payload.
func compareGopacket(t *testing.T, b []byte, p *rocev2.Packet) {
	t.Helper()
	gp := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true, Lazy: false})
	if gp.ErrorLayer() != nil {
		return
	}
	u, ok := gp.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if !ok {
		t.Fatalf("gopacket sees no UDP layer: %v", gp)
	}
	if u.DstPort != rocev2.UDPPort || !bytes.Equal(u.Contents, p.UDP) || !bytes.Equal(u.Payload, p.Transport) {
		t.Fatalf("gopacket UDP %v (payload %d bytes) vs ours %x (transport %d bytes)",
			u, len(u.Payload), p.UDP, len(p.Transport))
	}
	var ipContents []byte
	switch ip := gp.NetworkLayer().(type) {
	case *layers.IPv4:
		ipContents = ip.Contents
	case *layers.IPv6:
		ipContents = ip.Contents
	default:
		t.Fatalf("gopacket network layer %T", ip)
	}
	if !bytes.Equal(ipContents, p.IP) {
		t.Fatalf("gopacket IP header %x, ours %x", ipContents, p.IP)
	}
}

// FuzzBuildTransport builds packets from arbitrary fields and payloads and
// checks Parse(Build(f)) == f.
func FuzzBuildTransport(f *testing.F) {
	f.Add(uint8(bth.RCRDMAWriteFirst), uint8(0xff), uint16(0xffff), uint32(0x15), uint32(3955192),
		uint64(0x7f8e3b588000), uint64(0x6ac), uint64(65536), uint32(1), []byte("payload"))
	f.Add(uint8(bth.CNP), uint8(0x40), uint16(0xffff), uint32(0x118), uint32(0), uint64(0), uint64(0), uint64(0), uint32(0), []byte{})
	f.Add(uint8(bth.RCFlush), uint8(0), uint16(1), uint32(2), uint32(3), uint64(4), uint64(5), uint64(6), uint32(0x13), []byte(nil))
	f.Add(uint8(bth.UDSendOnlyWithImmediate), uint8(0x12), uint16(0xffff), uint32(1), uint32(7), uint64(0x80010000), uint64(1), uint64(0), uint32(0xdeadbeef), make([]byte, 256))
	f.Fuzz(func(t *testing.T, op, flags uint8, pkey uint16, qp, psn uint32, a, b, c uint64, d uint32, payload []byte) {
		fl := wire.Fields{
			BTH: bth.Fields{
				Opcode: bth.Opcode(op), SolicitedEvent: flags&1 != 0, MigReq: flags&2 != 0,
				PadCount: int(flags>>2) & 3, PKey: pkey, FECN: flags&0x10 != 0, BECN: flags&0x20 != 0,
				Resv6: uint8(d) & 0x3f, DestQP: bth.QPN(qp) & bth.QPNMask, AckReq: flags&0x40 != 0,
				Resv7: uint8(d>>8) & 0x7f, PSN: bth.PSN(psn) & bth.PSNMask,
			},
			RETH:         reth.Fields{VA: a, RKey: uint32(b), DMALength: uint32(c)},
			AETH:         aeth.Fields{Syndrome: aeth.Syndrome(d), MSN: uint32(a) & 0xffffff},
			ImmDt:        d,
			IETH:         uint32(b >> 32),
			DETH:         ext.DETHFields{QKey: uint32(a >> 32), Reserved: uint8(c), SrcQP: uint32(c>>8) & 0xffffff},
			AtomicETH:    ext.AtomicETHFields{VA: a, RKey: d, SwapData: b, CompareData: c},
			AtomicAckETH: c,
			FETH:         ext.FETHFields{Reserved: uint32(a) & (1<<26 - 1), Selectivity: uint8(b) & 3, PlacementType: uint8(c) & 0xf},
		}
		buf := make([]byte, bth.Size+64+len(payload)+8)
		n, err := wire.Build(buf, &fl, payload)
		in, known := fl.BTH.Opcode.Lookup()
		switch {
		case !known:
			if err == nil {
				t.Fatalf("built unknown opcode %v", fl.BTH.Opcode)
			}
			return
		case len(payload) > 0 && !in.Mask.Has(bth.MaskPayload):
			if err == nil {
				t.Fatalf("built %v with a payload", fl.BTH.Opcode)
			}
			return
		case err != nil:
			t.Fatalf("BuildTransport: %v", err)
		}
		if n != wire.TransportLen(fl.BTH.Opcode, len(payload)) || n%4 != 0 {
			t.Fatalf("length %d", n)
		}
		var p rocev2.Packet
		if err := p.ParseTransport(buf[:n]); err != nil {
			t.Fatalf("built packet does not parse: %v", err)
		}
		checkTransport(t, &p)
		want := expectedFields(fl, len(payload))
		if got := p.Fields(); got != want {
			t.Fatalf("fields\n got %+v\nwant %+v", got, want)
		}
		if !bytes.Equal(p.Payload, payload) {
			t.Fatal("payload differs")
		}
	})
}

// expectedFields is what Packet.Fields returns for a packet built from f:
// absent headers zero, the pad computed.
func expectedFields(f wire.Fields, n int) wire.Fields {
	m := f.BTH.Opcode.Mask()
	w := wire.Fields{BTH: f.BTH}
	w.BTH.PadCount = -n & 3
	if m.Has(bth.MaskRETH) {
		w.RETH = f.RETH
	}
	if m.Has(bth.MaskAETH) {
		w.AETH = f.AETH
	}
	if m.Has(bth.MaskImmDt) {
		w.ImmDt = f.ImmDt
	}
	if m.Has(bth.MaskIETH) {
		w.IETH = f.IETH
	}
	if m.Has(bth.MaskDETH) {
		w.DETH = f.DETH
	}
	if m.Has(bth.MaskAtomicETH) {
		w.AtomicETH = f.AtomicETH
	}
	if m.Has(bth.MaskAtomicAckETH) {
		w.AtomicAckETH = f.AtomicAckETH
	}
	if m.Has(bth.MaskFETH) {
		w.FETH = f.FETH
	}
	return w
}

// naiveICRC is the reference ICRC of the fuzz test, written from the rule
// (doc/rxe.md §7) with nothing shared with rocev2.ComputeICRC: build the
// masked pseudo-packet explicitly, eight 0xFF bytes first, and run a
// bit-by-bit reflected CRC-32 (polynomial 0xEDB88320, init and final
// complement) over it.
func naiveICRC(ip, udp, transport []byte) uint32 {
	var msg []byte
	msg = append(msg, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	ipm := bytes.Clone(ip)
	if ipm[0]>>4 == 6 {
		ipm[0] |= 0x0f // traffic class, flow label
		ipm[1], ipm[2], ipm[3] = 0xff, 0xff, 0xff
		ipm[7] = 0xff // hop limit
	} else {
		ipm[1] = 0xff                 // TOS
		ipm[8] = 0xff                 // TTL
		ipm[10], ipm[11] = 0xff, 0xff // header checksum
	}
	msg = append(msg, ipm...)
	udpm := bytes.Clone(udp)
	udpm[6], udpm[7] = 0xff, 0xff // checksum
	msg = append(msg, udpm...)
	tm := bytes.Clone(transport)
	if len(tm) > 4 {
		tm[4] = 0xff // FECN, BECN, Resv6
	}
	msg = append(msg, tm...)
	crc := ^uint32(0)
	for _, c := range msg {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xedb88320
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

// FuzzICRC checks rocev2.ComputeICRC against naiveICRC on IPv4 headers with
// 0–40 bytes of options, IPv6 headers and arbitrary UDP headers and
// transports.
func FuzzICRC(f *testing.F) {
	var p rocev2.Packet
	for _, fr := range fuzzFrames(f) {
		if p.ParseFrame(fr) == nil {
			f.Add(bytes.Clone(p.IP), bytes.Clone(p.UDP), bytes.Clone(p.Body()))
		}
	}
	v6 := testFrame6(f, bth.RCSendOnly, 100)
	if p.ParseFrame(v6) == nil {
		f.Add(bytes.Clone(p.IP), bytes.Clone(p.UDP), bytes.Clone(p.Body()))
	}
	f.Fuzz(func(t *testing.T, ip, udp, transport []byte) {
		// Shape the headers: IPv6 is 40 bytes, IPv4 20 plus a multiple
		// of 4 up to 60 with a matching IHL; UDP is 8 bytes.
		if len(ip) == 0 {
			return
		}
		if ip[0]>>4 == 6 {
			ip = append(ip, make([]byte, 40)...)[:40]
		} else {
			n := min(20+(max(len(ip)-20, 0))/4*4, 60)
			ip = append(ip, make([]byte, 20)...)[:n]
			ip[0] = 0x40 | byte(n/4)
		}
		udp = append(udp, make([]byte, 8)...)[:8]
		got := rocev2.ComputeICRC(ip, udp, transport)
		if want := naiveICRC(ip, udp, transport); got != want {
			t.Fatalf("ComputeICRC = %#08x, reference %#08x\nip %x\nudp %x\ntransport %x", got, want, ip, udp, transport)
		}
	})
}

// TestNaiveICRCGolden pins the fuzz reference itself to the scapy vectors.
func TestNaiveICRCGolden(t *testing.T) {
	for _, s := range []string{scapyUC, cx4CNP} {
		var p rocev2.Packet
		fr := unhex(t, s)
		if err := p.ParseFrame(fr); err != nil {
			t.Fatal(err)
		}
		if got, want := naiveICRC(p.IP, p.UDP, p.Body()), binary.LittleEndian.Uint32(p.ICRC); got != want {
			t.Fatalf("naive ICRC %#08x, wire %#08x", got, want)
		}
	}
}
