package cq

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/internal/errs"
)

// MaxCapacity is the largest capacity New accepts: 2^20 completions, 40 MiB
// of ring. rxe allows 32768 (RXE_MAX_CQE); more is rarely useful.
const MaxCapacity = 1 << 20

var (
	// ErrOverflow is returned by Push when the queue is full. The completion
	// is dropped and Stats.Overflows counted. IBA treats a CQ overrun as an
	// error on the CQ; rxe's rxe_cq_post reports IB_EVENT_CQ_ERR and fails,
	// and the engine then moves the QP to Error (IBA class G, doc/rxe.md §5).
	ErrOverflow = errors.New("cq: completion queue overflow")
	// ErrClosed is returned by Push after Close, and by Wait once the queue
	// is closed and empty.
	// It also matches roce.ErrClosed under errors.Is, so a Wait that a
	// device's Close ended is told apart the same way as any verb on it.
	ErrClosed = errs.Narrow("cq: completion queue closed", errs.ErrClosed)
	// ErrInvalidArg means a configuration or argument is malformed. It is
	// the one invalid-argument sentinel of goroce: roce, mr and qp export
	// the same value, so errors.Is matches it whichever package failed.
	ErrInvalidArg = errs.ErrInvalidArg
)

// Config configures a CQ.
type Config struct {
	// Capacity is the number of completions the queue holds, from 1 to
	// MaxCapacity, like ibv_create_cq's cqe. It is exact: the
	// (Capacity+1)-th unpolled completion overflows.
	Capacity int
	// Spin is how long Wait busy-polls an empty queue before it parks
	// (SetSpin); 0, the default, parks at once.
	Spin time.Duration
	// Hook, if set, is told of the queue's pushes and of the goroutines
	// that block in its Wait (Hook): the driver that makes the CQ learns
	// from it whether somebody may be waiting for what it did.
	Hook Hook
}

// Hook is told what happens on a CQ, for the driver that made it: roce's
// receive goroutine hands its processor over after a batch only when the
// batch pushed a completion or a goroutine waits (doc/latency.md §7), and
// learns both from the hook of the CQs its device makes. Its methods run
// on the pushing or waiting goroutine, inside Push or Wait, with no lock of
// the CQ held; they must be quick, must not block and must not call the
// CQ. Several CQs may share one Hook.
type Hook interface {
	// Pushed is called after Push queued a completion (not when it
	// returned an error).
	Pushed()
	// Waiting is called with +1 before Wait blocks on an empty queue and
	// with -1 once it has woken (a push, Close or its context), so that
	// the sum of its deltas is the number of goroutines blocked in Wait.
	Waiting(delta int)
}

// MaxSpin is the longest Spin accepted: a waiter that has polled this long
// parks, whatever it was configured with, so a forgotten spin cannot hold
// a processor for good.
const MaxSpin = 100 * time.Millisecond

// Stats are a CQ's counters since New.
type Stats struct {
	// Pushed counts completions accepted by Push.
	Pushed uint64
	// Polled counts completions handed out by Poll and Wait.
	Polled uint64
	// Overflows counts completions refused with ErrOverflow.
	Overflows uint64
	// SpinHits counts the Waits that found a completion while spinning
	// (SetSpin); SpinMisses those whose spin ran out, which then parked.
	SpinHits, SpinMisses uint64
}

// CQ is a bounded completion queue: a ring of Completion values, filled by
// the engine with Push and drained by the application with Poll or Wait.
// Neither side allocates per completion.
//
// Goroutines: the engine's QP goroutines call Push (several QPs may share a
// CQ, so any number of producers is allowed); any number of consumers may
// call Poll, Wait, Len and Stats concurrently with them and with each other.
// Completions leave in the order they were pushed; each goes to exactly one
// consumer, and a single Poll or Wait gets a contiguous run. A mutex guards
// the ring: it is held for one copy, uncontended in the common
// one-producer-one-consumer case, and simpler to trust than a lock-free
// multi-consumer ring.
//
// Notification: Wait blocks until something arrives. A driver with its own
// event loop selects on Notify instead. The goroutine whose Push made the
// queue non-empty wakes the waiter itself (a one-slot channel; no other
// goroutine is on the way), and with SetSpin the waiter does not sleep at
// all while completions come faster than the spin.
type CQ struct {
	mu     sync.Mutex
	ring   []Completion
	head   int // index of the oldest completion
	n      int // completions queued
	closed bool

	wake   chan struct{} // cap 1: hands the turn from waiter to waiter
	notify chan struct{} // cap 1: coalesced signal for Notify's reader
	done   chan struct{} // closed by Close

	spin atomic.Int64 // time.Duration: SetSpin
	hook Hook         // Config.Hook, or nil

	pushed, polled, overflows atomic.Uint64
	spinHits, spinMisses      atomic.Uint64
}

