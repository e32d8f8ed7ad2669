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

	"github.com/goroce/goroce/internal/testutil"
)

// TestSimJSON runs the short S1 scenario and checks the JSON keys the
// issue names (U, J, Q99_bytes, Qmax_bytes, Tconv_ms, cnp_per_s), the
// verdict, and the HTML file.
func TestSimJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s1.html")
	var stdout, stderr bytes.Buffer
	code := runSim([]string{"dcqcn", "--scenario", "S1", "--profile", "P", "--seed", "2", "--json", "-o", out}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())

	var got map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), stdout.String())
	for _, k := range []string{"U", "J", "Q99_bytes", "Qmax_bytes", "Tconv_ms", "cnp_per_s", "Tsettle_ms", "drops", "violations"} {
		assert.Contains(t, got, k)
	}
	assert.Equal(t, "S1", got["scenario"])
	assert.Equal(t, "P", got["profile"])
	assert.Equal(t, 2.0, got["seed"])
	assert.Equal(t, true, got["pass"])
	assert.Nil(t, got["Tconv_ms"], "not applicable to one flow: null")
	assert.Greater(t, got["U"].(float64), 0.99)

	page, err := os.ReadFile(out)
	require.NoError(t, err)
	svgs := 0
	for _, el := range testutil.RequireXML(t, page) {
		if el.Name.Local == "svg" {
			svgs++
		}
	}
	assert.Equal(t, 3, svgs)
}

func TestSimText(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runSim([]string{"dcqcn", "--scenario", "S1"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "PASS")
	assert.Regexp(t, `U\s+0\.99`, stdout.String())
}

func TestSimUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"dcqcn", "--list"}, 0, "S6"},
		{[]string{"dcqcn", "--scenario", "S9"}, 2, "unknown scenario"},
		{[]string{"dcqcn", "--profile", "X"}, 2, "unknown profile"},
		{[]string{"dcqcn", "extra"}, 2, "unexpected argument"},
		{[]string{"dcqcn", "--cnp-interval", "-4us"}, 2, "bad --cnp-interval"},
		{[]string{"tcp"}, 2, "usage: goroce sim dcqcn"},
		{nil, 2, "usage: goroce sim dcqcn"},
		{[]string{"-h"}, 0, "usage: goroce sim dcqcn"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, tc.code, runSim(tc.args, &stdout, &stderr))
			assert.Contains(t, stdout.String()+stderr.String(), tc.out)
		})
	}
}
