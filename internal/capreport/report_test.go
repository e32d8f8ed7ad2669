package capreport_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/lint"
	"github.com/goroce/goroce/internal/capreport"
	"github.com/goroce/goroce/internal/testutil"
)

const root = "../.."

var keep = flag.String("keep", "", "write the reports of the tests into this directory")

// render builds and writes the report of a capture file.
func render(t *testing.T, path string) []byte {
	t.Helper()
	f, err := capture.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r := capreport.Build(f, filepath.Base(path), nil)
	var buf bytes.Buffer
	require.NoError(t, capreport.Write(&buf, r))
	if *keep != "" {
		require.NoError(t, os.MkdirAll(*keep, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(*keep, strings.TrimSuffix(filepath.Base(path), ".pcap")+".html"), buf.Bytes(), 0o644))
	}
	return buf.Bytes()
}

// svgStats parses one SVG element strictly and counts its drawing elements.
func svgStats(t *testing.T, svg string) (marks int, width, height string) {
	t.Helper()
	for _, se := range testutil.RequireXML(t, []byte(svg)) {
		switch se.Name.Local {
		case "svg":
			for _, a := range se.Attr {
				switch a.Name.Local {
				case "width":
					width = a.Value
				case "height":
					height = a.Value
				}
			}
		case "path", "rect", "circle", "polygon", "line":
			marks++
		}
	}
	return marks, width, height
}

var (
	svgRE = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)
	urlRE = regexp.MustCompile(`(?i)(src|href)\s*=\s*"([^"]*)"|url\(|@import|https?://|//[a-z0-9.-]+\.[a-z]{2,}/`)
)

// checkDocument checks what "self-contained" promises: the whole page is
// well-formed XML, there is no script at all, nothing refers outside the
// page, and every SVG has a size and draws something.
func checkDocument(t *testing.T, doc []byte) int {
	t.Helper()
	testutil.RequireXML(t, doc)
	s := string(doc)
	assert.NotContains(t, strings.ToLower(s), "<script")
	for _, m := range urlRE.FindAllStringSubmatch(s, -1) {
		if m[1] != "" && strings.HasPrefix(m[2], "#") {
			continue // in-page link
		}
		t.Errorf("external reference: %q", m[0])
	}
	svgs := svgRE.FindAllString(s, -1)
	for _, svg := range svgs {
		marks, w, h := svgStats(t, svg)
		assert.Positive(t, marks, "an empty SVG: %.120s", svg)
		assert.NotEmpty(t, w)
		assert.NotEmpty(t, h)
		assert.NotEqual(t, "0", w)
		assert.NotEqual(t, "0", h)
	}
	return len(svgs)
}

// TestReportWellFormed renders every real rxe capture and the impaired
// capture of goroce's own traffic and checks the pages.
func TestReportWellFormed(t *testing.T) {
	m, err := filepath.Glob(filepath.Join(root, "testdata/pcaps/*.pcap"))
	require.NoError(t, err)
	m = append(m, filepath.Join(root, "testdata/cap/impaired.pcap"))
	for _, path := range m {
		t.Run(filepath.Base(path), func(t *testing.T) {
			doc := render(t, path)
			n := checkDocument(t, doc)
			assert.GreaterOrEqual(t, n, 2, "at least the throughput and opcode charts")
		})
	}
}

// TestReportImpaired checks that the report of the impaired capture shows
// its events: retransmissions and NAKs on the sequence graph, the
// Go-Back-N table and the ICRC findings linked from the graph.
func TestReportImpaired(t *testing.T) {
	doc := string(render(t, filepath.Join(root, "testdata/cap/impaired.pcap")))
	for _, want := range []string{
		`class="chart seq"`, `class="retx"`, `class="ack"`, `class="nak"`, `class="rnr"`, `class="ce"`,
		`class="cnpout"`, `class="chart tp"`, `class="chart ops"`, `class="chart lat"`,
		"Go-Back-N", "nak-seq", "rnr", "timeout", `href="#f`, `id="f`, "ICRC mismatch", `id="rule-ICRC"`,
	} {
		assert.Contains(t, doc, want)
	}
	// Every in-page link has its target.
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`id="([^"]+)"`).FindAllStringSubmatch(doc, -1) {
		ids[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`href="#([^"]+)"`).FindAllStringSubmatch(doc, -1) {
		assert.True(t, ids[m[1]], "link to #%s has no target", m[1])
	}
}

// TestReportPFCPriority: the report's findings come from the same linter
// as goroce cap lint, including the rule that needs the capture's pause
// frames (PFC-PRIORITY): probe_vlan.pcap has RoCE on priorities its PFC
// frames never enable.
func TestReportPFCPriority(t *testing.T) {
	f, err := capture.Open(filepath.Join(root, "testdata/tshark/probe/probe_vlan.pcap"))
	require.NoError(t, err)
	defer f.Close()
	r := capreport.Build(f, "probe_vlan.pcap", nil)
	assert.Equal(t, int64(5), r.Counts[lint.RulePFCPriority], "the findings goroce cap lint prints for this capture")
}
