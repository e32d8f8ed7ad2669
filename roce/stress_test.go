package roce_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// The verbs stress test: two devices move WRITE, READ and SEND traffic
// while many goroutines post, poll, modify, create, destroy and scrape, and
// Close comes down on all of it. It checks what the QP doc promises (every
// method may be called from any goroutine) rather than any one schedule:
//
//   - every WR whose post returned nil completes exactly once, with success
//     or an error status (a flush, or a retry or access error of the chaos),
//     and every CQ drains: a wrLedger per CQ records each WRID before its
//     post and strikes it on its completion;
//   - a checked pair, which the chaos leaves alone, moves byte-exact data
//     (WRITE, READ back, SEND) until Close begins;
//   - Modify to ERR flushes: every WR outstanding when it returns completes
//     soon after;
//   - no panic, no deadlock (every wait has a deadline and dumps the
//     goroutines when it passes), and goroutines and file descriptors are
//     back to their baseline after Close.
//
// Run it under -race: that is what it is for.

// stressOpts are the chaos QPs' options: short timeouts and few retries,
// so that a QP whose peer was reset fails its WRs soon instead of waiting.
var stressOpts = roce.ConnectOptions{MTU: qp.MTU1024, Timeout: 8 * time.Millisecond, RetryCnt: 3, RNRRetry: 2, MinRNRTimer: 1}

// checkedOpts are the checked pair's: timeout code 16 (268 ms) with 7
// retries tolerates a 2 s stall of a loaded -race run.
var checkedOpts = roce.ConnectOptions{MTU: qp.MTU1024, Timeout: 4096 * time.Nanosecond << 16}

// wrLedger is the account of one CQ: the WRs posted to the QPs that
// complete on it and not yet polled. It also bounds them to the CQ's
// capacity, so that the CQ cannot overflow (an overflow loses a completion
// by design: the application's fault, not the device's).
type wrLedger struct {
	name  string
	c     *cq.CQ
	mu    sync.Mutex
	open  map[uint64]struct{}
	limit int
}

// stressRun is one run's shared state.
type stressRun struct {
	nextID  atomic.Uint64
	closing atomic.Bool  // Close has begun: the checked pair may fail now
	rounds  atomic.Int64 // the checked pair's rounds
	stop    chan struct{}

	mu      sync.Mutex
	ledgers []*wrLedger
	errs    []string

	posted, refused, completed, flushed, failed atomic.Uint64
}

func (s *stressRun) errorf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) < 20 {
		s.errs = append(s.errs, fmt.Sprintf(format, args...))
	}
}

func (s *stressRun) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

func (s *stressRun) ledger(name string, c *cq.CQ) *wrLedger {
	l := &wrLedger{name: name, c: c, open: make(map[uint64]struct{}), limit: c.Cap()}
	s.mu.Lock()
	s.ledgers = append(s.ledgers, l)
	s.mu.Unlock()
	return l
}

// reserve records a new WRID as posted, or returns false if the CQ could
// not take its completion beside the ones outstanding.
func (s *stressRun) reserve(l *wrLedger) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.open) >= l.limit {
		return 0, false
	}
	id := s.nextID.Add(1)
	l.open[id] = struct{}{}
	return id, true
}

// settle settles a reservation with the post's result: a refused post will
// not complete. The errors a concurrent Modify, Destroy or Close, or a full
// queue, explain are expected; any other is a failure. It reports whether
// the post was accepted.
func (s *stressRun) settle(l *wrLedger, id uint64, err error) bool {
	if err == nil {
		s.posted.Add(1)
		return true
	}
	l.mu.Lock()
	delete(l.open, id)
	l.mu.Unlock()
	s.refused.Add(1)
	if !errors.Is(err, roce.ErrClosed) && !errors.Is(err, roce.ErrNoSuchQP) &&
		!errors.Is(err, qp.ErrQueueFull) && !errors.Is(err, qp.ErrInvalidState) {
		s.errorf("%s: post: %v", l.name, err)
	}
	return false
}

