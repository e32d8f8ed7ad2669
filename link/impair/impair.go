package impair

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/link"
)

// recvBatch is how many datagrams the receive pump takes from the inner
// link at a time.
const recvBatch = 64

// Random streams of the two directions (PCG's second seed word).
const (
	streamTx = 0x7478 // "tx"
	streamRx = 0x7278 // "rx"
)

// Link is a link.Link that impairs what goes through it. Send and Recv may
// be called concurrently with each other, each from one goroutine, as the
// inner link's; Report from any goroutine.
//
// The send side works in the caller's Send: drops, corrupted copies and
// duplicates go straight to the inner link's Send; a held packet is copied
// and sent behind later packets, by a later Send or, after Config.HoldMax,
// by the link's one timer goroutine. The receive side, when impaired, has
// one pump goroutine that receives from the inner link into the Link's
// buffers, impairs, and queues for Recv (a bounded ring: when Recv falls
// behind, the pump stops receiving and the inner link's own queue fills,
// as a socket's would); a held packet Recv releases itself when its time
// is up. Close stops and joins both goroutines.
//
// Link implements neither link.IPIDPlanner nor link.Lender, whatever the
// inner link does. Without a planner the device sends every IPv4 datagram
// with ID 0 and seals its ICRC over that ID; link/udp then sends each
// datagram alone (no GSO), which carries ID 0, so the ICRC of every packet
// the Link does not corrupt still verifies, however it reorders or
// duplicates them. A planner would have planned IDs by position in the
// batch, which reordering and duplication change.
type Link struct {
	inner link.Link
	cfg   Config

	// Send side; tx is nil when Config.Tx is off.
	txMu    sync.Mutex
	tx      *dir
	txOut   []link.Datagram
	txIdx   []int // caller index of each txOut entry
	txTimer *time.Timer
	txArmed bool
	txErrs  atomic.Uint64 // the timer goroutine's send errors

	// Receive side; rx is nil when Config.Rx is off.
	recvMu   sync.Mutex // serializes Recv
	rxMu     sync.Mutex // guards rx, the ring, rxErr, rxFatal, rxClosed
	rx       *dir
	ring     []ringSlot
	head, n  int
	rxErr    error
	rxFatal  bool
	rxClosed bool
	rxOut    []link.Datagram
	batch    []link.Datagram
	bufs     [][]byte
	notify   chan struct{} // the pump queued something (capacity 1)
	space    chan struct{} // Recv freed ring slots (capacity 1)
	rxTimer  *time.Timer   // Recv's wait for a held packet's time

	lastRx time.Time    // the pump's or Recv's goroutine only
	maxGap atomic.Int64 // nanoseconds

	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
}

// ringSlot is a received datagram waiting for Recv.
type ringSlot struct {
	buf []byte
	dg  link.Datagram // Buf unused
}

var (
	_ link.Link      = (*Link)(nil)
	_ link.StatsLink = (*Link)(nil)
)

// New wraps inner. It returns an error (wrapping ErrSpec) for a Config
// with a rate out of range. The Link owns inner from then on: Close
// closes it.
func New(inner link.Link, cfg Config) (*Link, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	l := &Link{inner: inner, cfg: c, done: make(chan struct{})}
	if c.Tx.enabled() {
		l.tx = newDir(c.Tx, c.Seed, streamTx, c.HoldMax, c.HoldSlots, c.MaxDatagram)
		if c.Tx.Reorder > 0 {
			l.txTimer = time.NewTimer(time.Hour)
			l.txTimer.Stop()
			l.wg.Add(1)
			go l.flusher()
		}
	}
	if c.Rx.enabled() {
		l.rx = newDir(c.Rx, c.Seed, streamRx, c.HoldMax, c.HoldSlots, c.MaxDatagram)
		l.ring = make([]ringSlot, 4*recvBatch+2*c.HoldSlots)
		l.batch = make([]link.Datagram, recvBatch)
		l.bufs = make([][]byte, recvBatch)
		for i := range l.bufs {
			l.bufs[i] = make([]byte, c.MaxDatagram)
		}
		l.notify = make(chan struct{}, 1)
		l.space = make(chan struct{}, 1)
		l.rxTimer = time.NewTimer(time.Hour)
		l.rxTimer.Stop()
		l.wg.Add(1)
		go l.pump()
	}
	return l, nil
}

// Config returns the Link's configuration, defaults filled in.
func (l *Link) Config() Config { return l.cfg }

// Inner returns the wrapped link.
func (l *Link) Inner() link.Link { return l.inner }

// LocalAddr returns the inner link's address.
func (l *Link) LocalAddr() netip.AddrPort { return l.inner.LocalAddr() }

