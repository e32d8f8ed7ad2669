package fabric_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/internal/fabric/fabrictest"
	"github.com/goroce/goroce/rocev2"
)

// sendFlows sends n datagrams to port 4791 of to from each of the source
// ports of host from (unconnected sockets: the ICMP port-unreachable
// answers do not fail the writes), each a BTH (an RDMA WRITE Only) whose
// destination QP is the source port, so that a sample names its flow.
func sendFlows(t *testing.T, from fabric.Host, to netip.Addr, ports []uint16, n int) {
	t.Helper()
	for _, p := range ports {
		var c *net.UDPConn
		require.NoError(t, fabric.InNetns(from.NS, func() (err error) {
			c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from.Addr, p)))
			return err
		}))
		pkt := make([]byte, 64)
		h := bth.Header(pkt[:bth.Size])
		h.Encode(&bth.Fields{Opcode: bth.RCRDMAWriteOnly, PKey: 0xFFFF, DestQP: bth.QPN(p), PSN: 1})
		for range n {
			_, err := c.WriteToUDPAddrPort(pkt, netip.AddrPortFrom(to, rocev2.UDPPort))
			require.NoError(t, err)
		}
		c.Close()
	}
}

// waitSent waits until leaf 0 has sent n packets to the spines since
// before, and returns the counters then.
func waitSent(t *testing.T, f *fabric.Fabric, before fabrictest.Spines, n uint64) fabrictest.Spines {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		now, err := fabrictest.SpineCounters(f)
		require.NoError(t, err)
		var sum uint64
		for _, v := range now.Sub(before).AB {
			sum += v
		}
		if sum >= n || time.Now().After(deadline) {
			require.Equal(t, n, sum, "packets leaf 0 sent the spines")
			return now
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSampleFlows: a FlowSampler sees each flow on the spine it took.
// 32 UDP flows to port 4791 cross from leaf 0 to leaf 1, 40 packets each;
// sampling every packet, each flow shows on one spine with all 40, and
// the samples per spine add up to what the leaf's interface counters say
// it sent each spine. Sampling one in 8, the flows seen show on the same
// spines, and about an eighth of the packets are kept.
func TestSampleFlows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric; skipped under -short")
	}
	f := fabrictest.Up(t, fabric.Config{Spines: 4})
	src, dst := f.LeafHosts(0)[0], f.LeafHosts(1)[0]
	var ports []uint16
	for p := range uint16(32) {
		ports = append(ports, 50000+p)
	}
	const n = 40

	before, err := fabrictest.SpineCounters(f)
	require.NoError(t, err)
	s, err := f.SampleFlows(1)
	require.NoError(t, err)
	sendFlows(t, src, dst.Addr, ports, n)
	after := waitSent(t, f, before, uint64(n*len(ports)))
	all, drops := s.Stop()
	require.Zero(t, drops)
	spineOf := map[bth.QPN]int{}
	perSpine := make([]uint64, 4)
	for _, fs := range all {
		require.Equal(t, src.Addr, fs.Src.Addr())
		require.Equal(t, dst.Addr, fs.Dst.Addr())
		assert.Equal(t, uint16(fs.DestQP), fs.Src.Port(), "the flow's BTH")
		assert.Equal(t, 0, fs.Leaf)
		_, dup := spineOf[fs.DestQP]
		assert.False(t, dup, "flow %d on two spines", fs.DestQP)
		spineOf[fs.DestQP] = fs.Spine
		assert.Equal(t, uint64(n), fs.Packets, "flow %d", fs.DestQP)
		assert.Equal(t, uint64(n*(14+20+8+64)), fs.Bytes, "flow %d", fs.DestQP)
		perSpine[fs.Spine] += fs.Packets
	}
	assert.Len(t, spineOf, len(ports))
	assert.Equal(t, after.Sub(before).AB, perSpine, "samples per spine against the interface counters")
	t.Logf("packets per spine %v", perSpine)

	s, err = f.SampleFlows(8)
	require.NoError(t, err)
	before = after
	sendFlows(t, src, dst.Addr, ports, n)
	waitSent(t, f, before, uint64(n*len(ports)))
	some, _ := s.Stop()
	var kept uint64
	for _, fs := range some {
		kept += fs.Packets
		assert.Equal(t, spineOf[fs.DestQP], fs.Spine, "flow %d keeps its spine", fs.DestQP)
	}
	// Binomial(1280, 1/8): mean 160, σ 11.8.
	assert.InDelta(t, 160, float64(kept), 60, "packets kept sampling one in 8")
	t.Logf("one in 8: %d of %d packets kept, %d of %d flows seen", kept, n*len(ports), len(some), len(ports))
}

// TestRecord: a Recorder's snapshots are in time order and their
// difference holds what crossed the fabric meanwhile.
func TestRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric; skipped under -short")
	}
	f := fabrictest.Up(t, fabric.Config{Spines: 2})
	r := f.Record(20 * time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	sendFlows(t, f.LeafHosts(0)[0], f.LeafHosts(1)[0].Addr, []uint16{50000, 50001, 50002}, 100)
	time.Sleep(50 * time.Millisecond)
	snaps, err := r.Stop()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(snaps), 4)
	for i := 1; i < len(snaps); i++ {
		assert.True(t, snaps[i].Time.After(snaps[i-1].Time), "snapshot %d after %d", i, i-1)
		assert.Positive(t, snaps[i].Read, "snapshot %d: how long its reading took", i)
		assert.Less(t, snaps[i].Read, 5*time.Second)
	}
	d, err := snaps[len(snaps)-1].Sub(snaps[0])
	require.NoError(t, err)
	pk, _ := d.LeafToSpine(0)
	assert.Equal(t, uint64(300), pk[0]+pk[1], "packets leaf 0 sent the spines")
}
