package roce

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/cq"
)

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

// afterBatch runs on the receive goroutine after each batch, outside the
// engine lock: it counts the batch for RxSeq, wakes WaitRx's waiters and,
// when the batch may have woken somebody, yields the processor
// (runtime.Gosched) before the loop reads its socket again.
//
// A goroutine the batch made runnable — a Wait on a CQ, a WaitRx, a
// Notify reader — otherwise waits until the loop has made that read (a
// system call that finds the socket empty) and parked; and the yield
// hands the loop itself to an idle processor, which the scheduler wakes
// for it, so that processor is awake when the next datagram comes.
// Measured on the 2-byte WRITE ping-pong (goroce perf --lat -e): p50 8.9
// µs against 11.0 µs without, the UDP ping-pong's 6.4 µs in the same
// runs. Since the loop runs in the link's pump, which parks without that
// read, the yield still pays: p50 1.27-1.28 times the UDP ping-pong's
// with it, 1.64-1.67 without.
//
// It yields when the batch pushed a completion (pushed: shard.pushed),
// when it sent handOffMin datagrams or more itself (bulk: READ responses,
// which are sent where they were made), or when a goroutine of the process
// is blocked in a CQ's Wait or in a WaitRx of any device (cq.Waiting,
// rxWaiting). A bulk reply gave its peer work; in this process the peer
// is a goroutine that, without the yield, gets a processor only when this
// loop parks (nobody else polls the network): without it the loopback
// READ test kept 1.42-1.52 cores busy and moved 0.55-0.59 of the UDP
// ceiling, with it 1.67-1.69 cores and 0.60-0.62. The waiters are counted
// process-wide because the scheduler is: a device whose batches wake
// nobody — a responder whose peer's WRITEs land in memory with no
// completion — still helps another device's waiter in the same process by
// waking the idle processor early (that yield keeps goroce perf --lat -e
// at 1.21-1.28 times the UDP ping-pong's p50; without it 1.55-1.64).
// Where nobody waits and the reply was small, the yield's wake-up only
// moves the next turn to the other CPU, and sometimes finds that CPU
// halted: in the run-to-completion ping-pong (the default here), whose
// responder device yielded after every WRITE, the p99 was 2.6-3.0 times
// the UDP ping-pong's, and is 1.3-1.5 times without that yield
// (doc/latency.md §7).
//
// With an OnBatch function the loop does not yield: the program's work
// for the batch ran inline, and there is nobody to hand the processor
// to (with the yield, the run-to-completion ping-pong's p99 was 29-36 µs,
// without 14-24 µs; p50 unchanged, 7.5-7.6 µs).
func (d *Device) afterBatch(pushed, bulk bool) {
	d.stats.RxBatches.Add(1)
	d.rx.processed()
	if fn := d.onBatch.Load(); fn != nil {
		d.inBatch.Store(true)
		(*fn)()
		d.inBatch.Store(false)
		d.sendDeferred()
		return
	}
	if pushed || bulk || cq.Waiting() > 0 || rxWaiting.Load() > 0 {
		d.stats.RxYields.Add(1)
		runtime.Gosched()
	}
}

// OnBatch sets fn to run on the device's receive goroutine after each
// batch of received datagrams has been processed (its memory writes,
// completions and replies done, no lock of the device held), or clears it
// (nil). It is run to completion: a program that polls its CQs and posts
// its next requests in fn handles each completion on the goroutine that
// produced it, with no goroutine woken in between (doc/latency.md §6).
//
// The packets of the requests fn posts leave when it returns, in one
// transmit pass for all of them (not with the next reply, as requests
// posted behind an unacknowledged one otherwise do; QP.PostSend).
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

// rxWaiting counts the goroutines of the process in a WaitRx of any
// device (afterBatch).
var rxWaiting atomic.Int32

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
	rxWaiting.Add(1)
	defer rxWaiting.Add(-1)
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
