package fabric_test

import (
	"bytes"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cc/fabric"
)

// TestWriteHTML checks that the page is well-formed XML, self-contained
// (no script, no external reference), and holds three SVG charts of
// non-zero size with one line per flow, points inside the view box, axis
// labels and a legend.
func TestWriteHTML(t *testing.T) {
	sc, _ := fabric.LookupScenario("S2")
	c := sc.Config(cc.ProfileP, 1)
	c.Duration = 4 * time.Millisecond
	c.Window = [2]time.Duration{time.Millisecond, 4 * time.Millisecond}
	r, err := fabric.Run(c)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, fabric.WriteHTML(&buf, r, fabric.Page{
		Title:   "S2 <test> & co",
		Notes:   []string{"profile P"},
		Figures: sc.Figures(r, cc.ProfileP),
	}))
	page := buf.String()
	require.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"))
	assert.NotContains(t, strings.ToLower(page), "<script")
	assert.NotContains(t, page, "href=")
	assert.NotContains(t, strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), "http")
	assert.Contains(t, page, "S2 &lt;test&gt; &amp; co")

	type svgInfo struct {
		w, h, vw, vh float64
		polylines    int
		points       int
		texts        []string
	}
	var svgs []*svgInfo
	var cur *svgInfo
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict = true
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "page must be well-formed")
		switch el := tok.(type) {
		case xml.StartElement:
			depth++
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch el.Name.Local {
			case "svg":
				cur = &svgInfo{w: num(t, attr["width"]), h: num(t, attr["height"])}
				vb := strings.Fields(attr["viewBox"])
				require.Len(t, vb, 4)
				cur.vw, cur.vh = num(t, vb[2]), num(t, vb[3])
				svgs = append(svgs, cur)
			case "polyline":
				require.NotNil(t, cur)
				cur.polylines++
				pts := strings.Fields(attr["points"])
				require.GreaterOrEqual(t, len(pts), 2)
				for _, p := range pts {
					xy := strings.Split(p, ",")
					require.Len(t, xy, 2)
					x, y := num(t, xy[0]), num(t, xy[1])
					require.True(t, x >= 0 && x <= cur.vw && y >= 0 && y <= cur.vh, "point %s outside the view box", p)
					cur.points++
				}
			case "text":
				if cur != nil {
					var s string
					require.NoError(t, d.DecodeElement(&s, &el))
					cur.texts = append(cur.texts, s)
					depth--
				}
			}
		case xml.EndElement:
			depth--
			if el.Name.Local == "svg" {
				cur = nil
			}
		}
	}
	assert.Zero(t, depth)
	require.Len(t, svgs, 3, "rate, throughput and queue charts")
	for i, s := range svgs {
		assert.Positive(t, s.w, "svg %d width", i)
		assert.Positive(t, s.h, "svg %d height", i)
		assert.Positive(t, s.vw*s.vh, "svg %d view box", i)
		assert.Contains(t, s.texts, "time (ms)", "svg %d x label", i)
		assert.Positive(t, s.points)
	}
	for i := range 2 {
		assert.Equal(t, 2, svgs[i].polylines, "one line per flow")
		assert.Contains(t, svgs[i].texts, "flow 0")
		assert.Contains(t, svgs[i].texts, "flow 1")
	}
	assert.Contains(t, svgs[0].texts, "rate (Gb/s)")
	assert.Contains(t, svgs[2].texts, "Kmax 200 KB")
	assert.Equal(t, 1, svgs[2].polylines)
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, s)
	return v
}
