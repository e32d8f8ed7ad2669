package testutil

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numbered returns an n-byte packet (n >= 8) carrying i in its first 8 bytes.
func numbered(i, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint64(b, uint64(i))
	for j := 8; j < n; j++ {
		b[j] = byte(i + j)
	}
	return b
}

func number(p []byte) int { return int(binary.BigEndian.Uint64(p)) }

// arrival is a delivered packet and the time it became due.
type arrival struct {
	at  time.Time
	pkt []byte
}

// drain receives every pending packet, event by event, recording the
// deadline at which each became due.
func drain(l *Link) []arrival {
	var out []arrival
	var buf [][]byte
	for {
		d, ok := l.Deadline()
		if !ok {
			return out
		}
		buf = l.Receive(d, buf[:0])
		for _, p := range buf {
			out = append(out, arrival{d, p})
		}
	}
}

// checkBalance asserts the accounting identity documented on LinkStats.
func checkBalance(t *testing.T, l *Link) {
	t.Helper()
	s := l.Stats()
	assert.Equal(t, s.Sent-s.TotalDropped()+s.Duplicated+s.Injected, s.Delivered+uint64(l.Pending()),
		"sent - dropped + duplicated + injected != delivered + pending; stats %+v, pending %d", s, l.Pending())
}

// within fails unless got is within k standard deviations of a binomial
// count with n trials and probability p.
func within(t *testing.T, what string, got uint64, n int, p, k float64) {
	t.Helper()
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	assert.InDelta(t, mean, float64(got), k*sd, "%s: want %.0f ± %.0fσ", what, mean, k)
}

func TestLinkPerfect(t *testing.T) {
	l := NewLink(1, Impairment{})
	now := Epoch()
	for i := range 10 {
		l.Send(now, numbered(i, 64))
	}
	d, ok := l.Deadline()
	require.True(t, ok)
	require.Equal(t, now, d)
	got := l.Receive(now, nil)
	require.Len(t, got, 10)
	for i, p := range got {
		assert.Equal(t, numbered(i, 64), p, "packet %d", i)
	}
	_, ok = l.Deadline()
	assert.False(t, ok, "Deadline reports a pending packet after Receive drained the link")
	s := l.Stats()
	assert.Equal(t, LinkStats{Sent: 10, Delivered: 10}, s)
	checkBalance(t, l)
}

func TestLinkSendCopies(t *testing.T) {
	l := NewLink(1, Impairment{Delay: time.Millisecond})
	p := []byte{1, 2, 3}
	l.Send(Epoch(), p)
	p[0] = 9
	got := l.Receive(Epoch().Add(time.Millisecond), nil)
	require.Equal(t, [][]byte{{1, 2, 3}}, got, "the link must copy the packet")
	assert.Empty(t, l.Receive(Epoch().Add(time.Hour), nil))
}

func TestLinkLoss(t *testing.T) {
	const n = 100_000
	for _, p := range []float64{0.001, 0.01, 0.05, 0.3} {
		l := NewLink(42, Impairment{Loss: p})
		now := Epoch()
		pkt := make([]byte, 16)
		for range n {
			l.Send(now, pkt)
		}
		s := l.Stats()
		within(t, "dropped", s.Dropped[DropLoss], n, p, 5)
		assert.Equal(t, s.Dropped[DropLoss], s.TotalDropped(), "drops for other reasons")
		checkBalance(t, l)
	}
}

func TestLinkGilbertElliott(t *testing.T) {
	// Row matrix A5 of the reliability matrix (doc/matrix.md §3): p_gb 0.5 %, p_bg 30 %.
	const n = 1_000_000
	ge := GilbertElliott{PGB: 0.005, PBG: 0.3}
	var lost []bool
	l := NewLink(7, Impairment{GilbertElliott: ge, OnPacket: func(ev Event) {
		switch ev.Kind {
		case EventDropped:
			lost = append(lost, true)
		case EventDuplicated, EventReordered:
			assert.Fail(t, "unexpected event", "%v", ev.Kind)
		}
	}})
	pkt := make([]byte, 8)
	for i := range n {
		l.Send(Epoch(), pkt)
		if len(lost) == i {
			lost = append(lost, false)
		}
	}
	drops := l.Stats().Dropped[DropGilbertElliott]
	want := ge.PGB / (ge.PGB + ge.PBG) // LossBad defaults to 1
	assert.InEpsilon(t, want, float64(drops)/n, 0.1, "mean loss")
	// Bursts: with LossBad 1 a bad period is a run of losses of mean length
	// 1/PBG.
	runs, inRun := 0, false
	for _, x := range lost {
		if x && !inRun {
			runs++
		}
		inRun = x
	}
	assert.InEpsilon(t, 1/ge.PBG, float64(drops)/float64(runs), 0.1, "mean burst length")
}

