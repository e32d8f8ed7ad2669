package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/perf"
)

func TestWaitMode(t *testing.T) {
	assert.Equal(t, perf.WaitAuto, waitMode(false, false, false))
	assert.Equal(t, perf.WaitEvent, waitMode(true, false, false))
	assert.Equal(t, perf.WaitPoll, waitMode(false, true, false))
	assert.Equal(t, perf.WaitInline, waitMode(false, false, true))
}

func TestPerfPollFlags(t *testing.T) {
	for _, args := range [][]string{{"-e", "--poll"}, {"--rtc", "-e"}, {"--rtc", "--poll"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, runPerf(append([]string{"write"}, args...), &stdout, &stderr), "%v", args)
		assert.Contains(t, stderr.String(), "exclude each other", "%v", args)
	}
}

// TestPerfRTC: a run-to-completion latency test and bw test complete every
// iteration with the data checks of an ordinary run.
func TestPerfRTC(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	for _, tc := range []struct {
		args       []string
		iters, qps int
		bytes      int64
	}{
		{[]string{"write", "--lat", "-n", "300", "--rtc", "--json"}, 300, 1, 300 * 2},
		{[]string{"read", "--lat", "-n", "300", "--rtc", "--json"}, 300, 1, 300 * 2},
		{[]string{"write", "-n", "400", "-s", "65536", "-q", "4", "--rtc", "--json"}, 400, 4, 400 * 65536 * 4},
	} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, runPerf(tc.args, &stdout, &stderr), "%v: %s", tc.args, stderr.String())
		var r perf.Result
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &r), "%v: %s", tc.args, stdout.String())
		assert.Equal(t, tc.iters, r.Iters, "%v", tc.args)
		assert.Equal(t, tc.qps, r.QPs, "%v", tc.args)
		assert.Equal(t, tc.bytes, r.Bytes, "%v: every request completed once", tc.args)
		if tc.qps == 1 {
			assert.Positive(t, r.LatP50us, "%v", tc.args)
		}
	}
}
