package coll

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/roce"
)

// bufID names the memory an op reads or writes.
type bufID uint8

const (
	bufNone bufID = iota
	bufIn         // the call's send buffer
	bufOut        // the call's receive buffer
	bufTmp        // the engine's scratch (halving-doubling's accumulator)
)

// op is one step of a channel's program, NCCL's primitives in one shape:
// the value of n bytes is the reduction of the messages received from rx
// and the local operand src (or a copy of the one of them there is); it
// is written to dst and sent to every tx. final marks the op that makes a
// reduction's last value, where Avg divides.
type op struct {
	n        int
	src, dst int // byte offsets in srcBuf, dstBuf; -1 for none
	srcBuf   bufID
	dstBuf   bufID
	rx, tx   [2]*conn
	nrx, ntx uint8
	final    bool
}

// channel is one channel's program for the call in progress.
type channel struct {
	ops []op
	pc  int // the next op to run: ops run in order
}

// engine runs a call's channel programs over the connections. It belongs
// to the goroutine holding Comm.callMu; it allocates only while a call is
// larger than every call before it (programs, scratch, staging of a
// connection's first use).
type engine struct {
	c     *Comm
	chs   []channel
	nch   int // channels the call uses
	in    []byte
	out   []byte
	tmp   []byte
	dt    DataType
	op    Op
	esz   int
	size  int
	txq   []*conn // connections with staged messages not yet posted
	rxq   []*conn // connections this call receives on
	touch []*conn // connections this call sends on
	wcs   []roce.Completion

	wr     roce.SendWR
	sge    [1]roce.SGE
	ctsWRs []roce.SendWR
	ctsSGE []roce.SGE
	fifoEl [ctsSize]byte

	gen     gen
	key     progKey // the programs' call
	keyOK   bool
	stalled atomic.Bool
	barrier [8]byte
}

func (e *engine) init(c *Comm) {
	e.c = c
	e.size = c.cfg.Size
	e.chs = make([]channel, c.cfg.Channels)
	e.wcs = make([]roce.Completion, 64)
	e.ctsWRs = make([]roce.SendWR, c.cfg.Steps)
	e.ctsSGE = make([]roce.SGE, c.cfg.Steps)
	e.gen.init(c)
}

func (e *engine) buf(b bufID) []byte {
	switch b {
	case bufIn:
		return e.in
	case bufOut:
		return e.out
	case bufTmp:
		return e.tmp
	}
	return nil
}

// prepare makes the staging of every connection the programs use and
// lists them.
func (e *engine) prepare() error {
	e.rxq, e.touch = e.rxq[:0], e.touch[:0]
	for ci := range e.nch {
		ch := &e.chs[ci]
		ch.pc = 0
		for i := range ch.ops {
			o := &ch.ops[i]
			for _, cn := range o.rx[:o.nrx] {
				if err := cn.ensureRx(); err != nil {
					return err
				}
				if !cn.rxListed {
					cn.rxListed = true
					e.rxq = append(e.rxq, cn)
				}
			}
			for _, cn := range o.tx[:o.ntx] {
				if err := cn.ensureTx(); err != nil {
					return err
				}
			}
		}
	}
	for _, cn := range e.rxq {
		cn.rxListed = false
	}
	return nil
}

// ready reports whether o can run: its messages are in and its sends have
// a free staging slot.
func (e *engine) ready(o *op) bool {
	for _, cn := range o.rx[:o.nrx] {
		if !cn.rxReady() {
			return false
		}
	}
	for _, cn := range o.tx[:o.ntx] {
		if !cn.txFree() {
			return false
		}
	}
	return true
}

// exec runs o: reduce or copy into place, stage the sends, free the
// receive slots.
func (e *engine) exec(o *op) error {
	n := o.n
	var rx [2][]byte
	for i, cn := range o.rx[:o.nrx] {
		b, err := cn.rxSlot(n)
		if err != nil {
			return err
		}
		rx[i] = b
	}
	var local, dst, tx0 []byte
	if o.src >= 0 {
		local = e.buf(o.srcBuf)[o.src : o.src+n]
	}
	if o.dst >= 0 {
		dst = e.buf(o.dstBuf)[o.dst : o.dst+n]
	}
	if o.ntx > 0 {
		tx0 = o.tx[0].txSlot(n)
	}
	var val []byte
	switch {
	case o.nrx == 0:
		val = local
	case o.nrx == 1 && local == nil:
		val = rx[0]
	default:
		target := tx0
		if target == nil {
			target = dst
		}
		a, rest := local, rx[:o.nrx]
		if a == nil {
			a, rest = rx[0], rx[1:o.nrx]
		}
		reduce(e.dt, e.op, target, a, rest[0])
		for _, r := range rest[1:] {
			reduce(e.dt, e.op, target, target, r)
		}
		val = target
	}
	if o.final && e.op == Avg {
		// Divide where the value may be written: in place if it is already
		// ours to write (a staging slot, the output), else in its first
		// destination.
		if !(sameMem(val, tx0) || sameMem(val, dst) || (o.nrx == 0 && o.srcBuf != bufIn)) {
			t := tx0
			if t == nil {
				t = dst
			}
			copy(t, val)
			val = t
		}
		divide(e.dt, val, e.size)
	}
	if dst != nil && !sameMem(dst, val) {
		copy(dst, val)
	}
	for _, cn := range o.tx[:o.ntx] {
		s := cn.txSlot(n)
		if !sameMem(s, val) {
			copy(s, val)
		}
		cn.txLen[cn.txProduced%cn.steps] = n
		cn.txProduced++
		if !cn.txQueued {
			cn.txQueued = true
			e.txq = append(e.txq, cn)
		}
	}
	for _, cn := range o.rx[:o.nrx] {
		cn.consume()
	}
	return nil
}

