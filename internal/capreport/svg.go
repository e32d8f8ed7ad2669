package capreport

import (
	"fmt"
	"math"
	"time"

	"github.com/goroce/goroce/internal/svgplot"
)

// esc escapes text for HTML and XML alike (svgplot.Esc).
func esc(s string) string { return svgplot.Esc(s) }

// fmtTime formats seconds with a unit that suits the axis span.
func timeFormatter(span float64) (func(float64) string, string) {
	switch {
	case span < 2e-3:
		return func(v float64) string { return svgplot.Trim(fmt.Sprintf("%.1f", v*1e6)) }, "µs"
	case span < 2:
		return func(v float64) string { return svgplot.Trim(fmt.Sprintf("%.3f", v*1e3)) }, "ms"
	}
	return func(v float64) string { return svgplot.Trim(fmt.Sprintf("%.3f", v)) }, "s"
}

// fmtCount formats large counts with k/M/G.
func fmtCount(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return svgplot.Trim(fmt.Sprintf("%.2f", v/1e9)) + "G"
	case a >= 1e6:
		return svgplot.Trim(fmt.Sprintf("%.2f", v/1e6)) + "M"
	case a >= 1e4:
		return svgplot.Trim(fmt.Sprintf("%.1f", v/1e3)) + "k"
	}
	return svgplot.Trim(fmt.Sprintf("%.2f", v))
}

func durUS(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
