package flow

import "time"

// MaxBins bounds the number of bins of a Series.
const MaxBins = 256

// initialBinWidth is the bin width a Series starts with; it doubles as
// the capture grows.
const initialBinWidth = time.Microsecond

// Series is a sum over time in equal bins starting at time 0 (the first
// frame). It never holds more than MaxBins bins: when a sample falls past
// the last one, neighbouring bins are merged and the width doubles, so
// memory stays fixed however long the capture is.
type Series struct {
	// Width is the bin width.
	Width time.Duration `json:"-"`
	// Bins holds the sums, bin i covering [i×Width, (i+1)×Width).
	Bins []float64 `json:"-"`
}

// Add adds v at time t (negative times count in the first bin).
func (s *Series) Add(t time.Duration, v float64) {
	if s.Width == 0 {
		s.Width = initialBinWidth
	}
	if t < 0 {
		t = 0
	}
	i := int64(t / s.Width)
	for i >= MaxBins {
		s.merge()
		i = int64(t / s.Width)
	}
	for int64(len(s.Bins)) <= i {
		s.Bins = append(s.Bins, 0)
	}
	s.Bins[i] += v
}

// merge halves the resolution.
func (s *Series) merge() {
	n := (len(s.Bins) + 1) / 2
	for j := range n {
		v := s.Bins[2*j]
		if 2*j+1 < len(s.Bins) {
			v += s.Bins[2*j+1]
		}
		s.Bins[j] = v
	}
	s.Bins = s.Bins[:n]
	s.Width *= 2
}

// Rebin returns the sums in bins of width w (a multiple of s.Width, or
// larger) covering [start, end): bin k holds [start+k×w, start+(k+1)×w).
// The report uses it to put series of different widths on one axis. Sums
// outside the range are left out.
func (s *Series) Rebin(w, start, end time.Duration) []float64 {
	if w <= 0 || end <= start {
		return nil
	}
	n := int((end - start + w - 1) / w)
	out := make([]float64, n)
	for i, v := range s.Bins {
		t := time.Duration(i) * s.Width
		if t+s.Width <= start || t >= end {
			continue
		}
		j := int((t - start) / w)
		out[max(0, min(j, n-1))] += v
	}
	return out
}

// Sampler keeps at most Cap items out of a stream by uniform decimation:
// it keeps every Stride-th item and, when full, drops every other kept item
// and doubles Stride. The kept items stay in stream order and spread over
// the whole stream, so a plot of them shows its shape.
type Sampler[T any] struct {
	// Items are the kept items, in order.
	Items []T
	// Seen counts every item offered.
	Seen   int64
	stride int64
	max    int
}

// NewSampler returns a Sampler keeping at most n items.
func NewSampler[T any](n int) Sampler[T] { return Sampler[T]{stride: 1, max: max(n, 2)} }

// Add offers v.
func (s *Sampler[T]) Add(v T) {
	if s.stride == 0 {
		s.stride, s.max = 1, max(s.max, 2)
	}
	n := s.Seen
	s.Seen++
	if n%s.stride != 0 {
		return
	}
	if len(s.Items) == s.max {
		k := 0
		for i := 0; i < len(s.Items); i += 2 {
			s.Items[k] = s.Items[i]
			k++
		}
		clear(s.Items[k:])
		s.Items = s.Items[:k]
		s.stride *= 2
		if n%s.stride != 0 {
			return
		}
	}
	s.Items = append(s.Items, v)
}

// Decimated reports whether items were dropped.
func (s *Sampler[T]) Decimated() bool { return s.Seen > int64(len(s.Items)) }
