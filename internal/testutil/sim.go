package testutil

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by [Sim.Run] and [Sim.RunTo], wrapped with the virtual
// time and step count; test them with errors.Is.
var (
	// ErrDeadlock means no event (packet delivery or node deadline) remains
	// while the stop condition is still false.
	ErrDeadlock = errors.New("testutil: sim deadlock: no pending event")
	// ErrTimeLimit means the virtual-time limit passed before the stop
	// condition became true.
	ErrTimeLimit = errors.New("testutil: sim virtual time limit reached")
	// ErrStalled means more than Sim.StallLimit steps ran without virtual
	// time moving: a livelock, such as a node whose deadline stays in the
	// past after OnTimeout.
	ErrStalled = errors.New("testutil: sim stalled: virtual time does not advance")
)

// DefaultStallLimit is the StallLimit of a new [Sim]. It is generous enough
// for a whole multi-GiB transfer over zero-delay links, where everything
// happens at one instant.
const DefaultStallLimit = 1 << 26

// Node is a sans-IO engine driven by a [Sim]: it exposes its next timer
// deadline and is told when that deadline has passed. A node with work
// ready to send can report a deadline of "now".
type Node interface {
	// Deadline returns the node's earliest deadline, and false if it has
	// none.
	Deadline() (time.Time, bool)
	// OnTimeout is called once the virtual time has reached the deadline.
	OnTimeout(now time.Time)
}

// NodeFuncs adapts a pair of functions to [Node], typically closures that
// call an engine and send what it returns on a [Link]. A nil DeadlineFunc
// means no deadline.
type NodeFuncs struct {
	DeadlineFunc func() (time.Time, bool)
	TimeoutFunc  func(now time.Time)
}

var _ Node = NodeFuncs{}

// Deadline calls f.DeadlineFunc.
func (f NodeFuncs) Deadline() (time.Time, bool) {
	if f.DeadlineFunc == nil {
		return time.Time{}, false
	}
	return f.DeadlineFunc()
}

// OnTimeout calls f.TimeoutFunc.
func (f NodeFuncs) OnTimeout(now time.Time) {
	if f.TimeoutFunc != nil {
		f.TimeoutFunc(now)
	}
}

type simLink struct {
	link    *Link
	deliver func(now time.Time, pkt []byte)
}

// Sim is a discrete-event driver for sans-IO engines over [Link]s in
// virtual time. Each step moves the [Clock] to the earliest event (a packet
// delivery on any link, or a node deadline), hands every due packet to its
// link's deliver func, then calls OnTimeout on every node whose deadline
// has been reached (re-reading the deadline first, since a delivery may
// have moved it). At one instant, deliveries therefore come before
// timeouts; links are served in the order they were added, then nodes.
//
// Packets that a deliver func or OnTimeout sends are picked up by later
// steps, at the same instant if the link has no delay. A typical two-QP
// test:
//
//	ab, ba := NewLink(SubSeed(seed, "ab"), imp), NewLink(SubSeed(seed, "ba"), imp)
//	sim := NewSim(clock)
//	sim.AddLink(ab, func(now time.Time, p []byte) { /* b.Receive(now, p); send b's output on ba */ })
//	sim.AddLink(ba, func(now time.Time, p []byte) { /* a.Receive(now, p); send a's output on ab */ })
//	sim.AddNode(nodeA) // OnTimeout sends a's output on ab
//	sim.AddNode(nodeB)
//	err := sim.Run(oracle.Done, 10*time.Second)
//
// A Sim runs on the caller's goroutine and is not safe for concurrent use.
type Sim struct {
	// StallLimit is the number of consecutive steps allowed at one instant
	// before Run and RunTo give up with ErrStalled. Zero means no limit.
	StallLimit int

	clock *Clock
	nodes []Node
	links []simLink
	buf   [][]byte
	steps uint64
	stall int
}

// NewSim returns a driver moving clock.
func NewSim(clock *Clock) *Sim {
	return &Sim{clock: clock, StallLimit: DefaultStallLimit}
}