func TestLinkGilbertElliottLossInGoodState(t *testing.T) {
	const n = 500_000
	ge := GilbertElliott{PGB: 0.01, PBG: 0.1, LossGood: 0.02, LossBad: 0.5}
	l := NewLink(8, Impairment{GilbertElliott: ge})
	for range n {
		l.Send(Epoch(), []byte{0})
	}
	pb := ge.PGB / (ge.PGB + ge.PBG)
	want := pb*ge.LossBad + (1-pb)*ge.LossGood
	assert.InEpsilon(t, want, float64(l.Stats().Dropped[DropGilbertElliott])/n, 0.1, "mean loss")
}

func TestLinkBurstLoss(t *testing.T) {
	const n = 100_000
	for _, bl := range []BurstLoss{{Rate: 0.02, MaxBurst: 3}, {Rate: 0.3, MaxBurst: 3}, {Rate: 0.9, MaxBurst: 2}, {Rate: 0.5, MaxBurst: 1}} {
		run, maxRun := 0, 0
		l := NewLink(3, Impairment{BurstLoss: bl, OnPacket: func(ev Event) {
			switch ev.Kind {
			case EventDropped:
				run++
				maxRun = max(maxRun, run)
			case EventDelivered:
				run = 0
			}
		}})
		buf := make([][]byte, 0, 1)
		for range n {
			l.Send(Epoch(), []byte{0})
			buf = l.Receive(Epoch(), buf[:0])
		}
		assert.LessOrEqual(t, maxRun, bl.MaxBurst, "%+v: longest run of drops", bl)
		if bl.Rate >= 0.3 {
			assert.Equal(t, bl.MaxBurst, maxRun, "%+v: longest run of drops", bl)
		}
		// The cap only lowers the rate: at most Rate, and not far below for
		// a small Rate.
		drops := float64(l.Stats().Dropped[DropBurstLoss]) / n
		assert.LessOrEqual(t, drops, bl.Rate+0.005, "%+v: loss rate", bl)
		if bl.Rate < 0.1 {
			assert.InEpsilon(t, bl.Rate, drops, 0.1, "%+v: loss rate", bl)
		}
		checkBalance(t, l)
	}
}

func TestLinkDropList(t *testing.T) {
	// QUIC runner amplificationlimit: droplist 2..7, plus duplicates and an
	// index out of order in the list.
	l := NewLink(1, Impairment{DropList: []int{7, 2, 3, 4, 5, 6, 6, 0, 1000}})
	for i := range 20 {
		l.Send(Epoch(), numbered(i, 8))
	}
	var got []int
	for _, p := range l.Receive(Epoch(), nil) {
		got = append(got, number(p))
	}
	assert.Equal(t, []int{1, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, got)
	assert.Equal(t, uint64(7), l.Stats().Dropped[DropIndex])
}

func TestLinkDropIf(t *testing.T) {
	isOdd := func(p []byte) bool { return number(p)%2 == 1 }
	for _, tc := range []struct {
		name string
		rate float64
	}{{"all", 0}, {"all explicit", 1}, {"half", 0.5}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 20_000
			l := NewLink(5, Impairment{DropIf: isOdd, DropIfRate: tc.rate})
			for i := range n {
				l.Send(Epoch(), numbered(i, 8))
			}
			evens := 0
			for _, p := range l.Receive(Epoch(), nil) {
				if !isOdd(p) {
					evens++
				}
			}
			assert.Equal(t, n/2, evens, "unmatched packets delivered")
			dropped := l.Stats().Dropped[DropClass]
			if tc.rate == 0 || tc.rate == 1 {
				assert.Equal(t, uint64(n/2), dropped)
			} else {
				within(t, "dropped", dropped, n/2, tc.rate, 5)
			}
		})
	}
}

