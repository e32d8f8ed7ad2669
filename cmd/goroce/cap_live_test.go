package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCapLiveFlagErrors checks the live-capture flags' errors: one line on
// stderr naming the problem, exit status 2, before any socket is opened
// (so they need no privileges).
func TestCapLiveFlagErrors(t *testing.T) {
	pcap := filepath.Join(repo, "testdata/pcaps/rc_imm.pcap")
	out := filepath.Join(t.TempDir(), "x.pcapng")
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"no such interface", []string{"cap", "-i", "nosuch0"}, `there is no interface "nosuch0" here`},
		{"no such interface, glued", []string{"cap", "-inosuch0", "-c", "1"}, `there is no interface "nosuch0" here`},
		{"file and interface", []string{"cap", "-r", pcap, "-i", "lo"}, "not both"},
		{"-w without -i", []string{"cap", "-r", pcap, "-w", out}, "-w applies to a live capture"},
		{"-a without -i", []string{"cap", "-r", pcap, "-a", "duration:1"}, "-a applies to a live capture"},
		{"-p without -i", []string{"cap", "-r", pcap, "-p"}, "-p applies to a live capture"},
		{"bad duration", []string{"cap", "-i", "lo", "-a", "duration:soon"}, "positive number of seconds"},
		{"zero duration", []string{"cap", "-i", "lo", "-a", "duration:0"}, "positive number of seconds"},
		{"bad packets", []string{"cap", "-i", "lo", "-a", "packets:-3"}, "positive integer"},
		{"filesize", []string{"cap", "-i", "lo", "-a", "filesize:100"}, "-a filesize is not supported"},
		{"unknown condition", []string{"cap", "-i", "lo", "-a", "later:1"}, "unknown condition"},
		{"no condition", []string{"cap", "-i", "lo", "-a", "10"}, "use duration:SECONDS or packets:N"},
		{"bad snaplen", []string{"cap", "-i", "lo", "-s", "0"}, "snap length"},
		{"-P without -w", []string{"cap", "-i", "lo", "-P"}, "needs -w"},
		{"-P with -w -", []string{"cap", "-i", "lo", "-w", "-", "-P"}, "can't print"},
		{"-Y with -w", []string{"cap", "-i", "lo", "-w", out, "-Y", "infiniband"}, "add -P"},
		{"no input", []string{"cap"}, "-i IFACE"},
		{"flows: no such interface", []string{"cap", "flows", "-i", "nosuch0"}, `there is no interface "nosuch0" here`},
		{"flows: no input", []string{"cap", "flows"}, "no capture file"},
		{"flows: file and interface", []string{"cap", "flows", "-r", pcap, "-i", "lo"}, "not both"},
		{"flows: -c without -i", []string{"cap", "flows", "-r", pcap, "-c", "3"}, "apply to a live capture"},
		{"flows: -a without -i", []string{"cap", "flows", "-r", pcap, "-a", "duration:3"}, "-a applies to a live capture"},
		{"flows: bad duration", []string{"cap", "flows", "-i", "lo", "-a", "duration:-1"}, "positive number"},
		{"lint: -w -", []string{"cap", "lint", "-i", "lo", "-w", "-"}, "write the capture to a file"},
		{"lint: no such interface", []string{"cap", "lint", "-i", "nosuch0"}, `there is no interface "nosuch0" here`},
		{"lint: negative -c", []string{"cap", "lint", "-i", "lo", "-c", "-1"}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(tc.args...)
			assert.Equal(t, 2, code, stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.msg)
		})
	}
	_, err := os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist, "no file is created on a usage error")
}

// TestCapLiveHelp checks that the live flags are documented.
func TestCapLiveHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "cap"}, {"cap", "flows", "-h"}, {"cap", "lint", "-h"}} {
		code, stdout, stderr := runCmd(args...)
		require.Equal(t, 0, code)
		help := stdout + stderr
		for _, f := range []string{"-i IFACE", "-a ", "-w ", "-c "} {
			assert.Contains(t, help, f, args)
		}
	}
}
