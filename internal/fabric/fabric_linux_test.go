package fabric_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/internal/fabric/fabrictest"
)

// TestFabricHashesL4 checks the fabric itself: both leaves hash the
// 5-tuple (policy 1), and UDP flows from 64 source ports between one host
// pair use every spine both ways (a uniform hash leaves one of 4 spines
// idle with probability 4 × 0.75^64 ≈ 4e-8).
func TestFabricHashesL4(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric; skipped under -short")
	}
	f := fabrictest.Up(t, fabric.Config{Spines: 4})
	for _, leaf := range f.Leaves {
		out, err := exec.Command("ip", "netns", "exec", leaf.NS, "sysctl", "-n", "net.ipv4.fib_multipath_hash_policy", "net.ipv4.ip_forward").Output()
		require.NoError(t, err)
		assert.Equal(t, []string{"1", "1"}, strings.Fields(string(out)), "%s: hash policy and forwarding", leaf.NS)
	}
	before, err := f.Stats()
	require.NoError(t, err)
	require.NoError(t, f.Probe(f.LeafHosts(0)[0], f.LeafHosts(1)[0], 64))
	after, err := f.Stats()
	require.NoError(t, err)
	d, err := after.Sub(before)
	require.NoError(t, err)
	ab, _ := d.LeafToSpine(0)
	ba, _ := d.LeafToSpine(1)
	t.Logf("64 UDP flows: packets per spine A→B %v, B→A %v", ab, ba)
	require.Len(t, ab, 4)
	for k := range ab {
		assert.NotZero(t, ab[k], "spine %d idle A→B", k)
		assert.NotZero(t, ba[k], "spine %d idle B→A", k)
	}
	for k, sp := range d.Spines {
		assert.Equal(t, ab[k]+ba[k], sp.UpPackets, "spine %d: what the leaves sent it", k)
		assert.Equal(t, sp.UpPackets, sp.DownPackets, "spine %d forwards all it gets", k)
	}
}
