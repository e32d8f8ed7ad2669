package collreport

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/goroce/goroce/internal/svgplot"
)

// Report is everything one HTML report of a collective run shows.
type Report struct {
	// Title heads the page ("all_reduce, 8 ranks on fabric demo").
	Title string
	// Command is the command line that made the run.
	Command string
	// Generated is shown in the footer; zero leaves it out.
	Generated time.Time
	// Notes are lines under the title: the job's shape, the settings.
	Notes []string
	// Figures are the run's key figures, with a note each.
	Figures []Figure
	// Rows are nccl-tests' rows: busbw against size, both halves.
	Rows []Row
	// Fabric is what the fabric carried; nil for a run without one.
	Fabric *Fabric
	// Counters are the transport's and the fabric's event counts: packets
	// sent and retransmitted, CNPs, rate cuts, CE marks, tbf drops.
	Counters []Counter
	// Conns are the connections that carried the data, with their QPs.
	Conns []Conn
}

// Figure is one key figure of a run.
type Figure struct {
	Name, Value, Note string
}

// Row is one size of the run.
type Row struct {
	Bytes     int64
	Type, Op  string
	Out, In   Half // out-of-place, in place
	Algorithm string
}

// Half is one half of a row.
type Half struct {
	TimeUs, AlgBw, BusBw float64 // µs, GB/s, GB/s
	Wrong                int64
	Checked              bool
}

// Fabric is the leaf-spine fabric of a run and the load on its links.
type Fabric struct {
	Name               string
	Leaves, Spines     int
	Rate, HostRate     float64 // bits/s of each direction; 0: unlimited
	Hosts              []Host
	Links              []LinkLoad
	LoadWindow         string  // what Links' counts cover ("the timed runs of 64M")
	LoadSeconds        float64 // its length
	SpineBytes         []uint64
	SpineMaxMean       float64
	Series             Series
	ThresholdBytes     int
	BufferBytes        int
	CongestionControl  string
	SampledOneInPacket int
}

// Host is a host of the fabric and the rank it ran (−1: none).
type Host struct {
	Name string
	Leaf int
	Rank int
}

// LinkLoad is what one link carried each way over Fabric.LoadWindow. AB is
// from the leaf (to the spine or host), BA towards the leaf.
type LinkLoad struct {
	Name              string // "l0-s1", "l1-h5"
	Uplink            bool
	Leaf, Spine, Host int
	AB, BA            DirLoad
}

// DirLoad is one direction of a link.
type DirLoad struct {
	Bytes uint64
	// Use is the share of the link's rate the bytes took (NaN: unlimited).
	Use          float64
	Marks, Drops uint64
}

// Series is each uplink's throughput over time.
type Series struct {
	// T is the end of each interval, in seconds from the run's start.
	T     []float64
	Links []SeriesLink
	// Spans mark the timed runs.
	Spans []Span
}

// SeriesLink is one uplink's throughput in each interval of Series.T, in
// Gb/s of frames, each way.
type SeriesLink struct {
	Name        string
	Leaf, Spine int
	AB, BA      []float64
}

// Span is an interval of the run, in seconds from its start.
type Span struct {
	Start, End float64
	Label      string
}

// Counter is one count of the run.
type Counter struct {
	Name  string
	Value uint64
	Note  string
	Bad   bool // shown as a problem when not zero
}

// Conn is one connection that carried data.
type Conn struct {
	From, To         int
	FromHost, ToHost string
	Channel          int
	QPs              []QP
}

// QP is one QP of a connection: its number, source port, the spine its
// packets took ("s2", "-" under one leaf, "?" not seen) and its counts.
type QP struct {
	Index               int
	QPN                 uint32
	SourcePort          uint16
	Spine               string
	Sent, Retransmitted uint64
}

