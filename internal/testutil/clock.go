package testutil

import (
	"fmt"
	"sync/atomic"
	"time"
)

// EpochUnix is the Unix time, in seconds, at which every [Clock] starts
// (2023-11-14T22:13:20Z). A fixed epoch keeps traces and failure messages
// identical from run to run.
const EpochUnix = 1_700_000_000

// Epoch returns the instant at which every [Clock] starts. It is also the
// default origin of a [Blackhole] schedule.
func Epoch() time.Time { return time.Unix(EpochUnix, 0) }

// Clock is a fake monotonic clock for virtual-time tests. It starts at
// [Epoch] and moves only when told to, and never backwards.
//
// A Clock is safe for concurrent use, so a driver goroutine under test may
// read it while the test advances it.
type Clock struct {
	elapsed atomic.Int64 // nanoseconds since Epoch
}

// NewClock returns a clock reading [Epoch].
func NewClock() *Clock { return &Clock{} }

// Now returns the current virtual time.
func (c *Clock) Now() time.Time {
	return time.Unix(EpochUnix, c.elapsed.Load())
}

// Elapsed returns the virtual time that has passed since [Epoch].
func (c *Clock) Elapsed() time.Duration { return time.Duration(c.elapsed.Load()) }

// Advance moves the clock forward by d. A negative d is a programmer error
// and panics.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("testutil: Clock.Advance(%v): negative duration", d))
	}
	c.elapsed.Add(int64(d))
}

// Set moves the clock to t. Moving it backwards is a programmer error and
// panics; setting the current time again is allowed.
func (c *Clock) Set(t time.Time) {
	d := int64(t.Sub(Epoch()))
	for {
		cur := c.elapsed.Load()
		if d < cur {
			panic(fmt.Sprintf("testutil: Clock.Set(%v): before current time %v",
				t, time.Unix(EpochUnix, cur)))
		}
		if c.elapsed.CompareAndSwap(cur, d) {
			return
		}
	}
}