// New returns an empty CQ. It fails with ErrInvalidArg unless
// 1 <= cfg.Capacity <= MaxCapacity.
func New(cfg Config) (*CQ, error) {
	if cfg.Capacity < 1 || cfg.Capacity > MaxCapacity {
		return nil, fmt.Errorf("%w: capacity %d not in [1, %d]", ErrInvalidArg, cfg.Capacity, MaxCapacity)
	}
	if cfg.Spin < 0 {
		return nil, fmt.Errorf("%w: negative spin %v", ErrInvalidArg, cfg.Spin)
	}
	c := &CQ{
		ring:   make([]Completion, cfg.Capacity),
		wake:   make(chan struct{}, 1),
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
		hook:   cfg.Hook,
	}
	c.SetSpin(cfg.Spin)
	return c, nil
}

// SetSpin sets how long Wait busy-polls an empty queue before it parks, as
// perftest polls its CQ (its default; --use_event parks instead). 0 turns
// polling off; negative values count as 0, values above MaxSpin as MaxSpin.
// Any goroutine may call it; it applies from the next Wait.
//
// Why: a parked waiter is made runnable by Push, and then waits for the
// scheduler to run it, typically after the pushing goroutine has finished
// its own work or another processor has woken up to steal it — a few
// microseconds at the median and tens at the 99th percentile. A spinning
// waiter sees the completion within a fraction of a microsecond.
//
// CPU cost: a spinning waiter keeps one processor (one core) 100 % busy for
// up to d on every Wait that finds the queue empty, whether or not
// anything arrives; a ping-pong at one completion per round trip spins all
// the time. It yields the processor to other goroutines every 20 µs
// (runtime.Gosched), and it does not spin at all when GOMAXPROCS is 1,
// where it could only delay the goroutine that would push. It pays off
// only with a core to spare: the spinner's thread holds a CPU that the
// producer's thread (a device's receive loop) may need: on 2 CPUs a
// spinning 2-byte WRITE ping-pong is several times slower than a parked
// one (doc/latency.md §3). Stats.SpinHits and SpinMisses show whether d
// fits the traffic.
func (c *CQ) SetSpin(d time.Duration) {
	c.spin.Store(int64(min(max(d, 0), MaxSpin)))
}

// Spin returns the busy-poll time of Wait (SetSpin).
func (c *CQ) Spin() time.Duration { return time.Duration(c.spin.Load()) }

// Cap returns the capacity.
func (c *CQ) Cap() int { return len(c.ring) }

// Len returns the number of completions waiting to be polled.
func (c *CQ) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Stats returns the counters.
func (c *CQ) Stats() Stats {
	return Stats{Pushed: c.pushed.Load(), Polled: c.polled.Load(), Overflows: c.overflows.Load(),
		SpinHits: c.spinHits.Load(), SpinMisses: c.spinMisses.Load()}
}

// Push appends cp. It returns ErrOverflow, dropping cp, when the queue is
// full, and ErrClosed after Close. It wakes a Wait and signals Notify. Push
// does not allocate.
func (c *CQ) Push(cp Completion) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.n == len(c.ring) {
		c.mu.Unlock()
		c.overflows.Add(1)
		return ErrOverflow
	}
	i := c.head + c.n
	if i >= len(c.ring) {
		i -= len(c.ring)
	}
	c.ring[i] = cp
	c.n++
	c.mu.Unlock()
	c.pushed.Add(1)
	if c.hook != nil {
		c.hook.Pushed()
	}
	signal(c.wake)
	signal(c.notify)
	return nil
}

// Poll moves up to len(dst) completions, oldest first, into dst and returns
// how many; 0 means the queue was empty (or dst is). It never blocks and
// does not allocate.
func (c *CQ) Poll(dst []Completion) int {
	c.mu.Lock()
	n := min(len(dst), c.n)
	if n == 0 {
		c.mu.Unlock()
		return 0
	}
	k := copy(dst[:n], c.ring[c.head:])
	copy(dst[k:n], c.ring)
	c.head += n
	if c.head >= len(c.ring) {
		c.head -= len(c.ring)
	}
	c.n -= n
	left := c.n
	c.mu.Unlock()
	c.polled.Add(uint64(n))
	if left > 0 {
		// Push signals once per completion but the token holds one, so a
		// waiter that took fewer than were queued passes the turn on.
		signal(c.wake)
	}
	return n
}