// css is the whole style sheet.
const css = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f6f7f9;margin:0}
main{max-width:1040px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;padding-top:8px;border-top:2px solid #d5d9e0}
p.sub{color:#5a6273;margin:0 0 12px}
table{border-collapse:collapse;background:#fff;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #d5d9e0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37}.bad{color:#b3261e;font-weight:600}
.note{background:#fff8e1;border-left:4px solid #e0a800;padding:4px 10px;margin:4px 0}
.chart{background:#fff;border:1px solid #d5d9e0;margin:4px 0 2px;max-width:100%;height:auto}
.legend{font-size:12px;color:#3c4454;margin:0 0 10px}.legend span{margin-right:14px;white-space:nowrap}
.sw{display:inline-block;width:12px;height:12px;vertical-align:-2px;margin-right:4px;border-radius:2px}
code{font-size:12px;background:#eef0f4;padding:1px 4px;border-radius:3px}
svg text{font:11px system-ui,sans-serif;fill:#3c4454}svg text.label{font-size:12px;fill:#1d2330}
svg text.node{font-size:12px;fill:#fff;font-weight:600}svg text.use{font-size:10px;fill:#1d2330}
svg .frame{fill:none;stroke:#9aa3b2}svg .grid{stroke:#e4e7ec}
svg .out{fill:none;stroke:#1f5fbf;stroke-width:2}svg .in{fill:none;stroke:#e07b00;stroke-width:2;stroke-dasharray:5 3}
svg .outdot{fill:#1f5fbf}svg .indot{fill:#e07b00}
svg .ideal{fill:none;stroke:#2a9d3a;stroke-width:1.2;stroke-dasharray:2 3}
svg .span{fill:#1f5fbf;opacity:.07}
svg .spine{fill:#3c4454}svg .leaf{fill:#1f5fbf}svg .host{fill:#6b7a90}svg .idle{fill:#c3c9d3}
svg .link{fill:none;stroke-linecap:round}
svg .tpab{fill:none;stroke-width:1.5}svg .tpba{fill:none;stroke-width:1.2;stroke-dasharray:4 3}
`

// Write writes the report as one self-contained HTML document: inline CSS
// and SVG, no script, no external reference. It is also well-formed XML.
func Write(w io.Writer, r *Report) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	fmt.Fprintf(bw, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>"+
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/><title>goroce coll report: %s</title>"+
		"<style>%s</style></head><body><main>\n", esc(r.Title), css)
	fmt.Fprintf(bw, "<h1>%s</h1>\n", esc(r.Title))
	if r.Command != "" {
		fmt.Fprintf(bw, "<p class=\"sub\"><code>%s</code></p>\n", esc(r.Command))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(bw, "<div class=\"note\">%s</div>\n", esc(n))
	}
	writeFigures(bw, r)
	writeBusBw(bw, r)
	if r.Fabric != nil {
		writeFabric(bw, r.Fabric)
		writeSeries(bw, r.Fabric)
	}
	writeCounters(bw, r)
	writeConns(bw, r)
	fmt.Fprintf(bw, "<p class=\"sub\">Made by <code>goroce coll --report</code>")
	if !r.Generated.IsZero() {
		fmt.Fprintf(bw, " on %s", esc(r.Generated.UTC().Format(time.RFC3339)))
	}
	fmt.Fprintf(bw, ". busbw is nccl-tests' bus bandwidth; link loads count whole Ethernet frames, as the links' rate limits do.</p>\n")
	fmt.Fprintf(bw, "</main></body></html>\n")
	return bw.Flush()
}

func writeFigures(w io.Writer, r *Report) {
	if len(r.Figures) == 0 {
		return
	}
	fmt.Fprintf(w, "<h2 id=\"figures\">Figures</h2>\n<table><tr><th>figure</th><th>value</th><th>how</th></tr>\n")
	for _, f := range r.Figures {
		fmt.Fprintf(w, "<tr><td>%s</td><td class=\"n\">%s</td><td>%s</td></tr>\n", esc(f.Name), esc(f.Value), esc(f.Note))
	}
	fmt.Fprintf(w, "</table>\n")
}

// writeBusBw draws busbw against size (a log2 axis), both halves, and the
// rows' table.
func writeBusBw(w io.Writer, r *Report) {
	fmt.Fprintf(w, "<h2 id=\"busbw\">Bus bandwidth against size</h2>\n")
	if len(r.Rows) == 0 {
		fmt.Fprintf(w, "<p>No rows: the run measured nothing.</p>\n")
		return
	}
	rows := slices.Clone(r.Rows)
	slices.SortStableFunc(rows, func(a, b Row) int { return int(a.Bytes - b.Bytes) })
	lx := func(b int64) float64 { return math.Log2(max(float64(b), 1)) }
	x0, x1 := lx(rows[0].Bytes), lx(rows[len(rows)-1].Bytes)
	if x1-x0 < 1 {
		x0, x1 = x0-1, x1+1
	}
	ymax := 0.0
	for _, row := range rows {
		ymax = max(ymax, row.Out.BusBw, row.In.BusBw)
	}
	p := newPlot(980, 300, x0, x1, 0, ymax*1.1)
	for v := math.Ceil(x0); v <= x1; v++ {
		p.XTicks = append(p.XTicks, v)
	}
	if len(p.XTicks) > 14 {
		p.XTicks = thinTicks(p.XTicks, 14)
	}
	p.Axes("size (bytes, log scale)", "busbw (GB/s)", func(v float64) string { return fmtBytes(int64(math.Round(math.Exp2(v)))) }, fmtNum)
	var xs, out, in []float64
	for _, row := range rows {
		xs, out, in = append(xs, lx(row.Bytes)), append(out, row.Out.BusBw), append(in, row.In.BusBw)
	}
	p.Polyline("out", xs, out)
	p.Polyline("in", xs, in)
	for i := range xs {
		fmt.Fprintf(&p.B, `<circle class="outdot" cx="%s" cy="%s" r="3"/>`, svgplot.F1(p.X(xs[i])), svgplot.F1(p.Y(out[i])))
		fmt.Fprintf(&p.B, `<circle class="indot" cx="%s" cy="%s" r="2.5"/>`, svgplot.F1(p.X(xs[i])), svgplot.F1(p.Y(in[i])))
	}
	fmt.Fprintln(w, p.SVG("chart busbw", "busbw against size"))
	fmt.Fprintf(w, "<p class=\"legend\"><span><span class=\"sw\" style=\"background:#1f5fbf\"></span>out-of-place</span><span><span class=\"sw\" style=\"background:#e07b00\"></span>in place</span></p>\n")
	fmt.Fprintf(w, "<table><tr><th>size (B)</th><th>type</th><th>redop</th><th>out-of-place time (µs)</th><th>algbw</th><th>busbw</th><th>#wrong</th><th>in-place time (µs)</th><th>algbw</th><th>busbw</th><th>#wrong</th></tr>\n")
	for _, row := range rows {
		fmt.Fprintf(w, "<tr><td class=\"n\">%d</td><td>%s</td><td>%s</td>", row.Bytes, esc(row.Type), esc(row.Op))
		for _, h := range []Half{row.Out, row.In} {
			fmt.Fprintf(w, "<td class=\"n\">%.1f</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td>",
				h.TimeUs, fmtNum(h.AlgBw), fmtNum(h.BusBw), wrongCell(h))
		}
		fmt.Fprintf(w, "</tr>\n")
	}
	fmt.Fprintf(w, "</table>\n")
}

func wrongCell(h Half) string {
	switch {
	case !h.Checked:
		return "N/A"
	case h.Wrong != 0:
		return fmt.Sprintf("<span class=\"bad\">%d</span>", h.Wrong)
	}
	return "<span class=\"ok\">0</span>"
}

// thinTicks keeps at most n of ts, evenly spread.
func thinTicks(ts []float64, n int) []float64 {
	step := (len(ts) + n - 1) / n
	var out []float64
	for i := 0; i < len(ts); i += step {
		out = append(out, ts[i])
	}
	return out
}

// writeFabric draws the fabric as a leaf-spine picture: spines on top,
// leaves below, hosts under their leaves with the rank each ran; every
// link a pair of strokes (leaf to far end on the left, back on the right)
// coloured and thickened by the share of its rate it used, labelled with
// that share; then the links' table.
func writeFabric(w io.Writer, f *Fabric) {
	fmt.Fprintf(w, "<h2 id=\"fabric\">Load on the fabric</h2>\n")
	fmt.Fprintf(w, "<p class=\"sub\">Fabric %s: %d leaves, %d spines, leaf–spine links %s, host links %s; over %s (%.2f s).</p>\n",
		esc(f.Name), f.Leaves, f.Spines, rateStr(f.Rate), rateStr(f.HostRate), esc(f.LoadWindow), f.LoadSeconds)
	const W, H = 980, 420
	var b strings.Builder
	spineX := func(k int) float64 { return float64(W) * (float64(k) + 0.5) / float64(max(f.Spines, 1)) }
	leafX := func(l int) float64 { return float64(W) * (float64(l) + 0.5) / float64(max(f.Leaves, 1)) }
	const spineY, leafY, hostY = 40.0, 250.0, 370.0
	perLeaf := map[int][]Host{}
	for _, h := range f.Hosts {
		perLeaf[h.Leaf] = append(perLeaf[h.Leaf], h)
	}
	hostX := map[string]float64{}
	for l, hs := range perLeaf {
		span := float64(W) / float64(max(f.Leaves, 1)) * 0.9
		for i, h := range hs {
			hostX[h.Name] = leafX(l) - span/2 + span*(float64(i)+0.5)/float64(len(hs))
		}
	}
	stroke := func(x1, y1, x2, y2, u float64) {
		wd := 1.5
		if !math.IsNaN(u) {
			wd = 1.5 + 6*min(max(u, 0), 1.2)
		}
		fmt.Fprintf(&b, `<line class="link" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"/>`,
			svgplot.F1(x1), svgplot.F1(y1), svgplot.F1(x2), svgplot.F1(y2), heat(u), svgplot.F1(wd))
	}
	label := func(x, y float64, s string) {
		fmt.Fprintf(&b, `<text class="use" x="%s" y="%s" text-anchor="middle">%s</text>`, svgplot.F1(x), svgplot.F1(y), esc(s))
	}
	for _, l := range f.Links {
		x1, y1 := leafX(l.Leaf), leafY
		x2, y2 := spineX(l.Spine), spineY
		if !l.Uplink {
			x2, y2 = hostX[fmt.Sprintf("h%d", l.Host)], hostY
		}
		// Two strokes side by side: the leaf's direction, then the far end's.
		dx, dy := x2-x1, y2-y1
		n := math.Hypot(dx, dy)
		ox, oy := -dy/n*3.5, dx/n*3.5
		stroke(x1-ox, y1-oy, x2-ox, y2-oy, l.AB.Use)
		stroke(x1+ox, y1+oy, x2+ox, y2+oy, l.BA.Use)
		if l.Uplink && !math.IsNaN(l.AB.Use) {
			// Near the leaf, where its uplinks fan out apart.
			t := 0.3
			label(x1+dx*t, y1+dy*t+4, fmt.Sprintf("%.2f↑ %.2f↓", l.AB.Use, l.BA.Use))
		}
	}
	for k := range f.Spines {
		x := spineX(k)
		fmt.Fprintf(&b, `<rect class="spine" x="%s" y="%s" width="64" height="28" rx="4"/>`, svgplot.F1(x-32), svgplot.F1(spineY-14))
		sb := ""
		if k < len(f.SpineBytes) {
			sb = fmt.Sprintf("%.1f MB", float64(f.SpineBytes[k])/1e6)
		}
		fmt.Fprintf(&b, `<text class="node" x="%s" y="%s" text-anchor="middle">s%d</text>`, svgplot.F1(x), svgplot.F1(spineY+4), k)
		label(x, spineY-20, sb)
	}
	for l := range f.Leaves {
		x := leafX(l)
		fmt.Fprintf(&b, `<rect class="leaf" x="%s" y="%s" width="64" height="28" rx="4"/>`, svgplot.F1(x-32), svgplot.F1(leafY-14))
		fmt.Fprintf(&b, `<text class="node" x="%s" y="%s" text-anchor="middle">l%d</text>`, svgplot.F1(x), svgplot.F1(leafY+4), l)
	}
	for _, h := range f.Hosts {
		x := hostX[h.Name]
		cls, rank := "host", ""
		if h.Rank < 0 {
			cls = "idle"
		} else {
			rank = fmt.Sprintf("rank %d", h.Rank)
		}
		fmt.Fprintf(&b, `<rect class="%s" x="%s" y="%s" width="44" height="24" rx="3"/>`, cls, svgplot.F1(x-22), svgplot.F1(hostY-12))
		fmt.Fprintf(&b, `<text class="node" x="%s" y="%s" text-anchor="middle">%s</text>`, svgplot.F1(x), svgplot.F1(hostY+4), esc(h.Name))
		label(x, hostY+26, rank)
	}
	fmt.Fprintf(w, `<svg class="chart fabric" viewBox="0 0 %d %d" width="%d" height="%d" role="img"><title>load on the fabric's links</title>%s</svg>`+"\n",
		W, H, W, H, b.String())
	fmt.Fprintf(w, "<p class=\"legend\"><span>share of the link's rate each way (left stroke from the leaf, right stroke towards it):</span>")
	for _, u := range []float64{0, 0.25, 0.5, 0.75, 1} {
		fmt.Fprintf(w, "<span><span class=\"sw\" style=\"background:%s\"></span>%.2f</span>", heat(u), u)
	}
	if f.SpineMaxMean > 0 {
		fmt.Fprintf(w, "<span>per-spine bytes max/mean %.2f</span>", f.SpineMaxMean)
	}
	fmt.Fprintf(w, "</p>\n")
	fmt.Fprintf(w, "<table><tr><th>link</th><th>from the leaf: bytes</th><th>share of rate</th><th>CE marks</th><th>tbf drops</th><th>to the leaf: bytes</th><th>share of rate</th><th>CE marks</th><th>tbf drops</th></tr>\n")
	for _, l := range f.Links {
		fmt.Fprintf(w, "<tr><td>%s</td>", esc(l.Name))
		for _, d := range []DirLoad{l.AB, l.BA} {
			fmt.Fprintf(w, "<td class=\"n\">%d</td><td class=\"n\">%s</td><td class=\"n\">%d</td><td class=\"n\">%s</td>",
				d.Bytes, useStr(d.Use), d.Marks, countCell(d.Drops, true))
		}
		fmt.Fprintf(w, "</tr>\n")
	}
	fmt.Fprintf(w, "</table>\n")
}

func rateStr(r float64) string {
	switch {
	case r == 0:
		return "unlimited"
	case r >= 1e9:
		return svgplot.Trim(fmt.Sprintf("%.3f", r/1e9)) + " Gbit/s"
	}
	return svgplot.Trim(fmt.Sprintf("%.3f", r/1e6)) + " Mbit/s"
}

func useStr(u float64) string {
	if math.IsNaN(u) {
		return "–"
	}
	return fmt.Sprintf("%.3f", u)
}

func countCell(n uint64, bad bool) string {
	if n == 0 {
		return "<span class=\"ok\">0</span>"
	}
	if bad {
		return fmt.Sprintf("<span class=\"bad\">%d</span>", n)
	}
	return fmt.Sprintf("%d", n)
}

// writeSeries draws each leaf's uplinks' throughput over the run, one
// chart per leaf: towards the spines solid, back dashed, a colour per
// spine, the timed runs shaded.
func writeSeries(w io.Writer, f *Fabric) {
	s := f.Series
	if len(s.T) < 2 || len(s.Links) == 0 {
		return
	}
	fmt.Fprintf(w, "<h2 id=\"series\">Throughput of the uplinks over time</h2>\n")
	ymax := 0.0
	for _, l := range s.Links {
		for _, v := range slices.Concat(l.AB, l.BA) {
			if !math.IsNaN(v) {
				ymax = max(ymax, v)
			}
		}
	}
	if f.Rate > 0 {
		ymax = max(ymax, f.Rate/1e9)
	}
	for leaf := range f.Leaves {
		p := newPlot(980, 240, 0, s.T[len(s.T)-1], 0, ymax*1.08)
		for _, sp := range s.Spans {
			fmt.Fprintf(&p.B, `<rect class="span" x="%s" y="%s" width="%s" height="%s"><title>%s</title></rect>`,
				svgplot.F1(p.X(sp.Start)), svgplot.F1(float64(p.Top)), svgplot.F1(max(p.X(sp.End)-p.X(sp.Start), 1)), svgplot.F1(float64(p.H-p.Top-p.Bottom)), esc(sp.Label))
		}
		p.Axes("time (s)", fmt.Sprintf("leaf %d's uplinks (Gb/s)", leaf), fmtNum, fmtNum)
		if f.Rate > 0 {
			p.Polyline("ideal", []float64{0, s.T[len(s.T)-1]}, []float64{f.Rate / 1e9, f.Rate / 1e9})
		}
		for _, l := range s.Links {
			if l.Leaf != leaf {
				continue
			}
			fmt.Fprintf(&p.B, `<g stroke="%s">`, color(l.Spine))
			p.Polyline("tpab", s.T, l.AB)
			p.Polyline("tpba", s.T, l.BA)
			fmt.Fprintf(&p.B, `</g>`)
		}
		fmt.Fprintln(w, p.SVG("chart series", fmt.Sprintf("leaf %d's uplinks over time", leaf)))
	}
	fmt.Fprintf(w, "<p class=\"legend\">")
	for k := range f.Spines {
		fmt.Fprintf(w, "<span><span class=\"sw\" style=\"background:%s\"></span>spine %d</span>", color(k), k)
	}
	fmt.Fprintf(w, "<span>solid: leaf to spine; dashed: spine to leaf; dotted: the link rate; shaded: the timed runs</span></p>\n")
}

func writeCounters(w io.Writer, r *Report) {
	if len(r.Counters) == 0 {
		return
	}
	fmt.Fprintf(w, "<h2 id=\"ecn\">ECN, CNPs and retransmissions</h2>\n<table><tr><th>count</th><th>value</th><th>what</th></tr>\n")
	for _, c := range r.Counters {
		fmt.Fprintf(w, "<tr><td>%s</td><td class=\"n\">%s</td><td>%s</td></tr>\n", esc(c.Name), countCell(c.Value, c.Bad), esc(c.Note))
	}
	fmt.Fprintf(w, "</table>\n")
}

func writeConns(w io.Writer, r *Report) {
	if len(r.Conns) == 0 {
		return
	}
	fmt.Fprintf(w, "<h2 id=\"conns\">Connections that carried the data</h2>\n")
	fmt.Fprintf(w, "<p class=\"sub\">Each QP's number, UDP source port and the spine its packets took (&#8220;-&#8221;: under one leaf; &#8220;?&#8221;: no packet sampled), packets sent and retransmitted.</p>\n")
	fmt.Fprintf(w, "<table><tr><th>from</th><th>to</th><th>channel</th><th>QPs</th></tr>\n")
	for _, c := range r.Conns {
		var qs []string
		for _, q := range c.QPs {
			s := fmt.Sprintf("qp%d %#x sport %d %s: %d sent", q.Index, q.QPN, q.SourcePort, q.Spine, q.Sent)
			if q.Retransmitted > 0 {
				s += fmt.Sprintf(", %d retransmitted", q.Retransmitted)
			}
			qs = append(qs, esc(s))
		}
		fmt.Fprintf(w, "<tr><td>rank %d (%s)</td><td>rank %d (%s)</td><td class=\"n\">%d</td><td>%s</td></tr>\n",
			c.From, esc(c.FromHost), c.To, esc(c.ToHost), c.Channel, strings.Join(qs, "<br/>"))
	}
	fmt.Fprintf(w, "</table>\n")
}
