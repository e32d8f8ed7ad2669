package roce_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// writePair connects two devices over a chanLink and gives b a 64-byte
// region a may WRITE.
func writePair(t *testing.T) (a, b *side, src, dst *mr.Region) {
	t.Helper()
	la, lb := newChanPair("127.0.0.1:4791", "127.0.0.2:4791")
	a, b = openSide(t, la), openSide(t, lb)
	t.Cleanup(func() { a.dev.Close(); b.dev.Close() })
	require.NoError(t, a.qp.Connect(b.qp.Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
	require.NoError(t, b.qp.Connect(a.qp.Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
	var err error
	src, err = a.dev.RegisterMR(a.pd, make([]byte, 64), mr.LocalWrite)
	require.NoError(t, err)
	dst, err = b.dev.RegisterMR(b.pd, make([]byte, 64), mr.LocalWrite|mr.RemoteWrite)
	require.NoError(t, err)
	return a, b, src, dst
}

// writeByte WRITEs v into the last byte of dst, from the last of src.
func writeByte(t *testing.T, a *side, src, dst *mr.Region, v byte) {
	t.Helper()
	require.NoError(t, src.WriteAt([]byte{v}, src.IOVA()+63))
	require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: uint64(v), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{src.SGE(0, 64)}, RemoteAddr: dst.IOVA(), RKey: dst.RKey()}))
	require.Equal(t, cq.StatusSuccess, waitOne(t, a.scq).Status)
}

// pollLastByte is perftest's write_lat wait, parked: look, and sleep in
// WaitRx until the device processed something new.
func pollLastByte(ctx context.Context, d *roce.Device, m *mr.Region, v byte) error {
	var b [1]byte
	for {
		seq := d.RxSeq()
		if err := m.ReadAt(b[:], m.IOVA()+63); err != nil {
			return err
		}
		if b[0] == v {
			return nil
		}
		if err := d.WaitRx(ctx, seq); err != nil {
			return err
		}
	}
}

// TestWaitRxSeesWrite: waiters parked on a region's last byte (several at
// once) all wake when the peer's WRITE lands, and see its byte.
func TestWaitRxSeesWrite(t *testing.T) {
	a, b, src, dst := writePair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for v := byte(1); v <= 3; v++ {
		const waiters = 3
		var wg sync.WaitGroup
		errs := make(chan error, waiters)
		for range waiters {
			wg.Go(func() { errs <- pollLastByte(ctx, b.dev, dst, v) })
		}
		time.Sleep(5 * time.Millisecond) // let them park
		select {
		case err := <-errs:
			t.Fatalf("a waiter returned before the WRITE: %v", err)
		default:
		}
		writeByte(t, a, src, dst, v)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
	assert.Equal(t, byte(3), readMR(t, dst)[63])
}

// TestWaitRxEnds: WaitRx returns at once for a seq already passed, and
// otherwise ends with ctx's error or, after Close, ErrClosed.
func TestWaitRxEnds(t *testing.T) {
	a, b, src, dst := writePair(t)
	seq := b.dev.RxSeq()
	writeByte(t, a, src, dst, 7)
	// A's completion may come before B counts the batch: B sends its ACK
	// when it leaves the shard lock, and counts the batch after that.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	require.NoError(t, b.dev.WaitRx(wctx, seq))
	require.NotEqual(t, seq, b.dev.RxSeq(), "the WRITE's batch counted")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, b.dev.WaitRx(ctx, b.dev.RxSeq()), context.DeadlineExceeded)

	done := make(chan error, 1)
	go func() { done <- b.dev.WaitRx(context.Background(), b.dev.RxSeq()) }()
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, b.dev.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, roce.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("WaitRx still blocked after Close")
	}
}

// TestWaitRxZeroAllocs: the look-and-wait of a poller allocates nothing.
func TestWaitRxZeroAllocs(t *testing.T) {
	a, b, src, dst := writePair(t)
	seq := b.dev.RxSeq()
	writeByte(t, a, src, dst, 1)
	ctx := context.Background()
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = b.dev.RxSeq()
		_ = b.dev.WaitRx(ctx, seq)
	}))
}

