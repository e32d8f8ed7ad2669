package roce

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
)

// Sharding (doc/engine.md): a device runs Config.Shards engines. A QP
// belongs to one shard for life, the one its QPN picks (shardOf), as a
// gVisor endpoint belongs to one dispatcher queue by its flow hash. Each
// shard has its own engine lock, QP table, active list, timer heap, timer
// goroutine and transmit batches, so verbs and packets of QPs on
// different shards never wait for each other, and a shard's sendmmsg is
// made outside every engine lock (txQueue).

// DefaultMaxShards caps the default shard count (Config.Shards 0).
const DefaultMaxShards = 8

// maxShards bounds Config.Shards: the receive goroutine's per-batch
// bookkeeping holds a shard index in a byte.
const maxShards = 256

// txBatches is the number of transmit batches a shard cycles through: one
// being filled under the engine lock while the others wait for or are in
// the link's Send. When all are queued, a goroutine that needs one waits
// for the sender to return one (back-pressure from the socket); if it
// holds the sender role itself, its transmit pass stops there and resumes
// once it has sent them, after releasing the lock (shard.unlock).
const txBatches = 3

// shard is one engine: the QPs whose QPN maps to it and everything their
// transport state needs to run.
type shard struct {
	d  *Device
	mu sync.Mutex // the shard's engine lock: guards its QPs' state and the fields below

	qps    map[bth.QPN]*QP
	lastRx *QP   // the QP the last received packet went to, while in qps
	active []*QP // QPs that may have packets to send
	spare  []*QP // the other half of active's double buffer
	timers timerHeap
	armed  time.Time   // the deadline the timer is set for (zero: none)
	timer  deviceTimer // the shard's single timer, armed under the lock

	pkt  rocev2.Packet
	rxIP qp.IPInfo // the IP header of the UD packet being handled

	tx      *txBatch // the batch being filled, owned by the lock's holder; nil: take one (batch)
	drain   bool     // the lock's holder took the sender role: it sends on unlock
	stalled bool     // a transmit pass stopped for want of a batch: unlock resumes it
	// handOff, set by the receive goroutine before it unlocks, lets unlock
	// pass a queue of request data to the shard's sender goroutine
	// (senderLoop) instead of sending it there.
	handOff bool
	kick    chan struct{} // cap 1: the sender goroutine has the role and a queue to send
	txq     txQueue

	// pushed is set when one of the shard's QPs pushed a completion
	// (shardCQ), and cleared by the receive goroutine after a batch: a
	// batch that pushed one may have woken a CQ's waiter (afterBatch).
	pushed atomic.Bool
	// deferred is set when a verb left newly posted WQEs to their QP's
	// reply (QP.kick); sendDeferred sends them after an OnBatch function.
	deferred bool
}

// shardCQ is the CQ a QP pushes its completions to: its own CQ, which
// the push also notes in the QP's shard (shard.pushed).
type shardCQ struct {
	c *cq.CQ
	s *shard
}

func (x shardCQ) Push(c cq.Completion) error {
	if !x.s.pushed.Load() {
		x.s.pushed.Store(true)
	}
	return x.c.Push(c)
}

// handOffMin is the send work of queued request data (WRITE and SEND
// packets, weighed by txBatch.weigh: each large packet, or each run of
// one QP's small ones, counts one) from which the receive goroutine hands
// its sender role to the shard's sender goroutine. A WRITE stream's ACK
// opens the window for about 31 packets of 4 KiB, whose sealing and
// sendmmsg took most of the receive goroutine's core; handed off, they
// run beside it, and it goes back to receiving: 64 KiB WRITE 0.62-0.66
// of the UDP ceiling against 0.56-0.61 (doc/limits.md §8). Responses are sent where they
// were made: the responder's receive goroutine would hand over after
// every batch of READ requests, a wake-up each, and READ fell from
// 0.60-0.67 to 0.54-0.59 when responses were handed over too. So is
// anything else (an ACK).
const handOffMin = 8

// txBatch is one batch of datagrams for the link's Send and the packet
// buffers they point into. Its owner is whoever holds it: the shard's lock
// while it is filled, the sender role while it is queued and sent.
type txBatch struct {
	bufs [][]byte
	dgs  []link.Datagram
	reqs int            // the send work of the request data among dgs, in handOffMin's units (weigh)
	last *QP            // the QP of the last request with payload weighed
	pay  []qp.TxPayload // dgs[i]'s payload left in its region, pinned until sendBatch has sent it
	// locked: the regions whose ReadLock sendBatch holds (readLock).
	locked []*mr.Region
}

