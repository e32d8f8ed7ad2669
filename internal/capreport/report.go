package capreport

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/flow"
	"github.com/goroce/goroce/capture/lint"
	"github.com/goroce/goroce/internal/svgplot"
)

// MaxFindings bounds the findings a Report keeps (the counts stay exact).
const MaxFindings = 5000

// maxMarks bounds the marks drawn per series of a sequence graph.
const maxMarks = 6000

// Report is everything one HTML report shows.
type Report struct {
	// Name is the capture's name as shown (the file name).
	Name string
	// Flows is the flow analysis, made with flow.Config.Points.
	Flows *flow.Result
	// Findings are the linter's findings (at most MaxFindings), with
	// Counts per rule and Total over all.
	Findings []lint.Finding
	Counts   map[lint.RuleID]int64
	Total    int64
	// Generated is shown in the footer; zero leaves it out.
	Generated time.Time
}

// Collector gathers findings for a Report, keeping the first MaxFindings.
type Collector struct {
	Findings []lint.Finding
	Dropped  int64
}

// Add keeps f if there is room; it fits lint.New.
func (c *Collector) Add(f lint.Finding) {
	if len(c.Findings) < MaxFindings {
		c.Findings = append(c.Findings, f)
		return
	}
	c.Dropped++
}

// Build reads a whole capture from src once, running the flow analysis
// and the linter, and returns the report. each, when not nil, is called
// after each packet (for a progress line). A file cut short or damaged is
// reported up to the damage, which Flows.Capture.Error names.
func Build(src capture.Source, name string, each func()) *Report {
	sc := flow.NewScanner(src)
	an := flow.NewAnalyzer(flow.Config{Points: true})
	var col Collector
	l := lint.New(col.Add)
	for {
		p, ok := sc.Next()
		if !ok {
			break
		}
		l.Check(p, an.Add(p))
		if each != nil {
			each()
		}
	}
	l.SetPauses(sc.Stats().Pauses) // PFC-PRIORITY needs the capture's pause frames
	l.Finish()
	res := an.Result(sc.Stats())
	lint.SetConns(col.Findings)
	return &Report{Name: name, Flows: res, Findings: col.Findings, Counts: l.Counts(), Total: l.Total()}
}

