package perf

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// endpoint is one device's side of a test: a PD, a send and a receive CQ,
// one registered buffer and the QPs. A loopback run has two, a run against
// a perftest peer one.
type endpoint struct {
	dev      *roce.Device
	pd       *mr.PD
	scq, rcq *cq.CQ
	qps      []*roce.QP
	buf      []byte
	mr       *mr.Region
	access   mr.AccessFlags // the remote access its MR and QPs grant the peer
}

// endpointConfig sizes an endpoint's resources.
type endpointConfig struct {
	qps              int
	cqDepth          int // each of the two CQs
	sendWRs, recvWRs int // per QP
	bufSize          int
	// access is the remote access the peer gets to the buffer and through
	// the QPs: remoteAccess of the test where the peer targets this side,
	// else none.
	access mr.AccessFlags
}

// remoteAccess is the remote access a test's target grants its peer:
// exactly the operation under test, on the MR and on the QP, as perftest
// grants per verb (create_single_mr and ctx_modify_qp_to_init in
// perftest_resources.c). A request for any other operation is then refused
// as rxe refuses it: an operation the QP's access flags do not enable is an
// invalid request, NAK 0x61, and the QP goes to ERR (rxe check_op_valid;
// qp.ReasonOpNotEnabled). A SEND lands in a posted receive under no rkey,
// so a send test grants nothing; perftest gives its SEND QPs REMOTE_WRITE
// (its MR then refuses a WRITE with NAK 0x62), goroce leaves it out.
func remoteAccess(op Op) mr.AccessFlags {
	switch op {
	case OpWrite:
		return mr.RemoteWrite
	case OpRead:
		return mr.RemoteRead
	case OpAtomic:
		return mr.RemoteAtomic
	}
	return 0
}

// qpAccess is the roce.ConnectOptions.Access of a QP that grants remote:
// LocalWrite besides, because Connect reads 0 as every access. LocalWrite
// enables no remote operation (perftest's QPs carry it too).
func qpAccess(remote mr.AccessFlags) mr.AccessFlags { return mr.LocalWrite | remote }

// setup allocates e's resources on e.dev. The order (PD, CQs, MR, QPs)
// fixes the keys and QPNs the peer sees. On an error the caller closes
// e.dev, which releases what was made.
func (e *endpoint) setup(c endpointConfig) error {
	e.pd = e.dev.AllocPD()
	e.buf = make([]byte, c.bufSize)
	var err error
	if e.scq, err = e.dev.CreateCQ(c.cqDepth); err != nil {
		return err
	}
	if e.rcq, err = e.dev.CreateCQ(c.cqDepth); err != nil {
		return err
	}
	// LocalWrite for what lands here: receives, READ responses, atomics'
	// original values; remote access only as the test needs (least privilege).
	e.access = c.access
	if e.mr, err = e.dev.RegisterMR(e.pd, e.buf, mr.LocalWrite|c.access); err != nil {
		return err
	}
	for range c.qps {
		q, err := e.dev.CreateQP(roce.QPConfig{PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq,
			MaxSendWR: c.sendWRs, MaxRecvWR: c.recvWRs})
		if err != nil {
			return err
		}
		e.qps = append(e.qps, q)
	}
	return nil
}

// recvWR is a receive of length bytes at offset off of e's buffer, its
// WRID the QP's index i.
func (e *endpoint) recvWR(i int, off uint64, length int) *qp.RecvWR {
	return &qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{e.mr.SGE(int(off), length)}}
}