// SourcePort implements link.SourcePorter by asking the inner link, so a
// device behind the impairment still sends from per-QP ports; an inner
// link that sends from one port gives that port.
func (l *Link) SourcePort(want uint16) uint16 {
	if s, ok := l.inner.(link.SourcePorter); ok {
		return s.SourcePort(want)
	}
	return l.inner.LocalAddr().Port()
}

var _ link.SourcePorter = (*Link)(nil)

// Stats returns the inner link's counters if it has any (link.StatsLink),
// else zeros.
func (l *Link) Stats() link.Stats {
	if s, ok := l.inner.(link.StatsLink); ok {
		return s.Stats()
	}
	return link.Stats{}
}

// Report is what a Link did.
type Report struct {
	Tx Counters `json:"tx"`
	Rx Counters `json:"rx"`
	// LongestRxGap is the longest time between two receives from the inner
	// link (after the first): the longest the peer was silent.
	LongestRxGap time.Duration `json:"longest_rx_gap_ns"`
	// TxTimerErrors counts sends of released packets that failed.
	TxTimerErrors uint64 `json:"tx_timer_errors,omitempty"`
}

// Report returns the counters so far.
func (l *Link) Report() Report {
	r := Report{LongestRxGap: time.Duration(l.maxGap.Load()), TxTimerErrors: l.txErrs.Load()}
	if l.tx != nil {
		r.Tx = l.tx.c.load()
	}
	if l.rx != nil {
		r.Rx = l.rx.c.load()
	}
	return r
}

// Send impairs dgs and sends what survives, with the held packets whose
// turn came, through the inner link. A dropped datagram counts as sent. On
// an error of the inner link it returns the index of the first datagram of
// dgs that may not have gone out. dgs is not modified; it may be reused
// when Send returns.
func (l *Link) Send(dgs []link.Datagram) (int, error) {
	if l.tx == nil {
		return l.inner.Send(dgs)
	}
	l.txMu.Lock()
	defer l.txMu.Unlock()
	now := time.Now()
	out, idx := l.txOut[:0], l.txIdx[:0]
	if l.tx.nheld > 0 {
		out, _, _ = l.tx.expire(out, now, false)
		for range out {
			idx = append(idx, 0)
		}
	}
	for i := range dgs {
		before := len(out)
		out = l.tx.process(out, dgs[i], now)
		for range out[before:] {
			idx = append(idx, i)
		}
	}
	n, err := len(dgs), error(nil)
	if p, e := l.sendAll(out); e != nil {
		err = e
		if p < len(idx) {
			n = idx[p]
		}
	}
	l.tx.done()
	if l.tx.nheld > 0 && !l.txArmed && l.txTimer != nil {
		l.txTimer.Reset(l.cfg.HoldMax)
		l.txArmed = true
	}
	clear(out) // drop the references to the caller's buffers
	l.txOut, l.txIdx = out[:0], idx[:0]
	return n, err
}

// sendAll sends out through the inner link; on an error it returns the
// index of the first datagram not sent.
func (l *Link) sendAll(out []link.Datagram) (int, error) {
	done := 0
	for done < len(out) {
		n, err := l.inner.Send(out[done:])
		done += n
		if err != nil {
			return done, err
		}
		if n == 0 {
			return done, errors.New("impair: inner link sent nothing")
		}
	}
	return done, nil
}

// flusher sends held packets whose time is up when no Send comes to do it.
func (l *Link) flusher() {
	defer l.wg.Done()
	for {
		select {
		case <-l.done:
			return
		case <-l.txTimer.C:
		}
		l.txMu.Lock()
		l.txArmed = false
		now := time.Now()
		out, next, held := l.tx.expire(l.txOut[:0], now, false)
		if len(out) > 0 {
			if p, err := l.sendAll(out); err != nil {
				l.txErrs.Add(uint64(len(out) - p))
			}
		}
		l.tx.done()
		if held {
			l.txTimer.Reset(max(next.Sub(now), 0))
			l.txArmed = true
		}
		l.txOut = out[:0]
		l.txMu.Unlock()
	}
}

// noteRx records the gap since the last receive.
func (l *Link) noteRx(now time.Time) {
	if !l.lastRx.IsZero() {
		if g := int64(now.Sub(l.lastRx)); g > l.maxGap.Load() {
			l.maxGap.Store(g)
		}
	}
	l.lastRx = now
}

