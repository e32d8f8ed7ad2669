package collreport

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// esc escapes text for HTML and XML alike: it emits only the five
// predefined XML entities, so the document parses as XML too.
func esc(s string) string { return html.EscapeString(s) }

// f1 formats an SVG coordinate.
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

// plot is a rectangular drawing area of an SVG chart with linear axes
// (a log2 x axis is the caller's: it plots log2 of its values and labels
// the ticks itself).
type plot struct {
	w, h                     int
	left, right, top, bottom int
	x0, x1, y0, y1           float64
	xticks                   []float64 // nil: round numbers
	b                        strings.Builder
}

func newPlot(w, h int, x0, x1, y0, y1 float64) *plot {
	if !(x1 > x0) {
		x1 = x0 + 1
	}
	if !(y1 > y0) {
		y1 = y0 + 1
	}
	return &plot{w: w, h: h, left: 70, right: 16, top: 14, bottom: 42, x0: x0, x1: x1, y0: y0, y1: y1}
}

// X and Y map data coordinates to SVG coordinates.
func (p *plot) X(x float64) float64 {
	return float64(p.left) + (x-p.x0)/(p.x1-p.x0)*float64(p.w-p.left-p.right)
}

func (p *plot) Y(y float64) float64 {
	return float64(p.h-p.bottom) - (y-p.y0)/(p.y1-p.y0)*float64(p.h-p.top-p.bottom)
}

// axes draws the frame, grid, ticks and labels; fx and fy format ticks.
func (p *plot) axes(xlabel, ylabel string, fx, fy func(float64) string) {
	l, r, t, bt := float64(p.left), float64(p.w-p.right), float64(p.top), float64(p.h-p.bottom)
	fmt.Fprintf(&p.b, `<rect class="frame" x="%s" y="%s" width="%s" height="%s"/>`, f1(l), f1(t), f1(r-l), f1(bt-t))
	xt := p.xticks
	if xt == nil {
		xt = ticks(p.x0, p.x1, 8)
	}
	for _, v := range xt {
		x := p.X(v)
		fmt.Fprintf(&p.b, `<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`, f1(x), f1(t), f1(x), f1(bt))
		fmt.Fprintf(&p.b, `<text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`, f1(x), f1(bt+14), esc(fx(v)))
	}
	for _, v := range ticks(p.y0, p.y1, 6) {
		y := p.Y(v)
		fmt.Fprintf(&p.b, `<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`, f1(l), f1(y), f1(r), f1(y))
		fmt.Fprintf(&p.b, `<text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`, f1(l-4), f1(y+4), esc(fy(v)))
	}
	fmt.Fprintf(&p.b, `<text class="label" x="%s" y="%d" text-anchor="middle">%s</text>`, f1((l+r)/2), p.h-6, esc(xlabel))
	fmt.Fprintf(&p.b, `<text class="label" x="14" y="%s" text-anchor="middle" transform="rotate(-90 14 %s)">%s</text>`,
		f1((t+bt)/2), f1((t+bt)/2), esc(ylabel))
}

// polyline draws the points (x[i], y[i]) in class, broken where a value
// is not finite (a gap in the data).
func (p *plot) polyline(class string, x, y []float64) {
	var pts []string
	flush := func() {
		if len(pts) > 1 {
			fmt.Fprintf(&p.b, `<polyline class="%s" points="%s"/>`, class, strings.Join(pts, " "))
		}
		pts = pts[:0]
	}
	for i := range min(len(x), len(y)) {
		if math.IsNaN(y[i]) || math.IsInf(y[i], 0) || math.IsNaN(x[i]) {
			flush()
			continue
		}
		pts = append(pts, f1(p.X(x[i]))+","+f1(p.Y(y[i])))
	}
	flush()
}

// svg returns the finished element.
func (p *plot) svg(class, title string) string {
	return fmt.Sprintf(`<svg class="chart %s" viewBox="0 0 %d %d" width="%d" height="%d" role="img"><title>%s</title>%s</svg>`,
		class, p.w, p.h, p.w, p.h, esc(title), p.b.String())
}

// ticks returns about n round values covering [a, b].
func ticks(a, b float64, n int) []float64 {
	if !(b > a) || n < 1 || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return nil
	}
	raw := (b - a) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(a/step) * step; v <= b+step*1e-9 && len(out) < 4*n; v += step {
		out = append(out, v)
	}
	return out
}

// trim removes trailing zeros of a decimal.
func trim(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// fmtNum formats a tick value with three significant digits.
func fmtNum(v float64) string {
	if v == 0 {
		return "0"
	}
	a := math.Abs(v)
	switch {
	case a >= 100:
		return trim(fmt.Sprintf("%.0f", v))
	case a >= 1:
		return trim(fmt.Sprintf("%.2f", v))
	}
	return trim(fmt.Sprintf("%.4f", v))
}

// fmtBytes formats a size with binary units, as nccl-tests' sizes are.
func fmtBytes(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dG", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dM", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dK", b>>10)
	}
	return fmt.Sprintf("%d", b)
}

// heat returns the colour of a link used to share u of its rate: green
// when idle, through yellow at a half, to red when full (and darker red
// beyond, for a link counted above its rate over a short window).
func heat(u float64) string {
	switch {
	case math.IsNaN(u):
		return "#9aa3b2"
	case u <= 0.5:
		t := max(u, 0) / 0.5
		return rgb(0x2a+t*(0xe0-0x2a), 0x9d+t*(0xb0-0x9d), 0x3a+t*(0x10-0x3a))
	case u <= 1:
		t := (u - 0.5) / 0.5
		return rgb(0xe0+t*(0xc6-0xe0), 0xb0+t*(0x28-0xb0), 0x10+t*(0x28-0x10))
	}
	return "#7a0f0f"
}

func rgb(r, g, b float64) string {
	c := func(v float64) int { return int(math.Round(min(max(v, 0), 255))) }
	return fmt.Sprintf("#%02x%02x%02x", c(r), c(g), c(b))
}

// color returns the i-th colour of the palette the spines are drawn in.
func color(i int) string {
	p := [...]string{"#1f5fbf", "#e07b00", "#2a9d3a", "#c62828", "#8e44ad", "#17a2b8", "#8c6d1f", "#d63384"}
	return p[i%len(p)]
}