// request builds into wr the seq-th request of QP i for op: size bytes at
// local offset off of e's buffer, and for WRITE, READ and atomics the
// peer's raddr under rkey. cas selects CMP_AND_SWAP (compare 0, swap 0, as
// perftest) over FETCH_AND_ADD for atomics. The WRID carries i in its top
// bits, which is how the loop finds the QP of a completion. wr's SGL array
// is reused (posting copies it), so that a request allocates nothing.
func (e *endpoint) request(wr *qp.SendWR, op Op, cas bool, i int, seq uint64, off uint64, size int, raddr uint64, rkey mr.Key) {
	sgl := wr.SGL[:0]
	if cap(sgl) == 0 {
		sgl = make([]qp.SGE, 0, 1)
	}
	*wr = qp.SendWR{WRID: uint64(i)<<40 | seq, Flags: qp.SendSignaled,
		SGL:        append(sgl, e.mr.SGE(int(off), size)),
		RemoteAddr: raddr, RKey: rkey}
	switch op {
	case OpWrite:
		wr.Opcode = qp.WRRDMAWrite
	case OpRead:
		wr.Opcode = qp.WRRDMARead
	case OpSend:
		wr.Opcode = qp.WRSend
		wr.RemoteAddr, wr.RKey = 0, 0
	case OpAtomic:
		wr.SGL[0].Length = 8
		if cas {
			wr.Opcode = qp.WRAtomicCmpAndSwp
		} else {
			wr.Opcode = qp.WRAtomicFetchAdd
			wr.CompareAdd = 1 // perftest's ATOMIC_ADD_VALUE
		}
	}
}

// errStalled is the cause with which a stallWatch ends its context.
var errStalled = errors.New("perf: stalled")

// stallWatch ends its context when a wait has lasted longer than timeout:
// one goroutine and one ticker for the whole test, instead of a context
// with a timer made and cancelled around every wait, which cost the
// 2-byte WRITE ping-pong about 0.35 µs of its p50 (8.93 → 8.58 µs). A wait
// calls kick as it starts; waits do not overlap. A stall is noticed
// between timeout and 9/8 of it.
type stallWatch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	since  atomic.Int64 // UnixNano when the current wait started
	quit   chan struct{}
	done   chan struct{}
}

// watchStalls starts a stallWatch under parent; stop ends it.
func watchStalls(parent context.Context, timeout time.Duration) *stallWatch {
	ctx, cancel := context.WithCancelCause(parent)
	w := &stallWatch{ctx: ctx, cancel: cancel, quit: make(chan struct{}), done: make(chan struct{})}
	w.kick()
	go func() {
		defer close(w.done)
		t := time.NewTicker(max(timeout/8, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-w.quit:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				if now.Sub(time.Unix(0, w.since.Load())) > timeout {
					cancel(errStalled)
					return
				}
			}
		}
	}()
	return w
}

// kick marks the start of a wait.
func (w *stallWatch) kick() { w.since.Store(time.Now().UnixNano()) }

// stop ends the watch and waits for its goroutine.
func (w *stallWatch) stop() {
	close(w.quit)
	<-w.done
	w.cancel(nil)
}

// poll waits for completions of c into wcs. It returns ctx's error when
// ctx ended, stalled() when w saw the wait last longer than its timeout,
// and failed(wc) for the first unsuccessful completion of the batch. w's
// context must be ctx or derived from it.
func poll(ctx context.Context, w *stallWatch, c *cq.CQ, wcs []cq.Completion,
	stalled func() error, failed func(cq.Completion) error) (int, error) {
	// Take what is queued without touching the watch: at message rate the
	// CQ is rarely empty.
	n := c.Poll(wcs)
	if n == 0 {
		w.kick()
		var err error
		n, err = c.Wait(w.ctx, wcs)
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			if errors.Is(context.Cause(w.ctx), errStalled) {
				return 0, stalled()
			}
			return 0, err
		}
	}
	for _, wc := range wcs[:n] {
		if wc.Status != cq.StatusSuccess {
			return 0, failed(wc)
		}
	}
	return n, nil
}

