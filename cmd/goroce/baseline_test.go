package main

import (
	"bytes"
	"encoding/json"
	"testing"

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
