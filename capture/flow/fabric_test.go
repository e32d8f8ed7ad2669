package flow_test

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/flow"
)

func analyzeFile(t *testing.T, rel string) *flow.Result {
	t.Helper()
	r, err := capture.Open(filepath.Join(root, rel))
	require.NoError(t, err)
	defer r.Close()
	res, err := flow.Analyze(r, flow.Config{})
	require.NoError(t, err)
	return res
}

// analyzeBytes analyses a capture held in memory.
func analyzeBytes(t *testing.T, data []byte, cfg flow.Config) (*flow.Result, error) {
	t.Helper()
	r, err := capture.NewReader(bytes.NewReader(data))
	require.NoError(t, err)
	return flow.Analyze(r, cfg)
}

// TestHostPairTuples counts the distinct 5-tuples per host pair: rxe gives
// each QP its own UDP source port (kernel rdma_get_udp_sport) and uses it
// both ways, so write_bw_rdma_cm's two RC QPs and the CM's QP 1 make 3
// ports × 2 directions.
func TestHostPairTuples(t *testing.T) {
	tests := []struct {
		file   string
		conns  []int
		tuples int
		ports  []uint16 // source ports 10.77.0.2 -> 10.77.0.3, in order
	}{
		{"testdata/pcaps/write_bw_rdma_cm.pcap", []int{1, 2, 3}, 6, []uint16{55410, 53583, 52366}},
		{"testdata/pcaps/rc_pingpong.pcap", []int{1}, 2, []uint16{49441}},
		{"testdata/pcaps/rping.pcap", []int{1, 2}, 4, []uint16{55410, 51528}},
		{"testdata/cap/impaired.pcap", []int{1}, 2, nil},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			res := analyzeFile(t, tc.file)
			require.Len(t, res.HostPairs, 1)
			hp := res.HostPairs[0]
			assert.True(t, hp.A.Less(hp.B))
			assert.Equal(t, tc.conns, hp.Connections)
			assert.Equal(t, tc.tuples, hp.FiveTuples)
			assert.Len(t, hp.Tuples, tc.tuples)
			assert.False(t, hp.TuplesCapped)
			var ports []uint16
			for _, tu := range hp.Tuples {
				assert.Equal(t, uint16(4791), tu.DstPort)
				assert.Len(t, tu.DestQPs, 1, "one QP per tuple")
				if tu.Src == netip.MustParseAddr("10.77.0.2") {
					ports = append(ports, tu.SrcPort)
				}
			}
			assert.Equal(t, tc.ports, ports)
		})
	}
}

// TestPausesPerPriority checks the pause statistics of probe_macc against
// the frames scripts/make-tshark-probes.py wrote (one frame every 250 µs).
func TestPausesPerPriority(t *testing.T) {
	res := analyzeFile(t, "testdata/tshark/probe/probe_macc.pcap")
	ps := res.Capture.Pauses
	require.NotNil(t, ps)
	assert.Equal(t, 36, ps.Frames, "38 frames, 2 without a whole opcode")
	assert.Equal(t, 6, ps.Pause, "frames 1-5, 37")
	assert.Equal(t, 8, ps.PFC, "frames 6-12, 38")
	assert.Equal(t, 22, ps.Other, "cut PAUSE/PFC, unknown and MPCP opcodes")
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, ps.Enabled) // frame 8 enables every class
	require.NotNil(t, ps.Link)
	assert.Equal(t, flow.PriorityPauses{Priority: -1, Pauses: 5, Resumes: 1, Quanta: 1 + 0x1234 + 0xffff + 0xff + 0x800,
		MaxQuanta: 0xffff, FirstFrame: 1, LastFrame: 37}, withoutSeries(*ps.Link))
	require.Len(t, ps.Priorities, 8)
	p3 := ps.Priorities[3]
	// frames 6 (0xffff), 7 (0x100), 8 (4), 10 (0: resume), 11 (0xaa), 38 (0x4000)
	assert.Equal(t, flow.PriorityPauses{Priority: 3, Pauses: 5, Resumes: 1, Quanta: 0xffff + 0x100 + 4 + 0xaa + 0x4000,
		MaxQuanta: 0xffff, FirstFrame: 6, LastFrame: 38}, withoutSeries(p3))
	// Over time, in 1 ms bins: frames 6, 7, 8 at 1.25-1.75 ms, 11 at 2.5 ms, 38 at 9.25 ms.
	assert.Equal(t, []float64{0, 3, 1, 0, 0, 0, 0, 0, 0, 1}, p3.OverTime.Rebin(time.Millisecond, 0, 10*time.Millisecond))
	// Priority 0: frame 8 (1), 12 (0x7777); frame 9 enables nothing.
	assert.Equal(t, int64(2), ps.Priorities[0].Pauses)
	assert.True(t, ps.Lossless(3))

	none := analyzeFile(t, "testdata/pcaps/rc_pingpong.pcap")
	assert.Nil(t, none.Capture.Pauses)
	assert.False(t, none.Capture.Pauses.Lossless(3))
}