// loop is the requester of a test, for loopback runs and runs against a
// perftest peer alike: it keeps depth requests outstanding on each QP,
// polls their send CQ and reposts, until every QP completed iters
// requests or dur passed. One goroutine runs it.
type loop struct {
	qps   []*roce.QP
	size  int // bytes per request
	depth int // outstanding requests per QP
	iters int // per QP; with dur > 0, as many as fit
	dur   time.Duration
	// next builds QP i's seq-th request into wr (its WRID as
	// endpoint.request's), reusing wr's SGL array.
	next func(wr *qp.SendWR, i int, seq uint64)
	// wait returns the next completions of the QPs' send CQ, failing on a
	// stall or an unsuccessful completion (poll).
	wait func(ctx context.Context, wcs []cq.Completion) (int, error)
	// postList is the number of WRs posted per call (perftest's
	// --post_list; 0 means 1): each call posts a list through
	// roce.QP.PostSendBatch, and a QP gets a list only when postList of
	// its depth are free, as in perftest.
	postList int
	// times records each request's post and completion time (depth 1).
	times bool
	// progress, if set, is called about every 100 ms with bytes so far.
	progress func(done, total int64)
	// cpu and machine read the process's and the machine's CPU time at
	// the start and the end of the run (nil: ProcessCPU, MachineCPU), for
	// Result.CPUSeconds and Result.MachineBusy.
	cpu     CPUClock
	machine MachineClock

	posted, done []int // per QP, for wait's messages
}

// tally is what a loop measured.
type tally struct {
	msgs    int // completions, all QPs
	bytes   int64
	elapsed time.Duration
	peak    float64         // bit/s of the best 10 ms window (perftest's BW peak is per burst)
	posts   []time.Time     // post time of each request, in order (times)
	rtts    []time.Duration // post to completion of each request (times)
	// stall is the longest time without a completion, from the first
	// post to the last completion (or to the error that ended the run).
	stall time.Duration
	// cpu is the CPU time over elapsed.
	cpu cpuSpan
}

// run drives the requests to the end and returns what it measured.
func (l *loop) run(ctx context.Context) (tally, error) {
	r, err := l.begin()
	if err != nil {
		return tally{}, err
	}
	for !r.finished(time.Now()) {
		n, err := l.wait(ctx, r.wcs)
		now := time.Now()
		r.t.stall = max(r.t.stall, now.Sub(r.lastDone))
		if err != nil {
			return r.t, err
		}
		if err := r.complete(n, now); err != nil {
			return tally{}, err
		}
	}
	return r.end(), nil
}

// loopRun is the state of one run of a loop.
type loopRun struct {
	l        *loop
	t        tally
	iters    int
	deadline time.Time
	postedAt []time.Time // of the outstanding request (times)
	pl       int         // WRs per post
	wrs      []qp.SendWR
	touched  []bool
	dirty    []int
	wcs      []cq.Completion
	total    int64
	meter    cpuMeter
	start    time.Time
	// lastProgress, winStart/winBytes (the peak's window) and lastDone
	// (the last completion) are times of the run so far.
	lastProgress, winStart, lastDone time.Time
	winBytes                         int64
}

