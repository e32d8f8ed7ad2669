package capreport_test

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/chromium"
)

// TestReportInChromium opens the report of the impaired capture in
// headless Chromium: the page loads without a console message, every SVG
// is laid out with a non-zero size, and a screenshot of the whole page is
// taken (kept with -keep DIR, as report.png). Skipped without Chromium
// (Debian package chromium) and under -short; in CI (CI set) a missing
// Chromium fails the test, since .ci/run installs it.
func TestReportInChromium(t *testing.T) {
	chromium.Need(t)
	dir := t.TempDir()
	if *keep != "" {
		dir = *keep
	}
	doc := render(t, filepath.Join(root, "testdata/cap/impaired.pcap"))
	page := filepath.Join(dir, "report.html")
	require.NoError(t, os.WriteFile(page, doc, 0o644))

	// Layout: the SVGs' sizes and the page height.
	lay := chromium.Probe(t, doc, 1100)
	assert.Empty(t, lay.Errors, "script errors")
	assert.Empty(t, lay.Console)
	sizes := lay.SVGs
	assert.Equal(t, len(svgRE.FindAll(doc, -1)), len(sizes))
	for i, s := range sizes {
		var w, h int
		_, err := fmt.Sscanf(s, "%dx%d", &w, &h)
		require.NoError(t, err)
		assert.True(t, w > 100 && h > 100, "SVG %d is laid out at %s", i, s)
	}
	height := lay.Height
	require.Positive(t, height)

	// The untouched page: no console output, and a screenshot of all of it.
	shot := filepath.Join(dir, "report.png")
	_, log := chromium.Run(t, fmt.Sprintf("--window-size=1100,%d", min(height, 16000)), "--screenshot="+shot, "file://"+page)
	assert.Empty(t, chromium.ConsoleLines(log), "console messages while loading the report")
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	require.NoError(t, err)
	assert.Equal(t, 1100, cfg.Width)
	assert.Equal(t, min(height, 16000), cfg.Height)
	t.Logf("screenshot %s (%dx%d)", shot, cfg.Width, cfg.Height)
}