func TestLinkDup(t *testing.T) {
	const n = 100_000
	l := NewLink(9, Impairment{Dup: 0.1})
	for i := range n {
		l.Send(Epoch(), numbered(i, 8))
	}
	got := l.Receive(Epoch(), nil)
	s := l.Stats()
	within(t, "duplicated", s.Duplicated, n, 0.1, 5)
	require.Len(t, got, n+int(s.Duplicated))
	// Zero delay: each duplicate follows its original immediately.
	next := 0
	for i := 0; i < len(got); i++ {
		require.Equal(t, next, number(got[i]), "packet %d", i)
		if i+1 < len(got) && number(got[i+1]) == next {
			i++
		}
		next++
	}
	checkBalance(t, l)
}

func TestLinkReorder(t *testing.T) {
	// matrix A6: 1 % of packets held back 1..8 slots.
	const n = 100_000
	held := map[int]bool{}
	l := NewLink(11, Impairment{
		Reorder: Reorder{Rate: 0.01, MinSlots: 1, MaxSlots: 8},
		OnPacket: func(ev Event) {
			if ev.Kind == EventReordered {
				held[ev.Index] = true
			}
		},
	})
	for i := range n {
		l.Send(Epoch(), numbered(i, 8))
	}
	got := l.Receive(Epoch(), nil)
	// The last few held packets wait for HoldMax.
	if d, ok := l.Deadline(); ok {
		assert.Equal(t, Epoch().Add(DefaultHoldMax), d, "deadline of the held tail")
		got = l.Receive(d, got)
	}
	require.Len(t, got, n)
	seen := make([]bool, n)
	inversions := 0
	for i, p := range got {
		k := number(p)
		require.False(t, seen[k], "packet %d delivered twice", k)
		seen[k] = true
		if i > 0 && k < number(got[i-1]) {
			inversions++
		}
	}
	s := l.Stats()
	within(t, "reordered", s.Reordered, n, 0.01, 5)
	assert.Positive(t, inversions)
	assert.LessOrEqual(t, uint64(inversions), s.Reordered, "more inversions than held packets")
	// Each held packet comes after between 1 and 8 later non-held packets.
	pos := make([]int, n)
	for i, p := range got {
		pos[number(p)] = i
	}
	for h := range held {
		// Non-held packets arrive in order, so the later ones that precede
		// h sit just before it; a window of 64 covers 8 slots plus any
		// held packets released in between, and a count above 8 still
		// shows up in it.
		later := 0
		for _, p := range got[max(0, pos[h]-64):pos[h]] {
			if k := number(p); k > h && !held[k] {
				later++
			}
		}
		if h < n-20 { // the tail may be released by HoldMax
			assert.True(t, later >= 1 && later <= 8, "held packet %d delivered after %d later packets, want 1..8", h, later)
		}
	}
}

func TestLinkReorderExactSlots(t *testing.T) {
	// Hold packet 0 for exactly 3 slots: it is delivered right after #3.
	for seed := range uint64(50) {
		l := NewLink(seed, Impairment{Reorder: Reorder{Rate: 0.2, MinSlots: 3, MaxSlots: 3}})
		var heldIdx []int
		l.imp.OnPacket = func(ev Event) {
			if ev.Kind == EventReordered {
				heldIdx = append(heldIdx, ev.Index)
			}
		}
		for i := range 10 {
			l.Send(Epoch(), numbered(i, 8))
		}
		got := l.Receive(Epoch(), nil)
		got = l.Receive(Epoch().Add(DefaultHoldMax), got)
		require.Len(t, got, 10, "seed %d", seed)
		order := make([]int, len(got))
		for i, p := range got {
			order[i] = number(p)
		}
		isHeld := func(k int) bool { return slices.Contains(heldIdx, k) }
		for _, h := range heldIdx {
			i := slices.Index(order, h)
			later := 0
			for _, k := range order[:i] {
				if k > h && !isHeld(k) {
					later++
				}
			}
			followers := 0
			for k := h + 1; k < 10; k++ {
				if !isHeld(k) {
					followers++
				}
			}
			assert.Equal(t, min(3, followers), later, "seed %d: order %v held %v: packets after #%d", seed, order, heldIdx, h)
		}
	}
}

