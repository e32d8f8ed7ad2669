package roce_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// writeLists moves n msg-byte WRITEs A→B, depth outstanding, posted in
// lists of up to list WRs with PostSendBatch (list 0: single PostSends).
// The WRs and their SGLs are built once, so the loop itself does not
// allocate.
func (p *udpPair) writeLists(t testing.TB, n, msg, depth, list int, wrs []qp.SendWR, wcs []cq.Completion) {
	t.Helper()
	round := len(p.bufA) / msg
	posted, done := 0, 0
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for done < n {
		for posted < n && posted-done < depth {
			k := min(max(list, 1), n-posted, depth-(posted-done))
			for j := range k {
				off := uint64((posted+j)%round) * uint64(msg)
				w := &wrs[j]
				w.WRID = uint64(posted + j)
				w.SGL[0] = qp.SGE{Addr: p.ma.IOVA() + off, Length: uint32(msg), LKey: p.ma.LKey()}
				w.RemoteAddr = p.mb.IOVA() + off
			}
			if list == 0 {
				require.NoError(t, p.qa.PostSend(&wrs[0]))
			} else {
				if m, err := p.qa.PostSendBatch(wrs[:k]); err != nil || m != k {
					t.Fatalf("PostSendBatch posted %d of %d: %v", m, k, err)
				}
			}
			posted += k
		}
		// One context for the whole run and checks without boxing: the
		// loop itself allocates nothing per WR.
		k, err := p.cqa.Wait(ctx, wcs)
		if err != nil {
			t.Fatalf("posted %d done %d: %v %+v", posted, done, err, p.qa.Counters().Snapshot())
		}
		for _, wc := range wcs[:k] {
			if wc.Status != cq.StatusSuccess {
				t.Fatalf("WR %d: %v", wc.WRID, wc.Status)
			}
			done++
		}
	}
}

// TestMessageRatePath runs small WRITEs the way a message-rate test does
// (128 outstanding; lists of 32, and single posts left to the ACK clock)
// over loopback UDP: the bytes arrive, every ICRC verifies with the IPv4 ID
// the link planned for its place in a GSO run that spans WRs (none
// recovered), and the path allocates nothing per packet.
func TestMessageRatePath(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	const msg, depth = 64, 128
	for _, list := range []int{32, 0} {
		p := newUDPPair(t, 1<<20)
		testutil.FillPattern(p.bufA, 5)
		wrs := make([]qp.SendWR, max(list, 1))
		for i := range wrs {
			wrs[i] = qp.SendWR{Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: make([]qp.SGE, 1), RKey: p.mb.RKey()}
		}
		wcs := make([]cq.Completion, 256)
		n := len(p.bufA) / msg
		p.writeLists(t, n, msg, depth, list, wrs, wcs)
		// B's memory through its region's lock: -race cannot see the kernel
		// socket's happens-before between the responder's write and this read.
		require.True(t, bytes.Equal(p.bufA, readMR(t, p.mb)), "list %d: data", list)
		allocs := func(n int) float64 {
			return testing.AllocsPerRun(3, func() { p.writeLists(t, n, msg, depth, list, wrs, wcs) })
		}
		small, large := allocs(256), allocs(8192)
		t.Logf("list %d: allocations per run: 256 WRITEs %.0f, 8192 WRITEs %.0f", list, small, large)
		require.LessOrEqual(t, large, small+16, "list %d: allocations must not grow with the packet count", list)
		for _, st := range []*roce.Stats{p.a.Stats(), p.b.Stats()} {
			require.Zero(t, st.BadICRC.Load(), "list %d", list)
			require.Zero(t, st.ICRCIDFixups.Load(), "list %d", list)
		}
		p.close()
	}
}
