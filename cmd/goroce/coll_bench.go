package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/goroce/goroce/coll"
	"github.com/goroce/goroce/internal/collcheck"
)

// collTest is one of nccl-tests' tests: its buffer sizes (getCollByteCount),
// its bandwidth rule (getBw) and its data (initData), in its terms.
type collTest struct {
	name    string
	kind    coll.Kind
	hasOp   bool // a reduction: -o applies, else redop "none"
	hasRoot bool // -r applies, else root -1
	// checkInPlace is false where nccl-tests reports N/A in place
	// (alltoall, sendrecv).
	checkInPlace bool
}

var collTests = []collTest{
	{name: "all_reduce", kind: coll.KindAllReduce, hasOp: true, checkInPlace: true},
	{name: "all_gather", kind: coll.KindAllGather, checkInPlace: true},
	{name: "reduce_scatter", kind: coll.KindReduceScatter, hasOp: true, checkInPlace: true},
	{name: "broadcast", kind: coll.KindBroadcast, hasRoot: true, checkInPlace: true},
	{name: "reduce", kind: coll.KindReduce, hasOp: true, hasRoot: true, checkInPlace: true},
	{name: "alltoall", kind: coll.KindAllToAll},
	{name: "sendrecv", kind: coll.KindSendRecv, hasOp: true},
}

// counts is nccl-tests' getCollByteCount for count elements of esz bytes
// on n ranks: the send and receive counts, the count the collective is
// called with, and the in-place offsets (per rank, elements).
func (t *collTest) counts(count, esz, n int) (send, recv, param, sendOff, recvOff int) {
	base := (count / n) &^ (16/esz - 1) // a multiple of 16 bytes per rank
	switch t.kind {
	case coll.KindAllGather:
		return base, base * n, base, base, 0
	case coll.KindReduceScatter:
		return base * n, base, base, 0, base
	case coll.KindAllToAll:
		return base * n, base * n, base, 0, 0
	}
	return count, count, count, 0, 0
}

// bw is nccl-tests' getBw: algbw and busbw in GB/s for param elements
// moved in sec.
func (t *collTest) bw(param, esz int, sec float64, n int) (alg, bus float64) {
	bytes := float64(param * esz)
	factor := 1.0
	switch t.kind {
	case coll.KindAllReduce:
		factor = 2 * float64(n-1) / float64(n)
	case coll.KindAllGather, coll.KindReduceScatter, coll.KindAllToAll:
		bytes *= float64(n)
		factor = float64(n-1) / float64(n)
	}
	alg = bytes / 1e9 / sec
	return alg, alg * factor
}

// bench runs one test the way nccl-tests' TimeTest and BenchTime do, on
// every rank, printing on rank 0.
type bench struct {
	c     *coll.Comm
	f     *collFlags
	t     *collTest
	n, me int
	out   io.Writer // rank 0's table (io.Discard elsewhere, or with --json)
	doc   *jsonDoc  // -J / --json results, rank 0
	// send and recv are the maxbytes buffers nccl-tests allocates;
	// expected is the check's.
	send, recv, expected []byte
	scalar               [2]float64
	iscalar              [2]int64
	rep                  uint64

	bwSum     float64
	bwCount   int
	errors    int // this rank's failed checks (nccl-tests' errors[0])
	ceiling   float64
	sizeBytes int // of the row being measured: for the extras

	watch *fabricWatch // rank 0 under the --fabric spawner: each timed run's counters
	rows  []collRow    // rank 0 under the spawner: the table's rows
}

// half is one half of a row: out-of-place or in place.
type half struct {
	timeUs, algbw, busbw float64
	check                bool
	wrong                int64
	minUs, maxUs         float64
}

