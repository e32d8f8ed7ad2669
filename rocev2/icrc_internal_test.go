package rocev2

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// generalHeaders is maskedHeaders without its fast paths: the byte-exact
// word loop over each header with its mask (what every packet took before
// the fast paths).
func generalHeaders(ipHdr, udpHdr, bthPart []byte) uint32 {
	return updateMasked(maskedIPUDP(ipHdr, udpHdr), bthPart, bthMask[:])
}

// TestMaskedHeadersMatchGeneral compares the fast paths of maskedHeaders
// with the general path on random IPv4 and IPv6 headers.
func TestMaskedHeadersMatchGeneral(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	buf := make([]byte, 60)
	for i := range 20000 {
		for j := range buf {
			buf[j] = byte(r.Uint32())
		}
		n := IPv4HeaderLen
		if i%2 == 1 {
			n = IPv6HeaderLen
			buf[0] = 0x60 | buf[0]&0x0f
		} else if buf[0]>>4 == 6 {
			buf[0] = 0x45
		}
		ip, udp, b := buf[:n], buf[n:n+8], buf[n+8:n+20]
		if got, want := maskedHeaders(ip, udp, b), generalHeaders(ip, udp, b); got != want {
			t.Fatalf("maskedHeaders = %#08x, general path %#08x (%x)", got, want, buf[:n+20])
		}
	}
}

// TestSlice8Tables checks the slicing tables against hash/crc32: step8
// over eight bytes and step4 over four equal crc32.Update over them.
func TestSlice8Tables(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		w, reg := r.Uint64(), r.Uint32()
		var b [8]byte
		for i := range b {
			b[i] = byte(w >> (8 * i))
		}
		if got, want := ^step8(^reg, w), crc32.Update(reg, crcTable, b[:]); got != want {
			t.Fatalf("step8 = %#08x, crc32 %#08x", got, want)
		}
		if got, want := ^step4(^reg, uint32(w)), crc32.Update(reg, crcTable, b[:4]); got != want {
			t.Fatalf("step4 = %#08x, crc32 %#08x", got, want)
		}
	}
}

var sinkReg uint32

// BenchmarkMaskedHeaders is the header part of one IPv4 ICRC alone (IP,
// UDP, BTH: 40 bytes behind the eight 0xFF), fast path and general path
// in one run.
func BenchmarkMaskedHeaders(b *testing.B) {
	buf := make([]byte, 40)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	buf[0] = 0x45
	ip, udp, bt := buf[:20], buf[20:28], buf[28:40]
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkReg += maskedHeaders(ip, udp, bt)
		}
	})
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkReg += generalHeaders(ip, udp, bt)
		}
	})
}

// TestFoldHeaded: foldHeaded is the CRC of its block and then p from a
// zero register, at every length around the fold's steps.
func TestFoldHeaded(t *testing.T) {
	if !hasFold512 {
		t.Log("no fold on this machine: the portable foldHeaded")
	}
	r := rand.New(rand.NewPCG(17, 4791))
	var h [64]byte
	p := make([]byte, 4200)
	for _, n := range []int{512, 513, 527, 528, 575, 576, 767, 768, 1024, 4096, 4100, 4200} {
		for i := range h {
			h[i] = byte(r.Uint32())
		}
		for i := range p[:n] {
			p[i] = byte(r.Uint32())
		}
		want := crc32.Update(crc32.Update(0xffffffff, crc32.IEEETable, h[:]), crc32.IEEETable, p[:n])
		if got := foldHeaded(&h, p[:n]); got != want {
			t.Fatalf("len %d: foldHeaded %#08x, want %#08x", n, got, want)
		}
	}
}