// begin starts a run: it posts each QP's first requests.
func (l *loop) begin() (*loopRun, error) {
	nq := len(l.qps)
	l.posted, l.done = make([]int, nq), make([]int, nq)
	r := &loopRun{l: l, iters: l.iters, postedAt: make([]time.Time, nq), pl: max(l.postList, 1),
		touched: make([]bool, nq), wcs: make([]cq.Completion, 256)}
	r.meter = startCPU(l.cpu, l.machine)
	r.start = time.Now()
	if l.dur > 0 {
		r.iters = 1 << 62
		r.deadline = r.start.Add(l.dur)
	}
	if l.times && l.dur == 0 {
		// Sized up front: growing them would allocate, and collect, in
		// the middle of the measurement.
		r.t.posts = make([]time.Time, 0, r.iters*nq)
		r.t.rtts = make([]time.Duration, 0, r.iters*nq)
	}
	if l.times {
		r.pl = 1
	}
	r.wrs = make([]qp.SendWR, r.pl)
	r.total = int64(r.iters) * int64(l.size) * int64(nq)
	if l.dur > 0 {
		r.total = 0 // a timed run: the total is not known (iters is a sentinel)
	}
	r.lastProgress, r.winStart, r.lastDone = r.start, r.start, r.start
	for i := range l.qps {
		if err := r.fill(i, r.start); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *loopRun) more(i int, now time.Time) bool {
	return r.l.posted[i] < r.iters && (r.deadline.IsZero() || now.Before(r.deadline))
}

// fill posts QP i's requests in lists of pl while a list fits in its
// depth (the last list of an iteration count may be shorter).
func (r *loopRun) fill(i int, now time.Time) error {
	l := r.l
	for r.more(i, now) && l.posted[i]-l.done[i]+min(r.pl, r.iters-l.posted[i]) <= l.depth {
		k := min(r.pl, r.iters-l.posted[i])
		for j := range k {
			l.next(&r.wrs[j], i, uint64(l.posted[i]+j))
		}
		if l.times {
			now := time.Now()
			r.postedAt[i] = now
			r.t.posts = append(r.t.posts, now)
		}
		n, err := l.qps[i].PostSendBatch(r.wrs[:k])
		l.posted[i] += n
		if err != nil {
			return err
		}
	}
	return nil
}

// finished reports whether every QP has completed all it will post.
func (r *loopRun) finished(now time.Time) bool {
	for i := range r.l.done {
		if r.l.done[i] < r.l.posted[i] || r.more(i, now) {
			return false
		}
	}
	return true
}

// complete accounts for the n completions in wcs, polled at now, and
// reposts.
func (r *loopRun) complete(n int, now time.Time) error {
	l := r.l
	r.lastDone = now
	for _, wc := range r.wcs[:n] {
		i := int(wc.WRID >> 40)
		l.done[i]++
		r.t.msgs++
		r.t.bytes += int64(l.size)
		r.winBytes += int64(l.size)
		if l.times {
			r.t.rtts = append(r.t.rtts, now.Sub(r.postedAt[i]))
		}
		if !r.touched[i] {
			r.touched[i] = true
			r.dirty = append(r.dirty, i)
		}
	}
	// Repost after the whole polled batch, so one call can post a list.
	for _, i := range r.dirty {
		r.touched[i] = false
		if err := r.fill(i, now); err != nil {
			return err
		}
	}
	r.dirty = r.dirty[:0]
	if w := now.Sub(r.winStart); w >= 10*time.Millisecond {
		r.t.peak = max(r.t.peak, float64(r.winBytes*8)/w.Seconds())
		r.winStart, r.winBytes = now, 0
	}
	if l.progress != nil && now.Sub(r.lastProgress) >= 100*time.Millisecond {
		l.progress(r.t.bytes, r.total)
		r.lastProgress = now
	}
	return nil
}

// end closes the run's accounts.
func (r *loopRun) end() tally {
	r.t.elapsed = time.Since(r.start)
	r.t.cpu = r.meter.stop()
	return r.t
}

// throughput returns a result row for msgs messages of size bytes (bytes
// in total) on nq QPs in el seconds; its peak is the average.
func throughput(op Op, size, nq, mtu, msgs int, bytes int64, el float64) Result {
	res := Result{Op: op, Size: size, Iters: msgs / nq, QPs: nq, MTU: mtu, Bytes: bytes, Seconds: el,
		Gbps: float64(bytes*8) / el / 1e9, Mpps: float64(msgs) / el / 1e6}
	res.PeakGbps = res.Gbps
	return res
}

// result returns t's result row; its peak is the best window's, or the
// average if that is higher.
func (t tally) result(op Op, size, nq, mtu int) Result {
	res := throughput(op, size, nq, mtu, t.msgs, t.bytes, t.elapsed.Seconds())
	res.PeakGbps = max(t.peak/1e9, res.Gbps)
	if t.cpu.ok {
		res.CPUSeconds, res.CPUSysSeconds = t.cpu.cpu.Total().Seconds(), t.cpu.cpu.System.Seconds()
	}
	if t.cpu.machineOK {
		res.MachineBusy = t.cpu.machineBusy
	}
	return res
}

// setLatency fills r's latency columns (µs) from samples, each divided by
// div: perftest's _lat tools report half a round trip for the ping-pong
// tests, whose iteration is one. It sorts samples, which must not be
// empty.
func setLatency(r *Result, samples []time.Duration, div float64) {
	slices.Sort(samples)
	us := make([]float64, len(samples))
	var sum float64
	for i, s := range samples {
		us[i] = float64(s) / 1e3 / div
		sum += us[i]
	}
	avg := sum / float64(len(us))
	var sq float64
	for _, u := range us {
		sq += (u - avg) * (u - avg)
	}
	pct := func(p float64) float64 { return us[min(len(us)-1, int(p*float64(len(us))))] }
	r.LatMinus, r.LatMaxus = us[0], us[len(us)-1]
	r.LatP50us, r.LatP99us, r.LatP999us = pct(0.50), pct(0.99), pct(0.999)
	r.LatAvgus = avg
	r.LatStdevus = math.Sqrt(sq / float64(len(us)))
}

// inlineRun drives a test run to completion (WaitInline): its step runs
// on a device's receive goroutine after each batch the device receives
// (roce.Device.OnBatch), and the calling goroutine only starts it and
// waits. Its mutex guards the run's state for both.
type inlineRun struct {
	mu      sync.Mutex
	started bool  // start returned: step may run
	over    bool  // the run ended
	res     error // why (nil: done)
	done    chan struct{}
}

// finish ends the run with err; the caller holds mu.
func (x *inlineRun) finish(err error) {
	if !x.over {
		x.over, x.res = true, err
		close(x.done)
	}
}

// drive runs step (which calls finish at the end) under mu: first on the
// calling goroutine after start, then on dev's receive goroutine after
// each received batch, and every `every` on the calling goroutine too, for
// what no received batch followed (a retransmission timer's error); after
// those, stalled, under mu as well, may end the run. drive returns the
// run's error once it ended or ctx did; step is not called once the run
// ended, though a call under way when drive returns may still finish
// (it must check x.over). The caller reads the run's state under mu.
func (x *inlineRun) drive(ctx context.Context, dev *roce.Device, every time.Duration,
	start func() error, step func(), stalled func(now time.Time) error) error {
	x.done = make(chan struct{})
	dev.OnBatch(func() {
		x.mu.Lock()
		if x.started && !x.over { // a batch may come before start ran
			step()
		}
		x.mu.Unlock()
	})
	defer dev.OnBatch(nil)
	x.mu.Lock()
	if err := start(); err != nil {
		x.finish(err)
		x.mu.Unlock()
		return err
	}
	x.started = true
	step()
	x.mu.Unlock()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-x.done:
		case <-ctx.Done():
			x.mu.Lock()
			x.finish(ctx.Err())
			x.mu.Unlock()
		case now := <-tick.C:
			x.mu.Lock()
			if !x.over {
				step()
			}
			if !x.over {
				if err := stalled(now); err != nil {
					x.finish(err)
				}
			}
			x.mu.Unlock()
			continue
		}
		break
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.res
}