func newTxBatch(n int) *txBatch {
	b := &txBatch{bufs: make([][]byte, n), dgs: make([]link.Datagram, 0, n), pay: make([]qp.TxPayload, n),
		locked: make([]*mr.Region, 0, n)}
	for i := range b.bufs {
		b.bufs[i] = make([]byte, maxFrame)
	}
	return b
}

// txQueue hands a shard's filled batches to the goroutine that sends
// them. At most one goroutine holds the sender role (sending) at a time
// and sends the queued batches in the order they were filled, so a QP's
// packets leave in the order its engine built them (PSN order, a
// retransmission after what it follows) with no lock held but this
// queue's, and only between sends.
//
// The role goes to the goroutine that queues a batch when no one holds it
// (the verb's caller, the receive goroutine or the timer goroutine), which
// sends once it has released the engine lock (shard.unlock). Others queue
// and leave: a PostSend never waits for another QP's sendmmsg.
type txQueue struct {
	mu      sync.Mutex
	cond    sync.Cond  // on mu: a batch was freed or the role released
	queue   []*txBatch // filled, in fill order
	free    []*txBatch
	sending bool // the sender role is held
}

// newShard makes shard i of d.
func newShard(d *Device, batch int) *shard {
	s := &shard{d: d, qps: make(map[bth.QPN]*QP), timer: newDeviceTimer(), tx: newTxBatch(batch),
		kick: make(chan struct{}, 1)}
	s.txq.cond.L = &s.txq.mu
	s.txq.queue = make([]*txBatch, 0, txBatches)
	s.txq.free = make([]*txBatch, 0, txBatches)
	for range txBatches - 1 {
		s.txq.free = append(s.txq.free, newTxBatch(batch))
	}
	return s
}

// shardCount resolves Config.Shards.
func shardCount(n int) int {
	if n == 0 {
		n = min(runtime.GOMAXPROCS(0), DefaultMaxShards)
	}
	return n
}

// shardOf returns the shard of QPN n. QPNs are random (newQPN), so their
// low bits spread QPs evenly.
func (d *Device) shardOf(n bth.QPN) *shard {
	return d.shards[uint32(n)%uint32(len(d.shards))]
}

// lock takes the shard's engine lock.
func (s *shard) lock() { s.mu.Lock() }

// unlock releases the engine lock and, if this goroutine took the sender
// role while holding it, sends what is queued: the syscall is made with
// no engine lock held. A transmit pass that stopped because every batch
// was queued (stall) is resumed after the send, under the lock again, and
// what it queues is sent the same way.
func (s *shard) unlock() {
	for {
		drain, stalled, handOff := s.drain, s.stalled, s.handOff
		s.drain, s.stalled, s.handOff = false, false, false
		if drain && handOff && !stalled && s.txq.queuedReqs() >= handOffMin {
			// The role passes to the sender goroutine with the queue; the
			// sends keep the role's order.
			s.mu.Unlock()
			s.kick <- struct{}{}
			return
		}
		s.mu.Unlock()
		if !drain {
			return
		}
		s.sendQueued(true)
		if !stalled {
			return
		}
		s.mu.Lock()
		s.service(time.Now())
	}
}

// batch returns the batch to fill, taking a free one if the last was
// queued; the caller holds the engine lock. When none is free it waits for
// the goroutine holding the sender role to free one, unless that is the
// caller: then it returns nil, and the caller must release the lock (and
// so send) before it can build more. Every batch that is not free is
// queued or being sent by the role's holder, so the wait ends.
func (s *shard) batch() *txBatch {
	if s.tx != nil {
		return s.tx
	}
	t := &s.txq
	t.mu.Lock()
	for len(t.free) == 0 {
		if s.drain {
			t.mu.Unlock()
			return nil
		}
		t.cond.Wait()
	}
	s.tx = t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	t.mu.Unlock()
	return s.tx
}

// flushTx queues the batch being filled for the link; the caller holds
// the engine lock. If no one holds the sender role, the caller takes it
// and sends on unlock.
func (s *shard) flushTx() {
	b := s.tx
	if b == nil || len(b.dgs) == 0 {
		return
	}
	t := &s.txq
	t.mu.Lock()
	t.queue = append(t.queue, b)
	if !t.sending {
		t.sending, s.drain = true, true
	}
	t.mu.Unlock()
	s.tx = nil
}

