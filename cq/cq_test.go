package cq_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
)

// TestStatusNumbers pins names, numbers and texts to enum ibv_wc_status
// (libibverbs/verbs.h) and ibv_wc_status_str (libibverbs/enum_strs.c).
func TestStatusNumbers(t *testing.T) {
	tests := []struct {
		s    cq.Status
		num  uint8
		name string
		text string
	}{
		{cq.StatusSuccess, 0, "IBV_WC_SUCCESS", "success"},
		{cq.StatusLocLenErr, 1, "IBV_WC_LOC_LEN_ERR", "local length error"},
		{cq.StatusLocQPOpErr, 2, "IBV_WC_LOC_QP_OP_ERR", "local QP operation error"},
		{cq.StatusLocEECOpErr, 3, "IBV_WC_LOC_EEC_OP_ERR", "local EE context operation error"},
		{cq.StatusLocProtErr, 4, "IBV_WC_LOC_PROT_ERR", "local protection error"},
		{cq.StatusWRFlushErr, 5, "IBV_WC_WR_FLUSH_ERR", "Work Request Flushed Error"},
		{cq.StatusMWBindErr, 6, "IBV_WC_MW_BIND_ERR", "memory management operation error"},
		{cq.StatusBadRespErr, 7, "IBV_WC_BAD_RESP_ERR", "bad response error"},
		{cq.StatusLocAccessErr, 8, "IBV_WC_LOC_ACCESS_ERR", "local access error"},
		{cq.StatusRemInvReqErr, 9, "IBV_WC_REM_INV_REQ_ERR", "remote invalid request error"},
		{cq.StatusRemAccessErr, 10, "IBV_WC_REM_ACCESS_ERR", "remote access error"},
		{cq.StatusRemOpErr, 11, "IBV_WC_REM_OP_ERR", "remote operation error"},
		{cq.StatusRetryExcErr, 12, "IBV_WC_RETRY_EXC_ERR", "transport retry counter exceeded"},
		{cq.StatusRNRRetryExcErr, 13, "IBV_WC_RNR_RETRY_EXC_ERR", "RNR retry counter exceeded"},
		{cq.StatusLocRDDViolErr, 14, "IBV_WC_LOC_RDD_VIOL_ERR", "local RDD violation error"},
		{cq.StatusRemInvRDReqErr, 15, "IBV_WC_REM_INV_RD_REQ_ERR", "remote invalid RD request"},
		{cq.StatusRemAbortErr, 16, "IBV_WC_REM_ABORT_ERR", "aborted error"},
		{cq.StatusInvEECNErr, 17, "IBV_WC_INV_EECN_ERR", "invalid EE context number"},
		{cq.StatusInvEECStateErr, 18, "IBV_WC_INV_EEC_STATE_ERR", "invalid EE context state"},
		{cq.StatusFatalErr, 19, "IBV_WC_FATAL_ERR", "fatal error"},
		{cq.StatusRespTimeoutErr, 20, "IBV_WC_RESP_TIMEOUT_ERR", "response timeout error"},
		{cq.StatusGeneralErr, 21, "IBV_WC_GENERAL_ERR", "general error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.num, uint8(tc.s))
			assert.Equal(t, tc.name, tc.s.String())
			assert.Equal(t, tc.text, tc.s.Description())
		})
	}
	assert.Equal(t, "Status(22)", cq.Status(22).String())
	assert.Equal(t, "unknown", cq.Status(22).Description())
}

func TestOpcodeNumbers(t *testing.T) {
	tests := []struct {
		o    cq.Opcode
		num  uint8
		name string
		recv bool
	}{
		{cq.OpSend, 0, "IBV_WC_SEND", false},
		{cq.OpRDMAWrite, 1, "IBV_WC_RDMA_WRITE", false},
		{cq.OpRDMARead, 2, "IBV_WC_RDMA_READ", false},
		{cq.OpCompSwap, 3, "IBV_WC_COMP_SWAP", false},
		{cq.OpFetchAdd, 4, "IBV_WC_FETCH_ADD", false},
		{cq.OpBindMW, 5, "IBV_WC_BIND_MW", false},
		{cq.OpLocalInv, 6, "IBV_WC_LOCAL_INV", false},
		{cq.OpRecv, 128, "IBV_WC_RECV", true},
		{cq.OpRecvRDMAWithImm, 129, "IBV_WC_RECV_RDMA_WITH_IMM", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.num, uint8(tc.o))
			assert.Equal(t, tc.name, tc.o.String())
			assert.Equal(t, tc.recv, tc.o.IsRecv())
		})
	}
	assert.Equal(t, "Opcode(7)", cq.Opcode(7).String())
}

