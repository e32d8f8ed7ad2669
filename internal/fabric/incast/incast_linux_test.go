package incast_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/internal/fabric/fabrictest"
	"github.com/goroce/goroce/internal/fabric/incast"
)

// dropGoal is issue 26's goal for an incast through one marked link: tbf
// drops with DCQCN on over drops with it off.
const dropGoal = 0.1

func summary(r *incast.Result) string {
	up, _ := r.Fabric.Link("l0-s0")
	ecn := "-"
	if up.A.ECN != nil {
		ecn = fmt.Sprintf("%d over threshold, %d CE", up.A.ECN.Over, up.A.ECN.Marks)
	}
	return fmt.Sprintf("%.3f Gb/s %.3f, CNPs sent %d received %d, rate cuts %d (lowest %v), retransmitted %d (Go-Back-N %d, NAK seq %d); l0→s0: %d tbf drops, marker %s; fabric: %d CE, %d drops",
		r.TotalGbps, r.Gbps, r.CNPsSent, r.CNPsReceived, r.RateCuts, r.MinRate, r.Retransmitted, r.GoBackN, r.SeqNAKs, up.A.Drops, ecn, r.Marks, r.Drops)
}

// TestIncastDCQCN is the demonstration of doc/fabric.md "Incast" (issue
// 26, part 3): three hosts of leaf 0 write into one host of leaf 1
// through a single spine whose links run at 500 Mbit/s, the leaf's
// uplink the congested, marked egress. With DCQCN on, the receiver's NP
// answers the CE marks with CNPs and the senders' RPs cut their rates, so
// the tbf behind the marker drops almost nothing; with it off, the
// senders' windows (8 × 64 KiB each) overflow the 512 KiB buffer and the
// tbf drops, the senders go back N. The runs alternate (on, off); the
// goal is drops(on)/drops(off) ≤ 0.1. A second pair runs only if the
// first misses it (a machine stalled during the on run, say), and both
// are logged.
func TestIncastDCQCN(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric and runs RDMA across it; skipped under -short")
	}
	f := fabrictest.Up(t, fabric.Config{HostsPerLeaf: 4, Spines: 1, Rate: 500 * fabric.Mbit})
	cfg := incast.Config{Fabric: f, Senders: f.LeafHosts(0)[:3], Receiver: f.LeafHosts(1)[0], Duration: 2 * time.Second}
	var on, off *incast.Result
	for attempt := 0; attempt < 2; attempt++ {
		for _, dcqcn := range []bool{true, false} {
			c := cfg
			c.DCQCN = dcqcn
			r, err := incast.Run(context.Background(), c)
			require.NoError(t, err)
			t.Logf("DCQCN %v: %s", dcqcn, summary(r))
			if dcqcn {
				on = r
			} else {
				off = r
			}
		}
		if off.Drops > 0 && float64(on.Drops) <= dropGoal*float64(off.Drops) {
			break
		}
	}
	t.Logf("tbf drops on/off: %d/%d = %.4f (goal ≤ %.1f); goodput on/off %.3f/%.3f Gb/s",
		on.Drops, off.Drops, float64(on.Drops)/float64(max(off.Drops, 1)), dropGoal, on.TotalGbps, off.TotalGbps)

	assert.Positive(t, on.CNPsSent, "the receiver's NP sent CNPs")
	assert.Equal(t, on.CNPsSent, on.CNPsReceived, "every CNP reached its sender")
	assert.Positive(t, on.RateCuts, "the senders' RPs cut their rates")
	assert.Positive(t, on.MinRate, "a cut rate was seen")
	assert.Positive(t, on.Marks, "the marker marked")
	assert.Zero(t, off.CNPsSent+off.CNPsReceived+off.RateCuts, "no DCQCN when off")
	assert.Greater(t, off.Drops, uint64(1000), "without DCQCN the incast overflows the buffer")
	assert.Positive(t, off.GoBackN, "and the senders go back N")
	assert.LessOrEqual(t, float64(on.Drops), dropGoal*float64(off.Drops), "tbf drops with DCQCN on / off")
	assert.Less(t, on.Retransmitted, off.Retransmitted, "retransmissions on < off")
}

// TestFlowOrder: a flow's packets cross the fabric in order (doc/fabric.md
// "Packet order"). One QP writes from a host of leaf 0 to a host of leaf
// 1 through 1 Gbit/s links with buffers deep enough that nothing is
// dropped, so a NAK sequence error, a Go-Back-N or a retransmission could
// only come from packets the fabric reordered; without RPS on the veths
// the fabric reordered several per second here (two CPUs forwarding one
// flow from their own backlogs). Every interface of the fabric has RPS on.
func TestFlowOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric and runs RDMA across it; skipped under -short")
	}
	f := fabrictest.Up(t, fabric.Config{Spines: 2, Rate: fabric.Gbit, Buffer: 4 << 20})
	for _, n := range f.Namespaces() {
		out, err := fabric.Command(context.Background(), n, "sh", "-c", "for d in /sys/class/net/*; do [ $(basename $d) = lo ] || cat $d/queues/rx-*/rps_cpus; done").CombinedOutput()
		require.NoError(t, err, "%s", out)
		for _, m := range strings.Fields(string(out)) {
			assert.NotRegexp(t, `^[0,]+$`, m, "RPS mask in %s", n)
		}
	}
	r, err := incast.Run(context.Background(), incast.Config{Fabric: f, Senders: f.LeafHosts(0), Receiver: f.LeafHosts(1)[0],
		Duration: 2 * time.Second})
	require.NoError(t, err)
	t.Logf("%s", summary(r))
	require.Zero(t, r.Drops, "the buffers hold the QP's window: nothing dropped")
	require.Positive(t, r.TotalGbps)
	assert.Zero(t, r.SeqNAKs, "NAK sequence errors")
	assert.Zero(t, r.GoBackN, "Go-Back-N retries")
	assert.Zero(t, r.Retransmitted, "retransmitted packets")
}
