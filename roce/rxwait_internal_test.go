package roce

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestWaitRxLateWaiter: waiters of a batch that came and went must all
// wake, even when waiters of the next count arrive meanwhile. With one
// wake-up token shared by all waiters, a late waiter could take the token
// meant for an earlier one, which then slept on with RxSeq already past
// its seq (found in review: 3 of 3 runs within a few thousand rounds).
func TestWaitRxLateWaiter(t *testing.T) {
	d := &Device{done: make(chan struct{}), waiters: new(Waiters)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for round := range 20000 {
		seq := d.RxSeq()
		var early, late sync.WaitGroup
		for range 4 {
			early.Add(1)
			go func() {
				defer early.Done()
				_ = d.WaitRx(ctx, seq)
			}()
		}
		for d.rx.waiters.Load() < 4 { // all in WaitRx, perhaps not parked yet
			runtime.Gosched()
		}
		d.rx.processed()
		for range 4 {
			late.Add(1)
			go func() {
				defer late.Done()
				_ = d.WaitRx(ctx, seq+1)
			}()
		}
		done := make(chan struct{})
		go func() { early.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatalf("round %d: a waiter of seq %d still asleep with RxSeq %d (waiters %d)",
				round, seq, d.RxSeq(), d.rx.waiters.Load())
		}
		for d.rx.waiters.Load() < 4 {
			runtime.Gosched()
		}
		d.rx.processed() // the late ones
		late.Wait()
	}
}
