package flow_test

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/flow"
)

// benchScan runs the Scanner (and, with analyze, the Analyzer) over a
// capture held in memory until b.N frames were read: ns/op is per frame,
// the file's reading and decoding included.
func benchScan(b *testing.B, name string, analyze bool) {
	data, err := os.ReadFile(root + "/testdata/pcaps/" + name)
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		rd, err := capture.NewReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		sc := flow.NewScanner(rd)
		an := flow.NewAnalyzer(flow.Config{})
		for n < b.N {
			p, ok := sc.Next()
			if !ok {
				break
			}
			n++
			if analyze {
				an.Add(p)
			}
		}
	}
}

// BenchmarkScan measures the Scanner over a 64 KiB RDMA WRITE stream.
func BenchmarkScan(b *testing.B) { benchScan(b, "write_bw_s65536.pcap", false) }

// BenchmarkAnalyze adds the Analyzer.
func BenchmarkAnalyze(b *testing.B) { benchScan(b, "write_bw_s65536.pcap", true) }

// BenchmarkAnalyzeRead is BenchmarkAnalyze over a 64 KiB RDMA READ
// stream (READ latency pairing).
func BenchmarkAnalyzeRead(b *testing.B) { benchScan(b, "read_bw_s65536.pcap", true) }

// loopSource replays frames held in memory, forever.
type loopSource struct {
	frames []capture.Frame
	i      int
}

func (s *loopSource) Next(f *capture.Frame) error {
	if len(s.frames) == 0 {
		return io.EOF
	}
	*f = s.frames[s.i%len(s.frames)]
	s.i++
	f.Number = s.i
	return nil
}

var _ capture.Source = (*loopSource)(nil)

// TestScanAllocs pins the Scanner and the Analyzer's steady state at zero
// allocations per packet: once every direction exists and its series
// have grown, a packet costs none.
func TestScanAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	rd, err := capture.Open(root + "/testdata/pcaps/write_bw_s65536.pcap")
	require.NoError(t, err)
	defer rd.Close()
	src := &loopSource{}
	for {
		var f capture.Frame
		if rd.Next(&f) != nil {
			break
		}
		f.Data = bytes.Clone(f.Data)
		src.frames = append(src.frames, f)
	}
	sc := flow.NewScanner(src)
	an := flow.NewAnalyzer(flow.Config{})
	for range 2 * len(src.frames) { // every direction, port and opcode seen
		p, ok := sc.Next()
		require.True(t, ok)
		an.Add(p)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		p, _ := sc.Next()
		an.Add(p)
	})
	assert.Zero(t, allocs)
}
