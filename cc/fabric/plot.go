package fabric

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"time"
)

// Page holds what [WriteHTML] prints around the plots.
type Page struct {
	// Title heads the page.
	Title string
	// Notes are short lines under the title (profile, seed, parameters).
	Notes []string
	// Figures, if any, are listed in a table with their thresholds.
	Figures []Figure
}

// palette holds distinguishable line colours (Tableau 20 order); flows
// beyond its length reuse colours.
var palette = [...]string{
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
	"#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
}

// WriteHTML writes r as one self-contained HTML page: a figures table and
// three inline SVG charts sharing a time axis — each flow's sending rate
// RC, each flow's delivered throughput in 1-ms bins, and the bottleneck
// queue on a log scale with Kmin and Kmax marked. The page has no scripts
// and loads nothing; it is also well-formed XML.
func WriteHTML(w io.Writer, r *Result, pg Page) error {
	bw := bufio.NewWriter(w)
	writeHead(bw, pg)

	c := r.Config
	n := len(r.Flows)
	tEnd := float64(c.Duration) / float64(time.Millisecond)
	names := make([]string, n)
	for i := range names {
		names[i] = "flow " + strconv.Itoa(i)
	}

	// 1. Sending rate RC per flow.
	rate := chart{title: "Sending rate RC per flow (reaction point)", ylabel: "rate (Gb/s)", xmax: tEnd,
		ymin: 0, ymax: float64(c.RP.LineRate) / 1e9, window: c.Window}
	for i := range r.Flows {
		s := series{name: names[i], color: palette[i%len(palette)]}
		for k, t := range r.Series.T {
			s.x = append(s.x, float64(t)/float64(time.Millisecond))
			s.y = append(s.y, float64(r.Series.Rate[i][k])/1e9)
		}
		rate.lines = append(rate.lines, s)
	}
	rate.write(bw)

	// 2. Delivered throughput per flow, 1-ms bins (or Bin if coarser).
	bin := max(time.Millisecond, c.Bin)
	tput := chart{title: "Delivered throughput per flow (" + bin.String() + " bins) at the receiver", ylabel: "throughput (Gb/s)",
		xmax: tEnd, ymin: 0, ymax: float64(c.Bottleneck) / 1e9, window: c.Window}
	if n > 1 {
		tput.refs = append(tput.refs, ref{y: float64(c.Bottleneck) / 1e9 / float64(n), label: "C/" + strconv.Itoa(n)})
	}
	for i := range r.Flows {
		s := series{name: names[i], color: palette[i%len(palette)]}
		for t := time.Duration(0); t+bin <= c.Duration; t += bin {
			s.x = append(s.x, float64(t+bin/2)/float64(time.Millisecond))
			s.y = append(s.y, float64(r.Throughput(i, t, t+bin))/1e9)
		}
		tput.lines = append(tput.lines, s)
	}
	tput.write(bw)

	// 3. Queue depth, log scale.
	qmax := 1.0
	for _, q := range r.Series.Queue {
		qmax = max(qmax, float64(q)/1000)
	}
	q := chart{title: "Bottleneck egress queue (largest per " + c.Sample.String() + " sample)", ylabel: "queue (KB, log scale)",
		xmax: tEnd, log: true, ymin: 1, ymax: max(qmax, float64(c.RED.Kmax)/1000*2, 10), window: c.Window}
	q.refs = append(q.refs,
		ref{y: float64(c.RED.Kmin) / 1000, label: "Kmin " + fmtNum(float64(c.RED.Kmin)/1000) + " KB"},
		ref{y: float64(c.RED.Kmax) / 1000, label: "Kmax " + fmtNum(float64(c.RED.Kmax)/1000) + " KB"})
	qs := series{name: "queue", color: "#333333"}
	for k, t := range r.Series.T {
		qs.x = append(qs.x, float64(t)/float64(time.Millisecond))
		qs.y = append(qs.y, float64(r.Series.Queue[k])/1000)
	}
	q.lines = []series{qs}
	q.note = "peak " + fmtNum(math.Round(float64(r.Qpeak)/1000)) + " KB over the run"
	q.write(bw)

	fmt.Fprint(bw, "</body>\n</html>\n")
	return bw.Flush()
}

