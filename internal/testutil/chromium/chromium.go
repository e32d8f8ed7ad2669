// Package chromium runs headless Chromium for the tests of goroce's HTML
// reports (internal/capreport, internal/collreport): a page is loaded with
// a probe that measures every SVG as laid out and records script errors,
// and a screenshot is taken; Chromium's log gives the page's console
// messages. Tests only.
package chromium

import (
	"bytes"
	"context"
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

// flags are the flags of every headless run: no sandbox (CI runs as root),
// no GPU, nothing fetched in the background.
var flags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
	"--no-first-run", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"}

// Need skips t under -short and where Chromium is not installed (Debian
// package chromium); in CI (CI set) a missing Chromium fails t, since
// .ci/run installs it.
func Need(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed: .ci/run installs it as root (apt-get install chromium)")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
}

// Run runs headless Chromium with args and returns its output and log.
func Run(t *testing.T, args ...string) (stdout, log string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chromium", append(append([]string{}, flags...), args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	require.NoError(t, cmd.Run(), "chromium: %s", e.String())
	return o.String(), e.String()
}

// ConsoleLines returns the page's console messages from Chromium's log.
func ConsoleLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, ":CONSOLE") {
			out = append(out, l)
		}
	}
	return out
}

// probe is appended to a copy of a page (never to the page, which has no
// script): it measures every SVG as laid out and records script errors,
// into a <pre> that --dump-dom prints.
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

var probeOut = regexp.MustCompile(`<pre id="probe">svgs=([^;]*);height=(\d+);errors=([^<]*)</pre>`)

// Layout is what the probe saw of a page.
type Layout struct {
	SVGs    []string // each SVG's laid-out size, "WxH"
	Height  int      // the document's scroll height
	Errors  string   // script errors, joined by '|'
	Console []string // console messages in Chromium's log
}

// Probe loads page (an HTML document with a </body>) at the window size
// width × 900 with the probe appended, and returns what it measured.
func Probe(t *testing.T, page []byte, width int) Layout {
	t.Helper()
	probed := filepath.Join(t.TempDir(), "probed.html")
	require.NoError(t, os.WriteFile(probed, bytes.Replace(page, []byte("</body>"), []byte(probe+"</body>"), 1), 0o644))
	dom, log := Run(t, "--window-size="+strconv.Itoa(width)+",900", "--dump-dom", "file://"+probed)
	m := probeOut.FindStringSubmatch(dom)
	require.NotNil(t, m, "no probe output in the DOM: %.500s", dom)
	height, _ := strconv.Atoi(m[2])
	var svgs []string
	if m[1] != "" {
		svgs = strings.Split(m[1], ",")
	}
	return Layout{SVGs: svgs, Height: height, Errors: m[3], Console: ConsoleLines(log)}
}

// RequireLaidOut checks that the probe saw no script error and no console
// message, and that every SVG was laid out larger than min × min pixels.
func (l Layout) RequireLaidOut(t *testing.T, min int) {
	t.Helper()
	assert.Empty(t, l.Errors, "script errors")
	assert.Empty(t, l.Console)
	for i, s := range l.SVGs {
		var w, h int
		_, err := fmt.Sscanf(s, "%dx%d", &w, &h)
		require.NoError(t, err)
		assert.True(t, w > min && h > min, "SVG %d is laid out at %s", i, s)
	}
	require.Positive(t, l.Height)
}

// Screenshot loads the page file at the window size width × the page's
// height (at most 16000, Chromium's limit here) into shot, checks that
// the page wrote nothing to the console and that the image has that
// size, and returns it.
func Screenshot(t *testing.T, page, shot string, width, height int) image.Image {
	t.Helper()
	height = min(height, 16000)
	_, log := Run(t, fmt.Sprintf("--window-size=%d,%d", width, height), "--screenshot="+shot, "file://"+page)
	assert.Empty(t, ConsoleLines(log), "console messages while loading the page")
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, width, img.Bounds().Dx())
	assert.Equal(t, height, img.Bounds().Dy())
	t.Logf("screenshot %s (%dx%d)", shot, img.Bounds().Dx(), img.Bounds().Dy())
	return img
}