func TestFlags(t *testing.T) {
	// enum ibv_wc_flags.
	assert.Equal(t, cq.Flags(1), cq.FlagGRH)
	assert.Equal(t, cq.Flags(2), cq.FlagWithImm)
	assert.Equal(t, cq.Flags(4), cq.FlagIPCsumOK)
	assert.Equal(t, cq.Flags(8), cq.FlagWithInv)
	tests := []struct {
		f    cq.Flags
		want string
	}{
		{0, "0"},
		{cq.FlagWithImm, "IBV_WC_WITH_IMM"},
		{cq.FlagGRH | cq.FlagWithInv, "IBV_WC_GRH|IBV_WC_WITH_INV"},
		{cq.FlagWithImm | 0x30, "IBV_WC_WITH_IMM|0x30"},
		{0x40, "0x40"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, tc.f.String())
	}
}

func TestStatusErr(t *testing.T) {
	require.NoError(t, cq.StatusSuccess.Err())
	ok := cq.Completion{Status: cq.StatusSuccess, WRID: 1}
	require.NoError(t, ok.Err())

	c := cq.Completion{WRID: 0x7, Status: cq.StatusRemAccessErr, QPN: 0x11}
	err := c.Err()
	require.Error(t, err)
	assert.Equal(t, "cq: remote access error (IBV_WC_REM_ACCESS_ERR) wr_id 0x7 qpn 0x11", err.Error())
	assert.ErrorIs(t, err, cq.StatusRemAccessErr.Err())
	assert.ErrorIs(t, fmt.Errorf("post: %w", err), cq.StatusRemAccessErr.Err())
	assert.NotErrorIs(t, err, cq.StatusRemInvReqErr.Err())
	assert.NotErrorIs(t, err, cq.StatusSuccess.Err())
	assert.NotErrorIs(t, err, errors.New("cq: remote access error (IBV_WC_REM_ACCESS_ERR)"))

	var se *cq.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, cq.StatusError{Status: cq.StatusRemAccessErr, WRID: 7, QPN: 0x11}, *se)

	assert.Equal(t, "cq: Work Request Flushed Error (IBV_WC_WR_FLUSH_ERR)", cq.StatusWRFlushErr.Err().Error())
	v := &cq.StatusError{Status: cq.StatusRemOpErr, VendorErr: 0x2a}
	assert.Equal(t, "cq: remote operation error (IBV_WC_REM_OP_ERR) vendor_err 0x2a", v.Error())
}

// A Status is itself an errors.Is target: no Err() call, no allocation.
func TestStatusIsTarget(t *testing.T) {
	c := cq.Completion{WRID: 0x7, Status: cq.StatusRemAccessErr, QPN: 0x11}
	err := fmt.Errorf("write: %w", c.Err())
	assert.ErrorIs(t, err, cq.StatusRemAccessErr)
	assert.NotErrorIs(t, err, cq.StatusRemInvReqErr)
	assert.NotErrorIs(t, err, cq.StatusSuccess)
	assert.ErrorIs(t, cq.StatusWRFlushErr, cq.StatusWRFlushErr.Err())
	assert.Equal(t, "IBV_WC_WR_FLUSH_ERR", cq.StatusWRFlushErr.Error())
	assert.Equal(t, "IBV_WC_WR_FLUSH_ERR", fmt.Sprint(cq.StatusWRFlushErr), "fmt prints the name")

	var match bool
	allocs := testing.AllocsPerRun(100, func() {
		match = errors.Is(err, cq.StatusRemAccessErr)
	})
	assert.True(t, match)
	assert.Zero(t, allocs, "errors.Is(err, cq.StatusRemAccessErr) allocates")
}

func TestCompletionSize(t *testing.T) {
	assert.Equal(t, uintptr(40), unsafe.Sizeof(cq.Completion{}), "MaxCapacity's 40 MiB assumes this")
}