// Clock returns the clock the Sim moves.
func (s *Sim) Clock() *Clock { return s.clock }

// Steps returns the number of steps taken so far.
func (s *Sim) Steps() uint64 { return s.steps }

// AddNode adds a node whose deadlines the Sim serves.
func (s *Sim) AddNode(n Node) { s.nodes = append(s.nodes, n) }

// AddLink adds a link whose packets the Sim delivers to deliver. deliver
// owns each packet it is given and may hand it back with l.Release.
func (s *Sim) AddLink(l *Link, deliver func(now time.Time, pkt []byte)) {
	s.links = append(s.links, simLink{link: l, deliver: deliver})
}

// Next returns the time of the earliest pending event, and false if there
// is none. It may be earlier than the clock if a node set a past deadline.
func (s *Sim) Next() (time.Time, bool) {
	var next time.Time
	found := false
	consider := func(t time.Time, ok bool) {
		if ok && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	for _, l := range s.links {
		consider(l.link.Deadline())
	}
	for _, n := range s.nodes {
		consider(n.Deadline())
	}
	return next, found
}

// Step moves the clock to the earliest pending event (never backwards) and
// processes every delivery and timeout due at that instant. It returns
// false, doing nothing, if no event is pending.
func (s *Sim) Step() bool {
	next, ok := s.Next()
	if !ok {
		return false
	}
	s.stepAt(next)
	return true
}

func (s *Sim) stepAt(next time.Time) {
	if now := s.clock.Now(); next.After(now) {
		s.clock.Set(next)
		s.stall = 0
	} else {
		s.stall++
	}
	s.steps++
	now := s.clock.Now()
	for _, l := range s.links {
		s.buf = l.link.Receive(now, s.buf[:0])
		for i, p := range s.buf {
			s.buf[i] = nil
			l.deliver(now, p)
		}
	}
	for _, n := range s.nodes {
		if d, ok := n.Deadline(); ok && !d.After(now) {
			n.OnTimeout(now)
		}
	}
}

// Run steps until until returns true, checking it before every step. It
// returns ErrDeadlock if no event remains, ErrTimeLimit (with the clock
// moved to the limit) if the next event lies more than limit after the
// clock's time at the start of Run, and ErrStalled per StallLimit. A limit
// of 0 means none. A nil until runs until no event remains and then returns
// nil.
func (s *Sim) Run(until func() bool, limit time.Duration) error {
	start := s.clock.Now()
	end := start.Add(limit)
	s.stall = 0
	for {
		if until != nil && until() {
			return nil
		}
		next, ok := s.Next()
		if !ok {
			if until == nil {
				return nil
			}
			return s.errorf(ErrDeadlock, start)
		}
		if limit > 0 && next.After(end) {
			if end.After(s.clock.Now()) {
				s.clock.Set(end)
			}
			return s.errorf(ErrTimeLimit, start)
		}
		s.stepAt(next)
		if s.StallLimit > 0 && s.stall > s.StallLimit {
			return s.errorf(ErrStalled, start)
		}
	}
}

// RunTo processes every event due at or before t, then moves the clock to t
// (if it is not already later). Running out of events is not an error; only
// ErrStalled is returned.
func (s *Sim) RunTo(t time.Time) error {
	start := s.clock.Now()
	s.stall = 0
	for {
		next, ok := s.Next()
		if !ok || next.After(t) {
			break
		}
		s.stepAt(next)
		if s.StallLimit > 0 && s.stall > s.StallLimit {
			return s.errorf(ErrStalled, start)
		}
	}
	if t.After(s.clock.Now()) {
		s.clock.Set(t)
	}
	return nil
}

func (s *Sim) errorf(err error, start time.Time) error {
	pending := 0
	for _, l := range s.links {
		pending += l.link.Pending()
	}
	return fmt.Errorf("%w (at +%v virtual, %v into this run, step %d, %d packets in flight)",
		err, s.clock.Elapsed(), s.clock.Now().Sub(start), s.steps, pending)
}
