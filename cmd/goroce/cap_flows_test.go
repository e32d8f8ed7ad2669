package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCapLintExitStatus checks lint's contract: 0 on every real rxe
// capture, 1 with findings, 2 on errors.
func TestCapLintExitStatus(t *testing.T) {
	m, err := filepath.Glob(filepath.Join(repo, "testdata/pcaps/*.pcap"))
	require.NoError(t, err)
	for _, p := range m {
		code, out, errOut := runCmd("cap", "lint", "-r", p)
		assert.Equal(t, 0, code, "%s: %s%s", p, out, errOut)
		assert.Contains(t, out, "no findings")
	}
	impaired := filepath.Join(repo, "testdata/cap/impaired.pcap")
	code, out, _ := runCmd("cap", "lint", "-r", impaired)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "ICRC mismatch")

	code, out, _ = runCmd("cap", "lint", "--json", "-r", impaired)
	assert.Equal(t, 1, code)
	var doc struct {
		File     string `json:"file"`
		Findings []struct {
			Frame     int    `json:"frame"`
			Rule      string `json:"rule"`
			Cite      string `json:"cite"`
			Direction string `json:"direction"`
		} `json:"findings"`
		Total  int            `json:"total"`
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.NotEmpty(t, doc.Findings)
	assert.Equal(t, doc.Total, len(doc.Findings))
	rules := map[string]int{}
	for _, f := range doc.Findings {
		rules[f.Rule]++
		assert.NotEmpty(t, f.Cite)
		assert.Positive(t, f.Frame)
	}
	// Two corrupted packets, and goroce's CNPs on the data's DSCP
	// (testdata/cap/README.md).
	assert.Equal(t, map[string]int{"ICRC": 2, "CNP-DSCP": 1}, rules)

	code, out, _ = runCmd("cap", "lint", "--json", "-r", filepath.Join(repo, "testdata/pcaps/rc_imm.pcap"))
	assert.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Empty(t, doc.Findings)

	code, _, errOut := runCmd("cap", "lint", "-r", filepath.Join(t.TempDir(), "nope.pcap"))
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "doesn't exist")
	notCap := filepath.Join(t.TempDir(), "x.txt")
	require.NoError(t, os.WriteFile(notCap, []byte("hello, world"), 0o644))
	code, _, _ = runCmd("cap", "lint", "-r", notCap)
	assert.Equal(t, 2, code)
	code, out, _ = runCmd("cap", "lint", "-rules")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "OPCODE-SEQ")
	assert.Contains(t, out, "ECMP-SHARED-TUPLE warning: ")
}

