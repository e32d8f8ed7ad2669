package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/fabric"
)

func TestPlace(t *testing.T) {
	f, err := fabric.Plan(fabric.Config{Name: "p", Leaves: 2, HostsPerLeaf: 4})
	require.NoError(t, err)
	names := func(hs []fabric.Host) []string {
		var s []string
		for _, h := range hs {
			s = append(s, h.Name)
		}
		return s
	}
	tests := []struct {
		name string
		n    int
		p    fabric.Placement
		want []string
	}{
		{"block", 8, fabric.PlaceBlock, []string{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"}},
		{"block short", 3, fabric.PlaceBlock, []string{"h0", "h1", "h2"}},
		{"interleaved", 8, fabric.PlaceInterleaved, []string{"h0", "h4", "h1", "h5", "h2", "h6", "h3", "h7"}},
		{"interleaved short", 4, fabric.PlaceInterleaved, []string{"h0", "h4", "h1", "h5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hs, err := f.Place(tc.n, tc.p, 0)
			require.NoError(t, err)
			assert.Equal(t, tc.want, names(hs))
		})
	}
	t.Run("random", func(t *testing.T) {
		a, err := f.Place(8, fabric.PlaceRandom, 7)
		require.NoError(t, err)
		b, err := f.Place(8, fabric.PlaceRandom, 7)
		require.NoError(t, err)
		c, err := f.Place(8, fabric.PlaceRandom, 8)
		require.NoError(t, err)
		assert.Equal(t, names(a), names(b), "same seed, same placement")
		assert.NotEqual(t, names(a), names(c), "another seed, another placement")
		assert.ElementsMatch(t, names(f.Hosts), names(a), "a permutation of the hosts")
	})
	for _, n := range []int{0, 9} {
		_, err := f.Place(n, fabric.PlaceBlock, 0)
		assert.ErrorIs(t, err, fabric.ErrConfig, "%d ranks", n)
	}
}

func TestParsePlacement(t *testing.T) {
	tests := []struct {
		in   string
		p    fabric.Placement
		seed uint64
		err  bool
	}{
		{"block", fabric.PlaceBlock, 0, false},
		{"interleaved", fabric.PlaceInterleaved, 0, false},
		{"random", fabric.PlaceRandom, 0, false},
		{"random:42", fabric.PlaceRandom, 42, false},
		{"block:1", 0, 0, true},
		{"random:x", 0, 0, true},
		{"ring", 0, 0, true},
		{"", 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			p, seed, err := fabric.ParsePlacement(tc.in)
			if tc.err {
				assert.ErrorIs(t, err, fabric.ErrConfig)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.p, p)
			assert.Equal(t, tc.seed, seed)
			assert.Equal(t, tc.in[:len(p.String())], p.String())
		})
	}
}
