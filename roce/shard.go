package roce

import (
	"runtime"
	"sync"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/qp"
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
	// deferred is set when a verb left newly posted WQEs to their QP's
	// reply (QP.kick); sendDeferred sends them after an OnBatch function.
	deferred bool
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

// unlockRx is unlock for the receive goroutine: a queue of request data
// it holds the sender role for goes to the shard's sender goroutine
// (handOffMin).
func (s *shard) unlockRx() {
	s.handOff = true
	s.unlock()
}

// service transmits what the shard's active QPs have and makes sure its
// timer covers the earliest deadline; the caller holds the engine lock.
func (s *shard) service(now time.Time) {
	if s.d.closed.Load() {
		return
	}
	s.transmit(now)
	s.rearm(now)
}

// activate marks q as possibly having packets to send.
func (s *shard) activate(q *QP) {
	if !q.active {
		q.active = true
		s.active = append(s.active, q)
	}
}
