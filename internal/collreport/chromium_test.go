package collreport

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var keep = flag.String("keep", "", "TestReportInChromium: keep report.html and report.png in this directory")

// chromiumFlags are the flags of every headless run: no sandbox (CI runs as
// root), no GPU, nothing fetched in the background.
var chromiumFlags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
	"--no-first-run", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"}

// probe is appended to a copy of the report (never to the report, which
// has no script): it measures every SVG as laid out and records script
// errors, into a <pre> that --dump-dom prints.
const probe = `<script>
var out = [], errs = [];
window.addEventListener('error', function (e) { errs.push(String(e.message)); });
document.querySelectorAll('svg').forEach(function (s) {
  var r = s.getBoundingClientRect(); out.push(Math.round(r.width) + 'x' + Math.round(r.height));
});
var pre = document.createElement('pre'); pre.id = 'probe';
pre.textContent = 'svgs=' + out.join(',') + ';height=' + document.documentElement.scrollHeight + ';errors=' + errs.join('|');
document.body.appendChild(pre);
</script>`

func runChromium(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chromium", append(append([]string{}, chromiumFlags...), args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	require.NoError(t, cmd.Run(), "chromium: %s", e.String())
	return o.String(), e.String()
}

// consoleLines returns the page's console messages from Chromium's log.
func consoleLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, ":CONSOLE") {
			out = append(out, l)
		}
	}
	return out
}

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
	if testing.Short() {
		t.Skip("starts a browser")
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed: .ci/run installs it as root (apt-get install chromium)")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	dir := t.TempDir()
	if *keep != "" {
		dir = *keep
	}
	var b bytes.Buffer
	require.NoError(t, Write(&b, sampleReport()))
	doc := b.Bytes()
	page := filepath.Join(dir, "report.html")
	require.NoError(t, os.WriteFile(page, doc, 0o644))
	probed := filepath.Join(t.TempDir(), "probed.html")
	require.NoError(t, os.WriteFile(probed, bytes.Replace(doc, []byte("</body>"), []byte(probe+"</body>"), 1), 0o644))

	dom, log := runChromium(t, "--window-size=1100,900", "--dump-dom", "file://"+probed)
	m := regexp.MustCompile(`<pre id="probe">svgs=([^;]*);height=(\d+);errors=([^<]*)</pre>`).FindStringSubmatch(dom)
	require.NotNil(t, m, "no probe output in the DOM: %.500s", dom)
	assert.Empty(t, m[3], "script errors")
	assert.Empty(t, consoleLines(log))
	sizes := strings.Split(m[1], ",")
	assert.Len(t, sizes, 4, "busbw, the fabric, a series per leaf")
	for i, s := range sizes {
		var w, h int
		_, err := fmt.Sscanf(s, "%dx%d", &w, &h)
		require.NoError(t, err)
		assert.True(t, w > 100 && h > 100, "SVG %d is laid out at %s", i, s)
	}
	height, _ := strconv.Atoi(m[2])
	require.Positive(t, height)

	shot := filepath.Join(dir, "report.png")
	_, log = runChromium(t, fmt.Sprintf("--window-size=1100,%d", min(height, 16000)), "--screenshot="+shot, "file://"+page)
	assert.Empty(t, consoleLines(log), "console messages while loading the report")
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, 1100, img.Bounds().Dx())
	assert.Equal(t, min(height, 16000), img.Bounds().Dy())
	for _, c := range []struct{ name, colour string }{{"a full link", heat(1)}, {"an idle link", heat(0)}, {"the leaves", "#1f5fbf"}} {
		assert.Greater(t, countColour(img, c.colour), 200, "pixels of %s (%s) in the screenshot", c.name, c.colour)
	}
	t.Logf("screenshot %s (%dx%d)", shot, img.Bounds().Dx(), img.Bounds().Dy())
}
