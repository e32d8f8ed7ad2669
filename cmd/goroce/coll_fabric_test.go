package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/internal/fabric/incast"
)

// TestCollFabricUsage: the flags of goroce coll --fabric that are wrong
// without looking at any fabric exit 2 with a message.
func TestCollFabricUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"fabric without -np", []string{"--fabric", "demo"}, "go with -np"},
		{"report without -np", []string{"--report", "r.html"}, "go with -np"},
		{"fabric and wrap", []string{"-np", "2", "--fabric", "demo", "--wrap", "ip netns exec x{rank}"}, "places the ranks itself"},
		{"fabric and rdzv", []string{"-np", "2", "--fabric", "demo", "--rdzv", "10.0.0.1:1"}, "places the ranks itself"},
		{"bad fabric name", []string{"-np", "2", "--fabric", "De-mo"}, `--fabric "De-mo"`},
		{"bad placement", []string{"-np", "2", "--fabric", "demo", "--placement", "ring"}, "--placement"},
		{"bad cc", []string{"--cc", "fast"}, `--cc "fast"`},
		{"cc too slow", []string{"--cc", "10kbit"}, `--cc "10kbit"`},
		{"bad sampling", []string{"-np", "2", "--fabric", "demo", "--sample-every", "-1"}, "--sample-every"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, run(append([]string{"coll", "all_reduce"}, tc.args...), &stdout, &stderr))
			assert.Contains(t, stderr.String(), tc.want)
		})
	}
}

func TestParseCC(t *testing.T) {
	c, err := parseCC("default")
	require.NoError(t, err)
	assert.Nil(t, c.RP, "roce's defaults")
	assert.False(t, c.DisableRP || c.DisableNP)
	c, err = parseCC("off")
	require.NoError(t, err)
	assert.True(t, c.DisableRP && c.DisableNP)
	c, err = parseCC("250mbit")
	require.NoError(t, err)
	require.NotNil(t, c.RP)
	assert.Equal(t, incast.Profile(250*cc.Mbps), *c.RP, "the namespace fabric's reaction point at that line rate")
	assert.NoError(t, c.RP.Validate())
}

// TestWireEfficiency: the payload share of a WRITE's frames: MTU-sized
// packets with 58 bytes of headers and ICRC each, a RETH on the first and
// an immediate on the last.
func TestWireEfficiency(t *testing.T) {
	assert.InDelta(t, 4096.0/(4096+58+20.0/32), wireEfficiency(4096, 128<<10), 1e-12)
	assert.InDelta(t, 1024.0/(1024+58+20.0/1), wireEfficiency(4096, 1024), 1e-12, "one packet")
	assert.InDelta(t, 1024.0/(1024+58+20.0/4), wireEfficiency(1024, 4096), 1e-12)
	assert.Equal(t, 1.0, wireEfficiency(0, 0))
}
