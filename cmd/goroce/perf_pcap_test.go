package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture/lint"
	"github.com/goroce/goroce/internal/capfmt"
)

var perfPcapSummary = regexp.MustCompile(`capture: (\d+) packets written to .*, (\d+) dropped`)

// TestPerfPcap runs a short loopback perf with --pcap for each
// --pcap-side and reads the file back: as many frames as the summary
// says were written, every one RoCEv2 with a good ICRC, an interface per
// captured device, and no capture/lint finding for a one-device capture.
func TestPerfPcap(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	for i, tc := range []struct {
		side   string
		ifaces int
	}{{"local", 1}, {"remote", 1}, {"both", 2}} {
		t.Run(tc.side, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "perf.pcapng")
			// Addresses of this test's own, port 4791 (the capture's
			// decoders find RoCEv2 by it).
			a, b := "127.18.2."+strconv.Itoa(2*i+1)+":4791", "127.18.2."+strconv.Itoa(2*i+2)+":4791"
			var stdout, stderr bytes.Buffer
			code := runPerf([]string{"write", "-n", "200", "-s", "65536", "--json", "--local", a, "--remote", b,
				"--pcap", path, "--pcap-side", tc.side}, &stdout, &stderr)
			require.Equal(t, 0, code, stderr.String())
			m := perfPcapSummary.FindStringSubmatch(stderr.String())
			require.NotNil(t, m, stderr.String())
			written, _ := strconv.Atoi(m[1])
			require.Positive(t, written)

			data, err := os.ReadFile(path)
			require.NoError(t, err)
			rd, err := capfmt.NewReader(bytes.NewReader(data))
			require.NoError(t, err)
			dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
			var f capfmt.Frame
			var p capfmt.Packet
			n, good := 0, 0
			for {
				err := rd.Next(&f)
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				dec.Decode(&f, &p)
				n++
				if p.RoCE && p.ICRCChecked && p.ICRCGood {
					good++
				}
			}
			assert.Equal(t, written, n)
			assert.Equal(t, n, good, "frames with a good ICRC")

			ng, err := pcapgo.NewNgReader(bytes.NewReader(data), pcapgo.DefaultNgReaderOptions)
			require.NoError(t, err)
			for {
				if _, _, err := ng.ReadPacketData(); err != nil {
					break
				}
			}
			assert.Equal(t, tc.ifaces, ng.NInterfaces())

			if tc.ifaces == 1 {
				src, err := capfmt.NewReader(bytes.NewReader(data))
				require.NoError(t, err)
				fs, _, err := lint.Lint(src)
				require.NoError(t, err)
				assert.Empty(t, fs)
			}
		})
	}
}

// TestPerfPcapErrors: a bad --pcap-side and --pcap against a peer are
// usage errors.
func TestPerfPcapErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pcapng")
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, runPerf([]string{"--pcap", path, "--pcap-side", "neither"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "--pcap-side")
	stderr.Reset()
	assert.Equal(t, 2, runPerf([]string{"--pcap", path, "192.0.2.1"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "loopback runs only")
}
