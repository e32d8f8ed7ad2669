package roce_test

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCopyPayloads checks the knob: the same transfer, byte-exact, with
// no packet sent from its region.
func TestCopyPayloads(t *testing.T) {
	p := newUDPPairConfig(t, 4<<20, roce.Config{CopyPayloads: true})
	defer p.close()
	testutil.FillPattern(p.bufA, 5)
	p.write(t, 4<<20, 64<<10, 16)
	require.Zero(t, p.a.Stats().TxGathered.Load())
	got := make([]byte, len(p.bufB))
	require.NoError(t, p.mb.ReadAt(got, p.mb.IOVA()))
	testutil.RequireSameBytes(t, p.bufA, got)
}

// BenchmarkWriteGathered compares, in one run, WRITE over link/udp with
// payloads sent from the region and copied into packet buffers first
// (Config.CopyPayloads): two device pairs take turns moving 16 MiB (64 KiB
// messages, 16 outstanding, from and into 64 MiB regions), so that load on
// the machine hits both alike. It reports the median over the turns of
// each one's Gb/s and of the ratio of their times (gathered/copied: below
// 1, gathering is faster); a median, so that one turn that met a stall
// (a retransmission timeout on a loaded machine) does not decide.
func BenchmarkWriteGathered(b *testing.B) {
	const size, chunk = 64 << 20, 16 << 20
	g := newUDPPairConfig(b, size, roce.Config{})
	defer g.close()
	c := newUDPPairConfig(b, size, roce.Config{CopyPayloads: true})
	defer c.close()
	testutil.FillPattern(g.bufA, 1)
	testutil.FillPattern(c.bufA, 1)
	g.write(b, size, 64<<10, 16) // warm up
	c.write(b, size, 64<<10, 16)
	var gbpsG, gbpsC, ratio []float64
	b.SetBytes(2 * chunk)
	for i := 0; b.Loop(); i++ {
		var tg, tc time.Duration
		if i%2 == 0 { // alternate which goes first
			tg = g.write(b, chunk, 64<<10, 16)
			tc = c.write(b, chunk, 64<<10, 16)
		} else {
			tc = c.write(b, chunk, 64<<10, 16)
			tg = g.write(b, chunk, 64<<10, 16)
		}
		gbpsG = append(gbpsG, chunk*8/tg.Seconds()/1e9)
		gbpsC = append(gbpsC, chunk*8/tc.Seconds()/1e9)
		ratio = append(ratio, tg.Seconds()/tc.Seconds())
	}
	median := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(median(gbpsG), "gathered-Gb/s")
	b.ReportMetric(median(gbpsC), "copied-Gb/s")
	b.ReportMetric(median(ratio), "gathered/copied")
	require.Positive(b, g.a.Stats().TxGathered.Load())
	require.Zero(b, c.a.Stats().TxGathered.Load())
}

