package testutil

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"time"
)

// maxFreeBufs bounds the buffer free list fed by Link.Release.
const maxFreeBufs = 4096

// Independent random streams, one per knob, so that enabling one knob does
// not change the choices of another.
const (
	streamLoss uint64 = iota + 1
	streamGE
	streamBurst
	streamClass
	streamDup
	streamCorrupt
	streamJitter
	streamReorder
)

// Link is one direction of an impaired packet link in virtual time, a
// discrete-event model: Send schedules each surviving copy for a delivery
// time, Deadline reports the earliest one, and Receive hands over every
// packet that is due. There are no goroutines or timers; pending packets
// sit in a min-heap ordered by (delivery time, scheduling order), so the
// cost per packet is O(log in-flight) and the link scales to millions of
// packets.
//
// A Link is driven by one goroutine at a time. Send times should not
// decrease; an earlier time is treated as the latest one seen.
//
// Buffers: Send and Inject copy the packet, so the caller keeps its buffer.
// Receive hands the copies over to the caller, who may give them back with
// Release for reuse.
type Link struct {
	imp  Impairment
	seed uint64

	rLoss, rGE, rBurst, rClass, rDup, rCorrupt, rJitter, rReorder rand.PCG

	geBad    bool  // Gilbert–Elliott state
	burstRun int   // consecutive BurstLoss drops
	dropList []int // sorted, unique
	dropNext int   // cursor into dropList
	bhOrigin int64 // Blackhole origin, UnixNano

	sent        int    // next Send index
	seq         uint64 // next scheduling sequence number
	lastNow     int64  // latest Send/Inject time
	txFree      int64  // when the serializer is next idle
	txQueue     []int64
	txHead      int
	lastArrival int64 // latest scheduled FIFO arrival

	pending     pendingHeap
	held        []*entry
	freeEntries []*entry
	freeBufs    [][]byte

	stats LinkStats
}

// NewLink returns a link applying imp, with every random choice drawn from
// PCG generators seeded by seed; the same seed and impairment always give
// the same deliveries. NewLink panics if imp is invalid (a rate outside
// [0, 1], a negative duration …), which is a programmer error.
func NewLink(seed uint64, imp Impairment) *Link {
	l := &Link{imp: imp.normalize(), seed: seed}
	for _, s := range []struct {
		p      *rand.PCG
		stream uint64
	}{
		{&l.rLoss, streamLoss}, {&l.rGE, streamGE}, {&l.rBurst, streamBurst},
		{&l.rClass, streamClass}, {&l.rDup, streamDup}, {&l.rCorrupt, streamCorrupt},
		{&l.rJitter, streamJitter}, {&l.rReorder, streamReorder},
	} {
		s.p.Seed(splitmix64(seed+s.stream*0x9e3779b97f4a7c15), splitmix64(seed^s.stream))
	}
	if len(imp.DropList) > 0 {
		l.dropList = slices.Clone(imp.DropList)
		slices.Sort(l.dropList)
		l.dropList = slices.Compact(l.dropList)
	}
	origin := l.imp.Blackhole.Origin
	if origin.IsZero() {
		origin = Epoch()
	}
	l.bhOrigin = origin.UnixNano()
	l.lastNow = -1 << 63
	return l
}

// Seed returns the seed the link was created with, for failure messages.
func (l *Link) Seed() uint64 { return l.seed }

// Stats returns the link's counters.
func (l *Link) Stats() LinkStats { return l.stats }

// Pending returns the number of packets scheduled but not yet received,
// held packets included.
func (l *Link) Pending() int { return len(l.pending) }

// Deadline returns the delivery time of the next pending packet, and false
// if none is pending.
func (l *Link) Deadline() (time.Time, bool) {
	if len(l.pending) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, l.pending[0].at), true
}

// Send puts a copy of pkt on the link at time now and applies the
// impairments described at [Impairment]. The caller keeps pkt.
func (l *Link) Send(now time.Time, pkt []byte) {
	t := l.advance(now)
	idx := l.sent
	l.sent++
	l.stats.Sent++
	l.emit(EventSent, t, idx, pkt, 0)
	if r, drop := l.dropDecision(t, idx, pkt); drop {
		l.stats.Dropped[r]++
		l.emit(EventDropped, t, idx, pkt, r)
		return
	}
	dup := l.imp.Dup > 0 && chance(&l.rDup, l.imp.Dup)
	l.schedule(t, idx, pkt, true)
	if dup {
		l.stats.Duplicated++
		l.emit(EventDuplicated, t, idx, pkt, 0)
		l.schedule(t, idx, pkt, false)
	}
}

// Inject is the attacker port: it puts a copy of pkt on the link for
// delivery at now, bypassing every impairment (no loss, delay, corruption
// or serialization). It stands for a packet forged by a third party, from
// any source. Injected packets have Send index -1.
func (l *Link) Inject(now time.Time, pkt []byte) {
	t := now.UnixNano()
	l.stats.Injected++
	l.emit(EventInjected, t, -1, pkt, 0)
	e := l.newEntry(pkt, -1)
	e.at = t
	l.pending.push(e)
}

