package rawnet

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestSpin(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		calls := 0
		if Spin(0, func(uintptr) bool { calls++; return false }) || calls != 1 {
			t.Fatalf("Spin(0): want one call reporting false, got %d calls", calls)
		}
		if !Spin(-time.Second, func(uintptr) bool { return true }) {
			t.Fatal("Spin(<0) of a ready ring reports false")
		}
	})
	t.Run("gives up", func(t *testing.T) {
		start := time.Now()
		if Spin(200*time.Microsecond, func(uintptr) bool { return false }) {
			t.Fatal("reported ready")
		}
		if el := time.Since(start); el < 200*time.Microsecond {
			t.Fatalf("gave up after %v, before 200µs", el)
		}
	})
	t.Run("ready while spinning", func(t *testing.T) {
		// Another goroutine makes the ring ready: Spin must see it.
		var ready atomic.Bool
		go func() {
			time.Sleep(time.Millisecond)
			ready.Store(true)
		}()
		if !Spin(10*time.Second, func(uintptr) bool { return ready.Load() }) {
			t.Fatal("did not see the ring become ready")
		}
	})
}
