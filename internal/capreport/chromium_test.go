package capreport_test

import (
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
	lay.RequireLaidOut(t, 100)
	assert.Equal(t, len(svgRE.FindAll(doc, -1)), len(lay.SVGs))

	// The untouched page: no console output, and a screenshot of all of it.
	chromium.Screenshot(t, page, filepath.Join(dir, "report.png"), 1100, lay.Height)
}
