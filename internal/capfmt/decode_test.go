package capfmt_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/capfmt"
)

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

// TestTimeRelativeFromFirstFrame checks frame.time_relative counts from the
// file's first frame even when the filter hides it, and can be negative
// (probe_ip frame 22).
func TestTimeRelativeFromFirstFrame(t *testing.T) {
	pkts := decodeFile(t, filepath.Join(root, "testdata/tshark/probe/probe_ip.pcap"))
	it, ok := pkts[21].Lookup(capfmt.FrameTimeRelative)
	require.True(t, ok)
	assert.Equal(t, "-0.000500000", string(capfmt.AppendValue(nil, &it)))
}