// Receive appends to dst every packet due at or before now, in delivery
// order, and returns the extended slice. The caller owns the returned
// packets and may hand them back with Release.
func (l *Link) Receive(now time.Time, dst [][]byte) [][]byte {
	t := now.UnixNano()
	for len(l.pending) > 0 && l.pending[0].at <= t {
		e := l.pending.pop()
		if e.hold > 0 {
			l.unhold(e)
		}
		l.stats.Delivered++
		l.emit(EventDelivered, e.at, e.idx, e.pkt, 0)
		dst = append(dst, e.pkt)
		e.pkt = nil
		l.freeEntries = append(l.freeEntries, e)
	}
	return dst
}

// Release gives a packet returned by Receive back to the link for reuse by
// later Sends. It is optional; the caller must not touch pkt afterwards.
func (l *Link) Release(pkt []byte) {
	if cap(pkt) > 0 && len(l.freeBufs) < maxFreeBufs {
		l.freeBufs = append(l.freeBufs, pkt[:0])
	}
}

// advance returns now in nanoseconds, never earlier than a previous Send.
func (l *Link) advance(now time.Time) int64 {
	t := now.UnixNano()
	if t < l.lastNow {
		return l.lastNow
	}
	l.lastNow = t
	return t
}

// dropDecision consults every drop knob. All enabled random knobs draw for
// every packet, so their patterns do not depend on one another.
func (l *Link) dropDecision(t int64, idx int, pkt []byte) (DropReason, bool) {
	imp := &l.imp
	reason, drop := DropReason(0), false
	set := func(r DropReason) {
		if !drop {
			reason, drop = r, true
		}
	}
	if len(imp.Blackhole.Windows) > 0 && l.inBlackhole(t) {
		set(DropBlackhole)
	}
	if l.dropNext < len(l.dropList) && l.dropList[l.dropNext] == idx {
		l.dropNext++
		set(DropIndex)
	}
	if imp.DropIf != nil && imp.DropIf(pkt) && chance(&l.rClass, imp.DropIfRate) {
		set(DropClass)
	}
	if imp.Loss > 0 && chance(&l.rLoss, imp.Loss) {
		set(DropLoss)
	}
	if ge := &imp.GilbertElliott; ge.PGB > 0 {
		p, move := ge.LossGood, ge.PGB
		if l.geBad {
			p, move = ge.LossBad, ge.PBG
		}
		lost := chance(&l.rGE, p)
		if chance(&l.rGE, move) {
			l.geBad = !l.geBad
		}
		if lost {
			set(DropGilbertElliott)
		}
	}
	if bl := &imp.BurstLoss; bl.Rate > 0 {
		if chance(&l.rBurst, bl.Rate) && (bl.MaxBurst == 0 || l.burstRun < bl.MaxBurst) {
			l.burstRun++
			set(DropBurstLoss)
		} else {
			l.burstRun = 0
		}
	}
	return reason, drop
}

func (l *Link) inBlackhole(t int64) bool {
	rel := t - l.bhOrigin
	if rel < 0 {
		return false
	}
	if p := int64(l.imp.Blackhole.Period); p > 0 {
		rel %= p
	}
	for _, w := range l.imp.Blackhole.Windows {
		if rel >= int64(w.Start) && rel < int64(w.End) {
			return true
		}
	}
	return false
}

// schedule copies pkt, corrupts the copy if chosen, computes its delivery
// time and queues it. holdable says whether Reorder may hold it back.
func (l *Link) schedule(t int64, idx int, pkt []byte, holdable bool) {
	imp := &l.imp
	depart := t
	if imp.Bandwidth > 0 {
		if imp.QueueLimit > 0 {
			for l.txHead < len(l.txQueue) && l.txQueue[l.txHead] <= t {
				l.txHead++
			}
			if len(l.txQueue)-l.txHead >= imp.QueueLimit {
				l.stats.Dropped[DropQueueFull]++
				l.emit(EventDropped, t, idx, pkt, DropQueueFull)
				return
			}
		}
		depart = max(t, l.txFree) + serialization(len(pkt), imp.Bandwidth)
		l.txFree = depart
		if imp.QueueLimit > 0 {
			if l.txHead > 1024 && l.txHead*2 > len(l.txQueue) {
				l.txQueue = append(l.txQueue[:0], l.txQueue[l.txHead:]...)
				l.txHead = 0
			}
			l.txQueue = append(l.txQueue, depart)
		}
	}

	e := l.newEntry(pkt, idx)
	if imp.Corrupt.Rate > 0 && chance(&l.rCorrupt, imp.Corrupt.Rate) && l.corrupt(e.pkt) {
		l.stats.Corrupted++
		l.emit(EventCorrupted, t, idx, e.pkt, 0)
	}

	at := depart + int64(imp.Delay)
	if j := int64(imp.Jitter); j > 0 {
		at += int64(intn(&l.rJitter, uint64(2*j+1))) - j
		at = max(at, depart)
	}
	if !imp.JitterReorder {
		at = max(at, l.lastArrival)
	}
	l.lastArrival = max(l.lastArrival, at)

	if r := &imp.Reorder; holdable && r.Rate > 0 && chance(&l.rReorder, r.Rate) {
		k := r.MinSlots + int(intn(&l.rReorder, uint64(r.MaxSlots-r.MinSlots+1)))
		e.hold = k
		e.nominal = at
		e.at = at + int64(r.HoldMax)
		l.pending.push(e)
		l.held = append(l.held, e)
		l.stats.Reordered++
		l.emit(EventReordered, t, idx, e.pkt, 0)
		return
	}

	e.at = at
	l.pending.push(e)
	// This packet fills one slot of every held packet; release those whose
	// last slot it was, right behind it.
	for i := 0; i < len(l.held); {
		h := l.held[i]
		if h.hold--; h.hold > 0 {
			i++
			continue
		}
		h.at = max(h.nominal, at)
		h.seq = l.nextSeq()
		l.pending.fix(h.hi)
		l.held = slices.Delete(l.held, i, i+1)
	}
}

