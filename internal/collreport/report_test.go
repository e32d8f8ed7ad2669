package collreport

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/svgplot"
	"github.com/goroce/goroce/internal/testutil"
)

// sampleReport is a run of 8 ranks on 2 leaves × 4 hosts and 4 spines at
// 1 Gbit/s: link l0-s0 full towards the spine, l1-s3 idle, one interval
// of the series unread (NaN), a hostile title.
func sampleReport() *Report {
	r := &Report{
		Title:   `all_reduce <8 ranks> & "fabric"`,
		Command: "goroce coll all_reduce -np 8 --fabric demo",
		Notes:   []string{"ranks placed interleaved"},
		Figures: []Figure{{Name: "per-spine bytes max/mean", Value: "1.12", Note: "the out-of-place timed run"}},
		Counters: []Counter{
			{Name: "CNPs sent", Value: 42}, {Name: "tbf drops", Value: 3, Bad: true}, {Name: "retransmitted", Value: 0, Bad: true},
		},
		Conns: []Conn{{From: 0, To: 1, FromHost: "h0", ToHost: "h4", QPs: []QP{{Index: 0, QPN: 0x11, SourcePort: 49153, Spine: "s2", Sent: 100, Retransmitted: 2}}}},
	}
	for i, b := range []int64{1 << 20, 4 << 20, 64 << 20} {
		bw := 0.05 * float64(i+1)
		r.Rows = append(r.Rows, Row{Bytes: b, Type: "float", Op: "sum", Out: Half{TimeUs: 1000, BusBw: bw, Checked: true}, In: Half{TimeUs: 1100, BusBw: bw * 0.9, Checked: true}})
	}
	f := &Fabric{Name: "demo", Leaves: 2, Spines: 4, Rate: 1e9, LoadWindow: "the timed runs of 64M", LoadSeconds: 2,
		SpineBytes: []uint64{250e6, 250e6, 250e6, 50e6}, SpineMaxMean: 1.25}
	for h := range 8 {
		f.Hosts = append(f.Hosts, Host{Name: fmt.Sprintf("h%d", h), Leaf: h / 4, Rank: h})
		f.Links = append(f.Links, LinkLoad{Name: fmt.Sprintf("l%d-h%d", h/4, h), Leaf: h / 4, Host: h,
			AB: DirLoad{Bytes: 1e8, Use: math.NaN()}, BA: DirLoad{Bytes: 1e8, Use: math.NaN()}})
	}
	for l := range 2 {
		for s := range 4 {
			u := 0.5
			switch {
			case l == 0 && s == 0:
				u = 1
			case l == 1 && s == 3:
				u = 0
			}
			f.Links = append(f.Links, LinkLoad{Name: fmt.Sprintf("l%d-s%d", l, s), Uplink: true, Leaf: l, Spine: s,
				AB: DirLoad{Bytes: uint64(u * 2.5e8), Use: u, Marks: 7}, BA: DirLoad{Bytes: uint64(u * 2.5e8), Use: u}})
			sl := SeriesLink{Name: fmt.Sprintf("l%d-s%d", l, s), Leaf: l, Spine: s}
			for i := range 10 {
				v := u
				if i == 4 {
					v = math.NaN()
				}
				sl.AB, sl.BA = append(sl.AB, v), append(sl.BA, v/2)
			}
			f.Series.Links = append(f.Series.Links, sl)
		}
	}
	for i := range 10 {
		f.Series.T = append(f.Series.T, 0.2*float64(i+1))
	}
	f.Series.Spans = []Span{{Start: 0.4, End: 1.2, Label: "67108864 B float out-of-place"}}
	r.Fabric = f
	return r
}

