package wire_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/wire"
)

// parseCorpus is one packet of every opcode (with and without payload where
// the opcode has one) and, for each, the malformed variants every Parse
// error path sees: truncated in the BTH, in the extension headers and
// before the ICRC, a bad TVer, an unknown opcode and a pad larger than the
// payload.
func parseCorpus(t *testing.T) [][]byte {
	t.Helper()
	var unknown bth.Opcode
	for op := bth.Opcode(0); ; op++ {
		if _, ok := op.Lookup(); !ok {
			unknown = op
			break
		}
	}
	var corpus [][]byte
	for _, op := range bth.Opcodes() {
		in, _ := op.Lookup()
		lens := []int{0}
		if in.Mask&bth.MaskPayload != 0 {
			lens = append(lens, 5)
		}
		for _, n := range lens {
			f := wire.Fields{BTH: bth.Fields{Opcode: op, PKey: 0xffff, DestQP: 0x12, PSN: 7}}
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(i + 1)
			}
			b := make([]byte, wire.TransportLen(op, n))
			if _, err := wire.Build(b, &f, payload); err != nil {
				t.Fatalf("%v: %v", op, err)
			}
			corpus = append(corpus, b)
			hl := in.HeaderLen
			for _, cut := range []int{0, bth.Size - 1, hl - 1, hl + bth.ICRCSize - 1} {
				if cut >= 0 && cut < len(b) {
					corpus = append(corpus, b[:cut])
				}
			}
			bad := func(edit func(c []byte)) {
				c := append([]byte(nil), b...)
				edit(c)
				corpus = append(corpus, c)
			}
			bad(func(c []byte) { c[1] |= 0x01 })                   // TVer 1
			bad(func(c []byte) { c[0] = byte(unknown) })           // unknown opcode
			bad(func(c []byte) { c[1] = c[1]&^0x30 | byte(3)<<4 }) // pad 3
		}
	}
	return corpus
}

// sameViews reports how a and b differ, view by view: the same memory
// (pointer, length, capacity), not only equal bytes.
func sameViews(a, b *wire.Packet) error {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := 0; i < va.NumField(); i++ {
		x, y := va.Field(i), vb.Field(i)
		name := va.Type().Field(i).Name
		switch x.Kind() {
		case reflect.Slice:
			if x.IsNil() != y.IsNil() || x.Len() != y.Len() || x.Cap() != y.Cap() ||
				x.Len() > 0 && x.Pointer() != y.Pointer() {
				return fmt.Errorf("%s: %v (len %d, cap %d) vs %v (len %d, cap %d)",
					name, x.Interface(), x.Len(), x.Cap(), y.Interface(), y.Len(), y.Cap())
			}
		case reflect.Pointer:
			if x.Pointer() != y.Pointer() {
				return fmt.Errorf("%s differs", name)
			}
		default:
			return fmt.Errorf("%s: unexpected kind %v", name, x.Kind())
		}
	}
	return nil
}

// TestParseReuse: parsing into a Packet that held any other packet (valid
// or not) leaves exactly what a parse into a zero Packet leaves — no view of
// the previous packet survives, on success and on every error path.
func TestParseReuse(t *testing.T) {
	corpus := parseCorpus(t)
	var reused wire.Packet
	pairs := 0
	for i, a := range corpus {
		for j, b := range corpus {
			_ = reused.Parse(a)
			got := reused.Parse(b)
			var fresh wire.Packet
			want := fresh.Parse(b)
			if !errors.Is(got, want) || (got == nil) != (want == nil) {
				t.Fatalf("packet %d after %d: error %v, a fresh parse says %v", j, i, got, want)
			}
			if err := sameViews(&reused, &fresh); err != nil {
				t.Fatalf("packet %d (% x) after %d (% x): %v", j, b, i, a, err)
			}
			pairs++
		}
	}
	if pairs < 10000 {
		t.Fatalf("only %d pairs", pairs)
	}
}
