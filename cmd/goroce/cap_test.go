package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func goldenArgs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "testdata/tshark/FIELDS"))
	require.NoError(t, err)
	var args []string
	for _, f := range strings.Fields(string(b)) {
		args = append(args, "-e", f)
	}
	return args
}

// TestCapGoldenCLI runs the golden comparison through the command line,
// spelled the way scripts/tshark-golden.sh calls tshark.
func TestCapGoldenCLI(t *testing.T) {
	for _, name := range []string{"rc_imm", "write_bw_rdma_cm", "atomic_fadd"} {
		want, err := os.ReadFile(filepath.Join(repo, "testdata/tshark", name+".tshark.txt"))
		require.NoError(t, err)
		args := append([]string{"cap", "-r", filepath.Join(repo, "testdata/pcaps", name+".pcap"),
			"-Y", "infiniband", "-T", "fields", "-E", "header=y", "-E", "separator=/t",
			"-E", "occurrence=a", "-E", "aggregator=,", "-E", "quote=n"}, goldenArgs(t)...)
		code, out, errOut := runCmd(args...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, string(want), out, name)
	}
	// tshark's glued spelling: -Tfields -Yinfiniband -eframe.number
	code, out, _ := runCmd("cap", "-r", filepath.Join(repo, "testdata/pcaps/rc_imm.pcap"), "-Yinfiniband.aeth", "-Tfields", "-eframe.number")
	require.Equal(t, 0, code)
	assert.Equal(t, "11\n15\n17\n19\n23\n", out)
}

// TestCapErrors checks that every user error is one line on stderr with
// exit status 2, and that output decoded before a damaged record is kept.
func TestCapErrors(t *testing.T) {
	pcap := filepath.Join(repo, "testdata/pcaps/rc_imm.pcap")
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte("not a capture\n"), 0o644))
	src, err := os.ReadFile(pcap)
	require.NoError(t, err)
	cut := filepath.Join(dir, "cut.pcap")
	require.NoError(t, os.WriteFile(cut, src[:5000], 0o644))

	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"unknown field", []string{"cap", "-r", pcap, "-T", "fields", "-e", "infiniband.nosuch"}, "some fields aren't valid"},
		{"protocol as field", []string{"cap", "-r", pcap, "-T", "fields", "-e", "infiniband"}, "some fields aren't valid"},
		{"bad filter", []string{"cap", "-r", pcap, "-Y", "infiniband.bth.opcode == 300"}, "too big"},
		{"rroce", []string{"cap", "-r", pcap, "-Y", "rroce"}, "neither a field nor a protocol"},
		{"incomplete filter", []string{"cap", "-r", pcap, "-Y", "infiniband &&"}, "unexpected end"},
		{"fields without -e", []string{"cap", "-r", pcap, "-T", "fields"}, "no fields were specified"},
		{"bad -T", []string{"cap", "-r", pcap, "-T", "xml"}, "invalid -T"},
		{"bad -E", []string{"cap", "-r", pcap, "-T", "fields", "-e", "frame.number", "-E", "quote=x"}, "-E"},
		{"no file", []string{"cap"}, "no capture file"},
		{"missing file", []string{"cap", "-r", filepath.Join(dir, "nope.pcap")}, "doesn't exist"},
		{"not a capture", []string{"cap", "-r", text}, "isn't a capture file"},
		{"cut short", []string{"cap", "-r", cut, "-T", "fields", "-e", "frame.number"}, "cut short in the middle of a packet"},
		{"-V", []string{"cap", "-r", pcap, "-V"}, "not supported"},
		{"stray argument", []string{"cap", "-r", pcap, "infiniband"}, "unexpected argument"},
		{"unknown command", []string{"nosuch"}, "unknown command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCmd(tc.args...)
			assert.Equal(t, 2, code)
			first, _, _ := strings.Cut(errOut, "\n")
			assert.Contains(t, first, tc.msg)
		})
	}
	code, out, _ := runCmd("cap", "-r", cut, "-T", "fields", "-e", "frame.number")
	assert.Equal(t, 2, code)
	assert.True(t, strings.HasPrefix(out, "1\n2\n3\n"), "frames before the cut are printed: %q", out)
}

// TestCapFormats smoke-tests -T text and -T json, -c and -G fields.
func TestCapFormats(t *testing.T) {
	pcap := filepath.Join(repo, "testdata/pcaps/rc_pingpong.pcap")
	code, out, _ := runCmd("cap", "-r", pcap, "-Y", "roce", "-c", "13")
	require.Equal(t, 0, code)
	assert.Equal(t, 2, strings.Count(out, "\n"))
	assert.Contains(t, out, "RRoCE 122 RC Send Only QP=0x000011 PSN=")

	code, out, _ = runCmd("cap", "-r", pcap, "-Y", "infiniband.bth.opcode == 17", "-T", "json", "-e", "frame.number", "-e", "roce.icrc.status")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"roce.icrc.status": [`)
	assert.True(t, strings.HasPrefix(out, "[\n  {\n"))

	code, out, _ = runCmd("cap", "-r", pcap, "-Y", "frame.number == 13", "-T", "json")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"infiniband.aeth_tree": {`)

	code, out, _ = runCmd("cap", "-G", "fields")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "infiniband.bth.psn\tfield\ttshark\n")
	assert.Contains(t, out, "roce.icrc.status\tfield\tgoroce\n")
}

// TestHelp checks the subcommand list.