// TestGatheredDeregisterWaits deregisters the source region while WRITEs
// from it are in flight over link/udp, whose packets read their payload
// from the region as they are sent: DeregisterMR must return (the pins
// last one batch), later packets must find the region gone (the WR fails
// LOC_PROT_ERR or had completed), and what did arrive must be the source's
// bytes, never those the application writes into its buffer once
// DeregisterMR has returned.
func TestGatheredDeregisterWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	const size = 16 << 20
	p := newUDPPair(t, size)
	defer p.close()
	for i := range p.bufA {
		p.bufA[i] = byte(i*7 + 1)
	}
	wr := roce.SendWR{WRID: 1, Opcode: roce.WRRDMAWrite, Flags: roce.SendSignaled,
		SGL:        []roce.SGE{p.ma.SGE(0, size)},
		RemoteAddr: p.mb.IOVA(), RKey: p.mb.RKey()}
	require.NoError(t, p.qa.PostSend(&wr))
	for p.a.Stats().TxGathered.Load() < 64 {
		runtime.Gosched()
	}
	require.NoError(t, p.a.DeregisterMR(p.ma))
	for i := range p.bufA {
		p.bufA[i] = 0xEE // the buffer is the application's again: no packet may read it now
	}
	wcs := make([]cq.Completion, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := p.cqa.Wait(ctx, wcs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	t.Logf("WRITE completed %v after %d packets gathered", wcs[0].Status, p.a.Stats().TxGathered.Load())
	require.Contains(t, []cq.Status{cq.StatusSuccess, cq.StatusLocProtErr}, wcs[0].Status)
	got := make([]byte, size)
	require.NoError(t, p.mb.ReadAt(got, p.mb.IOVA()))
	for i, c := range got {
		if c != 0 && c != byte(i*7+1) {
			t.Fatalf("byte %d is %#x: not the source's", i, c)
		}
	}
}

// TestLoopbackGSONoIDRecovery: between two Linux UDP links the link's guess
// of each segment's IPv4 ID (its place in the GSO super-packet, which
// loopback delivers whole) is right, so no ICRC needs rocev2.RecoverIPv4ID.
func TestLoopbackGSONoIDRecovery(t *testing.T) {
	p := newUDPPair(t, 1<<20)
	defer p.close()
	p.write(t, 16<<20, 64<<10, 16)
	for _, st := range []*roce.Stats{p.a.Stats(), p.b.Stats()} {
		require.Zero(t, st.BadICRC.Load())
		require.Zero(t, st.ICRCIDFixups.Load())
	}
	require.Positive(t, p.b.Stats().RxPackets.Load())
}

// TestGatheredSendWhileRegionWritten: QP 1 of device A sends WRITEs from
// the first half of A's region without copying while B's WRITEs on QP 2,
// which sits in A's other shard, land in that same half. The sender holds
// the region's ReadLock from the ICRC to the end of the send, so each
// packet's bytes are those its ICRC covers: B counts no bad ICRC, and
// every WRITE both ways succeeds. (The race detector's view of the same
// bug, the ICRC's read in one goroutine's sendBatch against the receive
// goroutine's WriteAt, shows in TestStressVerbsUDP under -race.)
func TestGatheredSendWhileRegionWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	const size, msg, rounds, depth = 1 << 20, 16 << 10, 256, 8
	p := newUDPPairConfig(t, size, roce.Config{Shards: 2})
	defer p.close()
	// A second QP pair, its A end in the other shard than p.qa.
	var qa2, qb2 *roce.QP
	for qa2 == nil {
		q, err := p.a.CreateQP(roce.QPConfig{PD: p.ma.PD(), SendCQ: p.cqa, RecvCQ: p.cqa})
		require.NoError(t, err)
		if q.QPN()%2 != p.qa.QPN()%2 {
			qa2 = q
		}
	}
	qb2, err := p.b.CreateQP(roce.QPConfig{PD: p.mb.PD(), SendCQ: p.cqb, RecvCQ: p.cqb})
	require.NoError(t, err)
	opts := roce.ConnectOptions{MTU: qp.MTU4096}
	require.NoError(t, qa2.Connect(qb2.Info(), opts))
	require.NoError(t, qb2.Connect(qa2.Info(), opts))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	half := size / 2
	// Each round posts depth WRITEs on both QPs, then waits for them.
	post := func(q *roce.QP, src, dst *mr.Region, from, i int) error {
		off := (i * msg) % half
		return q.PostSend(&roce.SendWR{WRID: uint64(i), Opcode: roce.WRRDMAWrite, Flags: roce.SendSignaled,
			SGL: []roce.SGE{src.SGE(from+off, msg)}, RemoteAddr: dst.IOVA() + uint64(off), RKey: dst.RKey()})
	}
	wait := func(c *cq.CQ, n int) error {
		wcs := make([]cq.Completion, 2*depth)
		for n > 0 {
			k, err := c.Wait(ctx, wcs)
			if err != nil {
				return err
			}
			for _, wc := range wcs[:k] {
				if err := wc.Err(); err != nil {
					return err
				}
			}
			n -= k
		}
		return nil
	}
	for i := 0; i < rounds; i += depth {
		for j := i; j < i+depth; j++ {
			require.NoError(t, post(p.qa, p.ma, p.mb, 0, j))   // A → B from A's first half
			require.NoError(t, post(qb2, p.mb, p.ma, half, j)) // B → A's first half
		}
		require.NoError(t, wait(p.cqa, depth))
		require.NoError(t, wait(p.cqb, depth))
	}
	require.Positive(t, p.a.Stats().TxGathered.Load(), "A sent from its region")
	assert.Zero(t, p.b.Stats().BadICRC.Load(), "B's bad ICRCs")
	assert.Zero(t, p.a.Stats().BadICRC.Load(), "A's bad ICRCs")
}