type series struct {
	name   string
	color  string
	dashed bool // drawn dashed (a worst case beside its median)
	dots   bool // a dot on every point (few points)
	x, y   []float64
}

type ref struct {
	y     float64
	label string
}

// chart is one SVG line chart, with time in ms on the x axis unless
// xlabel says otherwise.
type chart struct {
	title, ylabel string
	xlabel        string   // default "time (ms)"
	xlabels       []string // categorical x axis: point i at x = i, labelled xlabels[i]
	note          string   // printed after the title
	xmin, xmax    float64
	ymin, ymax    float64
	log           bool
	window        [2]time.Duration
	lines         []series
	refs          []ref
}

const (
	svgW, svgH                   = 960, 320
	padL, padR, padT, padB       = 70, 150, 34, 48
	plotW, plotH                 = svgW - padL - padR, svgH - padT - padB
	legendRowH, legendMaxRowsCol = 15, 18
)

func (c *chart) px(x float64) float64 { return padL + (x-c.xmin)/(c.xmax-c.xmin)*plotW }

func (c *chart) py(y float64) float64 {
	var f float64
	if c.log {
		y = max(y, c.ymin)
		f = (math.Log10(y) - math.Log10(c.ymin)) / (math.Log10(c.ymax) - math.Log10(c.ymin))
	} else {
		f = (y - c.ymin) / (c.ymax - c.ymin)
	}
	f = min(max(f, 0), 1)
	return padT + (1-f)*plotH
}

func (c *chart) write(w io.Writer) {
	e := html.EscapeString
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">
<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>
<text x="%d" y="20" font-size="15" font-weight="600">%s</text>
`, svgW, svgH, svgW, svgH, e(c.title), svgW, svgH, padL, e(c.title))
	if c.note != "" {
		fmt.Fprintf(w, "<text x=\"%d\" y=\"20\" font-size=\"12\" fill=\"#555\" text-anchor=\"end\">%s</text>\n", padL+plotW, e(c.note))
	}
	// Measurement window.
	if w0, w1 := float64(c.window[0])/1e6, float64(c.window[1])/1e6; w1 > w0 && (w0 > 0 || w1 < c.xmax) {
		fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f3f6fa"/>
<text x="%.1f" y="%d" font-size="10" fill="#6b7b8c" text-anchor="end">measurement window</text>
`, c.px(w0), padT, c.px(w1)-c.px(w0), plotH, c.px(w1)-4, padT+12)
	}
	// Grid and ticks.
	xt, xl := niceTicks(c.xmin, c.xmax, 10), []string(nil)
	if c.xlabels != nil {
		xt, xl = nil, c.xlabels
		for i := range c.xlabels {
			xt = append(xt, float64(i))
		}
	}
	for i, t := range xt {
		x := c.px(t)
		label := fmtNum(t)
		if xl != nil {
			label = xl[i]
		}
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e3e3e3"/>
<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>
`, x, padT, x, padT+plotH, x, padT+plotH+16, e(label))
	}
	var yt []float64
	if c.log {
		for d := math.Pow(10, math.Floor(math.Log10(c.ymin))); d <= c.ymax*1.0001; d *= 10 {
			if d >= c.ymin {
				yt = append(yt, d)
			}
		}
	} else {
		yt = niceTicks(c.ymin, c.ymax, 6)
	}
	for _, t := range yt {
		y := c.py(t)
		label := fmtNum(t)
		if c.log && t >= 1000 {
			label = fmtNum(t/1000) + " MB"
		} else if c.log {
			label += " KB"
		}
		if c.log && t == c.ymin {
			label = "≤ " + label // smaller values, an empty queue included, sit on the axis
		}
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e3e3"/>
<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>
`, padL, y, padL+plotW, y, padL-6, y+4, label)
	}
	// Axes and labels.
	xlabel := c.xlabel
	if xlabel == "" {
		xlabel = "time (ms)"
	}
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>
<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>
<text x="%d" y="%d" font-size="12" text-anchor="middle">%s</text>
<text x="16" y="%d" font-size="12" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>
`, padL, padT+plotH, padL+plotW, padT+plotH, padL, padT, padL, padT+plotH,
		padL+plotW/2, svgH-8, e(xlabel), padT+plotH/2, padT+plotH/2, e(c.ylabel))
	// Reference lines.
	for _, r := range c.refs {
		y := c.py(r.y)
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#888" stroke-dasharray="5 4"/>
<text x="%d" y="%.1f" font-size="10" fill="#555" text-anchor="end">%s</text>
`, padL, y, padL+plotW, y, padL+plotW-4, y-3, e(r.label))
	}
	// Data.
	for _, s := range c.lines {
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.3" stroke-linejoin="round"%s points="`, s.color, dash)
		for i := range s.x {
			if i > 0 {
				io.WriteString(w, " ")
			}
			fmt.Fprintf(w, "%.1f,%.1f", c.px(s.x[i]), c.py(s.y[i]))
		}
		io.WriteString(w, "\"/>\n")
		if s.dots {
			for i := range s.x {
				fmt.Fprintf(w, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", c.px(s.x[i]), c.py(s.y[i]), s.color)
			}
		}
	}
	// Legend, in columns to the right of the plot.
	if len(c.lines) > 1 || c.lines[0].name != "queue" {
		for i, s := range c.lines {
			col, row := i/legendMaxRowsCol, i%legendMaxRowsCol
			x := padL + plotW + 12 + col*70
			y := padT + 8 + row*legendRowH
			dash := ""
			if s.dashed {
				dash = ` stroke-dasharray="4 3"`
			}
			fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"%s/>
<text x="%d" y="%d" font-size="11">%s</text>
`, x, y, x+16, y, s.color, dash, x+20, y+4, e(s.name))
		}
	}
	io.WriteString(w, "</svg>\n")
}

