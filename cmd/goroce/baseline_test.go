package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/goroce/goroce/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPerfBaselineSegments runs a short loopback perf --baseline of each
// kind with three interleaved pairs and checks the JSON and the table.
func TestPerfBaselineSegments(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	for _, tc := range []struct {
		name string
		args []string
		keys []string
	}{
		{"bw", []string{"write", "-n", "200"}, []string{"baseline_gbps", "baseline_mpps", "mpps_ratio", "baseline_plain_mpps"}},
		{"lat", []string{"write", "--lat", "-n", "200"}, []string{"baseline_p50_us", "baseline_p99_us", "p99_ratio", "baseline_p999_us", "p999_ratio"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--baseline", "--segments", "3", "--segment-time", "100ms", "--segment-iters", "300",
				"--local", "127.18.3.1:4791", "--remote", "127.18.3.2:4791")
			var stdout, stderr bytes.Buffer
			require.Equal(t, 0, runPerf(append(args, "--json"), &stdout, &stderr), stderr.String())
			var out map[string]any
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &out))
			for _, k := range append(tc.keys, "ratio", "ratio_median", "ratio_min", "ratio_max", "ratio_q1", "ratio_q3", "segments") {
				assert.Contains(t, out, k)
			}
			f := func(k string) float64 { v, _ := out[k].(float64); return v }
			segs, _ := out["segments"].([]any)
			assert.Len(t, segs, 3)
			assert.Positive(t, f("ratio"))
			assert.Equal(t, f("ratio"), f("ratio_median"))
			assert.LessOrEqual(t, f("ratio_min"), f("ratio_median"))
			assert.LessOrEqual(t, f("ratio_median"), f("ratio_max"))

			stdout.Reset()
			require.Equal(t, 0, runPerf(args, &stdout, &stderr), stderr.String())
			assert.Contains(t, stdout.String(), "ratio over 3 pairs: median ")
		})
	}
}

// perfJSON runs goroce perf with args and --json, and returns its object
// and a getter of its numbers that fails the test on a missing one.
func perfJSON(t *testing.T, args []string) (map[string]any, func(string) float64) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runPerf(append(args, "--json"), &stdout, &stderr), stderr.String())
	var out map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out))
	return out, func(k string) float64 {
		v, ok := out[k].(float64)
		assert.True(t, ok, "%s missing", k)
		return v
	}
}

// TestPerfBaselineCPU checks the CPU figures of a short bandwidth
// --baseline run: present, positive, consistent, and in the table.
func TestPerfBaselineCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	args := []string{"write", "--baseline", "--segments", "2", "--segment-time", "100ms", "-n", "200",
		"--local", "127.18.4.1:4791", "--remote", "127.18.4.2:4791"}
	out, f := perfJSON(t, args)
	for _, k := range []string{"cpu_cores", "baseline_cpu_cores", "cpu_ns_per_byte", "baseline_cpu_ns_per_byte",
		"cpu_cost_ratio", "bound_gbps", "bound_ratio", "cpus", "machine_cores", "baseline_machine_cores"} {
		assert.Positive(t, f(k), k)
	}
	cpus := f("cpus")
	assert.Equal(t, float64(runtime.NumCPU()), cpus)
	assert.LessOrEqual(t, f("cpu_cores"), cpus*1.05+0.1)
	assert.LessOrEqual(t, f("baseline_cpu_cores"), cpus*1.05+0.1)
	assert.LessOrEqual(t, f("machine_cores"), cpus)
	assert.LessOrEqual(t, f("baseline_machine_cores"), cpus)
	for _, k := range []string{"cpu_sys_share", "baseline_cpu_sys_share"} {
		assert.LessOrEqual(t, f(k), 1.0, k)
	}
	segs, _ := out["segments"].([]any)
	require.Len(t, segs, 2)
	for _, s := range segs {
		m, _ := s.(map[string]any)
		for _, k := range []string{"cpu_cores", "cpu_ns_per_byte", "baseline_cpu_ns_per_byte", "cpu_cost_ratio", "bound_ratio"} {
			assert.Contains(t, m, k)
		}
	}

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runPerf(args, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), " CPU: goroce ")
	assert.Contains(t, stdout.String(), " CPU bound: ")
}