func TestNew(t *testing.T) {
	for _, n := range []int{-1, 0, cq.MaxCapacity + 1} {
		c, err := cq.New(cq.Config{Capacity: n})
		assert.ErrorIs(t, err, cq.ErrInvalidArg, "capacity %d", n)
		assert.Nil(t, c)
	}
	for _, n := range []int{1, 7, cq.MaxCapacity} {
		c, err := cq.New(cq.Config{Capacity: n})
		require.NoError(t, err)
		assert.Equal(t, n, c.Cap())
		assert.Zero(t, c.Len())
	}
}

func newCQ(t testing.TB, n int) *cq.CQ {
	t.Helper()
	c, err := cq.New(cq.Config{Capacity: n})
	require.NoError(t, err)
	return c
}

// TestOverflow: a full queue refuses and counts, keeps what it holds in
// order, and accepts again once polled.
func TestOverflow(t *testing.T) {
	c := newCQ(t, 4)
	for i := range 4 {
		require.NoError(t, c.Push(cq.Completion{WRID: uint64(i)}))
	}
	require.ErrorIs(t, c.Push(cq.Completion{WRID: 99}), cq.ErrOverflow)
	require.ErrorIs(t, c.Push(cq.Completion{WRID: 100}), cq.ErrOverflow)
	assert.Equal(t, cq.Stats{Pushed: 4, Overflows: 2}, c.Stats())
	assert.Equal(t, 4, c.Len())

	dst := make([]cq.Completion, 3)
	require.Equal(t, 3, c.Poll(dst))
	assert.Equal(t, []uint64{0, 1, 2}, wrids(dst))
	for i := 4; i < 7; i++ { // wraps around the ring
		require.NoError(t, c.Push(cq.Completion{WRID: uint64(i)}))
	}
	require.ErrorIs(t, c.Push(cq.Completion{WRID: 99}), cq.ErrOverflow)
	dst = make([]cq.Completion, 10)
	n := c.Poll(dst)
	require.Equal(t, 4, n)
	assert.Equal(t, []uint64{3, 4, 5, 6}, wrids(dst[:n]), "no overflowed completion slipped in")
	assert.Equal(t, cq.Stats{Pushed: 7, Polled: 7, Overflows: 3}, c.Stats())
	assert.Zero(t, c.Poll(dst))
	assert.Zero(t, c.Poll(nil))
}

func wrids(cs []cq.Completion) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.WRID
	}
	return out
}

// TestFIFOAcrossWrap pushes and polls in uneven batches around the ring.
func TestFIFOAcrossWrap(t *testing.T) {
	c := newCQ(t, 5)
	next, want := uint64(0), uint64(0)
	dst := make([]cq.Completion, 5)
	for round := range 200 {
		for range round%5 + 1 {
			if c.Push(cq.Completion{WRID: next, ByteLen: uint32(next)}) == nil {
				next++
			}
		}
		n := c.Poll(dst[:round%3+1])
		for _, got := range dst[:n] {
			require.Equal(t, want, got.WRID)
			require.Equal(t, uint32(want), got.ByteLen)
			want++
		}
	}
	for n := c.Poll(dst); n > 0; n = c.Poll(dst) {
		for _, got := range dst[:n] {
			require.Equal(t, want, got.WRID)
			want++
		}
	}
	assert.Equal(t, next, want)
}

func TestWaitTimeout(t *testing.T) {
	c := newCQ(t, 4)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	n, err := c.Wait(ctx, make([]cq.Completion, 1))
	assert.Zero(t, n)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// Loose: this only shows that Wait blocked rather than spun out.
	assert.GreaterOrEqual(t, time.Since(start), 10*time.Millisecond)
}

func TestWaitCancel(t *testing.T) {
	c := newCQ(t, 4)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(10 * time.Millisecond)
		cancel()
	}()
	n, err := c.Wait(ctx, make([]cq.Completion, 1))
	assert.Zero(t, n)
	require.ErrorIs(t, err, context.Canceled)
}

