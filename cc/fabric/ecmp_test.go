package fabric_test

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cc/fabric"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/rocev2"
)

// ecmpSeeds returns the seeds the ECMP goal is judged over: 20 by default,
// 100 in long mode.
func ecmpSeeds() []uint64 {
	n := 20
	if longMode() {
		n = 100
	}
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}

func TestFiveTupleHash(t *testing.T) {
	tu := fabric.FiveTuple{
		Src: netip.MustParseAddr("10.0.0.8"), Dst: netip.MustParseAddr("10.1.0.9"),
		SrcPort: 49593, DstPort: fabric.RoCEv2Port,
	}
	h := tu.Hash(7)
	assert.Equal(t, h, tu.Hash(7), "deterministic per seed")
	assert.NotEqual(t, h, tu.Hash(8), "the seed changes the hash")
	other := tu
	other.SrcPort++
	assert.NotEqual(t, h, other.Hash(7), "the source port changes the hash")

	// 64 consecutive source ports of one host pair, the ports a device
	// draws, spread over 8 spines like balls into bins: none idle.
	var bins [8]int
	for p := range 64 {
		tu.SrcPort = uint16(rocev2.SourcePortMin + p)
		bins[tu.Hash(1)%8]++
	}
	for s, n := range bins {
		assert.Positive(t, n, "spine %d idle", s)
	}
}

// TestECMPDeterministic checks that a run is a pure function of its
// config, and that the seed picks both the QPNs and the leaves' hashes.
func TestECMPDeterministic(t *testing.T) {
	var e fabric.ECMPSim
	cfg := fabric.ECMPConfig{Seed: 3, Mode: fabric.PortKernel, QPs: 8}
	a, err := e.Run(cfg)
	require.NoError(t, err)
	var fresh fabric.ECMPSim
	b, err := fresh.Run(cfg)
	require.NoError(t, err)
	assert.Equal(t, a, b)

	cfg.Seed = 4
	c, err := e.Run(cfg)
	require.NoError(t, err)
	assert.NotEqual(t, a.Flows[0].LQPN, c.Flows[0].LQPN)

	// Fixed ports: only the leaves' hash seeds change with the seed.
	spines := map[int]bool{}
	for seed := range uint64(16) {
		r, err := e.Run(fabric.ECMPConfig{Seed: seed, Mode: fabric.PortFixed})
		require.NoError(t, err)
		for _, f := range r.Flows {
			if f.Spine >= 0 {
				spines[f.Spine] = true
			}
		}
	}
	assert.Greater(t, len(spines), 4, "seeds re-seed the switch hash")
}

// TestECMPPorts checks each mode's source ports and the flows of the
// default scenario: 16 hosts in a ring, two of the pairs crossing.
func TestECMPPorts(t *testing.T) {
	var e fabric.ECMPSim
	for _, m := range []fabric.PortMode{fabric.PortFixed, fabric.PortKernel, fabric.PortExplicit} {
		t.Run(m.String(), func(t *testing.T) {
			r, err := e.Run(fabric.ECMPConfig{Seed: 1, Mode: m, QPs: 4, Ports: []uint16{50000, 50001, 50002}})
			require.NoError(t, err)
			require.Len(t, r.Flows, 16*4)
			cross := 0
			for _, f := range r.Flows {
				assert.Equal(t, (f.Src+1)%16, f.Dst)
				assert.Equal(t, uint16(fabric.RoCEv2Port), f.Tuple.DstPort)
				switch m {
				case fabric.PortFixed:
					assert.Equal(t, uint16(fabric.RoCEv2Port), f.Tuple.SrcPort)
				case fabric.PortKernel:
					assert.Equal(t, rocev2.ConnSourcePort(0, f.LQPN, f.RQPN), f.Tuple.SrcPort)
					assert.GreaterOrEqual(t, f.Tuple.SrcPort, uint16(rocev2.SourcePortMin))
				case fabric.PortExplicit:
					assert.Equal(t, []uint16{50000, 50001, 50002}[f.QP%3], f.Tuple.SrcPort)
				}
				if f.Spine >= 0 {
					cross++
					assert.Contains(t, []int{7, 15}, f.Src)
				}
			}
			assert.Equal(t, 2*4, cross)
		})
	}
}

