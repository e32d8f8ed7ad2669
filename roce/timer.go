package roce

import (
	"runtime"
	"time"
)

// Timers (doc/engine.md "Timers": deadlines, one timer per driver): each shard keeps
// its QPs' deadlines — retransmission, RNR wait, pacer release — in a
// heap and runs one goroutine (engineLoop) that sleeps on one device
// timer armed at the earliest (rearm), a timerfd on Linux
// (timer_linux.go) and a Go timer elsewhere.

// engineLoop runs one shard's QP timers: one timer for the shard, armed
// at its earliest QP deadline (as quic-go does). Packets are processed by
// the receive goroutine and work requests by their callers, all under the
// shard's engine lock, which is what makes the QPs' state single-owner.
//
// Pacer deadlines: the timer (a timerfd on Linux, doc/dcqcn.md §7.4) wakes
// the engine within timerLatency; a pacer plans its wake-ups so that the
// bucket absorbs that, and where it cannot (high rates, small buckets) asks
// for a lead: the timer is armed that much early and the engine watches
// the clock for the rest, without the lock.
func (s *shard) engineLoop() {
	d := s.d
	defer d.wg.Done()
	for s.timer.wait() {
		s.lock()
		for {
			if d.closed.Load() {
				s.unlock()
				return
			}
			now := time.Now()
			s.runTimers(now)
			s.transmit(now)
			s.armed = time.Time{}
			e, ok := s.timers.earliestEntry()
			if !ok || !e.pacing() || e.at.Sub(now) > e.q.paceLead {
				s.rearm(now)
				break
			}
			s.armed = e.at
			s.unlock()
			if !d.spinUntil(e.at) {
				return
			}
			s.lock()
		}
		s.unlock()
	}
}

// rearm arms the shard's timer for the earliest deadline if it is earlier
// than the one armed (a pacer's, its lead early); the caller holds the
// engine lock.
func (s *shard) rearm(now time.Time) {
	e, ok := s.timers.earliestEntry()
	if s.d.closed.Load() || !ok || (!s.armed.IsZero() && !e.at.Before(s.armed)) {
		return
	}
	s.armed = e.at
	wait := e.at.Sub(now)
	if e.pacing() {
		wait -= e.q.paceLead
	}
	s.timer.arm(wait)
}

// spinYield is how often a spinning engine yields its processor.
const spinYield = 20 * time.Microsecond

// spinUntil watches the clock until t, a pacer's lead away at most. It
// returns false when the device closes.
//
// It yields (runtime.Gosched) only every spinYield, not on every look: a
// goroutine that yields in a tight loop is always in the global run queue,
// which the scheduler serves before it polls the network, so the process's
// sockets would be read only by sysmon's poll (doc/engine.md, Timers).
func (d *Device) spinUntil(t time.Time) bool {
	yield := time.Now().Add(spinYield)
	for {
		now := time.Now()
		if !now.Before(t) {
			return true
		}
		select {
		case <-d.done:
			return false
		default:
		}
		if now.After(yield) {
			runtime.Gosched()
			yield = now.Add(spinYield)
		}
	}
}

// runTimers runs every QP timer of the shard that is due.
func (s *shard) runTimers(now time.Time) {
	for {
		e, ok := s.timers.peek()
		if !ok || e.at.After(now) {
			return
		}
		s.timers.pop()
		q := e.q
		if q.timerAt != e.at || q.destroyed {
			continue // stale entry
		}
		q.timerAt = time.Time{}
		endPaceWait(q)
		q.q.OnTimeout(now)
		s.activate(q)
	}
}

// endPaceWait ends q's wait for its pacer; transmit starts another if the
// pacer still holds it.
func endPaceWait(q *QP) {
	q.paceAt, q.paceLead = time.Time{}, 0
}

// armTimer makes sure the timer heap holds q's earliest deadline: its
// transport timers or its pacer's release.
func (s *shard) armTimer(q *QP) {
	at, ok := q.q.Deadline()
	if !q.paceAt.IsZero() && (!ok || q.paceAt.Before(at)) {
		at, ok = q.paceAt, true
	}
	if !ok {
		q.timerAt = time.Time{}
		return
	}
	if at.Equal(q.timerAt) {
		return
	}
	q.timerAt = at
	s.timers.push(timerEntry{at: at, q: q})
}

// timerHeap orders QP deadlines; entries whose QP has moved its deadline
// are stale and skipped when popped.
type timerEntry struct {
	at time.Time
	q  *QP
}

type timerHeap []timerEntry

// push and pop keep the min-heap without container/heap, whose interface
// boxing would allocate per timer update.
func (h *timerHeap) push(e timerEntry) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a[i].at.Before(a[p].at) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *timerHeap) pop() timerEntry {
	a := *h
	e := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a[n] = timerEntry{}
	a = a[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && a[l].at.Before(a[m].at) {
			m = l
		}
		if r < n && a[r].at.Before(a[m].at) {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return e
}

func (h timerHeap) peek() (timerEntry, bool) {
	if len(h) == 0 {
		return timerEntry{}, false
	}
	return h[0], true
}

// earliestEntry returns the earliest live entry, dropping stale ones.
func (h *timerHeap) earliestEntry() (timerEntry, bool) {
	for {
		e, ok := h.peek()
		if !ok {
			return timerEntry{}, false
		}
		if e.q.timerAt.Equal(e.at) && !e.q.destroyed {
			return e, true
		}
		h.pop()
	}
}

// pacing reports whether e is its QP's pacer deadline.
func (e timerEntry) pacing() bool { return e.q.paceAt.Equal(e.at) }

// deviceTimer is the device's single timer (doc/engine.md "Timers": one timer per
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

func (g *goTimer) stop() { g.t.Stop() }

func (g *goTimer) close() { close(g.done) }

func (g *goTimer) wait() bool {
	select {
	case <-g.t.C:
		return true
	case <-g.done:
		return false
	}
}
