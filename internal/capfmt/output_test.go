package capfmt_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/capfmt"
)

// decodeFile decodes a capture and returns the packets (with copied
// frames, so they stay valid).
func decodeFile(t testing.TB, path string) []capfmt.Packet {
	t.Helper()
	frames := loadFrames(t, path)
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	out := make([]capfmt.Packet, len(frames))
	for i := range frames {
		dec.Decode(&frames[i], &out[i])
	}
	return out
}

// TestFieldsOptions checks the -E variants against what tshark printed for
// rc_imm frame 10 (FORMATS.md §2).
func TestFieldsOptions(t *testing.T) {
	pkts := decodeFile(t, filepath.Join(root, "testdata/pcaps/rc_imm.pcap"))
	p := &pkts[9]
	require.Equal(t, 10, p.Number)
	var cols []capfmt.Field
	for _, n := range []string{"frame.number", "ip.src", "infiniband.immdt", "infiniband.payload", "infiniband.bth.se"} {
		f, ok := capfmt.FieldByName(n)
		require.True(t, ok)
		cols = append(cols, f)
	}
	tests := []struct {
		name string
		opts []string
		want string
	}{
		{"defaults", nil, "10\t10.77.0.3\t11223344,11223344\t\t0\n"},
		{"quote=d", []string{"quote=d"}, "\"10\"\t\"10.77.0.3\"\t\"11223344,11223344\"\t\t\"0\"\n"},
		{"quote=s", []string{"quote=s"}, "'10'\t'10.77.0.3'\t'11223344,11223344'\t\t'0'\n"},
		{"occurrence=f", []string{"occurrence=f"}, "10\t10.77.0.3\t11223344\t\t0\n"},
		{"occurrence=l", []string{"occurrence=l"}, "10\t10.77.0.3\t11223344\t\t0\n"},
		{"aggregator=/s", []string{"aggregator=/s"}, "10\t10.77.0.3\t11223344 11223344\t\t0\n"},
		{"separator=, quote=d", []string{"separator=,", "quote=d"}, "\"10\",\"10.77.0.3\",\"11223344,11223344\",,\"0\"\n"},
		{"separator=/s", []string{"separator=/s"}, "10 10.77.0.3 11223344,11223344  0\n"},
		{"header", []string{"header=y"}, "frame.number\tip.src\tinfiniband.immdt\tinfiniband.payload\tinfiniband.bth.se\n10\t10.77.0.3\t11223344,11223344\t\t0\n"},
		{"bom", []string{"bom=y"}, "\ufeff10\t10.77.0.3\t11223344,11223344\t\t0\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := capfmt.DefaultFieldsOptions()
			for _, s := range tc.opts {
				require.NoError(t, o.ParseFieldsOption(s))
			}
			var buf bytes.Buffer
			fw := capfmt.NewFieldsWriter(&buf, cols, o)
			require.NoError(t, fw.WriteHeader())
			require.NoError(t, fw.Write(p))
			assert.Equal(t, tc.want, buf.String())
		})
	}
	for _, bad := range []string{"header", "header=x", "occurrence=2", "quote=x", "nosuch=y", "separator="} {
		o := capfmt.DefaultFieldsOptions()
		assert.ErrorIs(t, o.ParseFieldsOption(bad), capfmt.ErrBadOption, bad)
	}
}

// TestJSONFieldsMatchesTshark compares -T json -e with tshark's sample for
// rc_imm frames 10 and 11 (testdata/tshark/samples/*.fields.json).
func TestJSONFieldsMatchesTshark(t *testing.T) {
	pkts := decodeFile(t, filepath.Join(root, "testdata/pcaps/rc_imm.pcap"))
	fields := goldenFields(t)
	for _, n := range []int{10, 11} {
		want, err := os.ReadFile(filepath.Join(root, "testdata/tshark/samples", "rc_imm.f"+itoa(n)+".fields.json"))
		require.NoError(t, err)
		var buf bytes.Buffer
		jw := capfmt.NewJSONWriter(&buf, fields, time.UTC)
		require.NoError(t, jw.Write(&pkts[n-1]))
		require.NoError(t, jw.Close())
		assert.Equal(t, string(want), buf.String(), "frame %d", n)
	}
	var buf bytes.Buffer
	jw := capfmt.NewJSONWriter(&buf, fields, time.UTC)
	require.NoError(t, jw.Close())
	assert.Equal(t, "[]\n", buf.String(), "no packets")
}

func itoa(n int) string {
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestJSONTree checks the tree layout's shape: protocols as objects,
// "_tree" children, colon-separated bytes, and our ICRC fields.
func TestJSONTree(t *testing.T) {
	pkts := decodeFile(t, filepath.Join(root, "testdata/pcaps/rc_imm.pcap"))
	var buf bytes.Buffer
	jw := capfmt.NewJSONWriter(&buf, nil, time.UTC)
	require.NoError(t, jw.Write(&pkts[10]))
	require.NoError(t, jw.Close())
	s := buf.String()
	for _, want := range []string{
		`"infiniband": {`,
		`"infiniband.bth": "11:00:ff:ff:00:00:00:1f:00:9c:70:af",`,
		`"infiniband.bth_tree": {`,
		`"infiniband.aeth.syndrome_tree": {`,
		`"infiniband.aeth.syndrome.credit_count": "31"`,
		`"infiniband.invariant.crc": "0xbac99488"`,
		`"roce.icrc.status": "good"`,
		`"roce.icrc.computed": "0xbac99488"`,
	} {
		assert.Contains(t, s, want)
	}
}

// TestTextSummary checks the one-line summary against tshark's default
// output for RoCE packets, plus goroce's PSN.
func TestTextSummary(t *testing.T) {
	pkts := decodeFile(t, filepath.Join(root, "testdata/pcaps/rc_pingpong.pcap"))
	var buf bytes.Buffer
	tw := capfmt.NewTextWriter(&buf, false)
	require.NoError(t, tw.Write(&pkts[11]))
	require.NoError(t, tw.Write(&pkts[12]))
	lines := strings.Split(buf.String(), "\n")
	// tshark: "   12   0.030524    10.77.0.3 → 10.77.0.2    RRoCE 122 RC Send Only QP=0x000011 "
	assert.True(t, strings.HasPrefix(lines[0], "   12   0.030524    10.77.0.3 → 10.77.0.2    RRoCE 122 RC Send Only QP=0x000011 PSN="), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "   13   0.033493    10.77.0.2 → 10.77.0.3    RRoCE 62 RC Acknowledge QP=0x000011 PSN="), lines[1])
}
