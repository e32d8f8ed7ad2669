//go:build linux

package udp

import (
	"runtime"
	"time"

	"github.com/goroce/goroce/link"
)

// Pump runs the receive loop for the caller (link.Pumper): batches are
// received as RecvLend receives them (Recv's when the link has no GRO) and
// handed to fn, all inside one wait on the socket (RawConn.Read).
//
// Why inside one wait: Go's netpoller forgets a readiness it has seen when
// a new Read begins (the descriptor's read state is reset), so a loop of
// RecvLend calls must read the socket once more after each batch to learn
// that it is empty before it may wait: an empty recvmmsg per wake-up. Within
// one Read the readiness of every datagram that arrived after the last
// recvmmsg is kept (the socket is registered edge-triggered, and each new
// datagram is an edge). So when that recvmmsg returned fewer messages than
// it asked for, the queue was empty when it looked, anything later will
// wake the wait, and the pump waits at once.
//
// With a busy-poll time (Config.BusyPoll, SetBusyPoll) the pump does not
// wait while datagrams keep coming: it reads the empty socket again and
// again until that time has passed since the last datagram, and only then
// waits. Every pollYield empty reads it yields its processor
// (runtime.Gosched), so that goroutines readied meanwhile on it (a sender
// the device handed work to, a verb's caller) run.
func (l *Link) Pump(dgs []link.Datagram, fn func(n int) bool) error {
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	if l.closed.Load() {
		return link.ErrClosed
	}
	if len(dgs) == 0 {
		return nil
	}
	r := &l.rx
	var (
		stop    bool  // fn returned false
		failed  error // a receive error
		drained bool  // the last recvmmsg came back short
		// last is when the last recvmmsg found datagrams while busy
		// polling (zero: none since the pump last waited); empties
		// counts the empty polls since (PolledReads).
		last    time.Time
		empties int
	)
	// deliver hands n datagrams to fn and reports whether to go on.
	deliver := func(n int) bool {
		if !fn(n) {
			stop = true
		}
		return !stop
	}
	// poll reports whether to read the empty socket again instead of
	// waiting (busy polling).
	poll := func() bool {
		spin := time.Duration(l.spin.Load())
		if spin <= 0 || last.IsZero() || l.closed.Load() || time.Since(last) >= spin {
			last, empties = time.Time{}, 0
			return false
		}
		if empties++; empties%pollYield == 0 {
			runtime.Gosched()
		}
		return true
	}
	read := func(fd uintptr) bool {
		for {
			if l.gro {
				if k := l.lendPending(dgs); k > 0 {
					if !deliver(k) {
						return true
					}
					continue
				}
			}
			if drained {
				drained = false
				if !poll() {
					return false // wait in the netpoller
				}
			}
			var m int
			if l.gro {
				m = l.layoutArena(len(dgs))
			} else {
				m = l.layoutDirect(dgs)
			}
			r.n = m
			if !l.recvmmsg(fd) {
				if poll() {
					continue
				}
				return false // EAGAIN: wait in the netpoller
			}
			if retry, err := l.recvResult(); err != nil {
				failed = err
				return true
			} else if retry {
				continue
			}
			if empties > 0 {
				l.polledReads.Add(1)
			}
			if l.spin.Load() > 0 {
				last, empties = time.Now(), 0
			}
			drained = r.res < m
			if l.gro {
				l.collectArena()
				continue
			}
			if k := l.collectDirect(dgs); k > 0 && !deliver(k) {
				return true
			}
		}
	}
	for !stop && failed == nil {
		if err := l.rc.Read(read); err != nil {
			return l.ioErr("receive", err)
		}
	}
	return failed
}

// pollYield is the number of empty reads after which a busy-polling Pump
// yields its processor.
const pollYield = 16

// SetBusyPoll sets how long Pump keeps polling the empty socket after the
// last datagram before it waits (link.BusyPoller, Config.BusyPoll); 0 or
// less turns polling off. A running Pump sees the change at its next poll.
func (l *Link) SetBusyPoll(d time.Duration) { l.spin.Store(int64(max(d, 0))) }
