package cq_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
)

// withProcs runs the test body with GOMAXPROCS n, restoring it after.
func withProcs(t *testing.T, n int) {
	t.Helper()
	old := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

func TestSpinConfig(t *testing.T) {
	c, err := cq.New(cq.Config{Capacity: 4, Spin: -time.Microsecond})
	assert.ErrorIs(t, err, cq.ErrInvalidArg)
	assert.Nil(t, c)

	c, err = cq.New(cq.Config{Capacity: 4, Spin: 30 * time.Microsecond})
	require.NoError(t, err)
	assert.Equal(t, 30*time.Microsecond, c.Spin())
	tests := []struct {
		name      string
		set, want time.Duration
	}{
		{"off", 0, 0},
		{"negative is off", -5 * time.Second, 0},
		{"in range", time.Millisecond, time.Millisecond},
		{"clamped", time.Hour, cq.MaxSpin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.SetSpin(tc.set)
			assert.Equal(t, tc.want, c.Spin())
		})
	}
}

// TestSpinHit: a spinning Wait takes a completion pushed while it spins,
// without parking (SpinHits), and returns it whole.
func TestSpinHit(t *testing.T) {
	withProcs(t, 2)
	c := newCQ(t, 4)
	c.SetSpin(cq.MaxSpin)
	go func() {
		time.Sleep(time.Millisecond)
		_ = c.Push(cq.Completion{WRID: 3, ByteLen: 2})
	}()
	dst := make([]cq.Completion, 4)
	n, err := c.Wait(context.Background(), dst)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.Equal(t, cq.Completion{WRID: 3, ByteLen: 2}, dst[0])
	st := c.Stats()
	assert.Equal(t, uint64(1), st.SpinHits)
	assert.Zero(t, st.SpinMisses)
	assert.Equal(t, uint64(1), st.Polled)
}

// TestSpinMissParks: when the spin runs out, Wait parks and a later Push
// still wakes it (SpinMisses).
func TestSpinMissParks(t *testing.T) {
	withProcs(t, 2)
	c := newCQ(t, 4)
	c.SetSpin(100 * time.Microsecond)
	go func() {
		time.Sleep(30 * time.Millisecond)
		_ = c.Push(cq.Completion{WRID: 8})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dst := make([]cq.Completion, 1)
	n, err := c.Wait(ctx, dst)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.Equal(t, uint64(8), dst[0].WRID)
	st := c.Stats()
	assert.Zero(t, st.SpinHits)
	assert.Equal(t, uint64(1), st.SpinMisses)
}

// TestSpinQueued: a completion already queued is returned without
// spinning, as counted by neither counter.
func TestSpinQueued(t *testing.T) {
	withProcs(t, 2)
	c := newCQ(t, 4)
	c.SetSpin(cq.MaxSpin)
	require.NoError(t, c.Push(cq.Completion{WRID: 1}))
	n, err := c.Wait(context.Background(), make([]cq.Completion, 4))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	st := c.Stats()
	assert.Zero(t, st.SpinHits+st.SpinMisses)
}

// TestSpinEnds: a spinning Wait ends with ctx's error or ErrClosed as
// promptly as a parked one, not after its spin.
func TestSpinEnds(t *testing.T) {
	withProcs(t, 2)
	tests := []struct {
		name string
		stop func(c *cq.CQ, cancel context.CancelFunc)
		want error
	}{
		{"cancel", func(_ *cq.CQ, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"close", func(c *cq.CQ, _ context.CancelFunc) { _ = c.Close() }, cq.ErrClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCQ(t, 4)
			c.SetSpin(cq.MaxSpin)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				time.Sleep(5 * time.Millisecond)
				tc.stop(c, cancel)
			}()
			start := time.Now()
			n, err := c.Wait(ctx, make([]cq.Completion, 1))
			assert.Zero(t, n)
			require.ErrorIs(t, err, tc.want)
			// MaxSpin is 100 ms: ending well before it shows the spin
			// watched ctx and Close.
			assert.Less(t, time.Since(start), cq.MaxSpin*3/4)
		})
	}
}

// TestSpinOneProc: with GOMAXPROCS 1 a spinner could only keep the
// producer from running, so Wait parks at once.
func TestSpinOneProc(t *testing.T) {
	withProcs(t, 1)
	c := newCQ(t, 4)
	c.SetSpin(cq.MaxSpin)
	go func() { _ = c.Push(cq.Completion{WRID: 4}) }()
	n, err := c.Wait(context.Background(), make([]cq.Completion, 1))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	st := c.Stats()
	assert.Zero(t, st.SpinHits+st.SpinMisses)
}

// TestSpinZeroAllocs: the spinning path allocates nothing either.
func TestSpinZeroAllocs(t *testing.T) {
	withProcs(t, 2)
	c := newCQ(t, 64)
	c.SetSpin(cq.MaxSpin)
	dst := make([]cq.Completion, 16)
	ctx := context.Background()
	push := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range push {
			time.Sleep(20 * time.Microsecond) // let Wait start spinning
			_ = c.Push(cq.Completion{WRID: 1})
		}
	}()
	allocs := testing.AllocsPerRun(200, func() {
		// AllocsPerRun runs f with GOMAXPROCS 1, where Wait does not
		// spin: the warm-up call sets 2 again (AllocsPerRun restores it).
		if runtime.GOMAXPROCS(0) < 2 {
			runtime.GOMAXPROCS(2)
		}
		push <- struct{}{}
		_, _ = c.Wait(ctx, dst)
	})
	close(push)
	<-done
	assert.Zero(t, allocs)
	assert.NotZero(t, c.Stats().SpinHits)
}

// TestSpinConcurrentConsumers: spinning and parked consumers mixed; every
// completion arrives exactly once and nobody hangs.
func TestSpinConcurrentConsumers(t *testing.T) {
	withProcs(t, 4)
	const total = 50_000
	c := newCQ(t, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got atomic.Int64
	seen := make([]atomic.Bool, total)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			dst := make([]cq.Completion, 1+i)
			for {
				n, err := c.Wait(ctx, dst)
				if err != nil {
					if !errors.Is(err, cq.ErrClosed) {
						t.Errorf("Wait: %v", err)
					}
					return
				}
				for _, cp := range dst[:n] {
					if seen[cp.WRID].Swap(true) {
						t.Errorf("WRID %d delivered twice", cp.WRID)
					}
				}
				if got.Add(int64(n)) == total {
					_ = c.Close()
				}
			}
		})
	}
	for i := 0; i < total; {
		if i%1000 == 0 {
			c.SetSpin(time.Duration(i%3000) * time.Microsecond / 100) // 0, 10, 20 µs
		}
		switch err := c.Push(cq.Completion{WRID: uint64(i)}); {
		case err == nil:
			i++
		case errors.Is(err, cq.ErrOverflow):
			runtime.Gosched()
		default:
			t.Fatal(err)
		}
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "consumers hung")
	assert.Equal(t, int64(total), got.Load())
}