// account strikes polled completions off their ledger.
func (s *stressRun) account(l *wrLedger, wcs []cq.Completion) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, wc := range wcs {
		if _, ok := l.open[wc.WRID]; !ok {
			s.errorf("%s: completion for WR %d, which is not outstanding (%v): never posted, or completed twice", l.name, wc.WRID, wc.Status)
			continue
		}
		delete(l.open, wc.WRID)
		s.completed.Add(1)
		switch wc.Status {
		case cq.StatusSuccess:
		case cq.StatusWRFlushErr:
			s.flushed.Add(1)
		default:
			s.failed.Add(1)
		}
	}
}

// outstanding returns the WRIDs not yet completed.
func (l *wrLedger) outstanding() map[uint64]struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[uint64]struct{}, len(l.open))
	for id := range l.open {
		m[id] = struct{}{}
	}
	return m
}

// drain polls l's CQ until it is empty.
func (s *stressRun) drain(l *wrLedger) {
	wcs := make([]cq.Completion, 32)
	for {
		n := l.c.Poll(wcs)
		if n == 0 {
			return
		}
		s.account(l, wcs[:n])
	}
}

// waiter takes completions off l's CQ with Wait until the CQ is closed and
// drained or the run stops.
func (s *stressRun) waiter(ctx context.Context, l *wrLedger) {
	wcs := make([]cq.Completion, 16)
	for {
		n, err := l.c.Wait(ctx, wcs)
		s.account(l, wcs[:n])
		if err != nil {
			if !errors.Is(err, cq.ErrClosed) && !errors.Is(err, context.Canceled) {
				s.errorf("%s: Wait: %v", l.name, err)
			}
			return
		}
	}
}