// TestWrite: every part of a fabric run's report is drawn from its model:
// the busbw chart and table, the leaf-spine picture with a link's stroke
// in the colour of its load, one series chart per leaf broken where an
// interval is missing, the counters with the bad ones flagged, the QPs;
// text is escaped and the page is well-formed XML without script.
func TestWrite(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Write(&b, sampleReport()))
	doc := b.Bytes()
	testutil.RequireXML(t, doc)
	s := b.String()
	assert.NotContains(t, s, "<script")
	assert.Contains(t, s, "all_reduce &lt;8 ranks&gt; &amp; &#34;fabric&#34;")
	assert.NotContains(t, s, "<8 ranks>")

	charts := regexp.MustCompile(`<svg class="chart (\w+)"`).FindAllStringSubmatch(s, -1)
	var classes []string
	for _, c := range charts {
		classes = append(classes, c[1])
	}
	assert.Equal(t, []string{"busbw", "fabric", "series", "series"}, classes, "busbw, the fabric, one series per leaf")
	// Every link is in the table, the full one red, the idle one green.
	for _, l := range []string{"l0-s0", "l1-s3", "l0-h0", "l1-h7"} {
		assert.Contains(t, s, "<td>"+l+"</td>")
	}
	assert.Contains(t, s, `stroke="`+heat(1)+`"`)
	assert.Contains(t, s, `stroke="`+heat(0)+`"`)
	assert.Contains(t, s, "1.00↑ 1.00↓", "the full uplink's label")
	for k := range 4 {
		assert.Contains(t, s, fmt.Sprintf(`>s%d</text>`, k))
	}
	for r := range 8 {
		assert.Contains(t, s, fmt.Sprintf(">rank %d</text>", r))
	}
	// The series: 8 uplinks × 2 directions, each broken once by the NaN,
	// plus the rate line of each leaf's chart.
	series := s[strings.Index(s, `<svg class="chart series"`):]
	series = series[:strings.LastIndex(series, "</svg>")]
	assert.Equal(t, 8*2*2, strings.Count(series, `<polyline class="tp`))
	assert.Equal(t, 2, strings.Count(series, `<polyline class="ideal"`))
	assert.Equal(t, 2, strings.Count(series, `<rect class="span"`), "the timed run shaded on each chart")
	// The rows, and the counters: a bad one not zero is flagged.
	assert.Equal(t, 3, strings.Count(s, `<td class="n">67108864</td>`)+strings.Count(s, `<td class="n">1048576</td>`)+strings.Count(s, `<td class="n">4194304</td>`))
	assert.Contains(t, s, `<td>tbf drops</td><td class="n"><span class="bad">3</span>`)
	assert.Contains(t, s, `<td>retransmitted</td><td class="n"><span class="ok">0</span>`)
	assert.Contains(t, s, "qp0 0x11 sport 49153 s2: 100 sent, 2 retransmitted")
}

// TestWriteNoFabric: a run without a fabric, or without rows, still makes a
// well-formed page, without the fabric's parts.
func TestWriteNoFabric(t *testing.T) {
	for _, r := range []*Report{{Title: "empty"}, {Title: "rows", Rows: sampleReport().Rows}} {
		var b bytes.Buffer
		require.NoError(t, Write(&b, r))
		testutil.RequireXML(t, b.Bytes())
		assert.NotContains(t, b.String(), `class="chart fabric"`)
		assert.NotContains(t, b.String(), `class="chart series"`)
		if len(r.Rows) == 0 {
			assert.Contains(t, b.String(), "No rows")
		}
	}
}

func TestTicks(t *testing.T) {
	tests := []struct {
		a, b float64
		n    int
		want []float64
	}{
		{0, 1, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 0.13, 6, []float64{0, 0.05, 0.1}},
		{3, 10, 8, []float64{3, 4, 5, 6, 7, 8, 9, 10}},
		{1, 1, 5, nil},
		{0, math.Inf(1), 5, nil},
	}
	for _, tc := range tests {
		got := svgplot.Ticks(tc.a, tc.b, tc.n)
		require.Len(t, got, len(tc.want), "%v…%v: %v", tc.a, tc.b, got)
		for i := range got {
			assert.InDelta(t, tc.want[i], got[i], 1e-9)
		}
	}
}

func TestHeat(t *testing.T) {
	tests := []struct {
		u    float64
		want string
	}{
		{0, "#2a9d3a"}, {-1, "#2a9d3a"}, {0.5, "#e0b010"}, {1, "#c62828"}, {1.5, "#7a0f0f"}, {math.NaN(), "#9aa3b2"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, heat(tc.u), "%v", tc.u)
	}
}

func TestFmtBytes(t *testing.T) {
	for in, want := range map[int64]string{1 << 30: "1G", 64 << 20: "64M", 3 << 10: "3K", 1000: "1000", 1<<20 + 1: "1048577"} {
		assert.Equal(t, want, fmtBytes(in))
	}
}
