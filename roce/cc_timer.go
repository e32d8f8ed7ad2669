package roce

import "time"

// deviceTimer is the device's single timer (STYLE §4: one timer per
// driver, armed at the earliest deadline). Arm and stop are called under
// the engine lock and never after the device is closed; wait is called by
// the engine goroutine alone and returns false once close was called.
type deviceTimer interface {
	// arm makes the timer fire d from now (at once if d ≤ 0), replacing
	// any earlier setting.
	arm(d time.Duration)
	// stop disarms it.
	stop()
	// wait blocks until the timer fires.
	wait() bool
	// close ends a pending and every later wait.
	close()
}

// goTimer is the portable device timer. A Go timer fires at the next
// millisecond here (doc/dcqcn.md §7.4), so the engine arms it timerSlack
// early for pacer deadlines and watches the clock for the rest.
type goTimer struct {
	t    *time.Timer
	done chan struct{}
}

func newGoTimer() *goTimer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &goTimer{t: t, done: make(chan struct{})}
}

func (g *goTimer) arm(d time.Duration) { g.t.Reset(max(0, d)) }
func (g *goTimer) stop()               { g.t.Stop() }
func (g *goTimer) close()              { close(g.done) }

func (g *goTimer) wait() bool {
	select {
	case <-g.t.C:
		return true
	case <-g.done:
		return false
	}
}