// TestECMPFluid checks the flow model on cases with a known answer,
// without DCQCN: links as fast as the hosts never slow the ring; at half
// the hosts' rate one spine per pair doubles the step; spread perfectly,
// the step is the hosts'.
func TestECMPFluid(t *testing.T) {
	var e fabric.ECMPSim
	r, err := e.Run(fabric.ECMPConfig{Mode: fabric.PortFixed, QPs: 8, SpineRate: 100 * cc.Gbps, NoDCQCN: true})
	require.NoError(t, err)
	assert.InDelta(t, 1, r.Ratio, 1e-6)

	r, err = e.Run(fabric.ECMPConfig{Mode: fabric.PortFixed, QPs: 8, NoDCQCN: true})
	require.NoError(t, err)
	assert.InDelta(t, 2, r.Ratio, 1e-6)
	// Ideal: 32 MB/16 per step at 100 Gb/s, 30 steps.
	assert.InDelta(t, 30*float64(2<<20)*8/100e9, r.Ideal.Seconds(), 1e-7)
	assert.Equal(t, 30*r.Step, r.Completion)
	assert.Equal(t, 4, r.Overloaded, "pair 7→8's uplink and downlink, and 15→0's")
}

// TestECMPGoal is the goal of issue 14 "Simulate what the fabric cannot
// show": with the kernel rule and 8 QPs per neighbour pair the median
// completion is at most 1.25 × ideal; with the fixed port every cross-leaf
// flow of a pair lands on one spine and the collective collapses.
func TestECMPGoal(t *testing.T) {
	var e fabric.ECMPSim
	seeds := ecmpSeeds()
	kernel, err := e.Sweep(fabric.ECMPConfig{Mode: fabric.PortKernel, QPs: 8}, seeds)
	require.NoError(t, err)
	t.Logf("kernel, 8 QPs: completion/ideal median %.3f worst %.3f; spine load max/mean median %.2f worst %.2f",
		kernel.RatioMedian, kernel.RatioWorst, kernel.LoadMedian, kernel.LoadWorst)
	assert.LessOrEqual(t, kernel.RatioMedian, 1.25)

	fixed, err := e.Sweep(fabric.ECMPConfig{Mode: fabric.PortFixed, QPs: 8}, seeds)
	require.NoError(t, err)
	t.Logf("fixed, 8 QPs: completion/ideal median %.3f worst %.3f", fixed.RatioMedian, fixed.RatioWorst)
	for _, r := range fixed.Runs {
		spine := map[int]int{}
		for _, f := range r.Flows {
			if f.Spine < 0 {
				continue
			}
			if s, ok := spine[f.Src]; ok {
				assert.Equal(t, s, f.Spine, "seed %d: pair %d→%d on two spines", r.Config.Seed, f.Src, f.Dst)
			}
			spine[f.Src] = f.Spine
		}
		assert.Len(t, spine, 2)
		assert.GreaterOrEqual(t, r.Ratio, 1.9, "seed %d", r.Config.Seed)
		assert.Positive(t, r.Overloaded)
	}
	assert.GreaterOrEqual(t, fixed.RatioMedian, 1.5*kernel.RatioMedian)
}

func TestECMPInvalid(t *testing.T) {
	var e fabric.ECMPSim
	for _, c := range []fabric.ECMPConfig{
		{Leaves: 1, HostsPerLeaf: 1},
		{QPs: -1},
		{SpineRate: -1},
		{Mode: 9},
		{Data: 3},
	} {
		_, err := e.Run(c)
		assert.True(t, errors.Is(err, fabric.ErrInvalidConfig), "%+v: %v", c, err)
	}
	_, err := fabric.ParsePortMode("random")
	assert.ErrorIs(t, err, fabric.ErrInvalidConfig)
	m, err := fabric.ParsePortMode("kernel")
	require.NoError(t, err)
	assert.Equal(t, fabric.PortKernel, m)
}