// unhold removes e, released by its HoldMax timeout, from the held list.
func (l *Link) unhold(e *entry) {
	e.hold = 0
	if i := slices.Index(l.held, e); i >= 0 {
		l.held = slices.Delete(l.held, i, i+1)
	}
}

// corrupt XORs one byte of the configured region with a nonzero value and
// reports whether the packet was long enough to change.
func (l *Link) corrupt(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	lo, hi := 0, len(b)
	switch l.imp.Corrupt.Region {
	case CorruptHeader:
		hi = min(hi, l.imp.Corrupt.HeaderLen)
	case CorruptTail4:
		lo = max(0, hi-4)
	}
	i := lo + int(intn(&l.rCorrupt, uint64(hi-lo)))
	b[i] ^= byte(1 + intn(&l.rCorrupt, 255))
	return true
}

func (l *Link) nextSeq() uint64 {
	s := l.seq
	l.seq++
	return s
}

// newEntry returns a pending entry holding a copy of pkt, reusing freed
// entries and buffers.
func (l *Link) newEntry(pkt []byte, idx int) *entry {
	var e *entry
	if n := len(l.freeEntries); n > 0 {
		e = l.freeEntries[n-1]
		l.freeEntries = l.freeEntries[:n-1]
	} else {
		e = new(entry)
	}
	var b []byte
	if n := len(l.freeBufs); n > 0 {
		b = l.freeBufs[n-1]
		l.freeBufs = l.freeBufs[:n-1]
	}
	if cap(b) < len(pkt) {
		b = make([]byte, len(pkt))
	}
	b = b[:len(pkt)]
	copy(b, pkt)
	*e = entry{pkt: b, idx: idx, seq: l.nextSeq()}
	return e
}

func (l *Link) emit(k EventKind, t int64, idx int, pkt []byte, r DropReason) {
	if l.imp.OnPacket == nil {
		return
	}
	l.imp.OnPacket(Event{Kind: k, Time: time.Unix(0, t), Index: idx, Len: len(pkt), Reason: r, Pkt: pkt})
}

// serialization returns the time to clock n bytes out at bw bits/s,
// rounded up to the nanosecond.
func serialization(n int, bw uint64) int64 {
	hi, lo := bits.Mul64(uint64(n)*8, uint64(time.Second))
	if hi >= bw { // more than ~292 years: saturate
		return 1<<63 - 1
	}
	q, r := bits.Div64(hi, lo, bw)
	if r != 0 {
		q++
	}
	return int64(q)
}

// chance returns true with probability p.
func chance(src *rand.PCG, p float64) bool {
	return float64(src.Uint64()>>11)*0x1p-53 < p
}

// intn returns a uniform value in [0, n), n > 0 (Lemire's multiply-shift;
// the bias is below 2^-50 for the small n used here).
func intn(src *rand.PCG, n uint64) uint64 {
	hi, _ := bits.Mul64(src.Uint64(), n)
	return hi
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// entry is a packet scheduled for delivery.
type entry struct {
	at      int64  // delivery time, UnixNano
	seq     uint64 // tie-break: scheduling order
	nominal int64  // for a held packet: its delivery time had it not been held
	pkt     []byte
	idx     int // Send index, -1 if injected
	hi      int // index in pendingHeap
	hold    int // slots still to wait; > 0 only while held
}

// pendingHeap is a binary min-heap of entries ordered by (at, seq). It is
// hand-written rather than container/heap to avoid interface calls on the
// per-packet path and to keep each entry's index for fix.
type pendingHeap []*entry

func (h pendingHeap) less(i, j int) bool {
	a, b := h[i], h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (h pendingHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hi = i
	h[j].hi = j
}

func (h *pendingHeap) push(e *entry) {
	e.hi = len(*h)
	*h = append(*h, e)
	h.up(e.hi)
}

func (h *pendingHeap) pop() *entry {
	old := *h
	n := len(old) - 1
	old.swap(0, n)
	e := old[n]
	old[n] = nil
	*h = old[:n]
	h.down(0)
	return e
}

func (h pendingHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h pendingHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

// down sifts element i down and reports whether it moved.
func (h pendingHeap) down(i int) bool {
	i0, n := i, len(h)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && h.less(r, j) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