// runInline is run with the requester on dev's receive goroutine (run to
// completion, inlineRun): after each batch the device receives, it polls
// c, accounts for the completions and posts the next requests there, so
// no goroutine is woken between a completion and the request it lets go.
// The calling goroutine posts the first requests and then only waits: for
// the end, a failed completion (failed), ctx, or a stall of stallAfter
// without a completion (stalled). Every stallAfter/8 it also polls c
// itself, for completions no received batch followed.
func (l *loop) runInline(ctx context.Context, dev *roce.Device, c *cq.CQ, stallAfter time.Duration,
	failed func(cq.Completion) error, stalled func() error) (tally, error) {
	var x inlineRun
	var r *loopRun
	step := func() {
		for {
			n := c.Poll(r.wcs)
			if n == 0 {
				break
			}
			now := time.Now()
			r.t.stall = max(r.t.stall, now.Sub(r.lastDone))
			for _, wc := range r.wcs[:n] {
				if wc.Status != cq.StatusSuccess {
					x.finish(failed(wc))
					return
				}
			}
			if err := r.complete(n, now); err != nil {
				x.finish(err)
				return
			}
		}
		if r.finished(time.Now()) {
			x.finish(nil)
		}
	}
	start := func() error {
		var err error
		r, err = l.begin()
		return err
	}
	err := x.drive(ctx, dev, stallAfter/8, start, step, func(now time.Time) error {
		if now.Sub(r.lastDone) > stallAfter {
			return stalled()
		}
		return nil
	})
	x.mu.Lock()
	defer x.mu.Unlock()
	if r == nil {
		return tally{}, err
	}
	if err != nil {
		return r.t, err
	}
	return r.end(), nil
}