func TestLinkReorderHoldMax(t *testing.T) {
	// With no traffic after it, a held packet is released HoldMax after
	// its normal delivery time.
	l := NewLink(1, Impairment{Delay: time.Millisecond, Reorder: Reorder{Rate: 1, MinSlots: 5, HoldMax: 3 * time.Millisecond}})
	l.Send(Epoch(), []byte{1})
	d, ok := l.Deadline()
	require.True(t, ok)
	require.Equal(t, Epoch().Add(4*time.Millisecond), d)
	require.Empty(t, l.Receive(d.Add(-1), nil), "delivered before the hold expired")
	require.Len(t, l.Receive(d, nil), 1, "delivered at the hold expiry")
	assert.Empty(t, l.held, "held list not cleared")
}

func TestLinkDelayJitter(t *testing.T) {
	// matrix A9: delay 1 ms ± 0.9 ms uniform.
	const (
		n      = 20_000
		delay  = time.Millisecond
		jitter = 900 * time.Microsecond
		gap    = 10 * time.Microsecond
	)
	for _, reorder := range []bool{false, true} {
		l := NewLink(13, Impairment{Delay: delay, Jitter: jitter, JitterReorder: reorder})
		sentAt := make([]time.Time, n)
		for i := range n {
			sentAt[i] = Epoch().Add(time.Duration(i) * gap)
			l.Send(sentAt[i], numbered(i, 8))
		}
		got := drain(l)
		require.Len(t, got, n)
		var sum time.Duration
		inversions := 0
		for i, a := range got {
			k := number(a.pkt)
			d := a.at.Sub(sentAt[k])
			require.True(t, d >= delay-jitter && d <= delay+jitter,
				"JitterReorder=%v: packet %d delayed %v, want %v ± %v", reorder, k, d, delay, jitter)
			sum += d
			if i > 0 && k < number(got[i-1].pkt) {
				inversions++
			}
		}
		if !reorder {
			assert.Zero(t, inversions, "a FIFO link reordered")
			continue
		}
		assert.Positive(t, inversions, "a JitterReorder link never reordered")
		assert.InDelta(t, delay, sum/n, float64(20*time.Microsecond), "mean delay (uniform jitter)")
	}
}

func TestLinkBandwidth(t *testing.T) {
	// 1 Gbit/s, 1000-byte packets: 8 µs each, back to back.
	l := NewLink(1, Impairment{Bandwidth: 1e9, Delay: 50 * time.Microsecond})
	for i := range 100 {
		l.Send(Epoch(), numbered(i, 1000))
	}
	got := drain(l)
	require.Len(t, got, 100)
	for i, a := range got {
		require.Equal(t, i, number(a.pkt))
		require.Equal(t, 50*time.Microsecond+time.Duration(i+1)*8*time.Microsecond, a.at.Sub(Epoch()), "packet %d", i)
	}
	// An idle link does not bank credit: a packet sent later departs at
	// its send time plus its own serialization.
	later := Epoch().Add(time.Second)
	l.Send(later, numbered(0, 125)) // 1 µs
	d, _ := l.Deadline()
	assert.Equal(t, 51*time.Microsecond, d.Sub(later), "deadline after idle")
}

func TestLinkQueueLimit(t *testing.T) {
	l := NewLink(1, Impairment{Bandwidth: 8e6, QueueLimit: 10}) // 1 µs per byte
	for i := range 100 {
		l.Send(Epoch(), numbered(i, 1000)) // 1 ms each
	}
	require.Equal(t, uint64(90), l.Stats().Dropped[DropQueueFull])
	require.Equal(t, 10, l.Pending())
	// After 2.5 ms two packets have left the queue: room for two.
	at := Epoch().Add(2500 * time.Microsecond)
	for i := range 3 {
		l.Send(at, numbered(100+i, 1000))
	}
	assert.Equal(t, uint64(91), l.Stats().Dropped[DropQueueFull])
	checkBalance(t, l)
}