// Recv returns received datagrams that survived the impairment, copied
// into dgs[i].Buf (resliced within its capacity; one too long for its
// buffer is dropped and counted in Counters.Oversize). After Close it
// returns link.ErrClosed.
func (l *Link) Recv(dgs []link.Datagram) (int, error) {
	if l.rx == nil {
		n, err := l.inner.Recv(dgs)
		if n > 0 {
			l.noteRx(time.Now())
		}
		return n, err
	}
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	if len(dgs) == 0 {
		return 0, nil
	}
	for {
		l.rxMu.Lock()
		if l.rxClosed {
			l.rxMu.Unlock()
			return 0, link.ErrClosed
		}
		now := time.Now()
		var next time.Time
		held := false
		if l.rx.nheld > 0 {
			var out []link.Datagram
			out, next, held = l.rx.expire(l.rxOut[:0], now, false)
			l.queue(out)
			l.rx.done()
			l.rxOut = out[:0]
		}
		if l.n > 0 {
			k := l.take(dgs)
			l.rxMu.Unlock()
			select {
			case l.space <- struct{}{}:
			default:
			}
			if k > 0 {
				return k, nil
			}
			continue
		}
		if err := l.rxErr; err != nil {
			if !l.rxFatal {
				l.rxErr = nil
			}
			l.rxMu.Unlock()
			return 0, err
		}
		l.rxMu.Unlock()
		var tc <-chan time.Time
		if held {
			l.rxTimer.Reset(max(next.Sub(now), 0))
			tc = l.rxTimer.C
		}
		select {
		case <-l.notify:
		case <-tc:
		case <-l.done:
		}
		if held {
			l.rxTimer.Stop()
		}
	}
}

// take moves queued datagrams into dgs; the caller holds rxMu.
func (l *Link) take(dgs []link.Datagram) int {
	k := 0
	for l.n > 0 && k < len(dgs) {
		s := &l.ring[l.head]
		l.head = (l.head + 1) % len(l.ring)
		l.n--
		d := &dgs[k]
		if cap(d.Buf) < len(s.buf) {
			l.rx.c.oversize.Add(1)
			continue
		}
		buf := append(d.Buf[:0], s.buf...)
		*d = s.dg
		d.Buf = buf
		k++
	}
	return k
}

// queue copies out into the ring; the caller holds rxMu. The pump keeps
// room for what one round can produce, so the ring overflows only if that
// reasoning is wrong; then the datagram is dropped and counted.
func (l *Link) queue(out []link.Datagram) {
	for i := range out {
		if l.n == len(l.ring) {
			l.rx.c.oversize.Add(1)
			continue
		}
		s := &l.ring[(l.head+l.n)%len(l.ring)]
		s.buf = append(s.buf[:0], out[i].Buf...)
		s.dg = out[i]
		s.dg.Buf = nil
		l.n++
	}
}

// pump receives from the inner link, impairs and queues for Recv.
func (l *Link) pump() {
	defer l.wg.Done()
	recv := l.inner.Recv
	if lr, ok := l.inner.(link.Lender); ok {
		recv = lr.RecvLend // lent buffers are copied before the next call
	}
	room := 2*recvBatch + 2*len(l.rx.holds)
	for {
		l.rxMu.Lock()
		for len(l.ring)-l.n < room && !l.rxClosed {
			l.rxMu.Unlock()
			select {
			case <-l.space:
			case <-l.done:
				return
			}
			l.rxMu.Lock()
		}
		l.rxMu.Unlock()
		for i := range l.batch {
			l.batch[i] = link.Datagram{Buf: l.bufs[i]}
		}
		n, err := recv(l.batch)
		l.rxMu.Lock()
		if l.rxClosed {
			// Close may have closed the inner link since recv returned: a
			// lending link's buffers are gone with it.
			l.rxMu.Unlock()
			return
		}
		if err != nil {
			l.rxErr = err
			l.rxFatal = errors.Is(err, link.ErrClosed)
			l.rxMu.Unlock()
			l.wake()
			if l.rxFatal {
				return
			}
			select {
			case <-l.done:
				return
			case <-time.After(time.Millisecond):
			}
			continue
		}
		now := time.Now()
		if n > 0 {
			l.noteRx(now)
		}
		out := l.rxOut[:0]
		if l.rx.nheld > 0 {
			out, _, _ = l.rx.expire(out, now, false)
		}
		for i := range l.batch[:n] {
			if len(l.batch[i].Buf) > l.cfg.MaxDatagram {
				l.rx.c.oversize.Add(1)
				continue
			}
			out = l.rx.process(out, l.batch[i], now)
		}
		l.queue(out)
		l.rx.done()
		clear(out)
		l.rxOut = out[:0]
		l.rxMu.Unlock()
		l.wake()
	}
}

// wake tells a waiting Recv to look.
func (l *Link) wake() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

// Close closes the inner link and stops the Link's goroutines; held
// packets are dropped. A blocked Recv returns link.ErrClosed. It returns
// the inner link's Close error, and link.ErrClosed when called again.
func (l *Link) Close() error {
	err := link.ErrClosed
	l.closeOnce.Do(func() {
		l.rxMu.Lock()
		l.rxClosed = true
		l.rxMu.Unlock()
		close(l.done)
		err = l.inner.Close()
		l.wg.Wait()
	})
	return err
}
