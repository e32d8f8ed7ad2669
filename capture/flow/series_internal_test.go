package flow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/bth"
)

func TestSigned24(t *testing.T) {
	tests := []struct {
		name string
		a, b bth.PSN
		want int64
	}{
		{"equal", 5, 5, 0},
		{"ahead", 7, 5, 2},
		{"behind", 5, 7, -2},
		{"across the wrap", 1, 0xffffff, 2},
		{"behind across the wrap", 0xfffffe, 1, -3},
		{"half window", 1 << 23, 0, -(1 << 23)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, signed24(tc.a, tc.b))
			if tc.want != -(1 << 23) {
				assert.Equal(t, tc.want > 0, tc.a.After(tc.b), "agrees with bth.PSN.Compare")
			}
		})
	}
}

func TestUnwrapper(t *testing.T) {
	var w unwrapper
	assert.Equal(t, int64(0), w.see(0xfffffd))
	assert.Equal(t, int64(3), w.see(0x000000)) // past the wrap
	assert.Equal(t, int64(1), w.see(0xfffffe)) // a resend behind
	assert.Equal(t, int64(3), w.u, "the reference stays at the highest")
	w.raise(10)
	assert.Equal(t, bth.PSN(7), w.raw)
	assert.Equal(t, int64(10), w.at(7))
	assert.Equal(t, bth.PSN(0xfffffd), w.psnAt(0))
	// A long stream: 3 × 2^24 PSNs in steps of 2^20 stay on one line.
	var v unwrapper
	p := bth.PSN(0)
	for i := range int64(48) {
		assert.Equal(t, i<<20, v.see(p))
		p = p.Add(1 << 20)
	}
}

func TestSeriesMerges(t *testing.T) {
	var s Series
	s.Add(0, 1)
	s.Add(3*time.Microsecond, 2)
	assert.Equal(t, initialBinWidth, s.Width)
	s.Add(time.Second, 4) // forces merges up to a width of 2^k µs ≥ 1 s / MaxBins
	assert.LessOrEqual(t, len(s.Bins), MaxBins)
	assert.GreaterOrEqual(t, s.Width*MaxBins, time.Second)
	var sum float64
	for _, v := range s.Bins {
		sum += v
	}
	assert.Equal(t, 7.0, sum, "merging keeps the total")
	assert.Equal(t, 3.0, s.Bins[0])
	r := s.Rebin(s.Width*4, 0, time.Second+s.Width)
	sum = 0
	for _, v := range r {
		sum += v
	}
	assert.Equal(t, 7.0, sum)
	assert.Nil(t, s.Rebin(time.Second, time.Second, 0))
	s.Add(-time.Second, 1) // before the first frame: the first bin
	assert.Equal(t, 4.0, s.Bins[0])
}

func TestSamplerKeepsAnEvenSpread(t *testing.T) {
	s := NewSampler[int](8)
	for i := range 1000 {
		s.Add(i)
	}
	assert.LessOrEqual(t, len(s.Items), 8)
	assert.Equal(t, int64(1000), s.Seen)
	assert.True(t, s.Decimated())
	for i := 1; i < len(s.Items); i++ {
		assert.Equal(t, s.stride, int64(s.Items[i]-s.Items[i-1]), "evenly spaced")
	}
	assert.Equal(t, 0, s.Items[0])
	assert.Greater(t, s.Items[len(s.Items)-1], 500, "spread over the whole stream")
	s.setMax(3)
	assert.LessOrEqual(t, len(s.Items), 3)
}