func TestLinkBlackhole(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		bh   Blackhole
		down func(t time.Duration) bool
	}{
		{"window", Blackhole{Windows: []Window{{10 * ms, 20 * ms}, {30 * ms, 31 * ms}}},
			func(t time.Duration) bool { return t >= 10*ms && t < 20*ms || t == 30*ms }},
		{"on-off", OnOff(5*ms, 2*ms),
			func(t time.Duration) bool { return t%(7*ms) >= 5*ms }},
		{"absolute origin", Blackhole{Origin: Epoch().Add(40 * ms), Windows: []Window{{0, 3 * ms}}},
			func(t time.Duration) bool { return t >= 40*ms && t < 43*ms }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLink(1, Impairment{Blackhole: tc.bh})
			for i := range 100 {
				at := Epoch().Add(time.Duration(i) * ms)
				l.Send(at, numbered(i, 8))
				got := l.Receive(at, nil)
				assert.Equal(t, tc.down(time.Duration(i)*ms), len(got) == 0, "send at +%dms blackholed", i)
			}
			checkBalance(t, l)
		})
	}
}

func TestLinkBlackholeInFlight(t *testing.T) {
	// Packets already in flight when the window opens still arrive.
	l := NewLink(1, Impairment{Delay: 5 * time.Millisecond, Blackhole: Blackhole{Windows: []Window{{time.Millisecond, time.Hour}}}})
	l.Send(Epoch(), []byte{1})
	l.Send(Epoch().Add(time.Millisecond), []byte{2})
	got := drain(l)
	require.Len(t, got, 1, "want only the packet sent before the window")
	assert.Equal(t, []byte{1}, got[0].pkt)
}

func TestLinkCorrupt(t *testing.T) {
	tests := []struct {
		name   string
		c      Corrupt
		size   int
		lo, hi int // region that may change
	}{
		{"anywhere", Corrupt{Rate: 1}, 200, 0, 200},
		{"header default 50", Corrupt{Rate: 1, Region: CorruptHeader}, 200, 0, 50},
		{"header 12 (BTH)", Corrupt{Rate: 1, Region: CorruptHeader, HeaderLen: 12}, 200, 0, 12},
		{"header longer than packet", Corrupt{Rate: 1, Region: CorruptHeader}, 20, 0, 20},
		{"tail4 (ICRC)", Corrupt{Rate: 1, Region: CorruptTail4}, 200, 196, 200},
		{"tail4 short", Corrupt{Rate: 1, Region: CorruptTail4}, 3, 0, 3},
		{"one byte", Corrupt{Rate: 1}, 1, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLink(17, Impairment{Corrupt: tc.c})
			hit := make(map[int]bool)
			const n = 2000
			orig := Pattern(1, tc.size)
			for range n {
				l.Send(Epoch(), orig)
			}
			for _, p := range l.Receive(Epoch(), nil) {
				diff := 0
				for i := range p {
					if p[i] != orig[i] {
						diff++
						hit[i] = true
						require.True(t, i >= tc.lo && i < tc.hi, "byte %d changed, outside [%d, %d)", i, tc.lo, tc.hi)
					}
				}
				require.Equal(t, 1, diff, "bytes changed")
			}
			assert.Len(t, hit, tc.hi-tc.lo, "distinct offsets hit")
			assert.Equal(t, uint64(n), l.Stats().Corrupted)
		})
	}
}

func TestLinkCorruptRateAndEmpty(t *testing.T) {
	const n = 50_000
	l := NewLink(19, Impairment{Corrupt: Corrupt{Rate: 0.01}})
	orig := Pattern(2, 100)
	for range n {
		l.Send(Epoch(), orig)
	}
	changed := 0
	for _, p := range l.Receive(Epoch(), nil) {
		if !bytes.Equal(p, orig) {
			changed++
		}
	}
	s := l.Stats()
	assert.Equal(t, uint64(changed), s.Corrupted, "packets changed vs Corrupted")
	within(t, "corrupted", s.Corrupted, n, 0.01, 5)

	l = NewLink(19, Impairment{Corrupt: Corrupt{Rate: 1}})
	l.Send(Epoch(), nil)
	got := l.Receive(Epoch(), nil)
	require.Len(t, got, 1)
	assert.Empty(t, got[0])
	assert.Zero(t, l.Stats().Corrupted, "an empty packet cannot be corrupted")
}

