package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPingpongTransportFlag: --transport picks the tool goroce plays;
// ud takes ibv_ud_pingpong's default size, 2048, which the default MTU
// refuses as ud_pingpong does on rxe at netdev MTU 1500.
func TestPingpongTransportFlag(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--transport", "xrc"}, 2, `goroce pingpong: --transport "xrc": rc, uc or ud`},
		{[]string{"--transport", "ud", "127.0.0.1"}, 1, "requested size 2048 larger than the port MTU (1024)"},
		{[]string{"--transport", "ud", "-s", "1025", "127.0.0.1"}, 1, "requested size 1025 larger than the port MTU (1024)"},
		{[]string{"--transport", "uc", "--impair", "loss=1%", "127.0.0.1"}, 1, "--impair needs RC: UC does not recover"},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		assert.Equal(t, tc.code, runPingpong(tc.args, &out, &errb), "%q", tc.args)
		assert.Contains(t, errb.String(), tc.want, "%q", tc.args)
	}
}
