package capfmt_test

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

	"github.com/goroce/goroce/internal/capfmt"
)

// fieldsOf renders a capture held in memory with the golden columns.
func fieldsOf(t *testing.T, data []byte) (string, error) {
	t.Helper()
	rd, err := capfmt.NewReader(bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	fw := capfmt.NewFieldsWriter(&out, goldenFields(t), capfmt.DefaultFieldsOptions())
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var (
		fr capfmt.Frame
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
	rd, err := capfmt.NewReader(bytes.NewReader(rewrite(t, src, false, true)))
	require.NoError(t, err)
	assert.True(t, rd.NanosecondTimestamps())
	rd, err = capfmt.NewReader(bytes.NewReader(src))
	require.NoError(t, err)
	assert.False(t, rd.NanosecondTimestamps())
}

// TestReaderLinkTypes re-frames RoCE packets as Linux cooked (SLL, SLL2)
// and raw IP and expects the same IP/UDP/InfiniBand fields.
func TestReaderLinkTypes(t *testing.T) {
	frames := loadFrames(t, filepath.Join(root, "testdata/pcaps/rc_imm.pcap"))
	var eth []capfmt.Frame
	for _, f := range frames[9:13] {
		eth = append(eth, f)
	}
	render := func(fs []capfmt.Frame) string {
		var out bytes.Buffer
		fields := goldenFields(t)[2:] // drop frame.number and time
		fw := capfmt.NewFieldsWriter(&out, fields, capfmt.DefaultFieldsOptions())
		dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
		var p capfmt.Packet
		for i := range fs {
			dec.Decode(&fs[i], &p)
			require.NoError(t, fw.Write(&p))
		}
		return out.String()
	}
	want := render(eth)
	convert := func(lt capfmt.LinkType, hdr func(et []byte) []byte) []capfmt.Frame {
		var out []capfmt.Frame
		for _, f := range eth {
			g := f
			g.LinkType = lt
			g.Data = append(hdr(f.Data[12:14]), f.Data[14:]...)
			g.OrigLen = len(g.Data)
			out = append(out, g)
		}
		return out
	}
	sll := convert(capfmt.LinkLinuxSLL, func(et []byte) []byte {
		return append([]byte{0, 0, 0, 1, 0, 6, 0x52, 0x54, 0, 0x77, 0, 3, 0, 0}, et...)
	})
	sll2 := convert(capfmt.LinkSLL2, func(et []byte) []byte {
		return append(append([]byte(nil), et...), 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 0x52, 0x54, 0, 0x77, 0, 3, 0, 0)
	})
	raw := convert(capfmt.LinkRaw, func([]byte) []byte { return nil })
	ipv4 := convert(capfmt.LinkIPv4, func([]byte) []byte { return nil })
	for name, fs := range map[string][]capfmt.Frame{"sll": sll, "sll2": sll2, "raw": raw, "ipv4": ipv4} {
		assert.Equal(t, want, render(fs), name)
	}
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
		_, err := capfmt.NewReader(bytes.NewReader(data))
		assert.ErrorIs(t, err, capfmt.ErrNotCapture, name)
	}

	// Cut in the middle of a record: the records before it decode, then
	// ErrCutShort (tshark: "appears to have been cut short").
	cut := src[:1000]
	out, err := fieldsOf(t, cut)
	assert.ErrorIs(t, err, capfmt.ErrCutShort)
	assert.NotEmpty(t, out)

	// A record claiming more than the snap length.
	bad := append([]byte(nil), src[:24+16]...)
	bad[24+8], bad[24+9], bad[24+10], bad[24+11] = 0xff, 0xff, 0xff, 0x7f
	_, err = fieldsOf(t, bad)
	assert.ErrorIs(t, err, capfmt.ErrCorrupt)
}

// TestTimeRelativeFromFirstFrame checks frame.time_relative counts from the
// file's first frame even when the filter hides it, and can be negative
// (probe_ip frame 22).
func TestTimeRelativeFromFirstFrame(t *testing.T) {
	pkts := decodeFile(t, filepath.Join(root, "testdata/tshark/probe/probe_ip.pcap"))
	it, ok := pkts[21].Lookup(capfmt.FrameTimeRelative)
	require.True(t, ok)
	assert.Equal(t, "-0.000500000", string(capfmt.AppendValue(nil, &it)))
}