// poller competes with waiter for l's completions, with Poll.
func (s *stressRun) poller(l *wrLedger) {
	wcs := make([]cq.Completion, 4)
	for !s.stopped() {
		if n := l.c.Poll(wcs); n > 0 {
			s.account(l, wcs[:n])
			continue
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// waitFlushed waits until every WR outstanding on l when it is called has
// completed: what Modify to ERR promises for the WRs posted before it.
func (s *stressRun) waitFlushed(l *wrLedger, d time.Duration) {
	want := l.outstanding()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		now := l.outstanding()
		left := 0
		for id := range want {
			if _, ok := now[id]; ok {
				left++
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	if !s.closing.Load() {
		s.errorf("%s: WRs outstanding at Modify(ERR) not flushed after %v", l.name, d)
	}
}

// stressSide is one end of a QP pair: the QP, its own CQ's ledger and a
// region other goroutines' WRs use (their bytes are not checked: WRs of
// several goroutines overlap in it).
type stressSide struct {
	dev *roce.Device
	q   *roce.QP
	l   *wrLedger
	m   *mr.Region
}

const (
	stressMRSize = 256 << 10
	stressMaxMsg = 16 << 10
	stressMaxWR  = 32
)

func (s *stressRun) side(d *roce.Device, m *mr.Region, name string) (*stressSide, error) {
	q, err := d.CreateQP(roce.QPConfig{MaxSendWR: stressMaxWR, MaxRecvWR: stressMaxWR})
	if err != nil {
		return nil, err
	}
	return &stressSide{dev: d, q: q, l: s.ledger(fmt.Sprintf("%s QP %d", name, q.QPN()), q.SendCQ()), m: m}, nil
}

// connect connects a and b to each other.
func connect(a, b *stressSide, o roce.ConnectOptions) error {
	if err := a.q.Connect(b.q.Info(), o); err != nil {
		return err
	}
	return b.q.Connect(a.q.Info(), o)
}

// postSend posts one signaled WRITE, READ or SEND of up to stressMaxMsg
// bytes from a to its peer b; false means it posted nothing.
func (s *stressRun) postSend(rng *rand.Rand, a, b *stressSide) bool {
	id, ok := s.reserve(a.l)
	if !ok {
		return false
	}
	n := uint32(1 + rng.IntN(stressMaxMsg))
	off := uint64(rng.IntN(stressMRSize - stressMaxMsg))
	wr := qp.SendWR{WRID: id, Flags: qp.SendSignaled, SGL: []qp.SGE{a.m.SGE(int(off), int(n))}}
	switch rng.IntN(3) {
	case 0:
		wr.Opcode, wr.RemoteAddr, wr.RKey = qp.WRRDMAWrite, b.m.IOVA()+off, b.m.RKey()
	case 1:
		wr.Opcode, wr.RemoteAddr, wr.RKey = qp.WRRDMARead, b.m.IOVA()+off, b.m.RKey()
	default:
		wr.Opcode = qp.WRSend
		wr.SGL[0].Length = min(n, 4096)
	}
	return s.settle(a.l, id, a.q.PostSend(&wr))
}

// postRecv posts one 4 KiB receive on a; false means it posted nothing.
func (s *stressRun) postRecv(rng *rand.Rand, a *stressSide) bool {
	id, ok := s.reserve(a.l)
	if !ok {
		return false
	}
	off := rng.IntN(stressMRSize - 4096)
	return s.settle(a.l, id, a.q.PostRecv(&qp.RecvWR{WRID: id, SGL: []qp.SGE{a.m.SGE(off, 4096)}}))
}

// ready reports whether a poster should post to x now: posts to a QP in
// ERR are thinned out, since they only flush, at no cost, and would crowd
// out the traffic.
func ready(rng *rand.Rand, x *stressSide) bool {
	return x.q.State() != qp.StateErr || rng.IntN(16) == 0
}

// loop runs f until the run stops; when f posts nothing (no room on the CQ,
// or the QP is being reset) it backs off briefly.
func (s *stressRun) loop(f func() bool) {
	for !s.stopped() {
		if !f() {
			time.Sleep(200 * time.Microsecond)
		}
	}
}

// stressPair opens two devices linked to each other; the test closes them.
type stressPair func(t *testing.T) (a, b *roce.Device)

func memStressPair(t *testing.T) (a, b *roce.Device) { return memStressShards(t, 0) }

// memStressShards opens the pair with the given Config.Shards.
func memStressShards(t *testing.T, shards int) (a, b *roce.Device) {
	n := mem.NewNetwork()
	var err error
	a, err = roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")), Shards: shards})
	require.NoError(t, err)
	b, err = roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")), Shards: shards})
	require.NoError(t, err)
	return a, b
}

func TestStressVerbsMem(t *testing.T) { stressVerbs(t, memStressPair, 3) }

// TestStressVerbsShards runs the stress test with many QPs over four
// shards per device (their QPNs pick them at random): posts, Modify to
// ERR and back, Destroy (churn) and Close meet on QPs of different
// engines, whose batches are sent outside their locks concurrently.
func TestStressVerbsShards(t *testing.T) {
	stressVerbs(t, func(t *testing.T) (a, b *roce.Device) { return memStressShards(t, 4) }, 10)
}

// countFDs returns the number of open file descriptors, or -1 where
// /proc/self/fd does not exist.
func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// joinOrDump waits for wg; if it does not finish within d, the test fails
// with every goroutine's stack, the evidence of a deadlock.
func joinOrDump(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		var b strings.Builder
		pprof.Lookup("goroutine").WriteTo(&b, 2)
		t.Fatalf("%s: not done after %v (deadlock?); goroutines:\n%s", what, d, b.String())
	}
}

// stressVerbs runs the stress test on the devices open makes, with pairs
// chaos QP pairs besides the checked pair and the churn.
func stressVerbs(t *testing.T, open stressPair, pairs int) {
	if testing.Short() {
		t.Skip("stress test; skipped with -short")
	}
	g0, fd0 := runtime.NumGoroutine(), countFDs()
	run := 2 * time.Second
	if raceEnabled {
		run = time.Second
	}
	s := &stressRun{stop: make(chan struct{})}
	da, db := open(t)
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(s.stop) }) }
	defer func() { // on a failed require: stop what runs
		halt()
		da.Close()
		db.Close()
	}()
	devs := []*roce.Device{da, db}
	mrs := make([]*mr.Region, 2)
	for i, d := range devs {
		var err error
		mrs[i], err = d.RegisterMR(nil, make([]byte, stressMRSize), mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	goFn := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}

	// The checked pair.
	ca, err := s.side(da, nil, "checked A")
	require.NoError(t, err)
	cb, err := s.side(db, nil, "checked B")
	require.NoError(t, err)
	require.NoError(t, connect(ca, cb, checkedOpts))
	goFn(func() { s.checkedLoop(ca, cb) })

	// The chaos pairs: posters on both sides, a waiter and a poller per CQ,
	// and a goroutine that moves a pair to ERR, watches the flush and
	// reconnects it.
	type pair struct{ a, b *stressSide }
	var ps []pair
	for i := 0; i < pairs; i++ {
		a, err := s.side(da, mrs[0], fmt.Sprintf("pair %d A", i))
		require.NoError(t, err)
		b, err := s.side(db, mrs[1], fmt.Sprintf("pair %d B", i))
		require.NoError(t, err)
		require.NoError(t, connect(a, b, stressOpts))
		ps = append(ps, pair{a, b})
		for k, x := range []*stressSide{a, b, a} {
			y := b
			if x == b {
				y = a
			}
			rng := rand.New(rand.NewPCG(uint64(i), uint64(k)))
			goFn(func() { s.loop(func() bool { return ready(rng, x) && s.postSend(rng, x, y) }) })
		}
		for k, x := range []*stressSide{a, b} {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(k+10)))
			goFn(func() { s.loop(func() bool { return ready(rng, x) && s.postRecv(rng, x) }) })
			goFn(func() { s.waiter(ctx, x.l) })
			goFn(func() { s.poller(x.l) })
		}
	}
	goFn(func() {
		rng := rand.New(rand.NewPCG(7, 7))
		for !s.stopped() {
			time.Sleep(time.Duration(10+rng.IntN(30)) * time.Millisecond)
			p := ps[rng.IntN(len(ps))]
			x, y := p.a, p.b
			if rng.IntN(2) == 0 {
				x, y = y, x
			}
			if err := x.q.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState); err != nil {
				s.expectClosed("Modify(ERR)", err)
				return
			}
			s.waitFlushed(x.l, 10*time.Second)
			for _, z := range []*stressSide{y, x} {
				for _, st := range []qp.State{qp.StateErr, qp.StateReset} {
					if err := z.q.Modify(&qp.Attr{State: st}, qp.AttrState); err != nil {
						s.expectClosed("Modify", err)
						return
					}
				}
			}
			if err := connect(x, y, stressOpts); err != nil {
				s.expectClosed("Connect", err)
				return
			}
		}
	})

	// QPs created, used and destroyed (or flushed by Close) while posts on
	// them are in flight.
	for k := 0; k < 2; k++ {
		goFn(func() { s.churn(rand.New(rand.NewPCG(uint64(k), 99)), da, db, mrs[0]) })
	}

	// Scrapers: everything a monitoring goroutine may read.
	// (The exporters of package roce/metrics read Device.Snapshot.)
	goFn(func() {
		for !s.stopped() {
			for _, d := range devs {
				_ = d.Snapshot()
				st := d.Stats()
				_ = st.RxPackets.Load() + st.TxPackets.Load() + st.BadICRC.Load()
			}
			for _, p := range ps {
				for _, x := range []*stressSide{p.a, p.b} {
					_ = x.q.Counters().Snapshot()
					_ = x.q.CC()
					_ = x.q.State()
					_ = x.q.Info()
					_ = x.l.c.Len()
					_ = x.l.c.Stats()
				}
			}
			time.Sleep(time.Millisecond)
		}
	})

	// Run for run, and then on until the checked pair has done a few rounds
	// (a loaded machine may take long over the first).
	time.Sleep(run)
	for deadline := time.Now().Add(30 * time.Second); s.rounds.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	// Close both devices while all of the above runs, twice at once for
	// one of them (Close is idempotent).
	s.closing.Store(true)
	var closers sync.WaitGroup
	for _, d := range []*roce.Device{da, db, da} {
		closers.Add(1)
		go func() {
			defer closers.Done()
			assert.NoError(t, d.Close())
		}()
	}
	joinOrDump(t, &closers, 30*time.Second, "Close")
	halt()
	joinOrDump(t, &wg, 30*time.Second, "the stress goroutines after Close")

	// Every CQ the devices made is closed: what is left on them is the last
	// of the flush, and then every WR has completed exactly once.
	s.mu.Lock()
	ledgers := s.ledgers
	s.mu.Unlock()
	for _, l := range ledgers {
		s.drain(l)
		if n := len(l.outstanding()); n > 0 {
			s.errorf("%s: %d WRs never completed", l.name, n)
		}
	}
	for _, e := range s.errs {
		t.Error(e)
	}
	t.Logf("posted %d (refused %d), completed %d: %d flushed, %d other errors; %d checked rounds; %d QPs",
		s.posted.Load(), s.refused.Load(), s.completed.Load(), s.flushed.Load(), s.failed.Load(), s.rounds.Load(), len(ledgers))
	assert.Equal(t, s.posted.Load(), s.completed.Load())
	assert.Positive(t, s.flushed.Load())
	assert.GreaterOrEqual(t, s.rounds.Load(), int64(3), "checked rounds")
	requireGoroutines(t, g0)
	if fd0 >= 0 {
		for i := 0; i < 200 && countFDs() > fd0; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		assert.LessOrEqual(t, countFDs(), fd0, "file descriptors after Close")
	}
}

