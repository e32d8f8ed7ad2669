package collreport

import (
	"bytes"
	"flag"
	"image"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/chromium"
)

var keep = flag.String("keep", "", "TestReportInChromium: keep report.html and report.png in this directory")

// countColour counts the pixels of img within 6 of c in every channel.
func countColour(img image.Image, c string) int {
	var want [3]uint32
	for i := range want {
		v, _ := strconv.ParseUint(c[1+2*i:3+2*i], 16, 8)
		want[i] = uint32(v)
	}
	near := func(a, b uint32) bool { return a+6 >= b && b+6 >= a }
	n := 0
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if near(r>>8, want[0]) && near(g>>8, want[1]) && near(b>>8, want[2]) {
				n++
			}
		}
	}
	return n
}

// TestReportInChromium opens the report of a fabric run (sampleReport) in
// headless Chromium, as internal/capreport's test does the capture
// report: the page loads without a console message, every SVG is laid
// out with a non-zero size, and a screenshot of the whole page shows the
// leaf-spine picture: the full uplink's red, the idle one's green, the
// leaves' blue (kept with -keep DIR, as report.png). Skipped without
// Chromium (Debian package chromium) and under -short; in CI (CI set) a
// missing Chromium fails the test, since .ci/run installs it.
func TestReportInChromium(t *testing.T) {
	chromium.Need(t)
	dir := t.TempDir()
	if *keep != "" {
		dir = *keep
	}
	var b bytes.Buffer
	require.NoError(t, Write(&b, sampleReport()))
	doc := b.Bytes()
	page := filepath.Join(dir, "report.html")
	require.NoError(t, os.WriteFile(page, doc, 0o644))

	// Layout: the SVGs' sizes and the page height.
	lay := chromium.Probe(t, doc, 1100)
	lay.RequireLaidOut(t, 100)
	assert.Len(t, lay.SVGs, 4, "busbw, the fabric, a series per leaf")

	img := chromium.Screenshot(t, page, filepath.Join(dir, "report.png"), 1100, lay.Height)
	for _, c := range []struct{ name, colour string }{{"a full link", heat(1)}, {"an idle link", heat(0)}, {"the leaves", "#1f5fbf"}} {
		assert.Greater(t, countColour(img, c.colour), 200, "pixels of %s (%s) in the screenshot", c.name, c.colour)
	}
}