// stall ends a transmit pass that found no free batch (batch returned
// nil): qs, the QPs it had not finished, stay active, and unlock resumes
// the pass once it has sent the queued batches.
func (s *shard) stall(qs []*QP) {
	for _, q := range qs {
		q.active = false // those after the first were not reached yet
		s.activate(q)
	}
	s.stalled = true
}

// sendQueued sends the queued batches in order and frees them; the caller
// holds the sender role, and gives it up at the end with release.
func (s *shard) sendQueued(release bool) {
	t := &s.txq
	t.mu.Lock()
	for len(t.queue) > 0 {
		b := t.queue[0]
		n := copy(t.queue, t.queue[1:])
		t.queue[n] = nil
		t.queue = t.queue[:n]
		t.mu.Unlock()
		s.d.sendBatch(b)
		t.mu.Lock()
		t.free = append(t.free, b)
		t.cond.Broadcast()
	}
	if release {
		t.sending = false
		t.cond.Broadcast()
	}
	t.mu.Unlock()
}

// unlockRx is unlock for the receive goroutine: a queue of request data
// it holds the sender role for goes to the shard's sender goroutine
// (handOffMin).
func (s *shard) unlockRx() {
	s.handOff = true
	s.unlock()
}

// senderLoop is the shard's sender goroutine: it sends the queues the
// receive goroutine hands it with the sender role (unlock) and gives the
// role up when the queue is empty. It ends with the device: Close waits
// for the role to be given up (waitSent) before it ends the device.
func (s *shard) senderLoop() {
	defer s.d.wg.Done()
	for {
		select {
		case <-s.kick:
			s.sendQueued(true)
		case <-s.d.done:
			return
		}
	}
}

// queuedReqs returns the send work of the request data in the queued
// batches (txBatch.weigh).
func (t *txQueue) queuedReqs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, b := range t.queue {
		n += b.reqs
	}
	return n
}

// waitSent returns once no goroutine holds the sender role: every batch
// queued so far is sent. Close calls it after the last engine pass.
func (s *shard) waitSent() {
	t := &s.txq
	t.mu.Lock()
	for t.sending {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

// sendBatch plans, seals and sends a batch, then empties it. A link whose
// kernel picks the IPv4 ID (link/udp: segment k of a GSO super-packet
// carries ID k) plans the IDs first, since the ICRC covers them; the
// others send ID 0. It runs in the goroutine holding the shard's sender
// role, with no engine lock held (but for a CNP under back-pressure,
// notify).
func (d *Device) sendBatch(b *txBatch) {
	// link.Link allows one sending goroutine: the shards' senders take
	// turns. A two-part datagram's payload is read twice, by seal and by
	// the link's Send: its region's ReadLock spans both, so a WRITE landing
	// in the region meanwhile (the receive goroutine) cannot make the bytes
	// sent differ from those the ICRC covers. Only the holder of sendMu
	// takes several regions' locks, so they cannot deadlock.
	d.sendMu.Lock()
	if d.planner != nil {
		// Under sendMu: the plan follows the link's GSO state, which
		// another shard's Send may change (link/udp turns GSO off when
		// the kernel refuses it).
		d.planner.PlanIPID(b.dgs)
	}
	b.readLock()
	for i := range b.dgs {
		seal(&b.dgs[i])
	}
	ts := d.cap.beginSend()
	dgs := b.dgs
	for len(dgs) > 0 {
		n, err := d.link.Send(dgs)
		d.cap.sent(dgs[:n], ts)
		if err != nil {
			d.stats.SendErrors.Add(uint64(len(dgs) - n))
			break
		}
		dgs = dgs[n:]
	}
	d.cap.endSend()
	b.readUnlock()
	d.sendMu.Unlock()
	b.releasePayloads()
	b.dgs, b.reqs, b.last = b.dgs[:0], 0, nil
}

// readLock takes the ReadLock of each region the batch's payloads lie in,
// once per region; readUnlock releases them.
func (b *txBatch) readLock() {
	b.locked = b.locked[:0]
	for i := range b.dgs {
		r := b.pay[i].Region
		if r == nil || slices.Contains(b.locked, r) {
			continue
		}
		r.ReadLock()
		b.locked = append(b.locked, r)
	}
}

func (b *txBatch) readUnlock() {
	for i, r := range b.locked {
		r.ReadUnlock()
		b.locked[i] = nil
	}
	b.locked = b.locked[:0]
}
