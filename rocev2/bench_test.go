package rocev2_test

import (
	"fmt"
	"hash/crc32"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// findFrame returns the first frame of the named capture whose opcode is op.
func findFrame(tb testing.TB, file string, op bth.Opcode) []byte {
	tb.Helper()
	var p rocev2.Packet
	for _, c := range readCaptures(tb) {
		if c.name != file {
			continue
		}
		for _, fr := range c.frames {
			if p.ParseFrame(fr) == nil && p.Opcode() == op {
				return fr
			}
		}
	}
	tb.Fatalf("%s has no %v", file, op)
	return nil
}

// writeFirst is the benchmark packet: an rxe RDMA WRITE FIRST from
// write_bw_s65536.pcap — Ethernet, IPv4, UDP, BTH, RETH, 1 KiB payload,
// ICRC (1090 bytes).
func writeFirst(tb testing.TB) []byte {
	fr := findFrame(tb, "write_bw_s65536", bth.RCRDMAWriteFirst)
	var p rocev2.Packet
	require.NoError(tb, p.ParseFrame(fr))
	require.Len(tb, p.Payload, 1024)
	require.NotNil(tb, p.RETH)
	return fr
}

// write4K describes the build benchmark packet: an RC RDMA WRITE ONLY with
// a 4 KiB payload over Ethernet/IPv4.
func write4K() (rocev2.Encap, wire.Fields, []byte) {
	e := rocev2.Encap{
		Ethernet: true,
		SrcMAC:   [6]byte{0x52, 0x54, 0, 0x77, 0, 3},
		DstMAC:   [6]byte{0x52, 0x54, 0, 0x77, 0, 2},
		Src:      netip.MustParseAddrPort("10.77.0.3:49593"),
		Dst:      netip.MustParseAddrPort("10.77.0.2:4791"),
	}
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCRDMAWriteOnly, PKey: 0xffff, DestQP: 0x15, AckReq: true, PSN: 3955192}}
	f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = 0x7f8e3b588000, 0x6ac, 4096
	payload := make([]byte, 4096)
	for i := range payload {
		payload[i] = byte(i)
	}
	return e, f, payload
}

