package fabric_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/fabric"
)

// TestFabricHashesL4 checks the fabric itself: both leaves hash the
// 5-tuple (policy 1), and UDP flows from 64 source ports between one host
// pair use every spine both ways (a uniform hash leaves one of 4 spines
// idle with probability 4 × 0.75^64 ≈ 4e-8).
func TestFabricHashesL4(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric; skipped under -short")
	}
	f := fabric.Build(t, fabric.Config{Spines: 4})
	for _, ns := range []string{f.LeafA, f.LeafB} {
		out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.fib_multipath_hash_policy", "net.ipv4.ip_forward").Output()
		require.NoError(t, err)
		assert.Equal(t, []string{"1", "1"}, strings.Fields(string(out)), "%s: hash policy and forwarding", ns)
	}
	before, err := f.SpineCounters()
	require.NoError(t, err)
	require.NoError(t, f.Probe(f.HostsA[0], f.HostsB[0], 64))
	after, err := f.SpineCounters()
	require.NoError(t, err)
	d := after.Sub(before)
	t.Logf("64 UDP flows: packets per spine A→B %v, B→A %v", d.AB, d.BA)
	for k := range d.AB {
		assert.NotZero(t, d.AB[k], "spine %d idle A→B", k)
		assert.NotZero(t, d.BA[k], "spine %d idle B→A", k)
	}
}