// niceTicks returns about n round tick values (1, 2, 5 × 10^k steps)
// covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		return []float64{lo}
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ts []float64
	for t := math.Ceil(lo/step) * step; t <= hi+step*1e-9; t += step {
		ts = append(ts, math.Round(t/step)*step)
	}
	return ts
}

// fmtNum formats a figure value compactly: up to 4 significant digits,
// no exponent for everyday magnitudes.
func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case math.IsInf(v, 1):
		return "∞"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// writeHead writes the page up to its charts: the style, the title, the
// notes and the figures table.
func writeHead(bw *bufio.Writer, pg Page) {
	e := html.EscapeString
	fmt.Fprintf(bw, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<title>%s</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px; color: #222; max-width: 1000px; }
h1 { font-size: 20px; margin: 0 0 4px 0; }
p.note { margin: 2px 0; color: #555; font-size: 13px; }
table { border-collapse: collapse; margin: 12px 0 8px 0; font-size: 13px; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th { background: #f2f2f2; }
td.k { text-align: left; font-family: ui-monospace, Menlo, Consolas, monospace; }
td.pass { color: #1a7f37; } td.fail { color: #cf222e; font-weight: bold; }
svg { display: block; margin: 14px 0; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
</style>
</head>
<body>
<h1>%s</h1>
`, e(pg.Title), e(pg.Title))
	for _, n := range pg.Notes {
		fmt.Fprintf(bw, "<p class=\"note\">%s</p>\n", e(n))
	}
	if len(pg.Figures) > 0 {
		fmt.Fprint(bw, "<table>\n<tr><th>figure</th><th>value</th><th>threshold</th><th>result</th></tr>\n")
		for _, f := range pg.Figures {
			th, res, cls := "report", "", ""
			switch f.Cmp {
			case AtLeast:
				th = "≥ " + fmtNum(f.Limit)
			case AtMost:
				th = "≤ " + fmtNum(f.Limit)
			}
			if f.Cmp != Report {
				res, cls = "pass", "pass"
				if !f.Pass() {
					res, cls = "FAIL", "fail"
				}
			}
			fmt.Fprintf(bw, "<tr><td class=\"k\">%s</td><td>%s</td><td>%s</td><td class=\"%s\">%s</td></tr>\n",
				e(f.Key), fmtNum(f.Value), e(th), cls, res)
		}
		fmt.Fprint(bw, "</table>\n")
	}

}