func BenchmarkParseFrame(b *testing.B) {
	fr := writeFirst(b)
	var p rocev2.Packet
	b.ReportAllocs()
	for b.Loop() {
		if err := p.ParseFrame(fr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseTransport(b *testing.B) {
	var p rocev2.Packet
	require.NoError(b, p.ParseFrame(writeFirst(b)))
	tr := p.Transport
	b.ReportAllocs()
	for b.Loop() {
		if err := p.ParseTransport(tr); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseFrameVerifyICRC is the whole receive check of one packet.
func BenchmarkParseFrameVerifyICRC(b *testing.B) {
	fr := writeFirst(b)
	var p rocev2.Packet
	b.SetBytes(int64(len(fr)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.ParseFrame(fr); err != nil {
			b.Fatal(err)
		}
		if err := p.VerifyICRC(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyICRC(b *testing.B) {
	var p rocev2.Packet
	require.NoError(b, p.ParseFrame(writeFirst(b)))
	b.SetBytes(int64(len(p.IP) + len(p.UDP) + len(p.Transport)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.VerifyICRC(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkComputeICRC4K(b *testing.B) {
	_, _, payload := write4K()
	benchComputeICRC(b, payload)
}

// parsedWrite4K returns write4K's packet with payload, built and parsed.
func parsedWrite4K(b *testing.B, payload []byte) *rocev2.Packet {
	e, f, _ := write4K()
	f.RETH.DMALength = uint32(len(payload))
	buf := make([]byte, 9000)
	n, err := e.Build(buf, &f, payload)
	require.NoError(b, err)
	p := new(rocev2.Packet)
	require.NoError(b, p.ParseFrame(buf[:n]))
	return p
}

// benchComputeICRC times ComputeICRC over write4K's packet with payload.
func benchComputeICRC(b *testing.B, payload []byte) {
	p := parsedWrite4K(b, payload)
	body := p.Body()
	b.SetBytes(int64(len(p.IP) + len(p.UDP) + len(body)))
	b.ReportAllocs()
	var sink uint32
	for b.Loop() {
		sink += rocev2.ComputeICRC(p.IP, p.UDP, body)
	}
	_ = sink
}

// BenchmarkComputeICRCGather4K is BenchmarkComputeICRC4K with the
// transport part in three buffers (headers, payload, pad): the CRC
// continuation must cost what one pass does.
func BenchmarkComputeICRCGather4K(b *testing.B) {
	_, _, payload := write4K()
	p := parsedWrite4K(b, payload)
	body := p.Body()
	hdr, pl, tail := body[:28], body[28:28+len(payload)], body[28+len(payload):]
	b.SetBytes(int64(len(p.IP) + len(p.UDP) + len(body)))
	b.ReportAllocs()
	var sink uint32
	for b.Loop() {
		sink += rocev2.ComputeICRCGather(p.IP, p.UDP, hdr, pl, tail)
	}
	_ = sink
}

func BenchmarkBuildTransport4K(b *testing.B) {
	_, f, payload := write4K()
	buf := make([]byte, 9000)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.Build(buf, &f, payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildTransportSeal4K is the send path: build the transport
// packet in place after room for the outer headers, then Seal writes
// Ethernet/IPv4/UDP and the ICRC.
func BenchmarkBuildTransportSeal4K(b *testing.B) {
	e, f, payload := write4K()
	buf := make([]byte, 9000)
	hl := e.HeaderLen()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		tn, err := wire.Build(buf[hl:], &f, payload)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Seal(buf, tn); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncapBuild4K(b *testing.B) {
	e, f, payload := write4K()
	buf := make([]byte, 9000)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Build(buf, &f, payload); err != nil {
			b.Fatal(err)
		}
	}
}

// TestZeroAllocs pins the hot paths at zero allocations.
func TestZeroAllocs(t *testing.T) {
	fr := writeFirst(t)
	var p rocev2.Packet
	require.NoError(t, p.ParseFrame(fr))
	tr := p.Transport
	e, f, payload := write4K()
	buf := make([]byte, 9000)
	hl := e.HeaderLen()
	var ph [48]byte
	tests := []struct {
		name string
		fn   func()
	}{
		{"ParseFrame", func() { _ = p.ParseFrame(fr) }},
		{"ParseFrame error", func() { _ = p.ParseFrame(fr[:40]) }},
		{"ParseTransport", func() { _ = p.ParseTransport(tr) }},
		{"ParseTransport error", func() { _ = p.ParseTransport(tr[:5]) }},
		{"VerifyICRC", func() { _ = p.ParseFrame(fr); _ = p.VerifyICRC() }},
		{"Fields", func() { _ = p.Fields() }},
		{"Encap", func() { _ = p.Encap() }},
		{"BuildTransport", func() { _, _ = wire.Build(buf[hl:], &f, payload) }},
		{"Seal", func() { _, _ = e.Seal(buf, wire.TransportLen(f.BTH.Opcode, len(payload))) }},
		{"Encap.Build", func() { _, _ = e.Build(buf, &f, payload) }},
		{"ComputeICRC", func() { _ = rocev2.ComputeICRC(fr[14:34], fr[34:42], fr[42:len(fr)-4]) }},
		{"ComputeICRCGather", func() {
			_ = rocev2.ComputeICRCGather(fr[14:34], fr[34:42], fr[42:50], fr[50:len(fr)-6], fr[len(fr)-6:len(fr)-4])
		}},
		{"PseudoHeaders", func() { _, _ = rocev2.PseudoHeaders(&ph, e.Src, e.Dst, 0, 100) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, tc.fn); n != 0 {
				t.Errorf("%s: %v allocations, want 0", tc.name, n)
			}
		})
	}
}

// The receive path verifies a packet's ICRC and then copies its payload
// into the memory region (the responder's scatter). Fusing the two — CRC a
// chunk, copy it, next chunk — would read the payload once instead of
// twice, but a packet whose ICRC fails must leave the region untouched
// (rxe verifies before any side effect), so a valid fused loop could only
// stage the chunks, which is the copy again. BenchmarkRecvFusion measures
// what fusion could win at most: per packet it alternates the path as it
// is (verify, then copy; the packet still in L1 from the socket read) with
// the fused loop that writes before it knows (not a valid receive path;
// the bound only), timing each, so that load on a shared machine hits both
// alike. It reports both costs and their ratio (fused/separate: below 1,
// fusion would pay). The destination walks a 64 MiB region, so its lines
// are cold as in a bulk transfer.
func BenchmarkRecvFusion(b *testing.B) {
	for _, chunk := range []int{512, 1024, 2048} {
		b.Run(fmt.Sprintf("chunk=%d", chunk), func(b *testing.B) { recvFusion(b, chunk) })
	}
}

func recvFusion(b *testing.B, chunk int) {
	const region = 64 << 20
	e, f, payload := write4K()
	buf := make([]byte, 9000)
	n, err := e.Build(buf, &f, payload)
	require.NoError(b, err)
	var p rocev2.Packet
	require.NoError(b, p.ParseFrame(buf[:n]))
	body := p.Body()
	pl := p.Payload
	hl := len(body) - len(pl) - int(p.BTH.PadCount())
	tail := body[hl+len(pl):]
	mem := make([]byte, region)
	want := rocev2.ReadICRC(p.ICRC)
	var sep, fused time.Duration
	off := 0
	b.SetBytes(int64(len(pl)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		dst := mem[off : off+len(pl)]
		t0 := time.Now()
		if i%2 == 1 {
			crc := rocev2.ComputeICRCGather(p.IP, p.UDP, body[:hl], nil, nil)
			for j := 0; j < len(pl); j += chunk {
				c := pl[j:min(j+chunk, len(pl))]
				crc = crc32.Update(crc, crc32.IEEETable, c)
				copy(dst[j:], c)
			}
			if crc32.Update(crc, crc32.IEEETable, tail) != want {
				b.Fatal("bad ICRC")
			}
			fused += time.Since(t0)
		} else {
			if rocev2.ComputeICRC(p.IP, p.UDP, body) != want {
				b.Fatal("bad ICRC")
			}
			copy(dst, pl)
			sep += time.Since(t0)
		}
		off += len(pl)
		if off+len(pl) > region {
			off = 0
		}
	}
	half := float64(max(b.N/2, 1))
	b.ReportMetric(float64(sep.Nanoseconds())/half, "separate-ns/pkt")
	b.ReportMetric(float64(fused.Nanoseconds())/half, "fused-ns/pkt")
	b.ReportMetric(float64(fused)/float64(max(sep, 1)), "fused/separate")
}

// BenchmarkComputeICRCSmall is the ICRC of the latency test's packet, an
// RC RDMA WRITE ONLY with a 2-byte payload over IPv4 (BTH, RETH, 2 bytes,
// 2 of pad): the masked IP/UDP/BTH part is most of the work.
func BenchmarkComputeICRCSmall(b *testing.B) {
	benchComputeICRC(b, []byte{0xa5, 0x5a})
}

// BenchmarkComputeICRCCold is BenchmarkComputeICRC4K and
// BenchmarkComputeICRCGather4K over packets spread through 8 MiB, each
// met once per 2048, as a receive ring or a memory region holds them: the
// payload streams through the cache and pushes out whatever the ICRC's
// header part keeps there (the micro-benchmarks' hot tables and packet
// flatter table lookups).
func BenchmarkComputeICRCCold(b *testing.B) {
	_, _, payload := write4K()
	const slot, slots = 4096, 2048
	ring := make([]byte, slot*slots)
	p := parsedWrite4K(b, payload)
	body := p.Body()
	hdr, tail := body[:28], body[28+len(payload):]
	for i := range ring {
		ring[i] = byte(i * 7)
	}
	b.Run("contiguous", func(b *testing.B) {
		tr := make([]byte, 28+slot)
		copy(tr, hdr)
		b.SetBytes(int64(len(p.IP) + len(p.UDP) + len(tr)))
		var sink uint32
		i := 0
		for b.Loop() {
			// The packet's bytes: its headers, and a payload from the ring
			// copied in as a receive does.
			copy(tr[28:], ring[i*slot:(i+1)*slot])
			sink += rocev2.ComputeICRC(p.IP, p.UDP, tr)
			i = (i + 1) % slots
		}
		_ = sink
	})
	b.Run("gather", func(b *testing.B) {
		b.SetBytes(int64(len(p.IP) + len(p.UDP) + len(hdr) + slot + len(tail)))
		var sink uint32
		i := 0
		for b.Loop() {
			sink += rocev2.ComputeICRCGather(p.IP, p.UDP, hdr, ring[i*slot:(i+1)*slot], tail)
			i = (i + 1) % slots
		}
		_ = sink
	})
}
