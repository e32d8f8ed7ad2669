package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSimECMP runs the default matrix (3 modes × 1/4/8 QPs, 20 seeds):
// the table, the goal line, and the HTML page with its three charts.
func TestSimECMP(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ecmp.html")
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runSim([]string{"ecmp", "-o", out}, &stdout, &stderr), stderr.String())
	text := stdout.String()
	assert.Regexp(t, `(?m)^fixed\s+8\s+4\.00\s+8\.00\s+2\.\d{3}\s+2\.\d{3}$`, text)
	assert.Regexp(t, `(?m)^kernel\s+8\s+\S+\s+\S+\s+1\.\d{3}\s+\S+$`, text)
	assert.Regexp(t, `(?m)^explicit\s+1\s`, text)
	assert.Contains(t, text, "goal: kernel rule, 8 QPs per pair")
	assert.Contains(t, text, ": pass")
	assert.Contains(t, text, "packet-level DCQCN")

	page, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, 3, strings.Count(string(page), "<svg "))
	assert.Contains(t, string(page), "kernel median")
}

func TestSimECMPJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runSim([]string{"ecmp", "--mode", "kernel", "--qps", "8", "--seeds", "5", "--json"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	var got struct {
		Spines int     `json:"spines"`
		Seeds  int     `json:"seeds"`
		Ideal  float64 `json:"ideal_ms"`
		Goal   *bool   `json:"goal_pass"`
		Rows   []struct {
			Mode   string  `json:"mode"`
			QPs    int     `json:"qps"`
			Median float64 `json:"completion_ideal_median"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), stdout.String())
	assert.Equal(t, 8, got.Spines)
	assert.Equal(t, 5, got.Seeds)
	assert.Greater(t, got.Ideal, 0.0)
	require.Len(t, got.Rows, 1)
	assert.Equal(t, "kernel", got.Rows[0].Mode)
	require.NotNil(t, got.Goal)
	assert.True(t, *got.Goal)
}

func TestSimECMPUsage(t *testing.T) {
	for _, args := range [][]string{
		{"ecmp", "--mode", "random"},
		{"ecmp", "--qps", "x"},
		{"ecmp", "--qps", "0"},
		{"ecmp", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, runSim(args, &stdout, &stderr), "%v", args)
	}
}
