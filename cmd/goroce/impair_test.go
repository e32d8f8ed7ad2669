package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPerfLoopbackImpaired runs `goroce perf OP --impair loss=1%,reorder=1%
// --json` in loopback mode: each test completes with its data verified and
// the JSON carries what the peer did; the block goes to stderr.
func TestPerfLoopbackImpaired(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	port := freeUDPPort(t)
	for _, op := range []string{"write", "read", "send"} {
		t.Run(op, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runPerf([]string{op, "--impair", "loss=1%,reorder=1%,seed=2", "-s", "16384", "-n", "200", "-m", "1024",
				"--local", fmt.Sprintf("127.0.0.1:%d", port), "--remote", fmt.Sprintf("127.0.0.2:%d", port), "--json"}, &out, &errb)
			require.Equal(t, 0, code, "stderr: %s", errb.String())
			var res struct {
				Iters    int  `json:"iters"`
				Verified bool `json:"verified"`
				Impair   struct {
					Impair string `json:"impair"`
					Link   struct {
						Tx struct{ Packets, Dropped uint64 } `json:"tx"`
					} `json:"link"`
					Stall float64 `json:"longest_stall_ms"`
				} `json:"impair"`
			}
			require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
			assert.Equal(t, 200, res.Iters)
			assert.True(t, res.Verified)
			assert.True(t, strings.HasPrefix(res.Impair.Impair, "tx loss=1%,reorder=1%; rx loss=1%,reorder=1%; seed=2"), res.Impair.Impair)
			assert.NotZero(t, res.Impair.Link.Tx.Packets)
			assert.Positive(t, res.Impair.Stall)
			assert.Contains(t, errb.String(), " The peer           :")
		})
	}
}

func TestImpairFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"perf bad rate", []string{"perf", "write", "--impair", "loss=2x"}, `goroce perf: --impair: impair: bad spec: loss=2x: "2x" is not a probability`},
		{"perf unknown key", []string{"perf", "--impair", "delay=1ms", "--server"}, `unknown key "delay"`},
		{"pingpong bad dir", []string{"pingpong", "--impair", "loss=1%,dir=sideways"}, "goroce pingpong: --impair: impair: bad spec: dir=sideways: want tx, rx or both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			run := runPerf
			if tc.args[0] == "pingpong" {
				run = runPingpong
			}
			code := run(tc.args[1:], &out, &errb)
			assert.Equal(t, 2, code)
			assert.Contains(t, errb.String(), tc.want)
		})
	}
}
