// Package tvbuf is the byte range of Wireshark's dissectors (its tvbuff):
// the captured bytes of a frame, or of a part of it, with the reported
// (on-the-wire) length, which is never smaller. Reading past the captured
// bytes is where Wireshark throws an exception; goroce's decoders
// (package capture and internal/capfmt, the tshark emulation) mirror each
// such place with a Has check, so that both follow a frame exactly as far
// as tshark does.
package tvbuf

// TVB is a byte range: B the captured bytes, Rep the reported length
// (Rep >= len(B)).
type TVB struct {
	B   []byte
	Rep int
}

// Has reports whether n bytes at off were captured (tvb_bytes_exist).
func (t TVB) Has(off, n int) bool {
	return off >= 0 && n >= 0 && off <= len(t.B) && n <= len(t.B)-off
}

// Remaining is tvb_reported_length_remaining: 0 when off is out of range;
// a negative off counts from the end.
func (t TVB) Remaining(off int) int {
	if off < 0 {
		off += t.Rep
		if off < 0 {
			return 0
		}
	}
	if off > t.Rep {
		return 0
	}
	return t.Rep - off
}

// From returns the sub-range starting at off (tvb_new_subset_remaining);
// empty for a negative off.
func (t TVB) From(off int) TVB {
	return t.Sub(off, t.Remaining(off))
}

// Sub returns n reported bytes at off (tvb_new_subset_length); the
// captured part is what exists of them. Out of range it is empty.
func (t TVB) Sub(off, n int) TVB {
	if off < 0 || off > t.Rep || n < 0 {
		return TVB{}
	}
	n = min(n, t.Rep-off)
	if off >= len(t.B) {
		// Reported but not captured: no bytes (slicing at off would
		// pass the captured bytes' capacity).
		return TVB{Rep: n}
	}
	c := min(n, len(t.B)-off)
	return TVB{B: t.B[off : off+c : off+c], Rep: n}
}

// Shrink limits the range to n bytes when it is longer
// (set_actual_length: an IP datagram inside a padded frame).
func (t TVB) Shrink(n int) TVB {
	if n < t.Rep {
		t.Rep = n
		if len(t.B) > n {
			t.B = t.B[:n:n]
		}
	}
	return t
}
