package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/internal/fabric/fabrictest"
)

// TestFabricUsage checks the argument errors, which need no root: each
// exits 2 with a message, before anything is built.
func TestFabricUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"fabric"}, "usage: goroce fabric up"},
		{"unknown subcommand", []string{"fabric", "sideways"}, `unknown subcommand "sideways"`},
		{"bad name", []string{"fabric", "up", "--name", "Bad-Name"}, `bad name "Bad-Name"`},
		{"two names", []string{"fabric", "up", "a", "--name", "b"}, `two names`},
		{"bad rate", []string{"fabric", "up", "--rate", "fast"}, `rate "fast"`},
		{"bad buffer", []string{"fabric", "up", "--buffer", "lots"}, `bad size "lots"`},
		{"too many leaves", []string{"fabric", "up", "--leaves", "9"}, "leaves 9 outside"},
		{"threshold over buffer", []string{"fabric", "up", "--buffer", "64KiB", "--ecn-threshold", "100KB"}, "ECN threshold 100000"},
		{"exec without command", []string{"fabric", "exec", "demo", "h0"}, "usage: goroce fabric exec"},
		{"incast mode", []string{"fabric", "incast", "--dcqcn", "maybe"}, `--dcqcn "maybe"`},
		{"down names and all", []string{"fabric", "down", "a", "--all"}, "names and --all"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, run(tc.args, &stdout, &stderr))
			assert.Contains(t, stderr.String(), tc.want)
		})
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, run([]string{"fabric", "help"}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "goroce fabric exec NAME HOST -- COMMAND")
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int{"512KiB": 512 << 10, "40KB": 40_000, "1MB": 1_000_000, "2MiB": 2 << 20, "40000": 40_000, "1.5K": 1500, "9000B": 9000} {
		got, err := parseBytes(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "KiB", "-1K", "1TB"} {
		_, err := parseBytes(in)
		assert.Error(t, err, in)
	}
}

// TestFabricCommand runs the command end to end as root: up with the
// issue's shape at small scale, status (text and JSON), stats --json
// (counters per link and per spine), exec in a host, exec's exit status,
// down, and status afterwards.
func TestFabricCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric; skipped under -short")
	}
	fabrictest.RequireRoot(t)
	name := fabrictest.Name()
	t.Cleanup(func() { fabric.Down(name) })
	var stdout, stderr bytes.Buffer
	code := run([]string{"fabric", "up", "--name", name, "--hosts-per-leaf", "2", "--spines", "2", "--rate", "200mbit", "--mtu", "1500"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), "2 leaves × 2 hosts, 2 spines, links 200mbit")
	assert.Regexp(t, `(?m)^h3\s+l1\s+10\.202\.1\.2\s+10\.202\.1\.1\s+gfab-`+name+`-h3$`, stdout.String())
	assert.Regexp(t, `(?m)^l1-s1\s+l1 sp1\s+10\.211\.1\.1/24\s+s1 lf1\s+10\.211\.1\.2/24\s+200mbit\s+both ends$`, stdout.String())

	stdout.Reset()
	require.Equal(t, 0, run([]string{"fabric", "status", name, "--json"}, &stdout, &stderr), stderr.String())
	var f fabric.Fabric
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &f))
	assert.Equal(t, name, f.Name)
	assert.True(t, f.Complete)
	assert.Len(t, f.Hosts, 4)

	stdout.Reset()
	require.Equal(t, 0, run([]string{"fabric", "stats", "--json", name}, &stdout, &stderr), stderr.String())
	var st fabric.Stats
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &st))
	require.Len(t, st.Links, 2*2+4)
	require.Len(t, st.Spines, 2)
	var up uint64
	for _, sp := range st.Spines {
		up += sp.UpPackets
	}
	assert.Positive(t, up, "up's probes crossed the spines")
	l, ok := st.Link("l0-s1")
	require.True(t, ok)
	require.NotNil(t, l.A.ECN)
	assert.Equal(t, l.A.TxPackets, l.A.ECN.Packets, "the marker saw what the leaf sent to the spine")

	stdout.Reset()
	require.Equal(t, 0, run([]string{"fabric", "exec", name, "h3", "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "10.202.1.2/24")
	assert.Equal(t, 3, run([]string{"fabric", "exec", name, "h0", "--", "sh", "-c", "exit 3"}, &stdout, &stderr), "the command's exit status")
	assert.Equal(t, 2, run([]string{"fabric", "exec", name, "h9", "--", "true"}, &stdout, &stderr), "no such host")

	stdout.Reset()
	require.Equal(t, 0, run([]string{"fabric", "down", name}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "removed 8 namespaces")
	assert.Equal(t, 1, run([]string{"fabric", "status", name}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "no fabric "+name)
}