// css is the whole style sheet.
const css = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f6f7f9;margin:0}
main{max-width:1040px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;padding-top:8px;border-top:2px solid #d5d9e0}
h3{font-size:15px;margin:18px 0 6px}
p.sub{color:#5a6273;margin:0 0 12px}
table{border-collapse:collapse;background:#fff;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #d5d9e0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr:target{background:#fff3c4}
.ok{color:#1a7f37}.bad{color:#b3261e;font-weight:600}
.note{background:#fff8e1;border-left:4px solid #e0a800;padding:4px 10px;margin:4px 0}
.chart{background:#fff;border:1px solid #d5d9e0;margin:4px 0 2px;max-width:100%;height:auto}
.legend{font-size:12px;color:#3c4454;margin:0 0 10px}.legend span{margin-right:14px;white-space:nowrap}
.sw{display:inline-block;width:12px;height:12px;vertical-align:-2px;margin-right:4px;border-radius:2px}
code{font-size:12px;background:#eef0f4;padding:1px 4px;border-radius:3px}
svg text{font:11px system-ui,sans-serif;fill:#3c4454}svg text.label{font-size:12px;fill:#1d2330}
svg .frame{fill:none;stroke:#9aa3b2}svg .grid{stroke:#e4e7ec}
svg .data{stroke:#1f5fbf;stroke-width:1.4}svg .fill{stroke:#e07b00;stroke-width:1.4}svg .retx{stroke:#d62728;stroke-width:1.6}
svg .ack{fill:none;stroke:#2a9d3a;stroke-width:1.3}svg .resp{fill:#2a9d3a;opacity:.55}
svg .nak{stroke:#e07b00;stroke-width:2}svg .rnr{fill:#8e44ad}svg .nakerr{stroke:#111;stroke-width:2}
svg .ce{fill:none;stroke:#c9a400;stroke-width:1.5}svg .cnpin{fill:#17a2b8}svg .cnpout{fill:#0b5563}
svg .finding{fill:none;stroke:#d62728;stroke-width:2}
svg .tp0{fill:none;stroke:#1f5fbf;stroke-width:1.5}svg .tp1{fill:none;stroke:#e07b00;stroke-width:1.5}
svg .gp0{fill:none;stroke:#1f5fbf;stroke-width:1.2;stroke-dasharray:4 3}svg .gp1{fill:none;stroke:#e07b00;stroke-width:1.2;stroke-dasharray:4 3}
svg .bar0{fill:#1f5fbf}svg .bar1{fill:#e07b00}svg .hread{fill:#1f5fbf;opacity:.75}svg .hatomic{fill:#e07b00;opacity:.75}
`

// Write writes the report as one self-contained HTML document: inline CSS
// and SVG, no script, no external reference. It is also well-formed XML.
func Write(w io.Writer, r *Report) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	res := r.Flows
	cs := res.Capture
	fmt.Fprintf(bw, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>"+
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/><title>goroce cap report: %s</title>"+
		"<style>%s</style></head><body><main>\n", esc(r.Name), css)
	fmt.Fprintf(bw, "<h1>RoCEv2 capture report: %s</h1>\n", esc(r.Name))
	fmt.Fprintf(bw, "<p class=\"sub\">%d frames (%d RoCEv2, %d other), %d bytes, %.6f s; %d connections; %s</p>\n",
		cs.Frames, cs.RoCE, cs.NonRoCE, cs.Bytes, cs.Duration, len(res.Connections), lintSummary(r))
	for _, n := range flow.Notes(cs, res.OverflowPackets) {
		fmt.Fprintf(bw, "<div class=\"note\">%s</div>\n", esc(n))
	}
	writeOverview(bw, r)
	byConn := map[int][]lint.Finding{}
	for _, f := range r.Findings {
		byConn[f.Conn] = append(byConn[f.Conn], f)
	}
	for _, c := range res.Connections {
		writeConn(bw, r, c, byConn[c.ID])
	}
	if fs := byConn[0]; len(fs) > 0 {
		fmt.Fprintf(bw, "<h2 id=\"conn-0\">Findings outside the analysed connections</h2>\n")
		writeFindings(bw, r, fs)
	}
	writeRules(bw, r)
	fmt.Fprintf(bw, "<p class=\"sub\">Made by <code>goroce cap report</code>")
	if !r.Generated.IsZero() {
		fmt.Fprintf(bw, " on %s", esc(r.Generated.UTC().Format(time.RFC3339)))
	}
	fmt.Fprintf(bw, ". Times are from the first frame. PSNs on the sequence graphs count from each stream's first PSN.</p>\n")
	fmt.Fprintf(bw, "</main></body></html>\n")
	return bw.Flush()
}

func lintSummary(r *Report) string {
	if r.Total == 0 {
		return "the linter found nothing"
	}
	return fmt.Sprintf("the linter found %d problems", r.Total)
}

func writeOverview(w io.Writer, r *Report) {
	res := r.Flows
	if len(res.Connections) == 0 {
		fmt.Fprintf(w, "<p>No RoCEv2 connections in this capture.</p>\n")
		return
	}
	fmt.Fprintf(w, "<table><tr><th>#</th><th>connection</th><th>packets</th><th>retransmitted</th><th>NAKs</th><th>RNR</th><th>CE</th><th>CNPs</th><th>ICRC bad</th><th>findings</th></tr>\n")
	for _, c := range res.Connections {
		var pk, retx, nak, rnr, ce, cnp, bad int64
		for _, d := range c.Dirs {
			pk += d.Packets
			ce += d.ECN.CE
			cnp += d.CNPs
			bad += d.ICRC.Bad
			if d.Requests != nil {
				retx += d.Requests.Retransmissions
			}
			if d.Responses != nil {
				nak += d.Responses.NAKSeq + d.Responses.NAKOther
				rnr += d.Responses.RNR
			}
		}
		nf := 0
		for _, f := range r.Findings {
			if f.Conn == c.ID {
				nf++
			}
		}
		fmt.Fprintf(w, "<tr><td><a href=\"#conn-%d\">%d</a></td><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%s</td><td class=\"n\">%s</td></tr>\n",
			c.ID, c.ID, esc(c.Title()), pk, retx, nak, rnr, ce, cnp, flag(bad), flag(int64(nf)))
	}
	fmt.Fprintf(w, "</table>\n")
}

func flag(n int64) string {
	if n == 0 {
		return "<span class=\"ok\">0</span>"
	}
	return fmt.Sprintf("<span class=\"bad\">%d</span>", n)
}

func writeConn(w io.Writer, r *Report, c *flow.Conn, fs []lint.Finding) {
	fmt.Fprintf(w, "<h2 id=\"conn-%d\">Connection %d: %s</h2>\n", c.ID, c.ID, esc(c.Title()))
	var sub []string
	if c.PathMTU > 0 {
		sub = append(sub, fmt.Sprintf("path MTU %d (from FIRST/MIDDLE sizes)", c.PathMTU))
	}
	if c.PairedBy != "" {
		sub = append(sub, "directions paired by "+c.PairedBy)
	}
	if len(sub) > 0 {
		fmt.Fprintf(w, "<p class=\"sub\">%s</p>\n", esc(strings.Join(sub, "; ")))
	}
	fmt.Fprintf(w, "<table><tr><th>direction</th><th>packets</th><th>bytes</th><th>frames</th><th>requests</th><th>responses</th><th>READ / ATOMIC latency (µs)</th><th>ECN CE</th><th>CNPs</th><th>ICRC bad</th><th>goodput</th></tr>\n")
	for i, d := range c.Dirs {
		fmt.Fprintf(w, "<tr><td><span class=\"sw\" style=\"background:%s\"></span>%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d–%d</td><td>%s</td><td>%s</td><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%s</td><td class=\"n\">%s</td></tr>\n",
			dirColor(i), esc(d.Name()), d.Packets, d.Bytes, d.FirstFrame, d.LastFrame, reqCell(d), respCell(d), latCell(d),
			d.ECN.CE, d.CNPs, flag(d.ICRC.Bad), esc(flow.Rate(d.GoodputBps)))
	}
	fmt.Fprintf(w, "</table>\n")
	for _, d := range c.Dirs {
		if d.Requests != nil && d.Seq != nil {
			writeSeqGraph(w, r, c, d, fs)
		}
	}
	writeThroughput(w, r, c)
	writeOpcodes(w, c)
	writeLatency(w, c)
	writeEvents(w, c)
	if len(fs) > 0 {
		fmt.Fprintf(w, "<h3>Linter findings</h3>\n")
		writeFindings(w, r, fs)
	} else {
		fmt.Fprintf(w, "<p class=\"ok\">The linter found nothing on this connection.</p>\n")
	}
}

func dirColor(i int) string { return [...]string{"#1f5fbf", "#e07b00"}[i%2] }

func reqCell(d *flow.Dir) string {
	q := d.Requests
	if q == nil {
		return "–"
	}
	s := fmt.Sprintf("%d pkts, %d msgs, PSN %d–%d", q.Packets, q.Messages, q.PSNFirst, q.PSNLast)
	var x []string
	if q.Retransmissions > 0 {
		x = append(x, fmt.Sprintf("%d retransmitted", q.Retransmissions))
	}
	if q.GoBackN > 0 {
		x = append(x, fmt.Sprintf("%d Go-Back-N", q.GoBackN))
	}
	if q.GapPSNs > 0 {
		x = append(x, fmt.Sprintf("%d PSNs never seen", q.GapPSNs))
	}
	if len(x) > 0 {
		s += "; <span class=\"bad\">" + esc(strings.Join(x, ", ")) + "</span>"
	}
	return s
}

func respCell(d *flow.Dir) string {
	q := d.Responses
	if q == nil {
		return "–"
	}
	s := fmt.Sprintf("%d ACKs (%.1f PSNs/ACK)", q.ACKs, q.Coalescing.Mean)
	if q.ReadResponses > 0 {
		s += fmt.Sprintf(", %d READ resp.", q.ReadResponses)
	}
	if q.AtomicACKs > 0 {
		s += fmt.Sprintf(", %d ATOMIC ACKs", q.AtomicACKs)
	}
	var x []string
	if q.NAKSeq > 0 {
		x = append(x, fmt.Sprintf("%d NAK-seq", q.NAKSeq))
	}
	if q.NAKOther > 0 {
		x = append(x, fmt.Sprintf("%d other NAKs", q.NAKOther))
	}
	if q.RNR > 0 {
		x = append(x, fmt.Sprintf("%d RNR NAKs", q.RNR))
	}
	if len(x) > 0 {
		s += "; <span class=\"bad\">" + esc(strings.Join(x, ", ")) + "</span>"
	}
	if q.MSN.Seen > 0 {
		s += fmt.Sprintf("; MSN %d–%d", q.MSN.First, q.MSN.Last)
	}
	return s
}

func latCell(d *flow.Dir) string {
	var x []string
	for _, o := range []struct {
		n string
		s *flow.OpStats
	}{{"READ", d.Reads}, {"ATOMIC", d.Atomics}} {
		if o.s == nil {
			continue
		}
		l := o.s.Latency
		t := fmt.Sprintf("%s %d/%d", o.n, o.s.Answered, o.s.Requests)
		if l.Count > 0 {
			t += fmt.Sprintf(": p50 %.1f, p99 %.1f, max %.1f", l.P50, l.P99, l.Max)
		}
		x = append(x, esc(t))
	}
	if len(x) == 0 {
		return "–"
	}
	return strings.Join(x, "<br/>")
}

// thin returns at most n of items, evenly spread.
func thin[T any](items []T, n int) []T {
	if len(items) <= n {
		return items
	}
	out := make([]T, 0, n)
	for i := range n {
		out = append(out, items[i*len(items)/n])
	}
	return out
}

// writeSeqGraph draws the tcptrace-style PSN-vs-time graph of d's request
// stream: requests as vertical bars over the PSNs they take, the other
// side's cumulative ACKs as a step line, READ responses and ATOMIC ACKs
// as dots, NAKs, CE marks, CNPs and linter findings as marks.
func writeSeqGraph(w io.Writer, r *Report, c *flow.Conn, d *flow.Dir, fs []lint.Finding) {
	s := d.Seq
	req, retx := thin(s.Requests.Items, maxMarks), thin(s.Retx.Items, maxMarks)
	resp, naks, ce := thin(s.Responses.Items, maxMarks), thin(s.NAKs.Items, maxMarks), thin(s.CE.Items, maxMarks)
	var cnpOut, cnpIn []flow.SeqPoint
	cnpOut = thin(s.CNPs.Items, maxMarks)
	if e := d.Partner(); e != nil && e.Seq != nil {
		cnpIn = thin(e.Seq.CNPs.Items, maxMarks)
	}
	var mine []lint.Finding
	for _, f := range fs {
		if f.Stream == d {
			mine = append(mine, f)
		}
	}
	tmin, tmax := math.Inf(1), math.Inf(-1)
	umin, umax := math.Inf(1), math.Inf(-1)
	see := func(ps []flow.SeqPoint, useU bool) {
		for _, p := range ps {
			t := p.T.Seconds()
			tmin, tmax = min(tmin, t), max(tmax, t)
			if useU {
				umin = min(umin, float64(p.U))
				umax = max(umax, float64(p.U+int64(max(p.Span, 1))))
			}
		}
	}
	see(req, true)
	see(retx, true)
	see(resp, true)
	see(naks, true)
	see(cnpOut, false)
	see(cnpIn, false)
	for _, f := range mine {
		tmin, tmax = min(tmin, f.Time), max(tmax, f.Time)
		umin, umax = min(umin, float64(f.U)), max(umax, float64(f.U+1))
	}
	if math.IsInf(tmin, 0) || math.IsInf(umin, 0) {
		return
	}
	pad := (tmax - tmin) * 0.02
	if pad == 0 {
		pad = 1e-6
	}
	upad := math.Max(1, (umax-umin)*0.03)
	p := svgplot.New(960, 380, tmin-pad, tmax+pad, umin-upad, umax+upad)
	ft, unit := timeFormatter(p.X1 - p.X0)
	q := d.Requests
	p.Axes("time ("+unit+")", fmt.Sprintf("PSN − %d", q.PSNFirst), ft, func(v float64) string { return fmtCount(v) })
	top := float64(p.Top)
	// CNPs: triangles on the top edge.
	for _, x := range []struct {
		ps    []flow.SeqPoint
		class string
		what  string
		down  bool
	}{{cnpIn, "cnpin", "CNP to this requester", true}, {cnpOut, "cnpout", "CNP sent by this requester", false}} {
		for _, pt := range x.ps {
			cx := p.X(pt.T.Seconds())
			pts := fmt.Sprintf("%s,%s %s,%s %s,%s", svgplot.F1(cx-4), svgplot.F1(top+1), svgplot.F1(cx+4), svgplot.F1(top+1), svgplot.F1(cx), svgplot.F1(top+8))
			if !x.down {
				pts = fmt.Sprintf("%s,%s %s,%s %s,%s", svgplot.F1(cx-4), svgplot.F1(top+9), svgplot.F1(cx+4), svgplot.F1(top+9), svgplot.F1(cx), svgplot.F1(top+2))
			}
			fmt.Fprintf(&p.B, `<polygon class="%s" points="%s"><title>frame %d: %s at %.6f s</title></polygon>`, x.class, pts, pt.Frame, x.what, pt.T.Seconds())
		}
	}
	bars := func(ps []flow.SeqPoint, class string) {
		if len(ps) == 0 {
			return
		}
		fmt.Fprintf(&p.B, `<path class="%s" d="`, class)
		for _, pt := range ps {
			x := p.X(pt.T.Seconds())
			y0, y1 := p.Y(float64(pt.U)), p.Y(float64(pt.U+int64(max(pt.Span, 1))))
			if y0-y1 < 2 {
				y1 = y0 - 2
			}
			fmt.Fprintf(&p.B, "M%s %sV%s", svgplot.F1(x), svgplot.F1(y0), svgplot.F1(y1))
		}
		fmt.Fprintf(&p.B, `"/>`)
	}
	var fresh, fills []flow.SeqPoint
	for _, pt := range req {
		if pt.Kind == flow.SeqFill {
			fills = append(fills, pt)
		} else {
			fresh = append(fresh, pt)
		}
	}
	bars(fresh, "data")
	bars(fills, "fill")
	bars(retx, "retx")
	// The other side's cumulative ACK line, as tcptrace draws it.
	var acks []flow.SeqPoint
	for _, pt := range resp {
		if pt.Kind == flow.SeqACK {
			acks = append(acks, pt)
		} else {
			fmt.Fprintf(&p.B, `<circle class="resp" cx="%s" cy="%s" r="2"/>`, svgplot.F1(p.X(pt.T.Seconds())), svgplot.F1(p.Y(float64(pt.U)+0.5)))
		}
	}
	if len(acks) > 0 {
		fmt.Fprintf(&p.B, `<path class="ack" d="M%s %s`, svgplot.F1(p.X(acks[0].T.Seconds())), svgplot.F1(p.Y(float64(acks[0].U+1))))
		hi := acks[0].U
		for _, pt := range acks[1:] {
			hi = max(hi, pt.U)
			fmt.Fprintf(&p.B, "H%sV%s", svgplot.F1(p.X(pt.T.Seconds())), svgplot.F1(p.Y(float64(hi+1))))
		}
		fmt.Fprintf(&p.B, `"/>`)
	}
	for _, pt := range ce {
		fmt.Fprintf(&p.B, `<circle class="ce" cx="%s" cy="%s" r="4"><title>frame %d: CE-marked</title></circle>`,
			svgplot.F1(p.X(pt.T.Seconds())), svgplot.F1(p.Y(float64(pt.U)+0.5)), pt.Frame)
	}
	for _, pt := range naks {
		x, y := p.X(pt.T.Seconds()), p.Y(float64(pt.U)+0.5)
		switch pt.Kind {
		case flow.SeqRNR:
			fmt.Fprintf(&p.B, `<polygon class="rnr" points="%s,%s %s,%s %s,%s"><title>frame %d: RNR NAK, PSN +%d</title></polygon>`,
				svgplot.F1(x-5), svgplot.F1(y+5), svgplot.F1(x+5), svgplot.F1(y+5), svgplot.F1(x), svgplot.F1(y-5), pt.Frame, pt.U)
		default:
			cl, what := "nak", "NAK PSN sequence error"
			if pt.Kind == flow.SeqNAKError {
				cl, what = "nakerr", "NAK error"
			}
			fmt.Fprintf(&p.B, `<path class="%s" d="M%s %sL%s %sM%s %sL%s %s"><title>frame %d: %s, PSN +%d</title></path>`,
				cl, svgplot.F1(x-5), svgplot.F1(y-5), svgplot.F1(x+5), svgplot.F1(y+5), svgplot.F1(x-5), svgplot.F1(y+5), svgplot.F1(x+5), svgplot.F1(y-5), pt.Frame, what, pt.U)
		}
	}
	for _, f := range thin(mine, maxMarks) {
		fmt.Fprintf(&p.B, `<a href="#f%d-%s"><circle class="finding" cx="%s" cy="%s" r="7"><title>frame %d: %s: %s</title></circle></a>`,
			f.Frame, esc(string(f.Rule)), svgplot.F1(p.X(f.Time)), svgplot.F1(p.Y(float64(f.U)+0.5)), f.Frame, esc(string(f.Rule)), esc(f.Message))
	}
	from, to := d.Src.String(), d.Dst.String()
	fmt.Fprintf(w, "<h3>Sequence graph: requests %s → %s (QP 0x%06x), responses back</h3>\n", esc(from), esc(to), d.DestQP)
	fmt.Fprint(w, p.SVG("chart seq", fmt.Sprintf("PSN over time, connection %d, requests from %s", c.ID, from)), "\n")
	fmt.Fprintf(w, "<div class=\"legend\"><span><i class=\"sw\" style=\"background:#1f5fbf\"></i>request (bar over its PSNs)</span>"+
		"<span><i class=\"sw\" style=\"background:#d62728\"></i>retransmission</span><span><i class=\"sw\" style=\"background:#e07b00\"></i>gap filled / NAK-seq ×</span>"+
		"<span><i class=\"sw\" style=\"background:#2a9d3a\"></i>ACK line, READ resp./ATOMIC ACK dots</span><span><i class=\"sw\" style=\"background:#8e44ad\"></i>RNR NAK</span>"+
		"<span><i class=\"sw\" style=\"background:#c9a400\"></i>CE-marked</span><span><i class=\"sw\" style=\"background:#17a2b8\"></i>CNP in ▼ / out ▲ (top)</span>"+
		"<span><i class=\"sw\" style=\"border:2px solid #d62728\"></i>linter finding (links to it)</span></div>\n")
	if s.Requests.Decimated() || s.Responses.Decimated() || len(req) < len(s.Requests.Items) {
		fmt.Fprintf(w, "<p class=\"sub\">%d requests and %d responses; the graph shows an even sample of them.</p>\n", s.Requests.Seen+s.Retx.Seen, s.Responses.Seen)
	}
}

// writeThroughput draws wire throughput and goodput per direction.
func writeThroughput(w io.Writer, r *Report, c *flow.Conn) {
	end := time.Duration(0)
	start := time.Duration(math.MaxInt64)
	width := time.Duration(0)
	for _, d := range c.Dirs {
		end = max(end, time.Duration(max(d.End, 0)*float64(time.Second))+1)
		start = min(start, time.Duration(max(d.Start, 0)*float64(time.Second)))
		width = max(width, d.Throughput.Width, d.Goodput.Width)
	}
	if width == 0 {
		return
	}
	// About 120 bins over the connection's life, whole multiples of the
	// series' own widths.
	bw := width
	for (end-start)/bw > 120 {
		bw *= 2
	}
	startBin := start / bw
	nb := int((end+bw-1)/bw - startBin)
	if nb < 1 {
		return
	}
	type line struct {
		class string
		v     []float64
	}
	var lines []line
	ymax := 0.0
	for i, d := range c.Dirs {
		for j, s := range []*flow.Series{&d.Throughput, &d.Goodput} {
			v := s.Rebin(bw, startBin*bw, (startBin+time.Duration(nb))*bw)
			if len(v) == 0 {
				continue
			}
			for k := range v {
				v[k] *= 8 / bw.Seconds()
			}
			for _, x := range v {
				ymax = max(ymax, x)
			}
			lines = append(lines, line{[...]string{"tp", "gp"}[j] + fmt.Sprint(i), v})
		}
	}
	t0 := (startBin * bw).Seconds()
	p := svgplot.New(960, 240, t0, t0+float64(nb)*bw.Seconds(), 0, ymax*1.08)
	ft, unit := timeFormatter(p.X1 - p.X0)
	p.Axes("time ("+unit+")", "bit/s", ft, fmtCount)
	for _, l := range lines {
		fmt.Fprintf(&p.B, `<path class="%s" d="`, l.class)
		for k, v := range l.v {
			x0, x1 := p.X(t0+float64(k)*bw.Seconds()), p.X(t0+float64(k+1)*bw.Seconds())
			y := p.Y(v)
			if k == 0 {
				fmt.Fprintf(&p.B, "M%s %s", svgplot.F1(x0), svgplot.F1(y))
			} else {
				fmt.Fprintf(&p.B, "V%s", svgplot.F1(y))
			}
			fmt.Fprintf(&p.B, "H%s", svgplot.F1(x1))
		}
		fmt.Fprintf(&p.B, `"/>`)
	}
	fmt.Fprintf(w, "<h3>Throughput over time</h3>\n%s\n", p.SVG("chart tp", fmt.Sprintf("throughput, connection %d", c.ID)))
	fmt.Fprintf(w, "<div class=\"legend\">")
	for i, d := range c.Dirs {
		fmt.Fprintf(w, "<span><i class=\"sw\" style=\"background:%s\"></i>%s: wire (solid), goodput (dashed)</span>", dirColor(i), esc(d.Name()))
	}
	fmt.Fprintf(w, " bins of %s</div>\n", esc(bw.String()))
}

// writeOpcodes draws the opcode mix as horizontal bars.
func writeOpcodes(w io.Writer, c *flow.Conn) {
	type row struct {
		dir int
		o   flow.OpcodeStat
	}
	var rows []row
	var most int64
	for i, d := range c.Dirs {
		for _, o := range d.Opcodes {
			rows = append(rows, row{i, o})
			most = max(most, o.Packets)
		}
	}
	if len(rows) == 0 {
		return
	}
	const rh, left, wid = 20, 330, 960
	h := len(rows)*rh + 10
	var b strings.Builder
	for k, r := range rows {
		y := 5 + k*rh
		bar := float64(wid-left-170) * float64(r.o.Packets) / float64(most)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, left-8, y+14, esc(fmt.Sprintf("%s %s", [...]string{"→", "←"}[r.dir%2], r.o.Name)))
		fmt.Fprintf(&b, `<rect class="bar%d" x="%d" y="%d" width="%s" height="%d"><title>%s: %d packets, %d bytes</title></rect>`,
			r.dir%2, left, y+3, svgplot.F1(math.Max(bar, 1)), rh-6, esc(r.o.Name), r.o.Packets, r.o.Bytes)
		fmt.Fprintf(&b, `<text x="%s" y="%d">%s</text>`, svgplot.F1(float64(left)+math.Max(bar, 1)+6), y+14, esc(fmt.Sprintf("%d pkts, %s", r.o.Packets, bytesStr(r.o.Bytes))))
	}
	fmt.Fprintf(w, "<h3>Opcode mix</h3>\n<svg class=\"chart ops\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\"><title>opcode mix, connection %d</title>%s</svg>\n",
		wid, h, wid, h, c.ID, b.String())
	fmt.Fprintf(w, "<div class=\"legend\">")
	for i, d := range c.Dirs {
		fmt.Fprintf(w, "<span><i class=\"sw\" style=\"background:%s\"></i>%s %s</span>", dirColor(i), [...]string{"→", "←"}[i%2], esc(d.Name()))
	}
	fmt.Fprintf(w, "</div>\n")
}

func bytesStr(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// writeLatency draws the READ and ATOMIC latency distributions.
func writeLatency(w io.Writer, c *flow.Conn) {
	type series struct {
		class, name string
		v           []float64
	}
	var ss []series
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, d := range c.Dirs {
		for _, o := range []struct {
			s           *flow.OpStats
			class, name string
		}{{d.Reads, "hread", "READ"}, {d.Atomics, "hatomic", "ATOMIC"}} {
			if o.s == nil || len(o.s.Samples.Items) == 0 {
				continue
			}
			v := slices.Clone(o.s.Samples.Items)
			for _, x := range v {
				lo, hi = min(lo, x), max(hi, x)
			}
			ss = append(ss, series{o.class, fmt.Sprintf("%s %s", o.name, d.Src), v})
		}
	}
	if len(ss) == 0 {
		return
	}
	lo = math.Max(lo, 0.001)
	logScale := hi/lo > 20
	conv := func(x float64) float64 { return x }
	if logScale {
		conv = func(x float64) float64 { return math.Log10(math.Max(x, 0.001)) }
	}
	a, b := conv(lo), conv(hi)
	if b <= a {
		b = a + 1
		a -= 1
	}
	a, b = a-(b-a)*0.04, b+(b-a)*0.04
	const nbins = 24
	bw := (b - a) / nbins
	counts := make([][]int, len(ss))
	most := 1
	for i, s := range ss {
		counts[i] = make([]int, nbins)
		for _, x := range s.v {
			k := min(nbins-1, max(0, int((conv(x)-a)/bw)))
			counts[i][k]++
			most = max(most, counts[i][k])
		}
	}
	p := svgplot.New(960, 240, a, b, 0, float64(most)*1.1)
	fx := func(v float64) string { return fmtCount(v) }
	xl := "latency (µs)"
	if logScale {
		fx = func(v float64) string { return fmtCount(math.Pow(10, v)) }
		xl = "latency (µs, log scale)"
	}
	if logScale {
		for e := math.Floor(a); e <= b; e++ {
			for _, m := range []float64{1, 2, 5} {
				if v := e + math.Log10(m); v >= a && v <= b {
					p.XTicks = append(p.XTicks, v)
				}
			}
		}
	}
	p.Axes(xl, "requests", fx, func(v float64) string { return svgplot.Trim(fmt.Sprintf("%.0f", v)) })
	sub := (p.X(a+bw) - p.X(a)) / float64(len(ss))
	for i, s := range ss {
		for k, n := range counts[i] {
			if n == 0 {
				continue
			}
			x := p.X(a+float64(k)*bw) + float64(i)*sub
			fmt.Fprintf(&p.B, `<rect class="%s" x="%s" y="%s" width="%s" height="%s"><title>%s: %d requests</title></rect>`,
				s.class, svgplot.F1(x), svgplot.F1(p.Y(float64(n))), svgplot.F1(math.Max(sub-1, 1)), svgplot.F1(p.Y(0)-p.Y(float64(n))), esc(s.name), n)
		}
	}
	fmt.Fprintf(w, "<h3>READ and ATOMIC latency</h3>\n%s\n", p.SVG("chart lat", fmt.Sprintf("latency distribution, connection %d", c.ID)))
	fmt.Fprintf(w, "<div class=\"legend\"><span><i class=\"sw\" style=\"background:#1f5fbf\"></i>READ: request to the last response packet</span>"+
		"<span><i class=\"sw\" style=\"background:#e07b00\"></i>ATOMIC: request to its ATOMIC ACK</span></div>\n")
}

// writeEvents lists Go-Back-N episodes, NAKs and RNR NAKs.
func writeEvents(w io.Writer, c *flow.Conn) {
	var rows []string
	for _, d := range c.Dirs {
		if q := d.Requests; q != nil {
			for _, e := range q.Episodes {
				why := e.Trigger
				if e.TriggerFrame > 0 {
					why += fmt.Sprintf(" (frame %d, %.1f µs before)", e.TriggerFrame, e.Delay)
				} else {
					why += fmt.Sprintf(" (%.1f µs after the previous request)", e.Delay)
				}
				rows = append(rows, fmt.Sprintf("<tr><td class=\"n\">%d</td><td class=\"n\">%.6f</td><td>Go-Back-N</td><td>%s</td><td>PSN %d back to %d, %d packets resent; trigger %s</td></tr>",
					e.Frame, e.Time, esc(d.Name()), e.From, e.To, e.Packets, esc(why)))
			}
		}
		if q := d.Responses; q != nil {
			for _, n := range q.NAKs {
				rows = append(rows, fmt.Sprintf("<tr><td class=\"n\">%d</td><td class=\"n\">%.6f</td><td>NAK</td><td>%s</td><td>%s, PSN %d</td></tr>",
					n.Frame, n.Time, esc(d.Name()), esc(n.Syndrome), n.PSN))
			}
			for _, n := range q.RNRs {
				wait := "no retry seen"
				if n.RetryFrame > 0 {
					wait = fmt.Sprintf("retried after %.1f µs (frame %d)", n.Wait, n.RetryFrame)
				}
				rows = append(rows, fmt.Sprintf("<tr><td class=\"n\">%d</td><td class=\"n\">%.6f</td><td>RNR NAK</td><td>%s</td><td>PSN %d, timer %d (%.0f µs), %s</td></tr>",
					n.Frame, n.Time, esc(d.Name()), n.PSN, n.TimerCode, n.Timer, esc(wait)))
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	sort.SliceStable(rows, func(i, j int) bool { return frameOf(rows[i]) < frameOf(rows[j]) })
	fmt.Fprintf(w, "<h3>Retransmissions and NAKs</h3>\n<table><tr><th>frame</th><th>time (s)</th><th>event</th><th>direction</th><th>detail</th></tr>\n%s\n</table>\n", strings.Join(rows, "\n"))
}

// frameOf reads the frame number back from an event row.
func frameOf(row string) int {
	var n int
	fmt.Sscanf(strings.TrimPrefix(row, "<tr><td class=\"n\">"), "%d", &n)
	return n
}

func writeFindings(w io.Writer, r *Report, fs []lint.Finding) {
	fmt.Fprintf(w, "<table><tr><th>frame</th><th>time (s)</th><th>rule</th><th>what is wrong</th></tr>\n")
	seen := map[string]bool{}
	for _, f := range fs {
		id := fmt.Sprintf("f%d-%s", f.Frame, f.Rule)
		attr := ""
		if !seen[id] {
			seen[id] = true
			attr = fmt.Sprintf(" id=\"%s\"", esc(id))
		}
		fmt.Fprintf(w, "<tr%s><td class=\"n\" title=\"goroce cap -r FILE -Y &quot;frame.number == %d&quot; -T json\">%d</td><td class=\"n\">%.6f</td><td><a href=\"#rule-%s\">%s</a></td><td>%s</td></tr>\n",
			attr, f.Frame, f.Frame, f.Time, esc(string(f.Rule)), esc(string(f.Rule)), esc(f.Message))
	}
	fmt.Fprintf(w, "</table>\n")
}

func writeRules(w io.Writer, r *Report) {
	fmt.Fprintf(w, "<h2 id=\"rules\">Linter rules</h2>\n<table><tr><th>rule</th><th>findings</th><th>requires</th><th>cites</th></tr>\n")
	for _, x := range lint.Rules {
		fmt.Fprintf(w, "<tr id=\"rule-%s\"><td>%s</td><td class=\"n\">%s</td><td>%s</td><td>%s</td></tr>\n",
			esc(string(x.ID)), esc(string(x.ID)), flag(r.Counts[x.ID]), esc(x.Summary), esc(x.Cite))
	}
	fmt.Fprintf(w, "</table>\n")
	if kept := int64(len(r.Findings)); r.Total > kept {
		fmt.Fprintf(w, "<p class=\"sub\">%d findings, the first %d listed.</p>\n", r.Total, kept)
	}
}
