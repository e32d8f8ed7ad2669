//go:build linux

package udp

import (
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
// one Read the readiness of every datagram that arrives after the last
// recvmmsg is kept (the socket is registered edge-triggered, and each new
// datagram is an edge). So when that recvmmsg returned fewer messages than
// it asked for, the queue was empty when it looked, anything later will
// wake the wait, and the pump waits at once.
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
	)
	// deliver hands n datagrams to fn and reports whether to go on.
	deliver := func(n int) bool {
		if !fn(n) {
			stop = true
		}
		return !stop
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
				return false // wait in the netpoller
			}
			var m int
			if l.gro {
				m = l.layoutArena(len(dgs))
			} else {
				m = l.layoutDirect(dgs)
			}
			r.n = m
			if !l.recvmmsg(fd) {
				return false // EAGAIN
			}
			if retry, err := l.recvResult(); err != nil {
				failed = err
				return true
			} else if retry {
				continue
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