// TestPerfCPUUtil: --cpu_util adds perftest's CPU_Util[%] column to a
// timed bandwidth run and "cpu_util" to its JSON; perftest refuses it
// outside duration mode, and so does goroce.
func TestPerfCPUUtil(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	addrs := []string{"--local", "127.18.5.1:4791", "--remote", "127.18.5.2:4791"}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runPerf(append([]string{"write", "-D", "0.2", "--cpu_util"}, addrs...), &stdout, &stderr), stderr.String())
	head, fields := testutil.PerftestRow(stdout.String())
	assert.True(t, strings.HasSuffix(head, "CPU_Util[%]"), "header %q", head)
	require.Len(t, fields, 6, "row %q", fields)
	util, err := strconv.ParseFloat(fields[5], 64)
	require.NoError(t, err)
	assert.Positive(t, util)
	assert.LessOrEqual(t, util, 105.0)

	stdout.Reset()
	require.Equal(t, 0, runPerf(append([]string{"write", "-D", "0.2", "--cpu_util", "--json"}, addrs...), &stdout, &stderr), stderr.String())
	var out map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out))
	assert.Positive(t, out["cpu_util"])
	assert.Positive(t, out["cpu_seconds"])

	for _, bad := range [][]string{{"write", "--cpu_util"}, {"write", "--lat", "-D", "1", "--cpu_util"}} {
		stderr.Reset()
		assert.Equal(t, 2, runPerf(append(bad, addrs...), &stdout, &stderr), "%v", bad)
		assert.Contains(t, stderr.String(), "duration mode")
	}
}

// TestPerfBaselineFloor: --floor adds the floor blast to a short
// bandwidth --baseline run: its medians in the JSON, its fields in every
// pair, its summary lines in the table.
func TestPerfBaselineFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	args := []string{"write", "--baseline", "--floor", "--segments", "2", "--segment-time", "100ms", "-n", "200",
		"--local", "127.18.6.1:4791", "--remote", "127.18.6.2:4791"}
	out, f := perfJSON(t, args)
	for _, k := range []string{"floor_gbps", "floor_ratio", "floor_ceiling", "floor_cpu_cores", "floor_cpu_ns_per_byte"} {
		assert.Positive(t, f(k), k)
	}
	for _, k := range []string{"floor_loss", "baseline_loss"} {
		assert.GreaterOrEqual(t, f(k), 0.0, k)
		assert.Less(t, f(k), 1.0, k)
	}
	segs, _ := out["segments"].([]any)
	require.Len(t, segs, 2)
	for _, s := range segs {
		m, _ := s.(map[string]any)
		for _, k := range []string{"floor_gbps", "floor_ratio", "floor_ceiling", "floor_cpu_cores", "floor_cpu_ns_per_byte"} {
			assert.Contains(t, m, k)
		}
		g, _ := m["gbps"].(float64)
		fg, _ := m["floor_gbps"].(float64)
		fr, _ := m["floor_ratio"].(float64)
		assert.InDelta(t, g/fg, fr, 1e-9)
	}

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runPerf(args, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), " RoCE floor (UDP blast + ICRC both sides + placement): ")
	assert.Contains(t, stdout.String(), " RoCE floor CPU: ")

	// Without --floor, none of it.
	out, _ = perfJSON(t, []string{"write", "--baseline", "--segments", "1", "--segment-time", "100ms", "-n", "200",
		"--local", "127.18.6.1:4791", "--remote", "127.18.6.2:4791"})
	assert.NotContains(t, out, "floor_gbps")
}

// TestPerfFloorFlagErrors: --floor needs --baseline and a bandwidth test;
// otherwise it is a usage error (exit 2), before anything runs.
func TestPerfFloorFlagErrors(t *testing.T) {
	for _, bad := range [][]string{
		{"write", "--floor"},
		{"write", "--floor", "--json"},
		{"write", "--lat", "--baseline", "--floor"},
		{"write_lat", "--baseline", "--floor"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, runPerf(append(bad, "--local", "127.18.6.1:4791", "--remote", "127.18.6.2:4791"), &stdout, &stderr), "%v", bad)
		assert.Contains(t, stderr.String(), "--floor works only with --baseline in bw tests", "%v", bad)
		assert.Empty(t, stdout.String(), "%v", bad)
	}
}
