//go:build rxe && linux

package interop

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// checkQuirks runs the wire hygiene on testdata/name, building goroce for
// its cap comparison when the suite has not.
func checkQuirks(t *testing.T, name string) wire {
	t.Helper()
	if h == nil {
		t.Skip(skipReason)
	}
	if h.goroce == "" { // the suite builds it when the guest comes up
		bin := filepath.Join(t.TempDir(), "goroce")
		b := exec.Command("go", "build", "-o", bin, "./cmd/goroce")
		b.Dir = h.root
		if out, err := b.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		h.goroce = bin
		defer func() { h.goroce = "" }()
	}
	w, err := h.checkWire(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWireHygieneQuirks runs the wire hygiene on testdata/quirks.pcap, cut
// from two interop captures: nine 1024-byte WRITE MIDDLEs of the data test's
// random payload, the fifth of which tshark 4.0's SMC-R heuristic took for a
// REQUEST ADD LINK v2 announcing 83 GIDs (the CI run it failed), and eight
// ib_write_lat packets with the EtherType quirk, one sent by goroce. Both
// quirks must be accounted, nothing else flagged, and goroce cap must print
// what tshark prints (it lost the ICRC of the SMC frame before capfmt
// modelled the SMC dissector).
func TestWireHygieneQuirks(t *testing.T) {
	w := checkQuirks(t, "quirks.pcap")
	if w.smc != 1 || w.ethertype != 1 || w.rpcordma != 0 || w.goroce != 13 || w.roce != 17 {
		t.Errorf("got %+v, want 1 SMC and 1 EtherType quirk among 13 of 17 packets from goroce", w)
	}
}

// TestWireHygieneEoIB runs the wire hygiene on testdata/quirks_eoib.pcap,
// the capture of a pyverbs UD cell that failed in CI: goroce's 1-byte UD
// SEND of a random byte, 0xc5, which tshark 4.0's Mellanox EoIB heuristic
// took for an EoIB header followed by a truncated Ethernet frame. The
// quirk must be accounted, nothing else flagged, and goroce cap must print
// what tshark prints.
func TestWireHygieneEoIB(t *testing.T) {
	w := checkQuirks(t, "quirks_eoib.pcap")
	if w.eoib != 1 || w.smc != 0 || w.ethertype != 0 || w.rpcordma != 0 || w.goroce != 3 || w.roce != 6 {
		t.Errorf("got %+v, want 1 EoIB quirk among 3 of 6 packets from goroce", w)
	}
}

// TestEoIBTrigger pins the EoIB heuristic's trigger the hygiene accepts:
// the payloads found to throw in tshark 4.0 and their neighbours that do
// not.
func TestEoIBTrigger(t *testing.T) {
	for _, c := range []struct {
		p    []byte
		want bool
	}{
		{[]byte{0xc5, 0, 0, 0}, true}, // the CI run's 1-byte SEND and its pad
		{[]byte{0xc0, 0xc0, 0x12, 0x34}, true},
		{[]byte{0xcf, 0x40, 0xff, 0xff}, true},
		{append([]byte{0xc5, 0, 0, 0}, make([]byte, 12)...), true},  // 16 bytes
		{append([]byte{0xc5, 0, 0, 0}, make([]byte, 13)...), false}, // 17: the frame is long enough
		{[]byte{0xc5, 0x01, 0, 0}, false},                           // a segment offset
		{[]byte{0xc5, 0x20, 0, 0}, false},                           // more segments
		{[]byte{0xb5, 0, 0, 0}, false},
		{[]byte{0xd5, 0, 0, 0}, false},
		{[]byte{0xc5, 0, 0}, false},
	} {
		if got := eoibTrigger(c.p); got != c.want {
			t.Errorf("eoibTrigger(% x) = %v, want %v", c.p, got, c.want)
		}
	}
}

// TestSMCTrigger pins the SMC-R heuristic's trigger the hygiene accepts.
func TestSMCTrigger(t *testing.T) {
	v2 := func(typ byte, n, length int) []byte {
		p := make([]byte, n)
		p[0], p[1], p[2] = typ, byte(length>>8), byte(length)
		return p
	}
	v1 := func(typ byte, n int) []byte {
		p := make([]byte, n)
		p[0], p[1] = typ, 44
		return p
	}
	for _, c := range []struct {
		name string
		p    []byte
		want bool
	}{
		{"v2 REQUEST ADD LINK, length = payload", v2(0x25, 1024, 1024), true},
		{"v2 length off by one", v2(0x25, 1024, 1023), false},
		{"v2 type 0x23 (none)", v2(0x23, 1024, 1024), false},
		{"v2 DELETE RKEY", v2(0x29, 40, 40), true},
		{"v1 CONFIRM LINK, 44 bytes", v1(0x01, 44), true},
		{"v1 RMBE control", v1(0xfe, 44), true},
		{"v1 type, 45 bytes", v1(0x01, 45), false},
		{"v1 type 0x0a (none)", v1(0x0a, 44), false},
		{"too short", []byte{0x21, 0}, false},
	} {
		if got := smcTrigger(c.p); got != c.want {
			t.Errorf("%s: smcTrigger = %v, want %v", c.name, got, c.want)
		}
	}
}
