package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// nccl-tests' output, byte for byte (its src/util.cu: the header,
// writeBenchmarkLinePreamble/Body/Terminator, the footer), so that the
// scripts that parse nccl-tests' tables parse goroce coll's.

// ncclTestsVersion is the nccl-tests release whose output is reproduced.
const ncclTestsVersion = "2.19.6"

// floatStr is nccl-tests' getFloatStr: v in width characters with two
// decimals, or one, or none, or in exponent form when it does not fit.
func floatStr(v float64, width int) string {
	for _, f := range []string{"%*.2f", "%*.1f", "%*.0f"} {
		if s := fmt.Sprintf(f, width, v); len(s) <= width {
			return s
		}
	}
	if width >= 7 {
		return cFormat("%*.1e", width, v)
	}
	return cFormat("%*.0e", width, v)
}

// cFormat is fmt.Sprintf for one float with C's exponent spelling (Go and
// C agree: at least two exponent digits).
func cFormat(f string, width int, v float64) string { return fmt.Sprintf(f, width, v) }

// cG formats v as C's printf("%g"): six significant digits, trailing
// zeros removed, exponent form when the exponent is below -4 or at least
// 6. Go's %g differs (it prints the shortest representation).
func cG(v float64) string {
	switch {
	case v == 0:
		if math.Signbit(v) {
			return "-0"
		}
		return "0"
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(v, 'e', 5, 64) // d.ddddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	if x < -4 || x >= 6 {
		mant = trimZeros(mant)
		sign := "+"
		if x < 0 {
			sign, x = "-", -x
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, x)
	}
	return trimZeros(strconv.FormatFloat(v, 'f', 5-x, 64))
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// rowPreamble is writeBenchmarkLinePreamble's text.
func rowPreamble(size, count int64, typ, op string, root int) string {
	return fmt.Sprintf("%12d  %12d  %8s  %6s  %6s", size, count, typ, op, fmt.Sprintf("%6d", root))
}

// rowBody is writeBenchmarkLineBody's text for one half (out-of-place or
// in-place): time in µs, algbw and busbw in GB/s, #wrong or N/A.
func rowBody(timeUs, algbw, busbw float64, check bool, wrong int64) string {
	if check {
		return fmt.Sprintf("  %7s  %6s  %6s  %6s", floatStr(timeUs, 7), floatStr(algbw, 6), floatStr(busbw, 6), padLeft(cG(float64(wrong)), 6))
	}
	return fmt.Sprintf("  %7s  %6s  %6s    N/A", floatStr(timeUs, 7), floatStr(algbw, 6), floatStr(busbw, 6))
}

func padLeft(s string, w int) string {
	if len(s) >= w {
		return s
	}
	return strings.Repeat(" ", w-len(s)) + s
}

// writeResultHeader is nccl-tests' table header (without -I and -S).
func writeResultHeader(w io.Writer) {
	fmt.Fprintf(w, "#\n")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type", "redop", "root",
		"time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", 0, "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "", "",
		"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", 0, "")
}

// writeResultFooter is nccl-tests' footer: the failed checks, the average
// bus bandwidth (with its verdict when NCCL_TESTS_MIN_BW is set), the end
// lines, and writeErrors' last line (empty, or the error).
func writeResultFooter(w io.Writer, errors int, avgBw, minBw float64, program, lastErr string) {
	verdict := "OK"
	if errors != 0 {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "# %-20s : %d %s\n", "Out of bounds values", errors, verdict)
	bwVerdict := ""
	if minBw >= 0 {
		bwVerdict = "OK"
		if avgBw < minBw*0.9 {
			bwVerdict = "FAILED"
		}
	}
	fmt.Fprintf(w, "# %-20s : %s %s\n", "Avg bus bandwidth", cG(avgBw), bwVerdict)
	fmt.Fprintf(w, "#\n")
	fmt.Fprintf(w, "# Collective test concluded: %s\n", program)
	fmt.Fprintf(w, "#\n")
	if lastErr != "" {
		fmt.Fprintf(w, "# error: %s\n", lastErr)
	} else {
		fmt.Fprintf(w, "\n")
	}
}