func withoutSeries(p flow.PriorityPauses) flow.PriorityPauses {
	p.OverTime = flow.CountSeries{}
	return p
}

// TestFabricOutput checks the host pairs and the pauses in the text and
// JSON of a capture with both: probe_vlan.
func TestFabricOutput(t *testing.T) {
	res := analyzeFile(t, "testdata/tshark/probe/probe_vlan.pcap")
	var txt bytes.Buffer
	require.NoError(t, flow.WriteText(&txt, "probe_vlan.pcap", res))
	for _, want := range []string{
		"host pair 10.77.0.2 <-> 10.77.0.3: 1 connections (1), 2 distinct 5-tuples (ECMP entropy)\n",
		"    10.77.0.3:49152 -> 10.77.0.2:4791 UDP: 9 packets, QP 0x000011\n",
		"host pair fd00:4d::2 <-> fd00:4d::3: 1 connections (2), 1 distinct 5-tuples (ECMP entropy)\n",
		"    [fd00:4d::3]:49152 -> [fd00:4d::2]:4791 UDP: 1 packets, QP 0x000011\n",
		"pause frames: 2 MAC Control (802.3x PAUSE 0, PFC 2, other 0); PFC enables priorities 3\n",
		"  priority 3 pauses over time (32µs bins): 0.006976 s ×1\n",
	} {
		assert.Contains(t, txt.String(), want)
	}
	var js bytes.Buffer
	require.NoError(t, flow.WriteJSON(&js, res))
	var doc struct {
		Capture struct {
			VLAN   int `json:"vlan_tagged"`
			Pauses struct {
				Priorities []struct {
					Priority int `json:"priority"`
					OverTime struct {
						Bin   float64   `json:"bin_s"`
						Count []float64 `json:"count"`
					} `json:"over_time"`
				} `json:"priorities"`
			} `json:"pauses"`
		} `json:"capture"`
		HostPairs []struct {
			A          string `json:"a"`
			B          string `json:"b"`
			FiveTuples int    `json:"five_tuples"`
			Tuples     []struct {
				SrcPort uint16   `json:"udp_src_port"`
				DestQPs []uint32 `json:"dest_qps"`
			} `json:"tuples"`
		} `json:"host_pairs"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
	assert.Equal(t, 11, doc.Capture.VLAN)
	require.Len(t, doc.HostPairs, 2)
	assert.Equal(t, "10.77.0.2", doc.HostPairs[0].A)
	assert.Equal(t, 2, doc.HostPairs[0].FiveTuples)
	assert.Equal(t, []uint32{0x11}, doc.HostPairs[0].Tuples[0].DestQPs)
	require.Len(t, doc.Capture.Pauses.Priorities, 1)
	ot := doc.Capture.Pauses.Priorities[0].OverTime
	assert.InDelta(t, 32e-6, ot.Bin, 1e-12)
	var sum float64
	for _, v := range ot.Count {
		sum += v
	}
	assert.Equal(t, 1.0, sum, "one pause, one resume (not counted)")
}

// TestPacketPriority checks the 802.1Q and DSCP view of tagged RoCEv2.
func TestPacketPriority(t *testing.T) {
	r, err := capture.Open(filepath.Join(root, "testdata/tshark/probe/probe_vlan.pcap"))
	require.NoError(t, err)
	defer r.Close()
	sc := flow.NewScanner(r)
	type prio struct {
		frame  int
		tagged bool
		pcp    uint8
		vid    uint16
		dscp   uint8
	}
	var got []prio
	for {
		p, ok := sc.Next()
		if !ok {
			break
		}
		got = append(got, prio{p.Frame, p.Tagged, p.PCP, p.VLANID, p.DSCP})
	}
	assert.Equal(t, []prio{
		{1, true, 3, 100, 26}, {2, true, 6, 200, 48}, {3, true, 6, 200, 48}, {4, true, 3, 100, 0},
		{5, true, 5, 0, 0}, {6, true, 7, 4095, 0}, {7, true, 3, 300, 0},
		{8, true, 3, 100, 0}, // 802.1ad S-tag (not vlan): the C-tag's priority
		{9, true, 2, 20, 0},  // 0x9100 over 0x8100: the outer tag
		{10, true, 4, 30, 0}, // 0x8100 over 0x8100: the outer tag
		{16, true, 3, 100, 26},
	}, got)
}
