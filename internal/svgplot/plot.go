// Package svgplot draws the line charts of goroce's HTML reports
// (internal/capreport, internal/collreport) as inline SVG: a plot area
// with linear axes, round-number ticks, a grid, labels and polylines. The
// output is plain text with only the five predefined XML entities, so a
// report parses as XML too.
package svgplot

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Esc escapes text for HTML and XML alike: it emits only the five
// predefined XML entities.
func Esc(s string) string { return html.EscapeString(s) }

// F1 formats an SVG coordinate.
func F1(v float64) string { return fmt.Sprintf("%.1f", v) }

// Plot is a rectangular drawing area of an SVG chart with linear axes (a
// log2 x axis is the caller's: it plots log2 of its values and labels the
// ticks itself). B holds the elements drawn so far; callers may add their
// own.
type Plot struct {
	W, H                     int       // the whole SVG
	Left, Right, Top, Bottom int       // margins
	X0, X1, Y0, Y1           float64   // data ranges
	XTicks                   []float64 // tick values for x; nil: round numbers
	B                        strings.Builder
}

// New returns a w × h plot of the data ranges [x0, x1] and [y0, y1] (an
// empty range is widened to 1) with margins for tick labels.
func New(w, h int, x0, x1, y0, y1 float64) *Plot {
	if !(x1 > x0) {
		x1 = x0 + 1
	}
	if !(y1 > y0) {
		y1 = y0 + 1
	}
	return &Plot{W: w, H: h, Left: 78, Right: 16, Top: 14, Bottom: 42, X0: x0, X1: x1, Y0: y0, Y1: y1}
}

// X maps a data x to its SVG coordinate.
func (p *Plot) X(x float64) float64 {
	return float64(p.Left) + (x-p.X0)/(p.X1-p.X0)*float64(p.W-p.Left-p.Right)
}

// Y maps a data y to its SVG coordinate.
func (p *Plot) Y(y float64) float64 {
	return float64(p.H-p.Bottom) - (y-p.Y0)/(p.Y1-p.Y0)*float64(p.H-p.Top-p.Bottom)
}

// Axes draws the frame, grid, ticks and labels; fx and fy format tick
// values.
func (p *Plot) Axes(xlabel, ylabel string, fx, fy func(float64) string) {
	l, r, t, bt := float64(p.Left), float64(p.W-p.Right), float64(p.Top), float64(p.H-p.Bottom)
	fmt.Fprintf(&p.B, `<rect class="frame" x="%s" y="%s" width="%s" height="%s"/>`, F1(l), F1(t), F1(r-l), F1(bt-t))
	xt := p.XTicks
	if xt == nil {
		xt = Ticks(p.X0, p.X1, 8)
	}
	for _, v := range xt {
		x := p.X(v)
		fmt.Fprintf(&p.B, `<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`, F1(x), F1(t), F1(x), F1(bt))
		fmt.Fprintf(&p.B, `<text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`, F1(x), F1(bt+14), Esc(fx(v)))
	}
	for _, v := range Ticks(p.Y0, p.Y1, 6) {
		y := p.Y(v)
		fmt.Fprintf(&p.B, `<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`, F1(l), F1(y), F1(r), F1(y))
		fmt.Fprintf(&p.B, `<text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`, F1(l-4), F1(y+4), Esc(fy(v)))
	}
	fmt.Fprintf(&p.B, `<text class="label" x="%s" y="%d" text-anchor="middle">%s</text>`, F1((l+r)/2), p.H-6, Esc(xlabel))
	fmt.Fprintf(&p.B, `<text class="label" x="14" y="%s" text-anchor="middle" transform="rotate(-90 14 %s)">%s</text>`,
		F1((t+bt)/2), F1((t+bt)/2), Esc(ylabel))
}

// Polyline draws the points (x[i], y[i]) in class, broken where a value is
// not finite (a gap in the data).
func (p *Plot) Polyline(class string, x, y []float64) {
	var pts []string
	flush := func() {
		if len(pts) > 1 {
			fmt.Fprintf(&p.B, `<polyline class="%s" points="%s"/>`, class, strings.Join(pts, " "))
		}
		pts = pts[:0]
	}
	for i := range min(len(x), len(y)) {
		if math.IsNaN(y[i]) || math.IsInf(y[i], 0) || math.IsNaN(x[i]) {
			flush()
			continue
		}
		pts = append(pts, F1(p.X(x[i]))+","+F1(p.Y(y[i])))
	}
	flush()
}

// SVG returns the finished element with the class attribute class.
func (p *Plot) SVG(class, title string) string {
	return fmt.Sprintf(`<svg class="%s" viewBox="0 0 %d %d" width="%d" height="%d" role="img"><title>%s</title>%s</svg>`,
		class, p.W, p.H, p.W, p.H, Esc(title), p.B.String())
}

// Ticks returns about n round values (1, 2 or 5 times a power of ten
// apart) covering [a, b]; nil for an empty or infinite range.
func Ticks(a, b float64, n int) []float64 {
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

// Trim removes the trailing zeros of a decimal ("1.50" → "1.5", "2.0" →
// "2", "-0" → "0").
func Trim(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}