// progress does everything that can be done now without waiting:
// completions, the programs' ops in order, sends whose CTS arrived, CTSs
// for freed slots. It reports whether anything moved.
func (e *engine) progress() (bool, error) {
	c := e.c
	moved := false
	if c.rcq != nil {
		for {
			k := c.rcq.Poll(e.wcs)
			for i := range e.wcs[:k] {
				if err := e.onRecv(&e.wcs[i]); err != nil {
					return true, err
				}
			}
			moved = moved || k > 0
			if k < len(e.wcs) {
				break
			}
		}
		for {
			k := c.scq.Poll(e.wcs)
			for i := range e.wcs[:k] {
				if err := e.onSend(&e.wcs[i]); err != nil {
					return true, err
				}
			}
			moved = moved || k > 0
			if k < len(e.wcs) {
				break
			}
		}
	}
	for ci := range e.nch {
		ch := &e.chs[ci]
		for ch.pc < len(ch.ops) {
			o := &ch.ops[ch.pc]
			if !e.ready(o) {
				break
			}
			if err := e.exec(o); err != nil {
				return true, err
			}
			ch.pc++
			moved = true
		}
	}
	for i := 0; i < len(e.txq); {
		cn := e.txq[i]
		m, err := cn.tryPost(e)
		if err != nil {
			return true, err
		}
		moved = moved || m
		if cn.txPosted == cn.txProduced {
			cn.txQueued = false
			last := len(e.txq) - 1
			e.txq[i], e.txq[last] = e.txq[last], nil
			e.txq = e.txq[:last]
			continue
		}
		i++
	}
	for _, cn := range e.rxq {
		m, err := cn.postCTS(e)
		if err != nil {
			return true, err
		}
		moved = moved || m
	}
	return moved, nil
}

// onRecv handles a receive completion: an immediate of a message part.
func (e *engine) onRecv(wc *roce.Completion) error {
	cn, err := e.connOf(wc)
	if err != nil {
		return err
	}
	if wc.Status != roce.StatusSuccess {
		return e.c.rankErr(cn.peer, wc.Err(), "broke its connection on channel %d (receive completion %v)", cn.ch, wc.Status)
	}
	return cn.onRecv(e, wc)
}

// onSend handles a send completion: a message's WRITE is acknowledged, or
// a WR failed.
func (e *engine) onSend(wc *roce.Completion) error {
	cn, err := e.connOf(wc)
	if err != nil {
		return err
	}
	if wc.Status != roce.StatusSuccess {
		what := "a WRITE"
		if wridKind(wc.WRID) == kindCTS {
			what = "a clear-to-send"
		}
		return e.c.rankErr(cn.peer, wc.Err(), "did not acknowledge %s on channel %d: %v", what, cn.ch, wc.Status)
	}
	if wridKind(wc.WRID) == kindData {
		cn.onSend(wridLow(wc.WRID))
	}
	return nil
}

func (e *engine) connOf(wc *roce.Completion) (*conn, error) {
	i := wridConn(wc.WRID)
	if i >= len(e.c.conns) || e.c.conns[i] == nil {
		return nil, fmt.Errorf("%w: completion with WRID %#x", ErrProtocol, wc.WRID)
	}
	return e.c.conns[i], nil
}

// done reports whether every op ran and every staged message is posted.
// (Their completions are taken by later calls: a posted message needs
// nothing more from this rank.)
func (e *engine) done() bool {
	for ci := range e.nch {
		if e.chs[ci].pc < len(e.chs[ci].ops) {
			return false
		}
	}
	return len(e.txq) == 0
}

// run drives the call's programs to the end, in one of two ways
// (Config.Progress): on the calling goroutine, which progresses while
// anything moves and otherwise sleeps until the device receives something
// (a message, a CTS, an ACK); or run to completion, where the device's
// receive goroutine progresses the call right after each batch it
// received (roce.Device.OnBatch) and the caller sleeps until the call is
// done. The watchdog ends a call without progress for Timeout.
func (c *Comm) run() error {
	e := &c.eng
	if err := e.prepare(); err != nil {
		return c.fail(err)
	}
	c.inCall.Store(true)
	defer c.inCall.Store(false)
	if c.inline {
		return c.runInline()
	}
	for {
		seq := c.dev.RxSeq()
		moved, err := e.progress()
		if err != nil {
			return c.fail(err)
		}
		if e.done() {
			return nil
		}
		if moved {
			c.moves.Add(1)
			continue
		}
		if err := c.dev.WaitRx(c.ctx, seq); err != nil {
			return c.waitFailed(err)
		}
	}
}