// TestCapFlowsFabric checks the host pairs (distinct 5-tuples) and the
// pauses per priority of cap flows, in text and JSON, on the crafted
// probes: probe_vlan (RoCEv2 on PCP 3 and 6, a PFC pause and resume of
// priority 3) and write_bw_rdma_cm (three QPs of one host pair).
func TestCapFlowsFabric(t *testing.T) {
	cm := filepath.Join(repo, "testdata/pcaps/write_bw_rdma_cm.pcap")
	code, out, errOut := runCmd("cap", "flows", "-r", cm)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "host pair 10.77.0.2 <-> 10.77.0.3: 3 connections (1, 2, 3), 6 distinct 5-tuples (ECMP entropy)")
	assert.Contains(t, out, "10.77.0.2:53583 -> 10.77.0.3:4791 UDP: 32 packets, QP 0x00001d")
	assert.NotContains(t, out, "pause frames")

	vlan := filepath.Join(repo, "testdata/tshark/probe/probe_vlan.pcap")
	code, out, errOut = runCmd("cap", "flows", "-r", vlan)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "pause frames: 2 MAC Control (802.3x PAUSE 0, PFC 2, other 0); PFC enables priorities 3")
	assert.Contains(t, out, "priority 3 pauses over time (32µs bins): 0.006976 s ×1")

	code, out, errOut = runCmd("cap", "flows", "--json", "-r", vlan)
	require.Equal(t, 0, code, errOut)
	var res struct {
		Capture struct {
			Pauses struct {
				PFC        int   `json:"pfc"`
				Enabled    []int `json:"enabled_priorities"`
				Priorities []struct {
					Priority int   `json:"priority"`
					Pauses   int   `json:"pauses"`
					Resumes  int   `json:"resumes"`
					Quanta   int64 `json:"quanta"`
					OverTime struct {
						Bin   float64   `json:"bin_s"`
						Count []float64 `json:"count"`
					} `json:"over_time"`
				} `json:"priorities"`
			} `json:"pauses"`
		} `json:"capture"`
		HostPairs []struct {
			A          string `json:"a"`
			B          string `json:"b"`
			FiveTuples int    `json:"five_tuples"`
		} `json:"host_pairs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	p := res.Capture.Pauses
	assert.Equal(t, 2, p.PFC)
	assert.Equal(t, []int{3}, p.Enabled)
	require.Len(t, p.Priorities, 1)
	assert.Equal(t, 3, p.Priorities[0].Priority)
	assert.Equal(t, 1, p.Priorities[0].Pauses)
	assert.Equal(t, 1, p.Priorities[0].Resumes)
	assert.Equal(t, int64(65535), p.Priorities[0].Quanta)
	c := p.Priorities[0].OverTime.Count
	require.NotEmpty(t, c)
	assert.Equal(t, 1.0, c[len(c)-1], "the pause is in the last bin")
	require.Len(t, res.HostPairs, 2) // IPv4 and IPv6
	assert.Equal(t, 2, res.HostPairs[0].FiveTuples)

	code, out, _ = runCmd("cap", "lint", "-r", vlan)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "CNP-DSCP (warning)")
}

// TestCapFlowsCLI checks the table and the JSON of flows.
func TestCapFlowsCLI(t *testing.T) {
	impaired := filepath.Join(repo, "testdata/cap/impaired.pcap")
	code, out, errOut := runCmd("cap", "flows", "-r", impaired)
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{"connection 1: RC", "retransmissions", "Go-Back-N at frame", "trigger nak-seq",
		"RNR NAK at frame", "retried after", "READs: 3 requests", "ATOMICs", "PSNs per ACK", "ICRC: "} {
		assert.Contains(t, out, want)
	}
	code, out, errOut = runCmd("cap", "flows", "--json", "-r", impaired)
	require.Equal(t, 0, code, errOut)
	var res struct {
		Connections []struct {
			Transport  string `json:"transport"`
			Directions []struct {
				Requests *struct {
					Retransmissions int `json:"retransmissions"`
					GoBackN         int `json:"go_back_n"`
				} `json:"requests"`
				Responses *struct {
					NAKSeq int `json:"nak_seq"`
					RNR    int `json:"rnr_naks"`
				} `json:"responses"`
			} `json:"directions"`
		} `json:"connections"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Connections, 1)
	d := res.Connections[0].Directions
	require.Len(t, d, 2)
	assert.Positive(t, d[0].Requests.Retransmissions)
	assert.Positive(t, d[0].Requests.GoBackN)
	assert.Positive(t, d[1].Responses.NAKSeq)
	assert.Positive(t, d[1].Responses.RNR)
}

// TestCapReportCLI writes a report and checks it is a page with charts.
func TestCapReportCLI(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.html")
	code, _, errOut := runCmd("cap", "report", "-r", filepath.Join(repo, "testdata/cap/impaired.pcap"), "-o", out)
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), "<!DOCTYPE html>"))
	assert.Contains(t, string(b), `class="chart seq"`)
	code, _, _ = runCmd("cap", "report", "-r", filepath.Join(repo, "testdata/cap/impaired.pcap"))
	assert.Equal(t, 2, code, "-o is required")
}

// TestCapSubcommandsCutShort: a file cut in the middle of a record is
// analysed up to the cut and flagged with exit status 2.
func TestCapSubcommandsCutShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, "testdata/pcaps/write_bw_s65536.pcap"))
	require.NoError(t, err)
	cut := filepath.Join(t.TempDir(), "cut.pcap")
	require.NoError(t, os.WriteFile(cut, b[:len(b)/2+7], 0o644))
	code, out, errOut := runCmd("cap", "flows", "-r", cut)
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "connection 1: RC")
	assert.Contains(t, out, "the file ends early")
	assert.Contains(t, errOut, "cut short")
	code, out, _ = runCmd("cap", "lint", "-r", cut)
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "no findings")
}
