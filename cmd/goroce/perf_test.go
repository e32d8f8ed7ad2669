package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// TestPerfShards runs the loopback WRITE test with --shards: 1 and 4
// engines per device move the data (verified through --impair's check),
// and a count roce.Open refuses fails the run.
func TestPerfShards(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	port := freeUDPPort(t)
	args := func(shards string) []string {
		return []string{"write", "--shards", shards, "--impair", "loss=0%", "-s", "16384", "-n", "200", "-q", "4",
			"--local", fmt.Sprintf("127.0.0.1:%d", port), "--remote", fmt.Sprintf("127.0.0.2:%d", port), "--json"}
	}
	for _, n := range []string{"1", "4"} {
		var out, errb bytes.Buffer
		require.Equal(t, 0, runPerf(args(n), &out, &errb), "--shards %s: %s", n, errb.String())
		var res struct {
			Iters    int  `json:"iters"`
			Verified bool `json:"verified"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
		assert.Equal(t, 200, res.Iters, "--shards %s", n)
		assert.True(t, res.Verified, "--shards %s", n)
	}
	var out, errb bytes.Buffer
	assert.NotEqual(t, 0, runPerf(args("300"), &out, &errb))
	assert.Contains(t, errb.String(), "invalid argument")
}
