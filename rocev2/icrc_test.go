package rocev2_test

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/goroce/goroce/rocev2"
)

// crc32ICRC is the straightforward ICRC: masked copies of the headers
// behind eight 0xFF bytes, the whole message to hash/crc32 at once. The
// masks follow IBA A17.4.1 as they are written there, not the word
// constants of the fast paths.
func crc32ICRC(ip, udp, transport []byte) uint32 {
	msg := bytes.Repeat([]byte{0xff}, 8)
	ipm := bytes.Clone(ip)
	if len(ipm) > 0 && ipm[0]>>4 == 6 {
		for i, m := range []byte{0x0f, 0xff, 0xff, 0xff, 0, 0, 0, 0xff} { // traffic class, flow label, hop limit
			if i < len(ipm) {
				ipm[i] |= m
			}
		}
	} else {
		for _, i := range []int{1, 8, 10, 11} { // TOS, TTL, header checksum
			if i < len(ipm) {
				ipm[i] = 0xff
			}
		}
	}
	udpm := bytes.Clone(udp)
	for _, i := range []int{6, 7} { // checksum
		if i < len(udpm) {
			udpm[i] = 0xff
		}
	}
	tm := bytes.Clone(transport)
	if len(tm) > 4 {
		tm[4] = 0xff // FECN, BECN, Resv6
	}
	msg = append(append(append(msg, ipm...), udpm...), tm...)
	return crc32.ChecksumIEEE(msg)
}

// randICRCInput returns random headers and transport: mostly the shapes
// the fast paths take (IPv4 without options, IPv6, 8-byte UDP, a whole
// BTH), some IPv4 with options, and some of any length.
func randICRCInput(r *rand.Rand) (ip, udp, transport []byte) {
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	switch r.IntN(4) {
	case 0:
		ip = fill(20)
		ip[0] = 0x45
	case 1:
		ip = fill(40)
		ip[0] = 0x60 | ip[0]&0x0f
	case 2:
		n := 20 + 4*r.IntN(11)
		ip = fill(n)
		ip[0] = 0x40 | byte(n/4)
	default:
		ip = fill(r.IntN(64))
	}
	udp = fill(8)
	if r.IntN(8) == 0 {
		udp = fill(r.IntN(12))
	}
	switch r.IntN(8) {
	case 0, 1:
		transport = fill(r.IntN(16))
	case 2:
		transport = fill(r.IntN(9000)) // the long payloads crcUpdate folds
	default:
		transport = fill(r.IntN(200))
	}
	return ip, udp, transport
}

// TestICRCMatchesCRC32Reference compares ComputeICRC, and
// ComputeICRCGather at a random split of the transport into three parts,
// with crc32ICRC over random inputs.
func TestICRCMatchesCRC32Reference(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 4791))
	for range 20000 {
		ip, udp, tr := randICRCInput(r)
		want := crc32ICRC(ip, udp, tr)
		if got := rocev2.ComputeICRC(ip, udp, tr); got != want {
			t.Fatalf("ComputeICRC = %#08x, reference %#08x\nip %x\nudp %x\ntransport %x", got, want, ip, udp, tr)
		}
		i := r.IntN(len(tr) + 1)
		j := i + r.IntN(len(tr)-i+1)
		if got := rocev2.ComputeICRCGather(ip, udp, tr[:i], tr[i:j], tr[j:]); got != want {
			t.Fatalf("ComputeICRCGather split %d,%d = %#08x, reference %#08x\nip %x\nudp %x\ntransport %x",
				i, j, got, want, ip, udp, tr)
		}
	}
}

// TestICRCGatherSplits checks ComputeICRCGather at the splits the send
// path makes (headers | payload | pad: BTH alone or BTH and RETH before a
// payload, with or without pad) on IPv4 and IPv6 packets of every payload
// length around the fold's thresholds and of an MTU.
func TestICRCGatherSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 4791))
	for _, v6 := range []bool{false, true} {
		for _, n := range []int{0, 16, 255, 256, 496, 500, 511, 512, 513, 527, 528, 1024, 1040, 4096, 4100} {
			ip, udp, _ := randICRCInput(r)
			if v6 {
				ip = make([]byte, 40)
				ip[0] = 0x60
			} else {
				ip = make([]byte, 20)
				ip[0] = 0x45
			}
			for i := range ip[1:] {
				ip[1+i] = byte(r.Uint32())
			}
			udp = udp[:0]
			for range 8 {
				udp = append(udp, byte(r.Uint32()))
			}
			for _, h := range []int{12, 28, 16, 40} {
				for _, pad := range []int{0, 2} {
					tr := make([]byte, h+n+pad)
					for i := range tr {
						tr[i] = byte(r.Uint32())
					}
					want := crc32ICRC(ip, udp, tr)
					if got := rocev2.ComputeICRC(ip, udp, tr); got != want {
						t.Fatalf("v6 %v, payload %d, head %d, pad %d: ComputeICRC %#08x, reference %#08x", v6, n, h, pad, got, want)
					}
					if got := rocev2.ComputeICRCGather(ip, udp, tr[:h], tr[h:h+n], tr[h+n:]); got != want {
						t.Fatalf("v6 %v, payload %d, head %d, pad %d: ComputeICRCGather %#08x, reference %#08x", v6, n, h, pad, got, want)
					}
				}
			}
		}
	}
}

// FuzzICRCGather checks ComputeICRC and ComputeICRCGather against
// crc32ICRC on any headers and any split of the transport.
func FuzzICRCGather(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		ip, udp, tr := randICRCInput(r)
		f.Add(ip, udp, tr, uint8(r.Uint32()), uint8(r.Uint32()))
	}
	f.Fuzz(func(t *testing.T, ip, udp, tr []byte, a, b uint8) {
		want := crc32ICRC(ip, udp, tr)
		if got := rocev2.ComputeICRC(ip, udp, tr); got != want {
			t.Fatalf("ComputeICRC = %#08x, reference %#08x", got, want)
		}
		i := min(int(a), len(tr))
		j := min(i+int(b), len(tr))
		if got := rocev2.ComputeICRCGather(ip, udp, tr[:i], tr[i:j], tr[j:]); got != want {
			t.Fatalf("ComputeICRCGather split %d,%d = %#08x, reference %#08x", i, j, got, want)
		}
	})
}