// run is TimeTest for one type, op and root.
func (b *bench) run(dt coll.DataType, op coll.Op, opName string, root int) error {
	if err := b.c.Barrier(); err != nil {
		return err
	}
	esz := dt.Size()
	// Warm-up: every size with a factor of 2.
	for size := b.f.minBytes; size <= b.f.maxBytes; size *= 2 {
		for it := range b.f.warmup {
			if err := b.start(dt, op, root, size/esz, false, it); err != nil {
				return err
			}
		}
		if size == 0 || size > b.f.maxBytes/2 {
			break // the next size is past -e (or would overflow)
		}
	}
	for size := b.f.minBytes; size <= b.f.maxBytes; {
		count := size / esz
		sendC, recvC, param, _, _ := b.t.counts(count, esz, b.n)
		b.sizeBytes = max(sendC, recvC) * esz
		fmt.Fprint(b.out, rowPreamble(int64(max(sendC, recvC)*esz), int64(param), dt.String(), opName, root))
		var halves [2]half
		for inPlace := range 2 {
			h, err := b.benchTime(dt, op, root, count, inPlace == 1)
			if err != nil {
				fmt.Fprintln(b.out)
				return err
			}
			halves[inPlace] = h
			fmt.Fprint(b.out, rowBody(h.timeUs, h.algbw, h.busbw, h.check, h.wrong))
		}
		if b.f.wide && b.ceiling > 0 {
			fmt.Fprintf(b.out, "  %6s  %6s  %7s  %7s", floatStr(b.ceiling, 6), floatStr(halves[0].busbw/b.ceiling, 6),
				floatStr(halves[0].minUs, 7), floatStr(halves[0].maxUs, 7))
		}
		fmt.Fprintln(b.out)
		if b.doc != nil {
			b.doc.addResult(b, size, dt, opName, root, param, halves)
		}
		if b.watch != nil {
			row := collRow{Size: b.sizeBytes, Count: param, Type: dt.String(), Redop: opName, Root: root}
			for i, h := range halves {
				row.Half[i] = collHalf{TimeUs: h.timeUs, AlgBw: h.algbw, BusBw: h.busbw, Wrong: h.wrong, Check: h.check}
			}
			b.rows = append(b.rows, row)
		}
		next, ok := nextSize(size, b.f.maxBytes, b.f.stepFactor, b.f.stepBytes)
		if !ok {
			break
		}
		size = next
	}
	return nil
}

// nextSize is the size after size, by factor (above 1) or by step bytes as
// nccl-tests steps; ok is false when there is none up to limit: a size of 0
// times a factor, or a next size past limit (so a factor or a step that
// would overflow an int ends the sizes instead of wrapping them).
func nextSize(size, limit, factor, step int) (next int, ok bool) {
	if factor > 1 {
		if size == 0 || size > limit/factor {
			return 0, false
		}
		return size * factor, true
	}
	if size > limit-step {
		return 0, false
	}
	return size + step, true
}

// buffers returns the send and receive buffers of a call as nccl-tests'
// startColl computes them: shifted by iteration through the maxbytes
// buffers, in place within the receive buffer.
func (b *bench) buffers(dt coll.DataType, count int, inPlace bool, iter int) (send, recv []byte) {
	esz := dt.Size()
	sendC, recvC, _, sendOff, recvOff := b.t.counts(count, esz, b.n)
	total := max(sendC, recvC) * esz
	shift := 0
	if total > 0 {
		steps := b.f.maxBytes / total
		if steps > 0 {
			shift = total * (iter % steps)
		}
	}
	recvAll := b.recv[shift:]
	if inPlace {
		send = recvAll[sendOff*b.me*esz : sendOff*b.me*esz+sendC*esz]
		recv = recvAll[recvOff*b.me*esz : recvOff*b.me*esz+recvC*esz]
		return send, recv
	}
	return b.send[shift : shift+sendC*esz], recvAll[:recvC*esz]
}

// start is startColl: one collective.
func (b *bench) start(dt coll.DataType, op coll.Op, root, count int, inPlace bool, iter int) error {
	send, recv := b.buffers(dt, count, inPlace, iter)
	r := coll.Request{Kind: b.t.kind, Send: send, Recv: recv, Type: dt, Op: op, Root: root, Algorithm: b.f.algo}
	if b.t.kind == coll.KindSendRecv {
		r.Peer, r.From = (b.me+1)%b.n, (b.me-1+b.n)%b.n
	}
	return b.c.Run(&r)
}

