package bth_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/bth"
)

func sign(v int32) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

func TestPSNCompare(t *testing.T) {
	tests := []struct {
		name string
		a, b bth.PSN
		want int // sign of a.Compare(b)
	}{
		{"equal zero", 0, 0, 0},
		{"equal max", 0xffffff, 0xffffff, 0},
		{"one ahead", 1, 0, 1},
		{"one behind", 0, 1, -1},
		{"wrap: 0 follows 0xFFFFFF", 0, 0xffffff, 1},
		{"wrap: 0xFFFFFF precedes 0", 0xffffff, 0, -1},
		{"wrap: 5 follows 0xFFFFF0", 5, 0xfffff0, 1},
		{"window edge ahead", 1<<23 - 1, 0, 1},
		{"window edge behind", 0, 1<<23 - 1, -1},
		{"window edge, wrapped", 0x7fffff + 0x10, 0x10, 1},
		// At a distance of exactly 2^23 both orders compare negative,
		// as with rxe's (s32)((a-b)<<8): documented at MaxPSNWindow.
		{"2^23 ahead", 1 << 23, 0, -1},
		{"2^23 behind", 0, 1 << 23, -1},
		{"2^23 + 1 is behind", 1<<23 + 1, 0, -1},
		// Bits above 24 are ignored, as the shift drops them.
		{"high bits ignored", 0x01000005, 5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.a.Compare(tc.b)
			assert.Equal(t, tc.want, sign(c))
			assert.Equal(t, tc.want < 0, tc.a.Before(tc.b), "Before")
			assert.Equal(t, tc.want > 0, tc.a.After(tc.b), "After")
			// Compare is rxe's psn_compare exactly.
			assert.Equal(t, int32((uint32(tc.a)-uint32(tc.b))<<8), c)
		})
	}
}

func TestPSNArithmetic(t *testing.T) {
	tests := []struct {
		name string
		got  bth.PSN
		want bth.PSN
	}{
		{"Add wraps", bth.PSN(0xffffff).Add(1), 0},
		{"Add wraps further", bth.PSN(0xfffffe).Add(5), 3},
		{"Add full turn", bth.PSN(7).Add(1 << 24), 7},
		{"Add large n", bth.PSN(7).Add(0xffffffff), 6},
		{"Next wraps", bth.PSN(0xffffff).Next(), 0},
		{"Next", bth.PSN(41).Next(), 42},
		{"Add masks input", bth.PSN(0x01000001).Add(0), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.got) })
	}
	subs := []struct {
		p, q bth.PSN
		want uint32
	}{
		{5, 3, 2},
		{0, 0xffffff, 1},
		{0xffffff, 0, 0xffffff},
		{3, 5, 0xfffffe},
		{0x800000, 0, 0x800000},
	}
	for _, tc := range subs {
		assert.Equal(t, tc.want, tc.p.Sub(tc.q), "%d - %d", tc.p, tc.q)
	}
	assert.True(t, bth.PSN(0xffffff).Valid())
	assert.False(t, bth.PSN(0x1000000).Valid())
	assert.Equal(t, "13571856", bth.PSN(13571856).String())
	assert.Equal(t, 1<<23-1, bth.MaxPSNWindow)
}

// TestPSNProperties checks Compare, Add and Sub on a million seeded random
// pairs: antisymmetry inside the window, agreement with the signed 24-bit
// distance, and p.Add(q.Sub(p)) == q.
func TestPSNProperties(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		p := bth.PSN(r.Uint32() & bth.PSNMask)
		var q bth.PSN
		if i%4 == 0 {
			// Near the window edges and wrap points.
			q = p.Add(uint32(1<<23 + r.IntN(64) - 32))
		} else {
			q = bth.PSN(r.Uint32() & bth.PSNMask)
		}
		d := q.Sub(p) // 0 .. 2^24-1
		if p.Add(d) != q || p.Sub(q) != (1<<24-d)&bth.PSNMask {
			t.Fatalf("Add/Sub: p=%d q=%d d=%d", p, q, d)
		}
		pq, qp := p.Compare(q), q.Compare(p)
		var ok bool
		switch {
		case d == 0:
			ok = pq == 0 && qp == 0
		case d == 1<<23:
			ok = pq < 0 && qp < 0 // the documented edge
		default:
			// Antisymmetric, and q is ahead of p when the forward
			// distance is below 2^23.
			ok = sign(pq) == -sign(qp) && q.After(p) == (d < 1<<23) && p.Before(q) == (d < 1<<23)
		}
		if !ok {
			t.Fatalf("Compare: p=%d q=%d d=%d: %d, %d", p, q, d, pq, qp)
		}
	}
}

func TestQPN(t *testing.T) {
	assert.Equal(t, "0x000011", bth.QPN(0x11).String())
	assert.Equal(t, "0xffffff", bth.QPNMulticast.String())
	assert.True(t, bth.QPN(0xffffff).Valid())
	assert.False(t, bth.QPN(0x1000000).Valid())
	assert.Equal(t, bth.QPN(1), bth.QPNGSI)
	assert.Equal(t, bth.QPN(0), bth.QPNSMI)
}

func TestPSNInWindow(t *testing.T) {
	tests := []struct {
		name  string
		p     bth.PSN
		first bth.PSN
		n     uint32
		want  bool
	}{
		{"empty window", 5, 5, 0, false},
		{"first", 5, 5, 1, true},
		{"one past a one-PSN window", 6, 5, 1, false},
		{"one before", 4, 5, 10, false},
		{"last", 14, 5, 10, true},
		{"one past last", 15, 5, 10, false},
		{"wrap: first is 0xFFFFFE", 0xfffffe, 0xfffffe, 4, true},
		{"wrap: 0xFFFFFF inside", 0xffffff, 0xfffffe, 4, true},
		{"wrap: 0 inside", 0, 0xfffffe, 4, true},
		{"wrap: last is 1", 1, 0xfffffe, 4, true},
		{"wrap: 2 past last", 2, 0xfffffe, 4, false},
		{"wrap: before first", 0xfffffd, 0xfffffe, 4, false},
		{"unacked window full", 128, 0, 128, false},
		{"unacked window last", 127, 0, 128, true},
		{"whole space", 0x123456, 0x654321, 1 << 24, true},
		{"largest Compare window, last", 1<<23 - 1, 0, 1 << 23, true},
		{"largest Compare window, past", 1 << 23, 0, 1 << 23, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.p.InWindow(tc.first, tc.n))
			if tc.n > 0 && tc.n <= bth.MaxPSNWindow+1 {
				// The rxe pair of psn_compare it replaces.
				last := tc.first.Add(tc.n - 1)
				old := !tc.p.Before(tc.first) && !tc.p.After(last)
				assert.Equal(t, old, tc.p.InWindow(tc.first, tc.n), "vs Before/After")
			}
		})
	}
}

func TestPSNInWindowMatchesCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 4791))
	for range 100000 {
		p, first := bth.PSN(r.Uint32N(1<<24)), bth.PSN(r.Uint32N(1<<24))
		n := 1 + r.Uint32N(bth.MaxPSNWindow+1)
		if r.IntN(2) == 0 {
			n = 1 + r.Uint32N(256) // windows the engine uses
			p = first.Add(r.Uint32N(512) - 128)
		}
		last := first.Add(n - 1)
		want := !p.Before(first) && !p.After(last)
		if got := p.InWindow(first, n); got != want {
			t.Fatalf("%v.InWindow(%v, %d) = %v, Before/After say %v", p, first, n, got, want)
		}
	}
}
