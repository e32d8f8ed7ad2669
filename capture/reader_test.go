package capture_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/pcapng"
	"github.com/goroce/goroce/internal/testutil/capgolden"
)

// root is the repository root, relative to this package.
const root = ".."

// fieldsOf renders a capture held in memory with the golden columns of
// the tshark emulation (testdata/tshark/FIELDS): the Reader must deliver
// the same frames whatever the file format.
func fieldsOf(t *testing.T, data []byte) (string, error) {
	t.Helper()
	return capgolden.Render(t, data, capgolden.Fields(t, filepath.Join(root, "testdata/tshark/FIELDS")))
}

// rewrite re-encodes a pcap's records with a pcapgo writer of another
// format (pcapng, nanosecond pcap), keeping timestamps and bytes.
func rewrite(t *testing.T, src []byte, ng, nanos bool) []byte {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(src))
	require.NoError(t, err)
	var out bytes.Buffer
	var write func(ci gopacket.CaptureInfo, data []byte) error
	var flush func() error
	if ng {
		w, err := pcapgo.NewNgWriter(&out, layers.LinkTypeEthernet)
		require.NoError(t, err)
		write, flush = w.WritePacket, w.Flush
	} else {
		var w *pcapgo.Writer
		if nanos {
			w = pcapgo.NewWriterNanos(&out)
		} else {
			w = pcapgo.NewWriter(&out)
		}
		require.NoError(t, w.WriteFileHeader(65536, layers.LinkTypeEthernet))
		write, flush = w.WritePacket, func() error { return nil }
	}
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.NoError(t, write(ci, data))
	}
	require.NoError(t, flush())
	return out.Bytes()
}

// TestReaderFormats decodes the same capture as pcap, nanosecond pcap,
// pcapng and gzip, and expects the same fields.
func TestReaderFormats(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "testdata/tshark/probe/probe_ip.pcap"))
	require.NoError(t, err)
	want, err := fieldsOf(t, src)
	require.NoError(t, err)
	require.NotEmpty(t, want)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(src)
	require.NoError(t, err)
	require.NoError(t, zw.Close())

	for name, data := range map[string][]byte{
		"pcapng": rewrite(t, src, true, false),
		"nanos":  rewrite(t, src, false, true),
		"gzip":   gz.Bytes(),
	} {
		got, err := fieldsOf(t, data)
		require.NoError(t, err, name)
		assert.Equal(t, want, got, name)
	}
	rd, err := capture.NewReader(bytes.NewReader(rewrite(t, src, false, true)))
	require.NoError(t, err)
	assert.True(t, rd.NanosecondTimestamps())
	rd, err = capture.NewReader(bytes.NewReader(src))
	require.NoError(t, err)
	assert.False(t, rd.NanosecondTimestamps())
}

// TestReaderDamaged covers files that are not captures or end early.
func TestReaderDamaged(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "testdata/pcaps/rc_imm.pcap"))
	require.NoError(t, err)

	for name, data := range map[string][]byte{
		"empty":       nil,
		"text":        []byte("this is not a capture file\n"),
		"short magic": src[:3],
		"header cut":  src[:20],
	} {
		_, err := capture.NewReader(bytes.NewReader(data))
		assert.ErrorIs(t, err, capture.ErrNotCapture, name)
	}

	// Cut in the middle of a record: the records before it decode, then
	// ErrCutShort (tshark: "appears to have been cut short").
	cut := src[:1000]
	out, err := fieldsOf(t, cut)
	assert.ErrorIs(t, err, capture.ErrCutShort)
	assert.NotEmpty(t, out)

	// A record claiming more than the snap length.
	bad := append([]byte(nil), src[:24+16]...)
	bad[24+8], bad[24+9], bad[24+10], bad[24+11] = 0xff, 0xff, 0xff, 0x7f
	_, err = fieldsOf(t, bad)
	assert.ErrorIs(t, err, capture.ErrCorrupt)
}

// TestReaderNextAllocs pins what the package doc says Reader.Next
// allocates per frame: nothing on pcap, plain or gzipped, nor on pcapng
// packet blocks without options; one object per block with epb_flags (a
// device's own capture, gopacket's pcapng reader). The doc had said
// "nothing" for all of them.
func TestReaderNextAllocs(t *testing.T) {
	const frames = 400
	data := bytes.Repeat([]byte{0xab}, 128)
	pcapFile := func(gz bool) []byte {
		var buf bytes.Buffer
		var w io.Writer = &buf
		var z *gzip.Writer
		if gz {
			z = gzip.NewWriter(&buf)
			w = z
		}
		pw := pcapgo.NewWriter(w)
		require.NoError(t, pw.WriteFileHeader(65535, layers.LinkTypeEthernet))
		for range frames {
			require.NoError(t, pw.WritePacket(gopacket.CaptureInfo{CaptureLength: len(data), Length: len(data)}, data))
		}
		if z != nil {
			require.NoError(t, z.Close())
		}
		return buf.Bytes()
	}
	pcapngFile := func(dir pcapng.Direction) []byte {
		var buf bytes.Buffer
		pw, err := pcapng.NewWriter(&buf, pcapng.Section{})
		require.NoError(t, err)
		id, err := pw.AddInterface(pcapng.Interface{Name: "x", LinkType: capture.LinkEthernet})
		require.NoError(t, err)
		for range frames {
			require.NoError(t, pw.WritePacket(pcapng.Packet{Interface: id, Data: data, Dir: dir}))
		}
		return buf.Bytes()
	}
	for _, tc := range []struct {
		name string
		file []byte
		max  float64
	}{
		{"pcap", pcapFile(false), 0},
		{"pcap.gz", pcapFile(true), 0},
		{"pcapng", pcapngFile(pcapng.DirUnknown), 0},
		{"pcapng epb_flags", pcapngFile(pcapng.DirInbound), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd, err := capture.NewReader(bytes.NewReader(tc.file))
			require.NoError(t, err)
			var f capture.Frame
			require.NoError(t, rd.Next(&f)) // buffers sized
			allocs := testing.AllocsPerRun(frames/2, func() { require.NoError(t, rd.Next(&f)) })
			assert.LessOrEqual(t, allocs, tc.max)
			assert.Len(t, f.Data, len(data))
		})
	}
}
