package tvbuf_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/internal/tvbuf"
)

// TestTVB: a frame of 10 bytes on the wire of which 6 were captured, as
// Wireshark's tvbuff treats it.
func TestTVB(t *testing.T) {
	full := tvbuf.TVB{B: []byte{0, 1, 2, 3, 4, 5}, Rep: 10}
	assert.True(t, full.Has(2, 4))
	assert.False(t, full.Has(2, 5), "past the captured bytes")
	assert.False(t, full.Has(-1, 1))
	assert.Equal(t, 7, full.Remaining(3))
	assert.Equal(t, 2, full.Remaining(-2), "a negative offset counts from the end")
	assert.Equal(t, 0, full.Remaining(11))
	for _, tc := range []struct {
		name string
		got  tvbuf.TVB
		want tvbuf.TVB
	}{
		{"sub inside the captured bytes", full.Sub(1, 3), tvbuf.TVB{B: []byte{1, 2, 3}, Rep: 3}},
		{"sub across the capture's end", full.Sub(4, 5), tvbuf.TVB{B: []byte{4, 5}, Rep: 5}},
		{"sub cut at the reported end", full.Sub(8, 9), tvbuf.TVB{B: []byte{}, Rep: 2}},
		{"sub out of range", full.Sub(11, 1), tvbuf.TVB{}},
		{"from", full.From(3), tvbuf.TVB{B: []byte{3, 4, 5}, Rep: 7}},
		{"from a negative offset", full.From(-2), tvbuf.TVB{}},
		{"shrink below the capture", full.Shrink(4), tvbuf.TVB{B: []byte{0, 1, 2, 3}, Rep: 4}},
		{"shrink above the capture", full.Shrink(8), tvbuf.TVB{B: []byte{0, 1, 2, 3, 4, 5}, Rep: 8}},
		{"shrink longer than the range", full.Shrink(20), full},
	} {
		assert.Equal(t, tc.want.Rep, tc.got.Rep, tc.name)
		assert.Equal(t, len(tc.want.B), len(tc.got.B), tc.name)
		if len(tc.want.B) > 0 {
			assert.Equal(t, tc.want.B, tc.got.B, tc.name)
		}
		assert.Equal(t, len(tc.got.B), cap(tc.got.B), "%s: a sub-range cannot grow into its parent", tc.name)
	}
}