// initData is the test's initData: inputs from (rank, seed, index) and
// the expected result, into the buffers of iteration 0.
func (b *bench) initData(dt coll.DataType, op coll.Op, root, count int, inPlace bool, rep uint64) bool {
	esz := dt.Size()
	n, me := b.n, b.me
	sendC, recvC, _, _, _ := b.t.counts(count, esz, n)
	send, recv := b.buffers(dt, count, inPlace, 0)
	clear(b.recv[:recvC*esz])
	if inPlace && b.t.kind == coll.KindReduceScatter {
		clear(b.recv[:sendC*esz])
	}
	data := send
	if inPlace {
		switch b.t.kind {
		case coll.KindAllGather, coll.KindReduceScatter:
		default:
			data = recv
		}
	}
	exp := b.expected[:recvC*esz]
	switch b.t.kind {
	case coll.KindAllReduce:
		collcheck.Input(data, dt, op, n, me, rep, 0)
		collcheck.Expected(exp, dt, op, n, rep, 0)
	case coll.KindAllGather:
		collcheck.Input(data, dt, coll.Sum, 1, 0, 33*rep+uint64(me), 0)
		for j := range n {
			collcheck.Input(exp[j*sendC*esz:(j+1)*sendC*esz], dt, coll.Sum, 1, 0, 33*rep+uint64(j), 0)
		}
	case coll.KindReduceScatter:
		collcheck.Input(data, dt, op, n, me, rep, 0)
		collcheck.Expected(exp, dt, op, n, rep, me*recvC)
	case coll.KindBroadcast:
		if me == root {
			collcheck.Input(data, dt, coll.Sum, 1, 0, rep, 0)
		}
		collcheck.Input(exp, dt, coll.Sum, 1, 0, rep, 0)
	case coll.KindReduce:
		collcheck.Input(data, dt, op, n, me, rep, 0)
		copy(exp, recv)
		if me == root {
			collcheck.Expected(exp, dt, op, n, rep, 0)
		}
	case coll.KindAllToAll:
		collcheck.Input(data, dt, coll.Sum, 1, 0, 33*rep+uint64(me), 0)
		part := sendC / n
		for j := range n {
			collcheck.Input(exp[j*part*esz:(j+1)*part*esz], dt, coll.Sum, 1, 0, 33*rep+uint64(j), me*part)
		}
	case coll.KindSendRecv:
		collcheck.Input(data, dt, coll.Sum, 1, 0, rep, me*sendC)
		collcheck.Input(exp, dt, coll.Sum, 1, 0, rep, ((me-1+n)%n)*recvC)
	}
	return !inPlace || b.t.checkInPlace
}

// benchTime is BenchTime: time iters × agg calls, combine over ranks,
// then the untimed check passes.
func (b *bench) benchTime(dt coll.DataType, op coll.Op, root, count int, inPlace bool) (half, error) {
	f := b.f
	var h half
	if f.check > 0 {
		b.initData(dt, op, root, count, inPlace, 99)
	}
	if err := b.start(dt, op, root, count, inPlace, 0); err != nil {
		return h, err
	}
	b.watch.begin()
	if err := b.c.Barrier(); err != nil {
		return h, err
	}
	var collOnly time.Duration
	start := time.Now()
	for it := range f.iters {
		t0 := time.Now()
		for a := range f.agg {
			if err := b.start(dt, op, root, count, inPlace, it*f.agg+a); err != nil {
				return h, err
			}
			if f.blocking == 1 {
				if err := b.c.Barrier(); err != nil {
					return h, err
				}
			}
		}
		if f.blocking == 3 {
			collOnly += time.Since(t0)
			if err := b.c.Barrier(); err != nil {
				return h, err
			}
		}
	}
	el := time.Since(start)
	if f.blocking == 3 {
		el = collOnly
	}
	sec := el.Seconds() / float64(f.iters*f.agg)
	// Combine over ranks as -a says, and keep the spread.
	avg, err := b.combine(sec, f.average)
	if err != nil {
		return h, err
	}
	lo, err := b.combine(sec, 2)
	if err != nil {
		return h, err
	}
	hi, err := b.combine(sec, 3)
	if err != nil {
		return h, err
	}
	_, _, param, _, _ := b.t.counts(count, dt.Size(), b.n)
	h.algbw, h.busbw = b.t.bw(param, dt.Size(), avg, b.n)
	h.timeUs, h.minUs, h.maxUs = avg*1e6, lo*1e6, hi*1e6
	b.watch.end(b.sizeBytes, dt, inPlace, h.busbw)
	if err := b.c.Barrier(); err != nil {
		return h, err
	}
	for range f.check {
		b.rep++
		reportable := b.initData(dt, op, root, count, inPlace, b.rep)
		if err := b.start(dt, op, root, count, inPlace, 0); err != nil {
			return h, err
		}
		var wrong int64
		if reportable {
			_, recv := b.buffers(dt, count, inPlace, 0)
			if b.f.inject && b.me == 1 && len(recv) > 0 {
				recv[0] ^= 0x40
			}
			sendC, recvC, _, _, _ := b.t.counts(count, dt.Size(), b.n)
			_ = sendC
			wrong = collcheck.Wrong(recv, b.expected[:recvC*dt.Size()], dt)
			if wrong != 0 {
				b.errors++
			}
		}
		total, err := b.sumInt(wrong)
		if err != nil {
			return h, err
		}
		h.check, h.wrong = reportable, total
		if total != 0 {
			break
		}
	}
	b.bwSum += h.busbw
	b.bwCount++
	return h, nil
}