// expectClosed records err unless Close explains it.
func (s *stressRun) expectClosed(what string, err error) {
	if !errors.Is(err, roce.ErrClosed) {
		s.errorf("%s: %v", what, err)
	}
}

// churn creates a QP pair, connects it, starts posting on both, then
// destroys one side or moves it to ERR while the posts run, deregisters
// B's region (its own, made for the round) under the posts too, destroys
// the rest and checks every WR of the pair completed exactly once.
func (s *stressRun) churn(rng *rand.Rand, da, db *roce.Device, am *mr.Region) {
	for !s.stopped() {
		a, err := s.side(da, am, "churn A")
		if err != nil {
			s.expectClosed("CreateQP", err)
			return
		}
		bm, err := db.RegisterMR(nil, make([]byte, stressMRSize), mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead)
		if err != nil {
			s.expectClosed("RegisterMR", err)
			a.q.Destroy()
			return
		}
		b, err := s.side(db, bm, "churn B")
		if err != nil {
			s.expectClosed("CreateQP", err)
			a.q.Destroy()
			return
		}
		if err := connect(a, b, stressOpts); err != nil {
			s.expectClosed("Connect", err)
			a.q.Destroy()
			b.q.Destroy()
			return
		}
		done := make(chan struct{})
		var posters sync.WaitGroup
		for k, x := range []*stressSide{a, b} {
			y := b
			if x == b {
				y = a
			}
			r := rand.New(rand.NewPCG(rng.Uint64(), uint64(k)))
			posters.Add(1)
			go func() {
				defer posters.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					if !s.postRecv(r, x) || !s.postSend(r, x, y) {
						time.Sleep(200 * time.Microsecond)
					}
				}
			}()
		}
		time.Sleep(time.Duration(1+rng.IntN(10)) * time.Millisecond)
		x, y := a, b
		if rng.IntN(2) == 0 {
			x, y = b, a
		}
		if rng.IntN(2) == 0 {
			err = x.q.Destroy()
		} else {
			err = x.q.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState)
		}
		if e := db.DeregisterMR(bm); e != nil {
			s.errorf("DeregisterMR: %v", e)
		}
		if err == nil {
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
			err = y.q.Destroy()
			if e := x.q.Destroy(); err == nil && !errors.Is(e, roce.ErrNoSuchQP) {
				err = e
			}
		}
		close(done)
		posters.Wait()
		if err != nil {
			s.expectClosed("Destroy", err)
			return
		}
		// Both QPs are destroyed and their CQs closed: the CQs hold the
		// last completions there will be.
		for _, z := range []*stressSide{a, b} {
			s.drain(z.l)
			if n := len(z.l.outstanding()); n > 0 {
				s.errorf("%s: %d WRs not completed after Destroy", z.l.name, n)
			}
			if n, err := z.l.c.Wait(context.Background(), make([]cq.Completion, 1)); n != 0 || !errors.Is(err, cq.ErrClosed) {
				s.errorf("%s: Wait after Destroy: %d, %v", z.l.name, n, err)
			}
		}
	}
}

