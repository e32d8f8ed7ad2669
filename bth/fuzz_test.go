package bth_test

import (
	"bytes"
	"testing"

	"github.com/goroce/goroce/bth"
)

// FuzzParse checks that Parse fails exactly on short input, that no
// accessor or opcode-table lookup panics on any header, and that
// Encode(Fields()) reproduces the header bytes.
func FuzzParse(f *testing.F) {
	f.Add(rxeWriteFirst)
	f.Add([]byte{0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10}) // scapy UC SEND ONLY
	f.Add([]byte{0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00}) // CX-4 Lx CNP
	f.Add(bytes.Repeat([]byte{0xff}, 16))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := bth.Parse(b)
		if (err != nil) != (len(b) < bth.Size) {
			t.Fatalf("Parse(len %d): %v", len(b), err)
		}
		if err != nil {
			return
		}
		if len(h) != bth.Size || cap(h) != bth.Size {
			t.Fatalf("view len %d cap %d", len(h), cap(h))
		}
		f := h.Fields()
		in, known := f.Opcode.Lookup()
		if known != f.Opcode.Known() || in.HeaderLen != f.Opcode.HeaderLen() || in.Mask != f.Opcode.Mask() {
			t.Fatalf("opcode table views disagree for %v", f.Opcode)
		}
		if known != (in.HeaderLen >= bth.Size) {
			t.Fatalf("%v: known %v, HeaderLen %d", f.Opcode, known, in.HeaderLen)
		}
		_ = f.Opcode.String()
		_ = f.PSN.String()
		_ = f.DestQP.String()
		out := make(bth.Header, bth.Size)
		out.Encode(&f)
		if !bytes.Equal(out, b[:bth.Size]) {
			t.Fatalf("Encode(Fields()) = %x, want %x", []byte(out), b[:bth.Size])
		}
		// Setters write only inside the view.
		c := bytes.Clone(b)
		v, _ := bth.Parse(c)
		v.SetPSN(f.PSN.Next())
		v.SetDestQP(f.DestQP + 1)
		v.SetPadCount(f.PadCount + 1)
		if !bytes.Equal(c[bth.Size:], b[bth.Size:]) {
			t.Fatal("setter wrote past the header")
		}
	})
}
