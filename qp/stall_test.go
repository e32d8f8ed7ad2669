package qp_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// TestStallRetryBudget pins what a stopped peer costs the requester under
// the impairments of roce's TestRealSocketReliability (1% loss, 1%
// reorder, 0.5% duplication each way) with rdma-core's test attributes,
// timeout 14 (67.1 ms) and retry_cnt 7. The responder is stopped mid-transfer
// like a descheduled process: it neither sends nor runs timers, and what
// arrives waits until it resumes.
//
// retry_cnt counts consecutive retries without progress (rxe_comp.c:
// COMPST_ERROR_RETRY spends one per timeout and per NAK PSN sequence error,
// started_retry lets only a timeout start a second one, and
// reset_retry_counters restores it on every response that makes progress).
// While the peer is stopped only timeouts happen, one per timeout from the
// last progress (each retransmission re-arms the timer), so the requester
// survives a stop as long as the stop and the time since the last progress
// before it stay under 7 timeouts (the first retry may be a NAK's), and
// fails the oldest WR with RETRY_EXC_ERR 7 to 8 timeouts after the last
// progress of a longer one — as rxe would.
func TestStallRetryBudget(t *testing.T) {
	p := defaultParams()
	p.mtu, p.timeout, p.retryCnt = qp.MTU4096, 14, 7
	to, ok := qp.AckTimeout(p.timeout)
	require.True(t, ok)
	imp := testutil.Impairment{Loss: 0.01, Dup: 0.005,
		Reorder: testutil.Reorder{Rate: 0.01, MinSlots: 1, MaxSlots: 8, HoldMax: 200 * time.Microsecond}}
	const start = 20 * time.Millisecond
	for _, o := range []op{opWrite, opRead} {
		for _, tc := range []struct {
			stop time.Duration
			ok   bool
		}{
			{5 * to, true},
			{9 * to, false},
		} {
			t.Run(fmt.Sprintf("%v/stop%v", o, tc.stop.Round(time.Millisecond)), func(t *testing.T) {
				pr := newPair(t, p, imp, imp)
				pr.b.pause = testutil.Window{Start: start, End: start + tc.stop}
				wcs, at, lastHeard, retries := stallTransfer(t, pr, o, 64<<20, 1<<20, 16)
				a := pr.a.qp.Counters().Snapshot()
				t.Logf("%v: last heard from B at %v, then %d retries, last CQE at %v; A %+v", pr, lastHeard, retries, at, a)
				if tc.ok {
					for _, c := range wcs {
						require.Equal(t, cq.StatusSuccess, c.Status, "wr %d", c.WRID)
					}
					require.Equal(t, 64, len(wcs))
					assert.Greater(t, at, start+tc.stop, "the stop fell inside the transfer")
					assert.Zero(t, a[qp.CounterRetryExceededErr])
					return
				}
				require.NotEmpty(t, wcs)
				var first cq.Completion
				for _, c := range wcs {
					if c.Status != cq.StatusSuccess {
						first = c
						break
					}
				}
				require.Equal(t, cq.StatusRetryExcErr, first.Status)
				require.Equal(t, qp.StateErr, pr.a.qp.State())
				require.Equal(t, uint64(1), a[qp.CounterRetryExceededErr])
				// The error comes 7 or 8 timeouts after the last progress
				// (the first retry may have been a NAK's), which was at most
				// the last packet heard before the stop; the stop spent the
				// retry budget, no more.
				gap := at - lastHeard
				assert.LessOrEqual(t, gap, 8*to+time.Millisecond, "RETRY_EXC_ERR %v after B went silent", gap)
				assert.GreaterOrEqual(t, gap, 5*to, "RETRY_EXC_ERR %v after B went silent", gap)
				assert.LessOrEqual(t, lastHeard, start+time.Millisecond)
				assert.LessOrEqual(t, retries, uint64(p.retryCnt))
			})
		}
	}
}

// stallTransfer moves total bytes from A to B (WRITE) or B to A (READ) in
// msg-byte WRs, depth at a time, until every WR completed or A is in ERR.
// It returns the completions, the virtual time of the last one and of the
// last packet A received (relative to the epoch), and the retries A started
// after that packet.
func stallTransfer(t *testing.T, pr *pair, o op, total, msg, depth int) (wcs []cq.Completion, at, lastHeard time.Duration, retries uint64) {
	t.Helper()
	a, b := pr.a, pr.b
	src := testutil.Pattern(pr.seed, total)
	dst := make([]byte, total)
	acc := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead
	var srcMR, dstMR *mr.Region
	if o == opWrite {
		srcMR, dstMR = a.reg(src, acc), b.reg(dst, acc)
	} else {
		srcMR, dstMR = b.reg(src, acc), a.reg(dst, acc)
	}
	n := total / msg
	posted := 0
	post := func() {
		for posted < n && posted-len(wcs) < depth {
			off := uint64(posted * msg)
			wr := qp.SendWR{WRID: uint64(posted), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL:        []qp.SGE{{Addr: srcMR.IOVA() + off, Length: uint32(msg), LKey: srcMR.LKey()}},
				RemoteAddr: dstMR.IOVA() + off, RKey: dstMR.RKey()}
			if o == opRead {
				wr.Opcode = qp.WRRDMARead
				wr.SGL = []qp.SGE{{Addr: dstMR.IOVA() + off, Length: uint32(msg), LKey: dstMR.LKey()}}
				wr.RemoteAddr, wr.RKey = srcMR.IOVA()+off, srcMR.RKey()
			}
			require.NoError(t, a.qp.PostSend(&wr))
			posted++
		}
	}
	post()
	// A hears from B for the last time before the stop at lastHeard; the
	// retries it spent by then are retriesThen.
	var retriesThen uint64
	trace := a.trace
	a.trace = func(now time.Time, dir string, pkt []byte) {
		if dir == ">"+a.name {
			lastHeard = now.Sub(testutil.Epoch())
			retriesThen = a.qp.Counters().Load(qp.CounterCompleterRetryErr)
		}
		if trace != nil {
			trace(now, dir, pkt)
		}
	}
	err := pr.run(func() bool {
		now := pr.clock.Now().Sub(testutil.Epoch())
		for _, c := range a.poll() {
			wcs = append(wcs, c)
			at = now
		}
		if a.qp.State() == qp.StateErr {
			return len(wcs) == posted
		}
		post()
		return len(wcs) == n
	}, time.Minute)
	require.NoError(t, err, "%v a=%+v b=%+v", pr, a.qp.Counters().Snapshot(), b.qp.Counters().Snapshot())
	if len(wcs) == n && wcs[n-1].Status == cq.StatusSuccess {
		testutil.RequireSameBytes(t, src, dst)
	}
	return wcs, at, lastHeard, a.qp.Counters().Load(qp.CounterCompleterRetryErr) - retriesThen
}