// onBatchPingPong runs n WRITEs from a to b, each posted by a's OnBatch
// function when the previous one's completion shows up on a's send CQ
// (run to completion: the test's goroutine only starts and waits), and
// returns how often the function ran.
func onBatchPingPong(t *testing.T, a *side, src, dst *mr.Region, n int) int {
	t.Helper()
	var (
		mu    sync.Mutex
		calls int
		sent  = 1
		done  = make(chan error, 1)
		wcs   = make([]cq.Completion, 8)
	)
	post := func(v int) error {
		if err := src.WriteAt([]byte{byte(v)}, src.IOVA()+63); err != nil {
			return err
		}
		return a.qp.PostSend(&qp.SendWR{WRID: uint64(v), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{src.SGE(0, 64)}, RemoteAddr: dst.IOVA(), RKey: dst.RKey()})
	}
	a.dev.OnBatch(func() {
		mu.Lock()
		defer mu.Unlock()
		calls++
		for k := a.scq.Poll(wcs); k > 0; k = a.scq.Poll(wcs) {
			for _, wc := range wcs[:k] {
				if wc.Status != cq.StatusSuccess {
					done <- fmt.Errorf("WRITE %d: %v", wc.WRID, wc.Status)
					return
				}
				if sent == n {
					done <- nil
					return
				}
				sent++
				// A verb from the receive goroutine: no device lock is held.
				if err := post(sent); err != nil {
					done <- err
					return
				}
			}
		}
	})
	mu.Lock()
	require.NoError(t, post(1))
	mu.Unlock()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("stuck after %d WRITEs", sent)
	}
	a.dev.OnBatch(nil)
	mu.Lock()
	defer mu.Unlock()
	return calls
}

// TestOnBatchRunToCompletion: a WRITE ping-pong driven entirely from the
// requester device's OnBatch function completes; every WRITE landed (the
// last byte is the last WRITE's); once cleared, the function is not
// called again while the device goes on receiving.
func TestOnBatchRunToCompletion(t *testing.T) {
	a, _, src, dst := writePair(t)
	const n = 200
	calls := onBatchPingPong(t, a, src, dst, n)
	assert.GreaterOrEqual(t, calls, n, "one call at least per ACK")
	assert.Equal(t, byte(n), readMR(t, dst)[63])
	var after atomic.Int32
	a.dev.OnBatch(func() { after.Add(1) })
	a.dev.OnBatch(nil)
	writeByte(t, a, src, dst, 7) // completes through Wait: the device received its ACK
	assert.Equal(t, byte(7), readMR(t, dst)[63])
	assert.Zero(t, after.Load(), "a cleared function is not called")
}

