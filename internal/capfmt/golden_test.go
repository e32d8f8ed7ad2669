package capfmt_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/capfmt"
	"github.com/goroce/goroce/internal/testutil/capgolden"
)

// root is the repository root, relative to this package.
const root = "../.."

// goldenFields reads testdata/tshark/FIELDS, the -e list of the goldens.
func goldenFields(t testing.TB) []capfmt.Field {
	t.Helper()
	return readFields(t, "testdata/tshark/FIELDS")
}

// readFields reads an -e list: testdata/tshark/FIELDS for the InfiniBand
// goldens, FIELDS.l2 (802.1Q, MAC Control) for the *.l2.tshark.txt ones.
func readFields(t testing.TB, name string) []capfmt.Field {
	t.Helper()
	return capgolden.Fields(t, filepath.Join(root, name))
}

// render decodes a capture file as
// tshark [-Y infiniband] -T fields -E header=y -e FIELDS… would.
func render(t testing.TB, pcap string, fields []capfmt.Field, onlyRoCE bool) []byte {
	t.Helper()
	f, err := os.Open(pcap)
	require.NoError(t, err)
	defer f.Close()
	rd, err := capfmt.NewReader(f)
	require.NoError(t, err)
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	opt := capfmt.DefaultFieldsOptions()
	opt.Header = true
	fw := capfmt.NewFieldsWriter(bw, fields, opt)
	require.NoError(t, fw.WriteHeader())
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var (
		fr capfmt.Frame
		p  capfmt.Packet
	)
	for {
		err := rd.Next(&fr)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		dec.Decode(&fr, &p)
		if onlyRoCE && !p.RoCE {
			continue
		}
		require.NoError(t, fw.Write(&p))
	}
	require.NoError(t, bw.Flush())
	return out.Bytes()
}

// firstDiff describes the first line and column where got and want differ.
func firstDiff(fields []capfmt.Field, got, want []byte) string {
	gl := strings.Split(string(got), "\n")
	wl := strings.Split(string(want), "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g == w {
			continue
		}
		gc, wc := strings.Split(g, "\t"), strings.Split(w, "\t")
		for c := 0; c < max(len(gc), len(wc)); c++ {
			var gv, wv string
			if c < len(gc) {
				gv = gc[c]
			}
			if c < len(wc) {
				wv = wc[c]
			}
			if gv != wv {
				name := "?"
				if c < len(fields) {
					name = fields[c].String()
				}
				return "line " + strconv.Itoa(i+1) + " (frame " + strings.SplitN(w, "\t", 2)[0] + "), field " + name +
					":\n  got  " + quote(gv) + "\n  want " + quote(wv)
			}
		}
		return "line " + strconv.Itoa(i+1) + ":\n  got  " + quote(g) + "\n  want " + quote(w)
	}
	return "outputs differ only in length"
}

func quote(s string) string { return "\"" + strings.ReplaceAll(s, "\t", "\\t") + "\"" }

// TestTsharkGoldens checks that the -T fields output is byte-identical to
// tshark 4.0.17's on every rxe capture and every crafted probe, with and
// without -Y infiniband (testdata/tshark/FORMATS.md), for the
// *.l2.tshark.txt goldens with the 802.1Q / MAC Control list FIELDS.l2 on
// every packet, and for the *.cm.tshark.txt goldens with the MAD / CM list
// FIELDS.cm under -Y infiniband.
func TestTsharkGoldens(t *testing.T) {
	fields := goldenFields(t)
	l2 := readFields(t, "testdata/tshark/FIELDS.l2")
	cmFields := readFields(t, "testdata/tshark/FIELDS.cm")
	type golden struct{ name, pcap, want string }
	var cases []golden
	add := func(pcapGlob, goldenDir string) {
		pcaps, err := filepath.Glob(filepath.Join(root, pcapGlob))
		require.NoError(t, err)
		require.NotEmpty(t, pcaps)
		for _, p := range pcaps {
			base := strings.TrimSuffix(filepath.Base(p), ".pcap")
			for _, suffix := range []string{".tshark.txt", ".all.tshark.txt", ".l2.tshark.txt", ".cm.tshark.txt"} {
				want := filepath.Join(root, goldenDir, base+suffix)
				if _, err := os.Stat(want); err == nil {
					cases = append(cases, golden{name: base + suffix, pcap: p, want: want})
				} else if suffix == ".tshark.txt" {
					t.Errorf("%s has no golden %s", p, want)
				}
			}
		}
	}
	add("testdata/pcaps/*.pcap", "testdata/tshark")
	add("testdata/tshark/probe/*.pcap", "testdata/tshark/probe")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := os.ReadFile(tc.want)
			require.NoError(t, err)
			fs, onlyRoCE := fields, strings.HasSuffix(tc.name, ".tshark.txt")
			switch {
			case strings.HasSuffix(tc.name, ".all.tshark.txt"):
				onlyRoCE = false
			case strings.HasSuffix(tc.name, ".l2.tshark.txt"):
				fs, onlyRoCE = l2, false
			case strings.HasSuffix(tc.name, ".cm.tshark.txt"):
				fs = cmFields
			}
			got := render(t, tc.pcap, fs, onlyRoCE)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from tshark: first difference at %s", tc.name, firstDiff(fs, got, want))
			}
		})
	}
}
