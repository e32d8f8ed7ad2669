package capreport_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/internal/capreport"
)

// FuzzCaptureFile feeds whole capture files through the flow analysis, the
// linter and the report, seeded with every golden capture, the impaired
// one and the tshark probes, whole, cut and with a flipped byte. None of
// it may panic, and a capture whose header reads must give a report.
func FuzzCaptureFile(f *testing.F) {
	var paths []string
	for _, g := range []string{"testdata/pcaps/*.pcap", "testdata/cap/*.pcap", "testdata/tshark/probe/*.pcap"} {
		m, _ := filepath.Glob(filepath.Join(root, g))
		paths = append(paths, m...)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || len(data) > 96<<10 {
			continue
		}
		f.Add(data)
		f.Add(data[:len(data)*2/3])
		c := bytes.Clone(data)
		c[len(c)/2] ^= 0x5a
		f.Add(c)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x0d, 0x0d, 0x0a})
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := capture.NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		r := capreport.Build(src, "fuzz.pcap", nil)
		if err := capreport.Write(io.Discard, r); err != nil {
			t.Fatal(err)
		}
	})
}
