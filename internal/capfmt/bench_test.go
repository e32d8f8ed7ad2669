package capfmt_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/capfmt"
	"github.com/goroce/goroce/rocev2"
)

// loadFrames reads every record of a capture into memory (copies, so the
// frames outlive the reader's buffer).
func loadFrames(tb testing.TB, path string) []capfmt.Frame {
	tb.Helper()
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	rd, err := capfmt.NewReader(f)
	require.NoError(tb, err)
	var out []capfmt.Frame
	for {
		var fr capfmt.Frame
		err := rd.Next(&fr)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(tb, err)
		fr.Data = bytes.Clone(fr.Data)
		out = append(out, fr)
	}
}

// BenchmarkFieldsPath measures the -T fields hot path: decode one frame of
// a 64 KiB RDMA WRITE stream and format the 48 golden columns. ns/op is
// per packet.
func BenchmarkFieldsPath(b *testing.B) {
	frames := loadFrames(b, filepath.Join(root, "testdata/pcaps/write_bw_s65536.pcap"))
	fields := goldenFields(b)
	fw := capfmt.NewFieldsWriter(io.Discard, fields, capfmt.DefaultFieldsOptions())
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var p capfmt.Packet
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fr := &frames[i%len(frames)]
		dec.Decode(fr, &p)
		if p.RoCE {
			if err := fw.Write(&p); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDecode measures decoding alone.
func BenchmarkDecode(b *testing.B) {
	frames := loadFrames(b, filepath.Join(root, "testdata/pcaps/write_bw_s65536.pcap"))
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var p capfmt.Packet
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dec.Decode(&frames[i%len(frames)], &p)
	}
}

// BenchmarkReadDecodeFields measures the whole pipeline from file bytes:
// pcap reader, decoder, -Y infiniband and the fields writer. ns/op is per
// packet.
func BenchmarkReadDecodeFields(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(root, "testdata/pcaps/write_bw_s65536.pcap"))
	require.NoError(b, err)
	fields := goldenFields(b)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		rd, err := capfmt.NewReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		fw := capfmt.NewFieldsWriter(io.Discard, fields, capfmt.DefaultFieldsOptions())
		dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
		var (
			fr capfmt.Frame
			p  capfmt.Packet
		)
		for n < b.N {
			if err := rd.Next(&fr); err != nil {
				break
			}
			n++
			dec.Decode(&fr, &p)
			if p.RoCE {
				if err := fw.Write(&p); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// BenchmarkFilter measures a compiled display filter on decoded packets.
func BenchmarkFilter(b *testing.B) {
	frames := loadFrames(b, filepath.Join(root, "testdata/pcaps/write_bw_s65536.pcap"))
	flt, err := capfmt.CompileFilter("infiniband.bth.opcode == 7 && ip.src == 10.77.0.3 || roce.icrc.status == bad")
	require.NoError(b, err)
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	packets := make([]capfmt.Packet, len(frames))
	for i := range frames {
		dec.Decode(&frames[i], &packets[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		flt.Match(&packets[i%len(packets)])
	}
}

// TestFieldsPathAllocs pins the -T fields hot path (decode, filter,
// format) at zero allocations per RoCE packet once buffers have grown.
// rocev2.ComputeICRC's own allocations (none since roce e34dcdf; see
// TestCodecComputeICRCDoesNotAllocate) are measured and allowed for, so this
// test guards capfmt's code alone.
func TestFieldsPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	all := loadFrames(t, filepath.Join(root, "testdata/pcaps/write_bw_s65536.pcap"))
	fields := goldenFields(t)
	fw := capfmt.NewFieldsWriter(io.Discard, fields, capfmt.DefaultFieldsOptions())
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	flt, err := capfmt.CompileFilter("infiniband && infiniband.bth.psn > 0")
	require.NoError(t, err)
	var (
		p      capfmt.Packet
		frames []capfmt.Frame
	)
	for i := range all { // warm up: grow the item and line buffers
		dec.Decode(&all[i], &p)
		require.NoError(t, fw.Write(&p))
		if p.ICRCChecked {
			frames = append(frames, all[i])
		}
	}
	require.NotEmpty(t, frames)
	var rp rocev2.Packet
	require.NoError(t, rp.ParseFrame(frames[0].Data))
	icrcAllocs := testing.AllocsPerRun(100, func() { _ = rocev2.ComputeICRC(rp.IP, rp.UDP, rp.Body()) })
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		dec.Decode(&frames[i%len(frames)], &p)
		if flt.Match(&p) {
			_ = fw.Write(&p)
		}
		i++
	})
	require.Equal(t, icrcAllocs, allocs, "allocations per RoCE packet on the fields path beyond rocev2.ComputeICRC's")
}
