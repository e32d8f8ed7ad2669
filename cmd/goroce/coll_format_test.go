package main

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCollFormatGolden makes format.c's lines with goroce coll's
// formatting: the table cells, C's %g, rows, header and footers must be
// nccl-tests' byte for byte.
func TestCollFormatGolden(t *testing.T) {
	var b bytes.Buffer
	for _, v := range []float64{0, 0.001, 0.004999, 0.005, 1.5, 12.345, 99.999, 123.456, 1234.5678, 9999.99,
		12345.6, 99999.4, 123456.7, 999999.5, 1234567.0, 98765432.1, 1e9, 3e12} {
		fmt.Fprintf(&b, "cell7 [%s]\n", floatStr(v, 7))
		fmt.Fprintf(&b, "cell6 [%s]\n", floatStr(v, 6))
	}
	for _, v := range []float64{0, 1, 7, 123456, 999999, 1000000, 1234567, 0.5, 0.123456789, 0.0001, 0.00001234,
		1.23456789, 42.0, 0.199999, 3.14159265, 1e-7, 5e20, 2.5} {
		fmt.Fprintf(&b, "g [%s]\n", cG(v))
	}
	b.WriteString(rowPreamble(67108864, 16777216, "float", "sum", -1))
	b.WriteString(rowBody(2048.5, 0.5, 0.75, true, 0))
	b.WriteString(rowBody(2048.5, 0.5, 0.75, false, 0))
	b.WriteString("\n")
	b.WriteString(rowPreamble(0, 0, "bfloat16", "none", 3))
	b.WriteString(rowBody(12.25, 0, 0, true, 1234567))
	b.WriteString("\n")
	writeResultHeader(&b)
	writeResultFooter(&b, 0, 0.548123456, -1, "all_reduce_perf", "")
	writeResultFooter(&b, 2, 1.5, 2, "sendrecv_perf", "boom")
	want, err := os.ReadFile("testdata/coll/format.golden")
	require.NoError(t, err)
	require.Equal(t, string(want), b.String())
}

func TestParseNCCLSize(t *testing.T) {
	for in, want := range map[string]int{"8": 8, "64M": 64 << 20, "1K": 1024, "2g": 2 << 30, "0.5M": 512 << 10} {
		got, err := parseNCCLSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "x", "-1", "5T"} {
		_, err := parseNCCLSize(bad)
		require.Error(t, err, bad)
	}
}
