package capreport

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"
)

// esc escapes text for HTML and XML alike: it emits only the five
// predefined XML entities, so the document parses as XML too.
func esc(s string) string { return html.EscapeString(s) }

// plot is a rectangular drawing area of an SVG chart with linear axes.
type plot struct {
	w, h                     int       // whole SVG
	left, right, top, bottom int       // margins
	x0, x1, y0, y1           float64   // data ranges
	xticks                   []float64 // tick values for x, nil: round numbers
	b                        strings.Builder
}

func newPlot(w, h int, x0, x1, y0, y1 float64) *plot {
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	return &plot{w: w, h: h, left: 78, right: 16, top: 14, bottom: 42, x0: x0, x1: x1, y0: y0, y1: y1}
}

// X and Y map data coordinates to SVG coordinates.
func (p *plot) X(x float64) float64 {
	return float64(p.left) + (x-p.x0)/(p.x1-p.x0)*float64(p.w-p.left-p.right)
}

func (p *plot) Y(y float64) float64 {
	return float64(p.h-p.bottom) - (y-p.y0)/(p.y1-p.y0)*float64(p.h-p.top-p.bottom)
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

// axes draws the frame, ticks and labels; fx and fy format tick values.
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

// svg returns the finished element.
func (p *plot) svg(class, title string) string {
	return fmt.Sprintf(`<svg class="%s" viewBox="0 0 %d %d" width="%d" height="%d" role="img"><title>%s</title>%s</svg>`,
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

// fmtTime formats seconds with a unit that suits the axis span.
func timeFormatter(span float64) (func(float64) string, string) {
	switch {
	case span < 2e-3:
		return func(v float64) string { return trim(fmt.Sprintf("%.1f", v*1e6)) }, "µs"
	case span < 2:
		return func(v float64) string { return trim(fmt.Sprintf("%.3f", v*1e3)) }, "ms"
	}
	return func(v float64) string { return trim(fmt.Sprintf("%.3f", v)) }, "s"
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

// fmtCount formats large counts with k/M/G.
func fmtCount(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trim(fmt.Sprintf("%.2f", v/1e9)) + "G"
	case a >= 1e6:
		return trim(fmt.Sprintf("%.2f", v/1e6)) + "M"
	case a >= 1e4:
		return trim(fmt.Sprintf("%.1f", v/1e3)) + "k"
	}
	return trim(fmt.Sprintf("%.2f", v))
}

func durUS(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
