package collreport

import (
	"fmt"
	"math"

	"github.com/goroce/goroce/internal/svgplot"
)

// esc escapes text for HTML and XML alike (svgplot.Esc).
func esc(s string) string { return svgplot.Esc(s) }

// fmtNum formats a tick value with three significant digits.
func fmtNum(v float64) string {
	if v == 0 {
		return "0"
	}
	a := math.Abs(v)
	switch {
	case a >= 100:
		return svgplot.Trim(fmt.Sprintf("%.0f", v))
	case a >= 1:
		return svgplot.Trim(fmt.Sprintf("%.2f", v))
	}
	return svgplot.Trim(fmt.Sprintf("%.4f", v))
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

// newPlot is svgplot.New with this report's narrower left margin (its
// y ticks are short numbers).
func newPlot(w, h int, x0, x1, y0, y1 float64) *svgplot.Plot {
	p := svgplot.New(w, h, x0, x1, y0, y1)
	p.Left = 70
	return p
}