// Wait is Poll that blocks until at least one completion is available. It
// returns (n, nil) with n >= 1, or (0, ctx.Err()) when ctx is done first, or
// (0, ErrClosed) once the queue is closed and drained. Completions already
// queued are returned even if ctx is done. dst must not be empty
// (ErrInvalidArg). With SetSpin, Wait first busy-polls an empty queue for
// up to the spin time (see SetSpin for its CPU cost). Wait does not
// allocate.
func (c *CQ) Wait(ctx context.Context, dst []Completion) (int, error) {
	if len(dst) == 0 {
		return 0, ErrInvalidArg
	}
	if d := c.spin.Load(); d > 0 && runtime.GOMAXPROCS(0) > 1 {
		if n := c.Poll(dst); n > 0 {
			return n, nil
		}
		if n := c.spinPoll(ctx, dst, time.Duration(d)); n > 0 {
			c.spinHits.Add(1)
			return n, nil
		}
		c.spinMisses.Add(1)
	}
	for {
		if n := c.Poll(dst); n > 0 {
			return n, nil
		}
		if n, done, err := c.block(ctx, dst); done {
			return n, err
		}
	}
}

// block waits for a push, Close or ctx on behalf of Wait, counted by the
// hook, and reports whether Wait is done (with what it returns); it is not
// after a push, when Wait polls again.
func (c *CQ) block(ctx context.Context, dst []Completion) (int, bool, error) {
	if c.hook != nil {
		c.hook.Waiting(1)
		defer c.hook.Waiting(-1)
	}
	select {
	case <-c.wake:
		return 0, false, nil
	case <-c.done:
		if n := c.Poll(dst); n > 0 {
			return n, true, nil
		}
		return 0, true, ErrClosed
	case <-ctx.Done():
		return 0, true, ctx.Err()
	}
}

// spinYield is how often a spinning Wait yields its processor, as the
// engine's pacer spin does (roce spinUntil): a goroutine queued behind
// the spinner on its processor waits at most that long. Not more often: a
// goroutine that yields every few microseconds is nearly always in the
// global run queue, which the scheduler serves before it polls the
// network, so the sockets' goroutines are woken late (milliseconds with a
// 2 µs yield: doc/latency.md §3).
const spinYield = 20 * time.Microsecond

// spinPoll busy-polls for up to d, returning what Poll took, or 0 when d
// passed, ctx ended or the queue closed: Wait's blocking path then
// settles the outcome. It looks at the counters, not the lock, so that a
// spinning waiter does not contend with Push for the ring; it reads the
// clock every 64 looks.
func (c *CQ) spinPoll(ctx context.Context, dst []Completion, d time.Duration) int {
	now := time.Now()
	end, yield := now.Add(d), now.Add(spinYield)
	ctxDone := ctx.Done()
	for i := 1; ; i++ {
		if c.pushed.Load() != c.polled.Load() {
			if n := c.Poll(dst); n > 0 {
				return n
			}
		}
		if i%64 != 0 {
			continue
		}
		now = time.Now()
		if !now.Before(end) {
			return 0
		}
		if now.After(yield) {
			select {
			case <-c.done:
				return 0
			case <-ctxDone:
				return 0
			default:
			}
			runtime.Gosched()
			yield = now.Add(spinYield)
		}
	}
}

// Notify returns a channel that receives a value after Push adds
// completions, for drivers that multiplex the CQ with other events. Signals
// coalesce: one value may stand for many completions, so on receiving it,
// Poll until Poll returns fewer than len(dst). A completion pushed after
// that Poll signals again, so nothing is missed. The channel is never
// closed; it is meant for a single reader (a second reader would take
// signals from the first). Wait does not use it.
func (c *CQ) Notify() <-chan struct{} { return c.notify }

// Close stops the queue: Push fails with ErrClosed, and Wait returns the
// completions still queued and then ErrClosed, waking every blocked
// waiter. Poll keeps draining. Close is idempotent and always returns nil.
func (c *CQ) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	return nil
}

// signal leaves a token in a one-slot channel unless one is there already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