// checkedLoop moves data over the checked pair and checks every byte
// until Close begins: WRITE a block to B, READ it back into another block
// of A, SEND it to a receive on B. It counts the rounds in s.rounds.
func (s *stressRun) checkedLoop(a, b *stressSide) {
	const size = 64 << 10
	src := testutil.Pattern(11, size)
	var err error
	regs := make([]*mr.Region, 4) // A: src, back; B: dst, recv
	for i, d := range []*roce.Device{a.dev, a.dev, b.dev, b.dev} {
		buf := src
		if i > 0 {
			buf = make([]byte, size)
		}
		if regs[i], err = d.RegisterMR(nil, buf, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead); err != nil {
			s.expectClosed("RegisterMR", err)
			return
		}
	}
	sm, bm, dm, rm := regs[0], regs[1], regs[2], regs[3]
	rng := rand.New(rand.NewPCG(5, 5))
	// do posts one WR (a receive on B first for a SEND) and waits for its
	// completions; false means Close has begun.
	do := func(wr qp.SendWR) bool {
		var rid uint64
		if wr.Opcode == qp.WRSend {
			id, _ := s.reserve(b.l)
			err := b.q.PostRecv(&qp.RecvWR{WRID: id, SGL: []qp.SGE{rm.SGE(0, size)}})
			s.settle(b.l, id, err)
			if err != nil {
				return s.checkedErr("PostRecv", err)
			}
			rid = id
		}
		id, _ := s.reserve(a.l)
		wr.WRID, wr.Flags = id, qp.SendSignaled
		err := a.q.PostSend(&wr)
		s.settle(a.l, id, err)
		if err != nil {
			return s.checkedErr("PostSend", err)
		}
		for _, w := range []struct {
			l  *wrLedger
			id uint64
		}{{a.l, id}, {b.l, rid}} {
			if w.id == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			wcs := make([]cq.Completion, 1)
			n, err := w.l.c.Wait(ctx, wcs)
			cancel()
			s.account(w.l, wcs[:n])
			if err != nil {
				return s.checkedErr("Wait", err)
			}
			if wcs[0].WRID != w.id || wcs[0].Status != cq.StatusSuccess {
				if s.closing.Load() {
					return false
				}
				s.errorf("checked pair: %v: WR %d completed %d with %v", wr.Opcode, w.id, wcs[0].WRID, wcs[0].Status)
				return false
			}
		}
		return true
	}
	got := make([]byte, size)
	for !s.closing.Load() {
		n := 1 + rng.IntN(size)
		off := rng.IntN(size - n + 1)
		if !do(qp.SendWR{Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{sm.SGE(off, n)}, RemoteAddr: dm.IOVA() + uint64(off), RKey: dm.RKey()}) ||
			!do(qp.SendWR{Opcode: qp.WRRDMARead, SGL: []qp.SGE{bm.SGE(off, n)}, RemoteAddr: dm.IOVA() + uint64(off), RKey: dm.RKey()}) {
			return
		}
		if err := bm.ReadAt(got[:n], bm.IOVA()+uint64(off)); err != nil || !bytes.Equal(got[:n], src[off:off+n]) {
			s.errorf("checked pair: READ back of WRITE [%d, %d) differs (%v)", off, off+n, err)
			return
		}
		if !do(qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{sm.SGE(off, n)}}) {
			return
		}
		// The receive's completion, on B's CQ, orders B's write of the
		// payload before this read.
		if err := rm.ReadAt(got[:n], rm.IOVA()); err != nil || !bytes.Equal(got[:n], src[off:off+n]) {
			s.errorf("checked pair: SEND [%d, %d) differs (%v)", off, off+n, err)
			return
		}
		s.rounds.Add(1)
	}
}

// checkedErr reports an error of the checked pair unless Close explains
// it; it returns false.
func (s *stressRun) checkedErr(what string, err error) bool {
	if !s.closing.Load() || (!errors.Is(err, roce.ErrClosed) && !errors.Is(err, cq.ErrClosed)) {
		s.errorf("checked pair: %s: %v", what, err)
	}
	return false
}
