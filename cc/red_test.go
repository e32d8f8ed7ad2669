package cc_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
)

// TestC1_REDCurve: doc/dcqcn.md §5.4 C1 — Kmin 5 KB, Kmax 200 KB, Pmax 0.01 →
// p(5 KB) = 0, p(102.5 KB) = 0.005, p(200 KB) = 0.01, p(> 200 KB) = 1; the
// empirical rate over 10⁶ draws at 102.5 KB is 0.005 ± 0.0003.
func TestC1_REDCurve(t *testing.T) {
	r, err := cc.NewRED(cc.ProfileP.REDConfig())
	require.NoError(t, err)
	tests := []struct {
		q    int
		want float64
	}{
		{0, 0},
		{5_000, 0},
		{102_500, 0.005},
		{200_000, 0.01},
		{200_001, 1},
		{16_000_000, 1},
	}
	for _, tc := range tests {
		assert.InDelta(t, tc.want, r.Probability(tc.q), 1e-15, "p(%d B)", tc.q)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	const draws = 1_000_000
	marked := 0
	for range draws {
		if r.Mark(102_500, rng.Float64()) {
			marked++
		}
	}
	rate := float64(marked) / draws
	t.Logf("empirical marking rate at 102.5 KB: %.5f", rate)
	assert.InDelta(t, 0.005, rate, 0.0003)

	assert.False(t, r.Mark(5_000, 0), "u = 0 is not below p = 0")
	assert.True(t, r.Mark(200_001, math.Nextafter(1, 0)), "p = 1 marks every packet")
}

func TestRED_StepAndValidation(t *testing.T) {
	// Kmin = Kmax, Pmax = 1: DCTCP-style step (doc/dcqcn.md §1.1).
	r, err := cc.NewRED(cc.REDConfig{Kmin: 100, Kmax: 100, Pmax: 1})
	require.NoError(t, err)
	assert.Equal(t, 0.0, r.Probability(100))
	assert.Equal(t, 1.0, r.Probability(101))
	assert.Equal(t, cc.REDConfig{Kmin: 100, Kmax: 100, Pmax: 1}, r.Config())

	for _, bad := range []cc.REDConfig{
		{Kmin: -1, Kmax: 10, Pmax: 0.1},
		{Kmin: 10, Kmax: 5, Pmax: 0.1},
		{Kmin: 1, Kmax: 5, Pmax: 0},
		{Kmin: 1, Kmax: 5, Pmax: 1.01},
		{Kmin: 1, Kmax: 5, Pmax: math.NaN()},
	} {
		_, err := cc.NewRED(bad)
		assert.ErrorIs(t, err, cc.ErrInvalidConfig, "%+v", bad)
	}
}
