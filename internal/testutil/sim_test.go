package testutil

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stopAndWait is a toy sans-IO reliable sender: one message in flight,
// retransmitted on timeout until acknowledged. It stands in for a QP.
type stopAndWait struct {
	out      *Link // data towards the receiver
	next     uint64
	total    uint64
	acked    uint64
	deadline time.Time
	armed    bool
	sends    int
	rto      time.Duration
}

func (s *stopAndWait) Deadline() (time.Time, bool) { return s.deadline, s.armed }

func (s *stopAndWait) OnTimeout(now time.Time) { s.transmit(now) }

func (s *stopAndWait) transmit(now time.Time) {
	if s.acked == s.total {
		s.armed = false
		return
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], s.acked)
	s.out.Send(now, b[:])
	s.sends++
	s.deadline, s.armed = now.Add(s.rto), true
}

func (s *stopAndWait) onAck(now time.Time, pkt []byte) {
	if n := binary.BigEndian.Uint64(pkt); n == s.acked+1 {
		s.acked = n
		s.transmit(now)
	}
}

var _ Node = (*stopAndWait)(nil)

// runStopAndWait moves total messages over lossy links in both directions
// and returns what the receiver got, in order.
func runStopAndWait(t *testing.T, seed uint64, imp Impairment, total uint64) ([]uint64, *stopAndWait, *Sim, error) {
	t.Helper()
	clock := NewClock()
	ab := NewLink(SubSeed(seed, "ab"), imp)
	ba := NewLink(SubSeed(seed, "ba"), imp)
	tx := &stopAndWait{out: ab, total: total, rto: 10 * time.Millisecond}
	var got []uint64
	sim := NewSim(clock)
	sim.AddLink(ab, func(now time.Time, pkt []byte) {
		n := binary.BigEndian.Uint64(pkt)
		if n == uint64(len(got)) {
			got = append(got, n)
		}
		var ack [8]byte
		binary.BigEndian.PutUint64(ack[:], uint64(len(got)))
		ba.Send(now, ack[:])
		ab.Release(pkt)
	})
	sim.AddLink(ba, func(now time.Time, pkt []byte) { tx.onAck(now, pkt); ba.Release(pkt) })
	sim.AddNode(tx)
	tx.transmit(clock.Now())
	err := sim.Run(func() bool { return tx.acked == tx.total }, time.Minute)
	return got, tx, sim, err
}

func TestSimStopAndWait(t *testing.T) {
	seed := Seed(t)
	imp := Impairment{Loss: 0.1, Delay: time.Millisecond, Jitter: 100 * time.Microsecond}
	got, tx, sim, err := runStopAndWait(t, seed, imp, 1000)
	require.NoError(t, err)
	require.Len(t, got, 1000)
	for i, n := range got {
		require.Equal(t, uint64(i), n, "message %d", i)
	}
	assert.Greater(t, tx.sends, 1000, "sends over a lossy link: want retransmissions")
	// Virtual time: at least 2 ms per round trip.
	assert.GreaterOrEqual(t, sim.Clock().Elapsed(), 2*time.Second)
	// Determinism end to end.
	got2, tx2, sim2, err := runStopAndWait(t, seed, imp, 1000)
	require.NoError(t, err)
	assert.Equal(t, got, got2)
	assert.Equal(t, tx.sends, tx2.sends)
	assert.Equal(t, sim.Clock().Elapsed(), sim2.Clock().Elapsed())
	assert.Equal(t, sim.Steps(), sim2.Steps())
}

func TestSimTimeLimit(t *testing.T) {
	// A blackhole longer than the limit: the sender retries forever.
	imp := Impairment{Delay: time.Millisecond, Blackhole: Blackhole{Windows: []Window{{0, time.Hour}}}}
	_, _, sim, err := runStopAndWait(t, 1, imp, 10)
	require.ErrorIs(t, err, ErrTimeLimit)
	assert.Equal(t, time.Minute, sim.Clock().Elapsed(), "the clock stops at the limit")
}

func TestSimDeadlock(t *testing.T) {
	clock := NewClock()
	l := NewLink(1, Impairment{Loss: 1})
	sim := NewSim(clock)
	delivered := 0
	sim.AddLink(l, func(time.Time, []byte) { delivered++ })
	node := &NodeFuncs{} // no deadline
	sim.AddNode(node)
	l.Send(clock.Now(), []byte{1}) // lost: nothing will ever happen
	err := sim.Run(func() bool { return delivered > 0 }, time.Second)
	require.ErrorIs(t, err, ErrDeadlock)
	// A nil until drains and returns nil.
	l2 := NewLink(2, Impairment{Delay: time.Millisecond})
	sim.AddLink(l2, func(time.Time, []byte) { delivered++ })
	l2.Send(clock.Now(), []byte{1})
	require.NoError(t, sim.Run(nil, 0))
	assert.Equal(t, 1, delivered)
}

func TestSimStalled(t *testing.T) {
	clock := NewClock()
	sim := NewSim(clock)
	sim.StallLimit = 1000
	calls := 0
	// A buggy node whose deadline never moves past now.
	sim.AddNode(NodeFuncs{
		DeadlineFunc: func() (time.Time, bool) { return clock.Now(), true },
		TimeoutFunc:  func(time.Time) { calls++ },
	})
	err := sim.Run(func() bool { return false }, time.Second)
	require.ErrorIs(t, err, ErrStalled)
	assert.Equal(t, 1001, calls, "OnTimeout calls")
	require.ErrorIs(t, sim.RunTo(clock.Now().Add(time.Second)), ErrStalled)
}

func TestSimOrderAndRunTo(t *testing.T) {
	clock := NewClock()
	sim := NewSim(clock)
	l := NewLink(1, Impairment{Delay: 2 * time.Millisecond})
	var log []string
	var timer time.Time
	armed := false
	sim.AddLink(l, func(now time.Time, p []byte) {
		log = append(log, "deliver@"+now.Sub(Epoch()).String())
		armed = false // an ACK cancels the timer due at the same instant
	})
	sim.AddNode(NodeFuncs{
		DeadlineFunc: func() (time.Time, bool) { return timer, armed },
		TimeoutFunc:  func(now time.Time) { log = append(log, "timeout@"+now.Sub(Epoch()).String()); armed = false },
	})
	l.Send(clock.Now(), []byte{1})
	timer, armed = Epoch().Add(2*time.Millisecond), true
	require.NoError(t, sim.RunTo(Epoch().Add(time.Millisecond)))
	require.Empty(t, log)
	require.Equal(t, time.Millisecond, clock.Elapsed())
	require.NoError(t, sim.RunTo(Epoch().Add(5*time.Millisecond)))
	require.Equal(t, []string{"deliver@2ms"}, log, "a delivery at 2ms that cancels the timer due then")
	require.Equal(t, 5*time.Millisecond, clock.Elapsed())
	timer, armed = Epoch().Add(7*time.Millisecond), true
	require.True(t, sim.Step())
	require.Equal(t, []string{"deliver@2ms", "timeout@7ms"}, log)
	assert.False(t, sim.Step(), "no event pending")
}
