package roce

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/cq"
)

// Waiters counts the goroutines blocked waiting for the work of one or
// more devices: in a Wait on a CQ one of them made (CreateCQ, a QP's own
// CQ) or in one's WaitRx. A device's receive goroutine hands its processor
// over after a batch while any is counted, since the batch may have
// readied one (doc/latency.md §7). Each device counts its own unless
// Config.Waiters gives it one to share: devices of one process whose
// goroutines wait for each other's work — the two ends of a loopback test
// — should share one, so that a responder's batches yield while its
// peer's requester waits. The zero value is ready; a Waiters must not be
// copied once in use.
type Waiters struct {
	n atomic.Int32
}

// Len returns the number of goroutines counted.
func (w *Waiters) Len() int { return int(w.n.Load()) }

// cqHook is the cq.Hook of the CQs a device makes: a push marks the
// device's next batch as one that may have woken a waiter (pushed), and
// the CQ's blocked waiters are counted in the device's Waiters.
type cqHook struct{ d *Device }

var _ cq.Hook = cqHook{}

func (h cqHook) Pushed() {
	if !h.d.pushed.Load() { // a load, not a store, when already set: one cache line for every shard
		h.d.pushed.Store(true)
	}
}

func (h cqHook) Waiting(delta int) { h.d.waiters.n.Add(int32(delta)) }

// rxNotify tells waiters that the receive goroutine has processed a batch
// of datagrams: RDMA WRITEs land in memory regions with no completion, so
// a program that watches a buffer for a peer's WRITE (perftest's
// write_lat polls the last byte of its buffer) has nothing else to sleep
// on. Its zero value is ready; the receive loop calls processed after
// each batch, outside the engine lock (afterBatch).
type rxNotify struct {
	seq     atomic.Uint64 // batches processed
	waiters atomic.Int32  // goroutines in WaitRx
	mu      sync.Mutex
	parked  []chan struct{} // the channels of waiters to wake at the next batch, under mu
	free    []chan struct{} // channels (cap 1) for later waiters, under mu: no allocation per wait
}

// OnBatch sets fn to run on the device's receive goroutine after each
// batch of received datagrams has been processed (its memory writes,
// completions and replies done, no lock of the device held), or clears it
// (nil). It is run to completion: a program that polls its CQs and posts
// its next requests in fn handles each completion on the goroutine that
// produced it, with no goroutine woken in between (doc/latency.md §6).
//
// fn must return promptly: the device receives nothing while it runs. It
// may call verbs (PostSend, PostRecv, a CQ's Poll) but must not block on
// the device (a CQ's Wait, WaitRx, Close). A call of fn that began before
// OnBatch returns may still be running. Completions that no received
// batch follows — a retransmission timer's error, a flush by Modify or
// Close — reach fn only with the next batch, if any: a program that
// relies on fn must look at its CQs some other way as well when nothing
// has happened for a while.
func (d *Device) OnBatch(fn func()) {
	if fn == nil {
		d.onBatch.Store(nil)
		return
	}
	d.onBatch.Store(&fn)
}

// processed counts a batch and wakes every parked waiter. The batch's
// effects (memory written, completions pushed) happen before the count:
// a waiter that sees the new count sees them. Each waiter has a channel
// of its own, so a waiter that comes late cannot take an earlier one's
// wake-up.
func (n *rxNotify) processed() {
	n.seq.Add(1)
	if n.waiters.Load() == 0 {
		return
	}
	n.mu.Lock()
	for i, c := range n.parked {
		select {
		case c <- struct{}{}:
		default:
		}
		n.parked[i] = nil
	}
	n.parked = n.parked[:0]
	n.mu.Unlock()
}

// park registers a channel to be woken at the next batch, unless the count
// moved past seq already (then it returns nil).
func (n *rxNotify) park(seq uint64, c chan struct{}) chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seq.Load() != seq {
		return nil
	}
	if c == nil {
		if k := len(n.free); k > 0 {
			c, n.free = n.free[k-1], n.free[:k-1]
		} else {
			c = make(chan struct{}, 1)
		}
	}
	n.parked = append(n.parked, c)
	return c
}

// unpark takes c off the parked list if it is still there and keeps it for
// later waiters, its token drained.
func (n *rxNotify) unpark(c chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if i := slices.Index(n.parked, c); i >= 0 {
		n.parked = slices.Delete(n.parked, i, i+1)
	}
	select {
	case <-c:
	default:
	}
	n.free = append(n.free, c)
}

// RxSeq returns the number of received batches the device has processed:
// it changes after every batch of datagrams the receive goroutine has
// handled (memory written by WRITEs, completions pushed, replies sent),
// whether or not they were valid. Take it before looking at memory a peer
// writes, and pass it to WaitRx to sleep until something new arrived.
func (d *Device) RxSeq() uint64 { return d.rx.seq.Load() }

// WaitRx blocks until the device has processed a received batch beyond
// seq (a value RxSeq returned), and returns nil; it returns at once if one
// already was. It returns ctx's error when ctx ends first, and ErrClosed
// once the device is closed. It is the efficient wait of a program that
// polls memory for a peer's RDMA WRITE:
//
//	for {
//		seq := d.RxSeq()
//		if lastByte() == want { break }
//		if err := d.WaitRx(ctx, seq); err != nil { … }
//	}
//
// Taking seq before the look means no WRITE is missed: one that lands
// after the look also moves the count past seq. A wake-up says only that
// something arrived, perhaps for another QP or region: look again. Any
// number of goroutines may wait; WaitRx allocates only the first time a
// waiter has to park (its channel is kept for later ones).
func (d *Device) WaitRx(ctx context.Context, seq uint64) error {
	n := &d.rx
	if n.seq.Load() != seq {
		return nil
	}
	// waiters counts this wait before park looks at the count: a batch
	// counted after that look sees a waiter and wakes the parked ones.
	n.waiters.Add(1)
	defer n.waiters.Add(-1)
	d.waiters.n.Add(1)
	defer d.waiters.n.Add(-1)
	var c chan struct{}
	for {
		p := n.park(seq, c)
		if p == nil {
			if c != nil {
				n.unpark(c)
			}
			return nil
		}
		c = p
		select {
		case <-c: // processed took c off the list: look again
		case <-d.done:
			n.unpark(c)
			return ErrClosed
		case <-ctx.Done():
			n.unpark(c)
			return ctx.Err()
		}
	}
}