func TestLinkInject(t *testing.T) {
	l := NewLink(1, Impairment{Loss: 1, Delay: time.Second, Corrupt: Corrupt{Rate: 1}})
	var evs []Event
	l.imp.OnPacket = func(ev Event) { evs = append(evs, ev) }
	l.Send(Epoch(), []byte{1, 2, 3})
	forged := []byte{0xde, 0xad}
	l.Inject(Epoch(), forged)
	got := l.Receive(Epoch(), nil)
	require.Equal(t, [][]byte{forged}, got, "the injected packet, untouched")
	s := l.Stats()
	assert.Equal(t, uint64(1), s.Injected)
	assert.Equal(t, uint64(1), s.Delivered)
	assert.Equal(t, uint64(1), s.Dropped[DropLoss])
	var kinds []EventKind
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
	}
	require.Equal(t, []EventKind{EventSent, EventDropped, EventInjected, EventDelivered}, kinds)
	assert.Equal(t, -1, evs[3].Index)
	assert.Equal(t, 2, evs[3].Len)
	assert.Equal(t, DropLoss, evs[1].Reason)
}

// kitchenSink enables every knob.
func kitchenSink() Impairment {
	return Impairment{
		Loss:           0.01,
		GilbertElliott: GilbertElliott{PGB: 0.005, PBG: 0.3},
		BurstLoss:      BurstLoss{Rate: 0.02, MaxBurst: 3},
		DropList:       []int{3, 5},
		DropIf:         func(p []byte) bool { return p[7]%16 == 0 },
		DropIfRate:     0.1,
		Blackhole:      OnOff(5*time.Millisecond, time.Millisecond),
		Dup:            0.02,
		Corrupt:        Corrupt{Rate: 0.01},
		Bandwidth:      6e9, // 1.37 µs per packet, sent every 1 µs: the queue fills
		QueueLimit:     64,
		Delay:          100 * time.Microsecond,
		Jitter:         20 * time.Microsecond,
		Reorder:        Reorder{Rate: 0.01, MinSlots: 1, MaxSlots: 8},
	}
}

// trace runs n packets through a kitchen-sink link and returns what came
// out, with delivery times.
func trace(seed uint64, n int) ([]arrival, LinkStats) {
	l := NewLink(seed, kitchenSink())
	clock := NewClock()
	var out []arrival
	var buf [][]byte
	for i := range n {
		l.Send(clock.Now(), numbered(i, 1024))
		clock.Advance(time.Microsecond)
		for {
			d, ok := l.Deadline()
			if !ok || d.After(clock.Now()) {
				break
			}
			buf = l.Receive(d, buf[:0])
			for _, p := range buf {
				out = append(out, arrival{d, p})
			}
		}
	}
	return append(out, drain(l)...), l.Stats()
}

func TestLinkDeterminism(t *testing.T) {
	const n = 20_000
	a, sa := trace(99, n)
	b, sb := trace(99, n)
	require.Equal(t, sa, sb, "same seed, different stats")
	require.Equal(t, a, b, "same seed, different deliveries")
	_, sc := trace(100, n)
	assert.NotEqual(t, sa, sc, "different seeds gave identical stats")
	// Every knob did something.
	for r := range NumDropReasons {
		assert.Positive(t, sa.Dropped[r], "drops for reason %v", r)
	}
	assert.Positive(t, sa.Duplicated)
	assert.Positive(t, sa.Reordered)
	assert.Positive(t, sa.Corrupted)
	// Deliveries are in time order.
	for i := 1; i < len(a); i++ {
		require.False(t, a[i].at.Before(a[i-1].at), "delivery %d at %v before the previous one at %v", i, a[i].at, a[i-1].at)
	}
}

func TestLinkKnobsIndependent(t *testing.T) {
	// Turning on another random knob does not change the loss pattern.
	lossOnly := lostIndices(NewLink(5, Impairment{Loss: 0.05}))
	withDup := lostIndices(NewLink(5, Impairment{Loss: 0.05, Dup: 0.5, Jitter: time.Millisecond, Corrupt: Corrupt{Rate: 0.5}}))
	assert.Equal(t, lossOnly, withDup, "enabling Dup, Jitter and Corrupt changed which packets Loss drops")
}