// TestRxYieldOnlyForWaiters: the receive goroutine yields its processor
// after a batch only when somebody may wait for what it did: a responder
// whose peer's WRITEs push no completion, with no goroutine waiting for
// its work, never yields (its yield only moved the next turn of a
// ping-pong to the other CPU); the requester, whose ACKs push completions,
// does; so does a responder whose batch sent a READ response of many
// packets; and so does the responder while a goroutine is blocked in a
// Wait on one of its CQs or in its WaitRx, or in those of another device
// that shares its Config.Waiters — not of a device that does not.
func TestRxYieldOnlyForWaiters(t *testing.T) {
	shared := new(roce.Waiters)
	la, lb := newChanPair("127.0.0.1:4791", "127.0.0.2:4791")
	a, b := openSideConfig(t, roce.Config{Link: la}), openSideConfig(t, roce.Config{Link: lb, Waiters: shared})
	t.Cleanup(func() { a.dev.Close(); b.dev.Close() })
	require.NoError(t, a.qp.Connect(b.qp.Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
	require.NoError(t, b.qp.Connect(a.qp.Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
	src, err := a.dev.RegisterMR(a.pd, make([]byte, 64), mr.LocalWrite)
	require.NoError(t, err)
	dst, err := b.dev.RegisterMR(b.pd, make([]byte, 64), mr.LocalWrite|mr.RemoteWrite)
	require.NoError(t, err)
	// write WRITEs v and polls for its completion without waiting in the
	// CQ, as a run-to-completion or busy-polling program does.
	post := func(wr *qp.SendWR) {
		t.Helper()
		require.NoError(t, a.qp.PostSend(wr))
		var wc [1]cq.Completion
		deadline := time.Now().Add(10 * time.Second)
		for a.scq.Poll(wc[:]) == 0 {
			require.True(t, time.Now().Before(deadline), "no completion for WR %d", wr.WRID)
			time.Sleep(50 * time.Microsecond)
		}
		require.Equal(t, cq.StatusSuccess, wc[0].Status)
	}
	write := func(v byte) {
		t.Helper()
		require.NoError(t, src.WriteAt([]byte{v}, src.IOVA()+63))
		post(&qp.SendWR{WRID: uint64(v), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{src.SGE(0, 64)}, RemoteAddr: dst.IOVA(), RKey: dst.RKey()})
	}
	batches := func(d *roce.Device) (n, yields uint64) {
		return d.Stats().RxBatches.Load(), d.Stats().RxYields.Load()
	}

	for v := byte(1); v <= 20; v++ {
		write(v)
	}
	// The receive goroutine counts a batch and its yield after the batch's
	// ACK or response left (afterBatch), so the peer may see its
	// completion first: what a batch must have counted is waited for.
	assert.Eventually(t, func() bool { n, _ := batches(b.dev); return n >= 20 }, 2*time.Second, time.Millisecond,
		"responder batches")
	_, y := batches(b.dev)
	assert.Zero(t, y, "the responder yielded after batches that woke nobody")
	assert.Eventually(t, func() bool { n, y := batches(a.dev); return n >= 20 && n == y }, 2*time.Second, time.Millisecond,
		"the requester's batches (20 or more) each pushed a completion")

	// A READ whose response the responder sends as 16 packets from the
	// receive goroutine: a batch that sent that much yields (the peer has
	// work now; in this process it is a goroutine waiting for a processor).
	big, err := b.dev.RegisterMR(b.pd, make([]byte, 16384), mr.LocalWrite|mr.RemoteRead)
	require.NoError(t, err)
	sink, err := a.dev.RegisterMR(a.pd, make([]byte, 16384), mr.LocalWrite)
	require.NoError(t, err)
	_, y0 := batches(b.dev)
	post(&qp.SendWR{WRID: 99, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
		SGL: []qp.SGE{sink.SGE(0, 16384)}, RemoteAddr: big.IOVA(), RKey: big.RKey()})
	assert.Eventually(t, func() bool { _, y := batches(b.dev); return y > y0 }, 2*time.Second, time.Millisecond,
		"the responder did not yield after sending a 16-packet READ response")

	// Waiters the responder yields for: in a Wait on its own CQ, and in
	// the Wait and WaitRx of an idle device that shares its Waiters. (One
	// in its own WaitRx is counted the same way, but the batch it waits
	// for also wakes it, so whether it is still counted when the batch
	// ends is a race.)
	lc, _ := newChanPair("127.0.0.3:4791", "127.0.0.4:4791")
	peer := openSideConfig(t, roce.Config{Link: lc, Waiters: shared})
	t.Cleanup(func() { peer.dev.Close() })
	for i, wait := range []func(context.Context){
		func(ctx context.Context) { b.rcq.Wait(ctx, make([]cq.Completion, 1)) },
		func(ctx context.Context) { peer.scq.Wait(ctx, make([]cq.Completion, 1)) },
		func(ctx context.Context) { peer.dev.WaitRx(ctx, peer.dev.RxSeq()) },
	} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); wait(ctx) }()
		require.Eventually(t, func() bool { return shared.Len() == 1 }, 10*time.Second, time.Millisecond, "waiter %d not counted", i)
		_, y0 := batches(b.dev)
		write(byte(100 + i))
		assert.Eventually(t, func() bool { _, y := batches(b.dev); return y > y0 }, 2*time.Second, time.Millisecond,
			"waiter %d: the responder did not yield", i)
		cancel()
		<-done
	}
	require.Zero(t, shared.Len(), "the waiters left the count")

	// A goroutine waiting on a device with a count of its own does not
	// make the responder yield, nor does anybody once the waiters left.
	ld, _ := newChanPair("127.0.0.5:4791", "127.0.0.6:4791")
	other := openSideConfig(t, roce.Config{Link: ld})
	t.Cleanup(func() { other.dev.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); other.scq.Wait(ctx, make([]cq.Completion, 1)) }()
	time.Sleep(10 * time.Millisecond) // let it block
	_, y0 = batches(b.dev)
	for v := byte(200); v < 210; v++ {
		write(v)
	}
	_, y = batches(b.dev)
	assert.Equal(t, y0, y, "the responder yielded for another device's waiter, or for none")
	cancel()
	<-done
}
