// Package capgolden serves the tests that compare goroce's reading of a
// capture with tshark's goldens (testdata/tshark: each golden is tshark
// -T fields with the -e list of a FIELDS file): it reads such a list and
// renders a capture with it through package capture's Reader and the
// tshark emulation (internal/capfmt). Only _test.go files import it.
package capgolden

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/internal/capfmt"
)

// Fields reads the -e list at path (testdata/tshark/FIELDS for the
// InfiniBand goldens, FIELDS.l2 for 802.1Q and MAC Control, FIELDS.cm for
// the MADs): whitespace-separated field names, each one capfmt knows.
func Fields(t testing.TB, path string) []capfmt.Field {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []capfmt.Field
	for _, name := range strings.Fields(string(b)) {
		f, ok := capfmt.FieldByName(name)
		require.True(t, ok, "%s names %q, which capfmt does not know", path, name)
		out = append(out, f)
	}
	return out
}

// Render reads a capture held in memory (any format capture.NewReader
// takes) and returns its frames as tshark -T fields with fields and
// capfmt's default options would print them, with the header line. The
// error is the reader's: what was rendered before it comes with it.
func Render(t testing.TB, data []byte, fields []capfmt.Field) (string, error) {
	t.Helper()
	rd, err := capture.NewReader(bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	fw := capfmt.NewFieldsWriter(&out, fields, capfmt.DefaultFieldsOptions())
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var (
		fr capture.Frame
		p  capfmt.Packet
	)
	for {
		err := rd.Next(&fr)
		if errors.Is(err, io.EOF) {
			return out.String(), nil
		}
		if err != nil {
			return out.String(), err
		}
		dec.Decode(&fr, &p)
		require.NoError(t, fw.Write(&p))
	}
}