// TestWriteECMPHTML checks the ECMP page as TestWriteHTML checks the DCQCN
// one: well-formed, self-contained, the table and three charts.
func TestWriteECMPHTML(t *testing.T) {
	var e fabric.ECMPSim
	var stats []fabric.ECMPStats
	for _, m := range []fabric.PortMode{fabric.PortFixed, fabric.PortKernel} {
		for _, q := range []int{1, 8} {
			st, err := e.Sweep(fabric.ECMPConfig{Mode: m, QPs: q}, []uint64{1, 2, 3})
			require.NoError(t, err)
			stats = append(stats, st)
		}
	}
	var buf bytes.Buffer
	require.NoError(t, fabric.WriteECMPHTML(&buf, stats, fabric.Page{Title: "ECMP <ring>", Notes: []string{"2 leaves"}}))
	page := buf.String()
	require.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"))
	assert.NotContains(t, strings.ToLower(page), "<script")
	assert.NotContains(t, strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), "http")
	assert.Contains(t, page, "ECMP &lt;ring&gt;")
	assert.Contains(t, page, "goal 1.25")
	svgs, rows := 0, 0
	for _, el := range testutil.RequireXML(t, []byte(page)) {
		switch el.Name.Local {
		case "svg":
			svgs++
		case "tr":
			rows++
		}
	}
	assert.Equal(t, 3, svgs)
	assert.Equal(t, 1+len(stats), rows)
}

// TestECMPAssigned: a ring placed by LeafOf with the spines given by
// SpineOf (a real fabric's, observed) is timed with exactly those paths.
func TestECMPAssigned(t *testing.T) {
	var e fabric.ECMPSim
	base := fabric.ECMPConfig{Leaves: 2, HostsPerLeaf: 4, Spines: 4, HostRate: 100 * cc.Gbps, SpineRate: cc.Gbps,
		NoDCQCN: true, Data: 8 << 20, LeafOf: []int{0, 1, 0, 1, 0, 1, 0, 1}}
	tests := []struct {
		name        string
		spineOf     [][]int
		ratio, load float64
	}{
		{"spread", [][]int{{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}}, 1, 1},
		{"two on spine 0", [][]int{{0}, {0}, {0}, {1}, {1}, {2}, {2}, {3}}, 2, 1.5},
		{"all on spine 3", [][]int{{3}, {3}, {3}, {3}, {3}, {3}, {3}, {3}}, 4, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.SpineOf = tc.spineOf
			r, err := e.Run(cfg)
			require.NoError(t, err)
			for _, f := range r.Flows {
				assert.Equal(t, tc.spineOf[f.Src][0], f.Spine, "member %d", f.Src)
			}
			assert.InDelta(t, tc.ratio, r.Ratio, 1e-6)
			assert.InDelta(t, tc.load, r.LoadMaxMean, 1e-6)
			// The ideal: every leaf sends 4 chunks of 1 MiB over 4 spines of 1 Gb/s.
			assert.InDelta(t, float64(1<<20)*8/1e9, r.IdealStep.Seconds(), 1e-7)
		})
	}

	t.Run("three members", func(t *testing.T) {
		cfg := base
		cfg.LeafOf, cfg.SpineOf = []int{0, 1, 1}, [][]int{{2}, nil, {2}}
		r, err := e.Run(cfg)
		require.NoError(t, err)
		require.Len(t, r.Flows, 3)
		assert.Equal(t, []int{2, -1, 2}, []int{r.Flows[0].Spine, r.Flows[1].Spine, r.Flows[2].Spine})
		assert.Equal(t, 4*r.Step, r.Completion, "2(n-1) steps")
	})
	t.Run("unobserved flows hash", func(t *testing.T) {
		cfg := base
		cfg.SpineOf = [][]int{{-1}}
		r, err := e.Run(cfg)
		require.NoError(t, err)
		hashed := base
		h, err := e.Run(hashed)
		require.NoError(t, err)
		assert.Equal(t, h.Flows[0].Spine, r.Flows[0].Spine)
	})
	for _, bad := range []fabric.ECMPConfig{
		{LeafOf: []int{0, 2}},
		{LeafOf: []int{0}},
		{Spines: 4, SpineOf: [][]int{{4}}},
		{QPs: 1, SpineOf: [][]int{{0, 1}}},
	} {
		_, err := e.Run(bad)
		assert.ErrorIs(t, err, fabric.ErrInvalidConfig, "%+v", bad)
	}
}
