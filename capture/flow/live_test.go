package flow_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/flow"
)

// TestLiveCounters reads captures through a Scanner and checks
// that each direction's Live counters, read before Result, agree with
// what Result reports, and that the Scanner gives the same result as
// Analyze.
func TestLiveCounters(t *testing.T) {
	for _, name := range []string{"../../testdata/cap/impaired.pcap", "../../testdata/pcaps/read_bw_s8.pcap"} {
		rd, err := capture.Open(name)
		require.NoError(t, err)
		sc := flow.NewScanner(rd)
		an := flow.NewAnalyzer(flow.Config{})
		for {
			p, ok := sc.Next()
			if !ok {
				break
			}
			an.Add(p)
		}
		require.NoError(t, sc.Err())
		live := map[*flow.Dir]flow.LiveCounters{}
		for _, d := range an.Directions() {
			live[d] = d.Live()
		}
		res := an.Result(sc.Stats())
		require.NoError(t, rd.Close())
		require.NotEmpty(t, res.Connections)
		n := 0
		for _, c := range res.Connections {
			for _, d := range c.Dirs {
				n++
				l, ok := live[d]
				require.True(t, ok, d.Name())
				assert.Equal(t, d.Packets, l.Packets)
				assert.Equal(t, d.Bytes, l.Bytes)
				assert.Equal(t, d.ECN.CE, l.CE)
				assert.Equal(t, d.CNPs, l.CNPs)
				assert.Equal(t, d.ICRC.Bad, l.ICRCBad)
				if d.Requests != nil {
					assert.Equal(t, d.Requests.Retransmissions, l.Retransmissions)
					assert.Equal(t, d.Requests.GapPSNs, l.GapPSNs)
				}
				if d.Responses != nil {
					assert.Equal(t, d.Responses.NAKSeq+d.Responses.NAKOther, l.NAKs)
					assert.Equal(t, d.Responses.RNR, l.RNRNAKs)
				}
			}
		}
		assert.Equal(t, len(live), n, name)

		rd, err = capture.Open(name)
		require.NoError(t, err)
		want, err := flow.Analyze(rd, flow.Config{})
		require.NoError(t, err)
		rd.Close()
		assert.Equal(t, want.Capture, res.Capture, name)
		assert.Equal(t, len(want.Connections), len(res.Connections), name)
	}
}