func TestWaitPrefersData(t *testing.T) {
	c := newCQ(t, 4)
	require.NoError(t, c.Push(cq.Completion{WRID: 5}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dst := make([]cq.Completion, 4)
	n, err := c.Wait(ctx, dst)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.Equal(t, uint64(5), dst[0].WRID)

	_, err = c.Wait(ctx, nil)
	assert.ErrorIs(t, err, cq.ErrInvalidArg)
}

func TestWaitWakesOnPush(t *testing.T) {
	c := newCQ(t, 4)
	go func() {
		time.Sleep(10 * time.Millisecond)
		_ = c.Push(cq.Completion{WRID: 9, Status: cq.StatusWRFlushErr})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dst := make([]cq.Completion, 4)
	n, err := c.Wait(ctx, dst)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.Equal(t, cq.Completion{WRID: 9, Status: cq.StatusWRFlushErr}, dst[0])
}

func TestClose(t *testing.T) {
	c := newCQ(t, 4)
	require.NoError(t, c.Push(cq.Completion{WRID: 1}))
	errs := make(chan error, 2)
	for range 2 { // two waiters; one gets the completion, both end
		go func() {
			dst := make([]cq.Completion, 1)
			for {
				_, err := c.Wait(context.Background(), dst)
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	for range 2 {
		select {
		case err := <-errs:
			assert.ErrorIs(t, err, cq.ErrClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("Wait did not return after Close")
		}
	}
	assert.ErrorIs(t, c.Push(cq.Completion{}), cq.ErrClosed)
	assert.Equal(t, uint64(1), c.Stats().Polled)

	// Completions queued before Close are still delivered.
	c = newCQ(t, 4)
	require.NoError(t, c.Push(cq.Completion{WRID: 2}))
	require.NoError(t, c.Close())
	dst := make([]cq.Completion, 4)
	n, err := c.Wait(context.Background(), dst)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = c.Wait(context.Background(), dst)
	assert.ErrorIs(t, err, cq.ErrClosed)
}

// TestNotifyCoalesces: many pushes leave one signal; draining and pushing
// again signals again.
func TestNotifyCoalesces(t *testing.T) {
	c := newCQ(t, 8)
	select {
	case <-c.Notify():
		t.Fatal("signal before any push")
	default:
	}
	for i := range 3 {
		require.NoError(t, c.Push(cq.Completion{WRID: uint64(i)}))
	}
	<-c.Notify()
	select {
	case <-c.Notify():
		t.Fatal("signals did not coalesce")
	default:
	}
	dst := make([]cq.Completion, 2)
	total := 0
	for n := c.Poll(dst); ; n = c.Poll(dst) {
		total += n
		if n < len(dst) {
			break
		}
	}
	assert.Equal(t, 3, total)
	require.NoError(t, c.Push(cq.Completion{WRID: 3}))
	select {
	case <-c.Notify():
	default:
		t.Fatal("no signal after drain and push")
	}
}

func TestZeroAllocs(t *testing.T) {
	c := newCQ(t, 64)
	dst := make([]cq.Completion, 16)
	comp := cq.Completion{WRID: 1, Opcode: cq.OpRDMAWrite, ByteLen: 4096, QPN: 0x11}
	ctx := context.Background()
	tests := []struct {
		name string
		f    func()
	}{
		{"Push+Poll", func() {
			_ = c.Push(comp)
			c.Poll(dst)
		}},
		{"Poll empty", func() { c.Poll(dst) }},
		{"Push+Wait", func() {
			_ = c.Push(comp)
			_, _ = c.Wait(ctx, dst)
		}},
		{"Push overflow", func() {
			for c.Push(comp) == nil {
			}
			c.Poll(dst)
			c.Poll(dst)
			c.Poll(dst)
			c.Poll(dst)
		}},
		{"Completion.Err success", func() { _ = comp.Err() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Zero(t, testing.AllocsPerRun(1000, tc.f))
		})
	}
}

// TestConcurrentConsumers: one producer, several consumers, small polls and
// a small ring. Every completion arrives exactly once, each consumer sees
// increasing WRIDs, and nobody hangs (the Wait hand-off has no lost wakeup).
func TestConcurrentConsumers(t *testing.T) {
	const total = 100_000
	for _, tc := range []struct {
		name      string
		consumers int
		batch     int
		capacity  int
	}{
		{"1 consumer batch 16", 1, 16, 64},
		{"4 consumers batch 1", 4, 1, 8},
		{"4 consumers batch 3", 4, 3, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCQ(t, tc.capacity)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var got atomic.Int64
			seen := make([]atomic.Bool, total)
			var wg sync.WaitGroup
			for range tc.consumers {
				wg.Go(func() {
					dst := make([]cq.Completion, tc.batch)
					last := int64(-1)
					for {
						n, err := c.Wait(ctx, dst)
						if err != nil {
							if !errors.Is(err, cq.ErrClosed) {
								t.Errorf("Wait: %v", err)
							}
							return
						}
						for _, cp := range dst[:n] {
							id := int64(cp.WRID)
							if id <= last {
								t.Errorf("WRID %d after %d", id, last)
							}
							last = id
							if seen[id].Swap(true) {
								t.Errorf("WRID %d delivered twice", id)
							}
						}
						if got.Add(int64(n)) == total {
							_ = c.Close()
						}
					}
				})
			}
			overflows := 0
			for i := 0; i < total; {
				switch err := c.Push(cq.Completion{WRID: uint64(i)}); {
				case err == nil:
					i++
				case errors.Is(err, cq.ErrOverflow):
					overflows++
					runtime.Gosched()
				default:
					t.Fatal(err)
				}
			}
			wg.Wait()
			require.NoError(t, ctx.Err(), "consumers hung")
			assert.Equal(t, int64(total), got.Load())
			st := c.Stats()
			assert.Equal(t, uint64(total), st.Pushed)
			assert.Equal(t, uint64(total), st.Polled)
			assert.Equal(t, uint64(overflows), st.Overflows)
		})
	}
}

// TestConcurrentProducers: QPs sharing a CQ push from their own goroutines.
func TestConcurrentProducers(t *testing.T) {
	const producers, each = 4, 10_000
	c := newCQ(t, producers*each)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				if err := c.Push(cq.Completion{QPN: uint32(p), WRID: uint64(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	dst := make([]cq.Completion, producers*each)
	require.Equal(t, producers*each, c.Poll(dst))
	next := make([]uint64, producers)
	for _, cp := range dst {
		require.Equal(t, next[cp.QPN], cp.WRID, "per-producer order kept")
		next[cp.QPN]++
	}
}

// countHook is a cq.Hook that counts.
type countHook struct{ pushed, waiting atomic.Int32 }

func (h *countHook) Pushed()           { h.pushed.Add(1) }
func (h *countHook) Waiting(delta int) { h.waiting.Add(int32(delta)) }

var _ cq.Hook = (*countHook)(nil)

// TestHook: a CQ's hook counts its pushes (not those refused) and the
// goroutines blocked in its Wait, on every CQ that shares it, and each way
// out of the wait — a push, Close, ctx — takes its waiter off the count; a
// Wait that finds a completion queued is never counted.
func TestHook(t *testing.T) {
	var h countHook
	a, err := cq.New(cq.Config{Capacity: 4, Hook: &h})
	require.NoError(t, err)
	b, err := cq.New(cq.Config{Capacity: 4, Hook: &h})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range []*cq.CQ{a, a, b} {
		wg.Go(func() { c.Wait(ctx, make([]cq.Completion, 1)) })
	}
	waitFor := func(n int32) {
		t.Helper()
		require.Eventually(t, func() bool { return h.waiting.Load() == n }, 10*time.Second, time.Millisecond)
	}
	waitFor(3)
	require.NoError(t, a.Push(cq.Completion{WRID: 1})) // wakes one of a's
	waitFor(2)
	require.NoError(t, b.Close())
	waitFor(1)
	cancel()
	wg.Wait()
	assert.Zero(t, h.waiting.Load())
	assert.Equal(t, int32(1), h.pushed.Load())

	require.NoError(t, a.Push(cq.Completion{WRID: 2}))
	n, err := a.Wait(context.Background(), make([]cq.Completion, 1))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.Zero(t, h.waiting.Load())
	assert.Equal(t, int32(2), h.pushed.Load())

	require.ErrorIs(t, b.Push(cq.Completion{}), cq.ErrClosed)
	for range 4 {
		require.NoError(t, a.Push(cq.Completion{}))
	}
	require.ErrorIs(t, a.Push(cq.Completion{}), cq.ErrOverflow)
	assert.Equal(t, int32(6), h.pushed.Load(), "refused pushes are not counted")
}