// combine reduces a time over the ranks: 0 rank 0's, 1 the average, 2
// the minimum, 3 the maximum (nccl-tests' -a).
func (b *bench) combine(v float64, mode int) (float64, error) {
	b.scalar[0] = v
	var err error
	switch mode {
	case 0:
		err = coll.Broadcast(b.c, b.scalar[:1], b.scalar[1:2], 0)
		return b.scalar[1], err
	case 2:
		err = coll.AllReduce(b.c, b.scalar[:1], b.scalar[1:2], coll.Min)
	case 3:
		err = coll.AllReduce(b.c, b.scalar[:1], b.scalar[1:2], coll.Max)
	default:
		err = coll.AllReduce(b.c, b.scalar[:1], b.scalar[1:2], coll.Avg)
	}
	return b.scalar[1], err
}

func (b *bench) sumInt(v int64) (int64, error) {
	b.iscalar[0] = v
	err := coll.AllReduce(b.c, b.iscalar[:1], b.iscalar[1:2], coll.Sum)
	return b.iscalar[1], err
}

// measureCeiling is the point-to-point rate between ranks 0 and 1 of the
// job through the communicator itself (its CTS, its WRITEs, its channels
// and QPs), while the other ranks wait: the most a rank can move, which
// busbw is compared with.
func measureCeiling(c *coll.Comm, bytes, reps int) (float64, error) {
	if c.Size() < 2 {
		return 0, nil
	}
	buf := make([]byte, bytes)
	rate := []float64{0, 0}
	me := c.Rank()
	one := func() error {
		switch me {
		case 0:
			return c.Run(&coll.Request{Kind: coll.KindSend, Send: buf, Type: coll.Uint8, Peer: 1})
		case 1:
			return c.Run(&coll.Request{Kind: coll.KindRecv, Recv: buf, Type: coll.Uint8, Peer: 0})
		}
		return nil
	}
	if err := one(); err != nil { // warm-up: staging allocated, CTSs posted
		return 0, err
	}
	if err := c.Barrier(); err != nil {
		return 0, err
	}
	start := time.Now()
	for range reps {
		if err := one(); err != nil {
			return 0, err
		}
	}
	if me == 1 {
		rate[0] = float64(bytes*reps) / time.Since(start).Seconds() / 1e9
	}
	if err := coll.AllReduce(c, rate[:1], rate[1:2], coll.Max); err != nil {
		return 0, err
	}
	return rate[1], nil
}

var errWrong = errors.New("wrong results")

// avgBw is the footer's average bus bandwidth.
func (b *bench) avgBw() float64 {
	if b.bwCount == 0 {
		return 0
	}
	v := b.bwSum / float64(b.bwCount)
	if math.IsNaN(v) {
		return 0
	}
	return v
}