// waitFailed is the error of a wait that ended without the call: a
// stall (described), a failure reported meanwhile, Close.
func (c *Comm) waitFailed(err error) error {
	e := &c.eng
	if e.stalled.Load() {
		// A failed WR completes on a timer, not a received batch: look
		// once more before blaming a silent peer.
		c.inlMu.Lock()
		_, perr := e.progress()
		c.inlMu.Unlock()
		if perr != nil {
			return c.fail(perr)
		}
		return c.fail(e.stallError())
	}
	if ferr := c.failed(); ferr != nil {
		return ferr
	}
	return c.fail(err)
}

// runInline is run to completion: progress on the caller until nothing
// moves, then on the device's receive goroutine (onBatch) until done.
func (c *Comm) runInline() error {
	e := &c.eng
	select { // a signal of an earlier call
	case <-c.inlDone:
	default:
	}
	c.inlMu.Lock()
	c.inlActive, c.inlErr = true, nil
	for {
		moved, err := e.progress()
		if err != nil {
			c.inlActive = false
			c.inlMu.Unlock()
			return c.fail(err)
		}
		if e.done() {
			c.inlActive = false
			c.inlMu.Unlock()
			return nil
		}
		if !moved {
			break
		}
	}
	c.inlMu.Unlock()
	var err error
	select {
	case <-c.inlDone:
		c.inlMu.Lock()
		err = c.inlErr
		c.inlMu.Unlock()
		if err != nil {
			return c.fail(err)
		}
		return nil
	case <-c.ctx.Done():
	}
	c.inlMu.Lock()
	c.inlActive = false
	c.inlMu.Unlock()
	return c.waitFailed(context.Cause(c.ctx))
}

// onBatch runs on the device's receive goroutine after each batch: it
// progresses the call in progress, if any, and wakes the caller when the
// call is done or failed.
func (c *Comm) onBatch() {
	c.inlMu.Lock()
	defer c.inlMu.Unlock()
	if !c.inlActive {
		return
	}
	e := &c.eng
	for {
		moved, err := e.progress()
		if err != nil {
			c.inlErr = err
			break
		}
		if e.done() {
			break
		}
		if !moved {
			return
		}
		c.moves.Add(1)
	}
	c.inlActive = false
	select {
	case c.inlDone <- struct{}{}:
	default:
	}
}

// rankErr makes a *RankError about rank r seen by this rank.
func (c *Comm) rankErr(r int, err error, format string, a ...any) *RankError {
	e := &RankError{Ranks: []int{r}, Reporter: c.cfg.Rank, Reason: fmt.Sprintf(format, a...), Err: err}
	if r >= 0 && r < len(c.peers) {
		p := c.peers[r]
		e.Hosts = []string{fmt.Sprintf("%s pid %d, %v", p.Host, p.Pid, p.Addr.Addr())}
	}
	return e
}

// stallError describes what the call waits for: the first op that cannot
// run, or the first message without a CTS.
func (e *engine) stallError() error {
	c := e.c
	t := c.cfg.Timeout
	for ci := range e.nch {
		ch := &e.chs[ci]
		if ch.pc >= len(ch.ops) {
			continue
		}
		o := &ch.ops[ch.pc]
		for _, cn := range o.rx[:o.nrx] {
			if !cn.rxReady() {
				return c.rankErr(cn.peer, ErrTimeout, "sent nothing for %v: this rank waits for message %d (%d bytes) on channel %d",
					t, cn.rxConsumed+1, o.n, cn.ch)
			}
		}
		for _, cn := range o.tx[:o.ntx] {
			if !cn.txFree() {
				return c.rankErr(cn.peer, ErrTimeout, "acknowledged nothing for %v: this rank waits for message %d's WRITE to complete on channel %d",
					t, cn.txDone+1, cn.ch)
			}
		}
	}
	for _, cn := range e.txq {
		return c.rankErr(cn.peer, ErrTimeout, "offered no slot for %v: this rank waits for its clear-to-send for message %d on channel %d",
			t, cn.txPosted+1, cn.ch)
	}
	return fmt.Errorf("coll: rank %d: no progress for %v: %w", c.cfg.Rank, t, ErrTimeout)
}

// drain waits until every message this rank has posted is acknowledged,
// or deadline (Close: so that the peers get them). Messages still waiting
// for a CTS are not waited for: only the peer's program could let them go.
func (e *engine) drain(deadline time.Time) {
	c := e.c
	if c.rcq == nil {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	pending := func() bool {
		for _, cn := range c.conns {
			if cn != nil && cn.txDone < cn.txPosted {
				return true
			}
		}
		return false
	}
	for pending() {
		seq := c.dev.RxSeq()
		if _, err := e.progress(); err != nil {
			return
		}
		if !pending() {
			return
		}
		if err := c.dev.WaitRx(ctx, seq); err != nil {
			return
		}
	}
}