func lostIndices(l *Link) []int {
	var lost []int
	l.imp.OnPacket = func(ev Event) {
		if ev.Kind == EventDropped {
			lost = append(lost, ev.Index)
		}
	}
	for range 10_000 {
		l.Send(Epoch(), []byte{0})
	}
	return lost
}

func TestLinkBalance(t *testing.T) {
	l := NewLink(3, kitchenSink())
	for i := range 10_000 {
		l.Send(Epoch().Add(time.Duration(i)*time.Microsecond), numbered(i, 512))
		if i%100 == 0 {
			l.Inject(Epoch().Add(time.Duration(i)*time.Microsecond), []byte{1})
		}
		if i%7 == 0 {
			for _, p := range l.Receive(Epoch().Add(time.Duration(i)*time.Microsecond), nil) {
				l.Release(p)
			}
		}
		checkBalance(t, l)
	}
	drain(l)
	checkBalance(t, l)
	assert.Zero(t, l.Pending(), "after drain")
}

func TestLinkReleaseZeroAlloc(t *testing.T) {
	l := NewLink(1, Impairment{Loss: 0.01, Delay: time.Microsecond, Jitter: 100, Reorder: Reorder{Rate: 0.01, MaxSlots: 4}})
	pkt := make([]byte, 1024)
	clock := NewClock()
	buf := make([][]byte, 0, 16)
	step := func() {
		l.Send(clock.Now(), pkt)
		clock.Advance(time.Microsecond)
		buf = l.Receive(clock.Now(), buf[:0])
		for _, p := range buf {
			l.Release(p)
		}
	}
	for range 1000 {
		step()
	}
	assert.Zero(t, testing.AllocsPerRun(10_000, step), "allocations per Send+Receive+Release")
}

func TestImpairmentValidation(t *testing.T) {
	bad := []Impairment{
		{Loss: 1.5},
		{Loss: math.NaN()},
		{Dup: -0.1},
		{Delay: -1},
		{Reorder: Reorder{Rate: 0.1, MinSlots: 5, MaxSlots: 2}},
		{Blackhole: Blackhole{Windows: []Window{{2, 1}}}},
		{Corrupt: Corrupt{Region: 9}},
		{DropList: []int{-1}},
	}
	for _, imp := range bad {
		assert.Panics(t, func() { NewLink(1, imp) }, "NewLink(%+v)", imp)
	}
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "GilbertElliott", DropGilbertElliott.String())
	assert.Equal(t, "DropReason(99)", DropReason(99).String())
	assert.Equal(t, "Delivered", EventDelivered.String())
	assert.Equal(t, "Tail4", CorruptTail4.String())
}

func BenchmarkLinkSendReceive(b *testing.B) {
	for _, bc := range []struct {
		name string
		imp  Impairment
	}{
		{"perfect", Impairment{}},
		{"delay", Impairment{Delay: 10 * time.Microsecond}},
		{"impaired", Impairment{Loss: 0.01, Dup: 0.01, Delay: 10 * time.Microsecond, Jitter: time.Microsecond,
			Bandwidth: 100e9, Reorder: Reorder{Rate: 0.01, MaxSlots: 8}, Corrupt: Corrupt{Rate: 0.01}}},
	} {
		for _, release := range []bool{true, false} {
			name := bc.name
			if !release {
				name += "/no-release"
			}
			b.Run(name, func(b *testing.B) {
				l := NewLink(1, bc.imp)
				pkt := make([]byte, 1024+12+4)
				clock := NewClock()
				buf := make([][]byte, 0, 64)
				b.ReportAllocs()
				b.SetBytes(int64(len(pkt)))
				for b.Loop() {
					l.Send(clock.Now(), pkt)
					clock.Advance(100 * time.Nanosecond)
					buf = l.Receive(clock.Now(), buf[:0])
					if release {
						for _, p := range buf {
							l.Release(p)
						}
					}
				}
			})
		}
	}
}
