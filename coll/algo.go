package coll

import "fmt"

// Algorithm is how a collective moves its data.
type Algorithm uint8

const (
	// AlgoAuto chooses by collective, size and rank count (Comm.Choose).
	AlgoAuto Algorithm = iota
	// AlgoRing is NCCL's ring: all-reduce as a reduce-scatter then an
	// all-gather around the ring, 2(n-1) steps of 1/n of the data each;
	// broadcast and reduce as a chain.
	AlgoRing
	// AlgoTree is NCCL's double binary tree: two binary trees over the
	// ranks, the second mirrored (even n) or shifted by one (odd n), so
	// that a leaf of one is an inner node of the other; channels alternate
	// between them, each reducing up its tree and broadcasting down,
	// pipelined by chunk. Broadcast and reduce use one tree rooted at
	// their root.
	AlgoTree
	// AlgoHD is halving-doubling: all-reduce as recursive halving
	// (reduce-scatter) then recursive doubling (all-gather), 2 log2 n
	// exchanges with one partner each (Rabenseifner), or for small data
	// log2 n exchanges of the whole vector; a rank count that is not a
	// power of two first folds its extra ranks into partners. Reduce-scatter
	// and all-gather use their half when n is a power of two.
	AlgoHD
)

func (a Algorithm) valid() bool { return a <= AlgoHD }

// String returns the algorithm's flag spelling: auto, ring, tree, hd.
func (a Algorithm) String() string {
	switch a {
	case AlgoAuto:
		return "auto"
	case AlgoRing:
		return "ring"
	case AlgoTree:
		return "tree"
	case AlgoHD:
		return "hd"
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// ParseAlgorithm parses auto, ring, tree or hd (also halving-doubling).
func ParseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case "auto", "":
		return AlgoAuto, nil
	case "ring":
		return AlgoRing, nil
	case "tree":
		return AlgoTree, nil
	case "hd", "halving-doubling":
		return AlgoHD, nil
	}
	return 0, fmt.Errorf("%w: algorithm %q (auto, ring, tree or hd)", ErrInvalidArg, s)
}

// Kind is a collective.
type Kind uint8

// Collectives.
const (
	KindAllReduce Kind = iota
	KindReduceScatter
	KindAllGather
	KindBroadcast
	KindReduce
	KindAllToAll
	KindSend
	KindRecv
	KindSendRecv
)

// String returns nccl-tests' name of the collective's test (all_reduce,
// …, sendrecv; send and recv for the halves).
func (k Kind) String() string {
	switch k {
	case KindAllReduce:
		return "all_reduce"
	case KindReduceScatter:
		return "reduce_scatter"
	case KindAllGather:
		return "all_gather"
	case KindBroadcast:
		return "broadcast"
	case KindReduce:
		return "reduce"
	case KindAllToAll:
		return "alltoall"
	case KindSend:
		return "send"
	case KindRecv:
		return "recv"
	case KindSendRecv:
		return "sendrecv"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Thresholds of the automatic choice (Comm.Choose), measured with 4 ranks
// on loopback (doc/coll.md §5).
const (
	// hdMaxBytes: all-reduces up to this size use halving-doubling,
	// larger ones the ring.
	hdMaxBytes = 256 << 10
	// treeMaxBytes: broadcasts and reduces up to this size use a tree.
	treeMaxBytes = 256 << 10
	// hdWholeBytes: halving-doubling exchanges whole vectors (recursive
	// doubling, log2 n steps) up to this size per channel, and halves
	// above it.
	hdWholeBytes = 32 << 10
	// minChannelBytes: a call uses one channel per this many bytes, up to
	// Config.Channels.
	minChannelBytes = 32 << 10
)

// Choose returns the algorithm a collective of kind with bytes of data
// (the per-rank buffer: the larger of send and receive) runs with:
// the forced one if it applies to kind and this rank count, else the
// automatic choice. Send, receive and all-to-all have only their direct
// exchange (AlgoAuto).
func (c *Comm) Choose(kind Kind, bytes int, forced Algorithm) Algorithm {
	if forced == AlgoAuto {
		forced = c.cfg.Algorithm
	}
	n := c.cfg.Size
	switch kind {
	case KindAllReduce:
		if forced != AlgoAuto {
			return forced
		}
		if bytes <= hdMaxBytes {
			return AlgoHD
		}
		return AlgoRing
	case KindReduceScatter, KindAllGather:
		if forced == AlgoHD && isPow2(n) {
			return AlgoHD
		}
		if forced == AlgoAuto && isPow2(n) && bytes <= hdMaxBytes {
			return AlgoHD
		}
		return AlgoRing
	case KindBroadcast, KindReduce:
		if forced == AlgoRing || forced == AlgoTree {
			return forced
		}
		if bytes <= treeMaxBytes {
			return AlgoTree
		}
		return AlgoRing
	}
	return AlgoAuto
}

// gen builds the channel programs of a call into the engine.
type gen struct {
	c      *Comm
	e      *engine
	ring   []int // ring position → rank
	pos    int   // this rank's ring position
	slice  int   // elements per message
	ch     int   // the channel being built
	sends  []op
	recvs  []op
	levels [][2]int
}

func (g *gen) init(c *Comm) {
	g.c, g.e = c, &c.eng
	n := c.cfg.Size
	g.ring = make([]int, n)
	for i := range g.ring {
		g.ring[i] = i
	}
	if c.cfg.RankOrder != nil {
		copy(g.ring, c.cfg.RankOrder)
	}
	for i, r := range g.ring {
		if r == c.cfg.Rank {
			g.pos = i
		}
	}
}

// conn returns the connection to rank r on the channel being built.
func (g *gen) conn(r int) *conn { return g.c.conns[r*g.c.cfg.Channels+g.ch] }

// at returns the connection to the rank at ring position p.
func (g *gen) at(p int) *conn {
	n := len(g.ring)
	return g.conn(g.ring[((p%n)+n)%n])
}

// spec describes one op for add: element ranges are converted to bytes
// there. Zero-length ops are dropped on every rank alike.
type spec struct {
	n        int // elements
	src, dst int // element offsets, -1 none
	srcBuf   bufID
	dstBuf   bufID
	rx, tx   []*conn
	final    bool
}

func (g *gen) op(s spec) op {
	esz := g.e.esz
	o := op{n: s.n * esz, src: -1, dst: -1, srcBuf: s.srcBuf, dstBuf: s.dstBuf, final: s.final}
	if s.src >= 0 && s.srcBuf != bufNone {
		o.src = s.src * esz
	}
	if s.dst >= 0 && s.dstBuf != bufNone {
		o.dst = s.dst * esz
	}
	for _, cn := range s.rx {
		if cn != nil {
			o.rx[o.nrx] = cn
			o.nrx++
		}
	}
	for _, cn := range s.tx {
		if cn != nil {
			o.tx[o.ntx] = cn
			o.ntx++
		}
	}
	return o
}

func (g *gen) add(s spec) {
	if s.n <= 0 {
		return
	}
	ch := &g.e.chs[g.ch]
	ch.ops = append(ch.ops, g.op(s))
}

// pieces adds f's op for each message-sized piece of [lo, hi).
func (g *gen) pieces(lo, hi int, f func(lo, n int) spec) {
	for off := lo; off < hi; off += g.slice {
		g.add(f(off, min(g.slice, hi-off)))
	}
}

// lead is how many sends an exchange runs ahead of its receives: the
// peers' CTSs cover Steps messages, so half of them keeps both directions
// busy without either side's sends outrunning the other's offers.
func (g *gen) lead() int { return max(1, g.c.cfg.Steps/2) }

// flush adds the queued sends and receives interleaved: lead sends
// first, then one receive and one send in turn.
func (g *gen) flush() {
	ch := &g.e.chs[g.ch]
	s, r := g.sends, g.recvs
	i := 0
	for ; i < len(s) && i < g.lead(); i++ {
		ch.ops = append(ch.ops, s[i])
	}
	for j := 0; j < len(r) || i < len(s); j++ {
		if j < len(r) {
			ch.ops = append(ch.ops, r[j])
		}
		if i < len(s) {
			ch.ops = append(ch.ops, s[i])
			i++
		}
	}
	g.sends, g.recvs = g.sends[:0], g.recvs[:0]
}

// queueSend and queueRecv add an exchange's pieces to the queues flush
// interleaves.
func (g *gen) queueSend(lo, hi int, f func(lo, n int) spec) {
	for off := lo; off < hi; off += g.slice {
		if s := f(off, min(g.slice, hi-off)); s.n > 0 {
			g.sends = append(g.sends, g.op(s))
		}
	}
}

func (g *gen) queueRecv(lo, hi int, f func(lo, n int) spec) {
	for off := lo; off < hi; off += g.slice {
		if s := f(off, min(g.slice, hi-off)); s.n > 0 {
			g.recvs = append(g.recvs, g.op(s))
		}
	}
}

// part returns channel ch's share [lo, hi) of count elements split over
// nch channels.
func part(count, nch, ch int) (int, int) { return count * ch / nch, count * (ch + 1) / nch }

// channels returns how many channels a call of bytes uses.
func (c *Comm) channels(bytes int) int {
	return max(1, min(c.cfg.Channels, bytes/minChannelBytes))
}

// build makes the programs of a call: count elements (the per-rank
// count: a reduce-scatter's output, an all-gather's input, a block of an
// all-to-all).
func (g *gen) build(r *Request, algo Algorithm, count int) {
	e := g.e
	e.esz = r.Type.Size()
	g.slice = max(1, g.c.cfg.Chunk/e.esz)
	n := g.c.cfg.Size
	total := count * e.esz
	if r.Kind == KindReduceScatter || r.Kind == KindAllGather || r.Kind == KindAllToAll {
		total *= n
	}
	e.nch = g.c.channels(total)
	for ch := range e.nch {
		g.ch = ch
		e.chs[ch].ops = e.chs[ch].ops[:0]
		lo, hi := part(count, e.nch, ch)
		switch r.Kind {
		case KindAllReduce:
			switch algo {
			case AlgoRing:
				g.ringAllReduce(lo, hi)
			case AlgoTree:
				g.treeAllReduce(lo, hi)
			default:
				g.hdAllReduce(lo, hi)
			}
		case KindReduceScatter:
			if algo == AlgoHD {
				g.hdReduceScatter(count, lo, hi)
			} else {
				g.ringReduceScatter(count, lo, hi)
			}
		case KindAllGather:
			if algo == AlgoHD {
				g.hdAllGather(count, lo, hi)
			} else {
				g.ringAllGather(count, lo, hi)
			}
		case KindBroadcast:
			if algo == AlgoTree {
				g.treeBroadcast(r.Root, lo, hi)
			} else {
				g.chainBroadcast(r.Root, lo, hi)
			}
		case KindReduce:
			if algo == AlgoTree {
				g.treeReduce(r.Root, lo, hi)
			} else {
				g.chainReduce(r.Root, lo, hi)
			}
		case KindAllToAll:
			g.allToAll(count, lo, hi)
		case KindSend, KindRecv, KindSendRecv:
			g.sendRecv(r, lo, hi)
		}
	}
}

// depth is how many messages one ring step moves per loop: half the
// FIFO, as NCCL's ring moves ALLREDUCE_CHUNKSTEPS = NCCL_STEPS/2 steps per
// primitive. A rank forwards each message of a step as it arrives, so a
// step's messages stream through the ring one behind the other, and the
// loop's fill and drain (2n-2 hops) are paid once per depth messages
// rather than per message.
func (g *gen) depth() int { return max(1, g.c.cfg.Steps/2) }

// step emits f's op for each message-sized piece of [lo, lo+k): one ring
// step of a loop.
func (g *gen) step(lo, k int, f func(o, k int) spec) { g.pieces(lo, lo+k, f) }

// ringAllReduce is NCCL's ring all-reduce over [lo, hi): in loops of n
// chunks of depth messages, each chunk goes round the ring reduced (n-1
// steps), the last rank's reduction being final, and then round again
// copied.
func (g *gen) ringAllReduce(lo, hi int) {
	n := len(g.ring)
	me := g.pos
	if n == 1 {
		g.pieces(lo, hi, func(o, k int) spec {
			return spec{n: k, src: o, srcBuf: bufIn, dst: o, dstBuf: bufOut, final: true}
		})
		return
	}
	next, prev := []*conn{g.at(me + 1)}, []*conn{g.at(me - 1)}
	cnt := hi - lo
	loop := n * g.depth() * g.slice
	for off := 0; off < cnt; off += loop {
		real := min(loop, cnt-off)
		ck := ceilDiv(real, n)
		chunk := func(j int) (int, int) {
			j = ((j % n) + n) % n
			s := min(off+j*ck, off+real)
			return lo + s, min(s+ck, off+real) - s
		}
		s, k := chunk(me - 1)
		g.step(s, k, func(o, k int) spec { return spec{n: k, src: o, srcBuf: bufIn, dst: -1, tx: next} })
		for step := 2; step < n; step++ {
			s, k := chunk(me - step)
			g.step(s, k, func(o, k int) spec { return spec{n: k, rx: prev, src: o, srcBuf: bufIn, dst: -1, tx: next} })
		}
		s, k = chunk(me)
		g.step(s, k, func(o, k int) spec {
			return spec{n: k, rx: prev, src: o, srcBuf: bufIn, dst: o, dstBuf: bufOut, tx: next, final: true}
		})
		for step := 1; step < n-1; step++ {
			s, k := chunk(me - step)
			g.step(s, k, func(o, k int) spec { return spec{n: k, rx: prev, src: -1, dst: o, dstBuf: bufOut, tx: next} })
		}
		s, k = chunk(me + 1)
		g.step(s, k, func(o, k int) spec { return spec{n: k, rx: prev, src: -1, dst: o, dstBuf: bufOut} })
	}
}

// ringReduceScatter: block b of the input is rank b's output. The piece
// that starts at ring position p-1 is reduced round the ring and ends, in
// its final form, at position p's rank. Each channel takes [lo, hi) of
// every block, in loops of depth messages per step.
func (g *gen) ringReduceScatter(count, lo, hi int) {
	n := len(g.ring)
	me := g.pos
	block := func(p int) int { return g.ring[((p%n)+n)%n] * count }
	if n == 1 {
		g.pieces(lo, hi, func(o, k int) spec {
			return spec{n: k, src: block(me) + o, srcBuf: bufIn, dst: o, dstBuf: bufOut, final: true}
		})
		return
	}
	next, prev := []*conn{g.at(me + 1)}, []*conn{g.at(me - 1)}
	for off := lo; off < hi; off += g.depth() * g.slice {
		k := min(g.depth()*g.slice, hi-off)
		b := block(me - 1)
		g.step(off, k, func(o, k int) spec { return spec{n: k, src: b + o, srcBuf: bufIn, dst: -1, tx: next} })
		for step := 2; step < n; step++ {
			b := block(me - step)
			g.step(off, k, func(o, k int) spec { return spec{n: k, rx: prev, src: b + o, srcBuf: bufIn, dst: -1, tx: next} })
		}
		b = block(me)
		g.step(off, k, func(o, k int) spec {
			return spec{n: k, rx: prev, src: b + o, srcBuf: bufIn, dst: o, dstBuf: bufOut, final: true}
		})
	}
}

// ringAllGather: each rank's block travels round the ring, in loops of
// depth messages per step.
func (g *gen) ringAllGather(count, lo, hi int) {
	n := len(g.ring)
	me := g.pos
	block := func(p int) int { return g.ring[((p%n)+n)%n] * count }
	var next []*conn
	if n > 1 {
		next = []*conn{g.at(me + 1)}
	}
	for off := lo; off < hi; off += g.depth() * g.slice {
		k := min(g.depth()*g.slice, hi-off)
		b := block(me)
		g.step(off, k, func(o, k int) spec { return spec{n: k, src: o, srcBuf: bufIn, dst: b + o, dstBuf: bufOut, tx: next} })
		if n == 1 {
			continue
		}
		prev := []*conn{g.at(me - 1)}
		for step := 1; step < n-1; step++ {
			b := block(me - step)
			g.step(off, k, func(o, k int) spec { return spec{n: k, rx: prev, src: -1, dst: b + o, dstBuf: bufOut, tx: next} })
		}
		b = block(me - (n - 1))
		g.step(off, k, func(o, k int) spec { return spec{n: k, rx: prev, src: -1, dst: b + o, dstBuf: bufOut} })
	}
}

// chainBroadcast: the ring from the root, each rank passing on what it
// received.
func (g *gen) chainBroadcast(root, lo, hi int) {
	n := len(g.ring)
	rootPos := g.posOf(root)
	p := ((g.pos - rootPos) + n) % n
	var next, prev []*conn
	if p < n-1 {
		next = []*conn{g.at(g.pos + 1)}
	}
	if p > 0 {
		prev = []*conn{g.at(g.pos - 1)}
	}
	g.pieces(lo, hi, func(o, k int) spec {
		if p == 0 {
			return spec{n: k, src: o, srcBuf: bufIn, dst: o, dstBuf: bufOut, tx: next}
		}
		return spec{n: k, rx: prev, src: -1, dst: o, dstBuf: bufOut, tx: next}
	})
}

// chainReduce: the ring ending at the root, each rank adding its input.
func (g *gen) chainReduce(root, lo, hi int) {
	n := len(g.ring)
	rootPos := g.posOf(root)
	p := ((g.pos - rootPos - 1) + 2*n) % n // the root's successor starts, the root ends
	var next, prev []*conn
	if p < n-1 {
		next = []*conn{g.at(g.pos + 1)}
	}
	if p > 0 {
		prev = []*conn{g.at(g.pos - 1)}
	}
	g.pieces(lo, hi, func(o, k int) spec {
		if p == n-1 {
			return spec{n: k, rx: prev, src: o, srcBuf: bufIn, dst: o, dstBuf: bufOut, final: true}
		}
		return spec{n: k, rx: prev, src: o, srcBuf: bufIn, dst: -1, tx: next}
	})
}

func (g *gen) posOf(rank int) int {
	for i, r := range g.ring {
		if r == rank {
			return i
		}
	}
	return 0
}

// btree returns the parent and children of label l in a binary tree over
// labels 0 … n-1 rooted at 0 (-1 for none). Label 0's one child is the
// largest power of two below n; a label whose lowest set bit is b has its
// parent at l with b cleared and 2b set (or just b cleared when that is
// out of range) and its children at l ± b/2, the upper one halved further
// until it is in range. Leaves are the odd labels, so half the ranks are
// leaves, and depth is log2 n.
func btree(n, l int) (parent, c0, c1 int) {
	if n <= 1 {
		return -1, -1, -1
	}
	if l == 0 {
		b := 1
		for b*2 < n {
			b *= 2
		}
		return -1, -1, b
	}
	b := l & -l
	parent = (l ^ b) | (b << 1)
	if parent >= n {
		parent = l ^ b
	}
	half := b >> 1
	if half == 0 {
		return parent, -1, -1
	}
	c0 = l - half
	c1 = l + half
	for c1 >= n && half > 0 {
		half >>= 1
		c1 = l + half
	}
	if half == 0 {
		c1 = -1
	}
	return parent, c0, c1
}

// dtree returns label l's parent and children in tree t (0 or 1) of the
// double binary tree: tree 0 is btree, tree 1 its mirror image (even n:
// label n-1-l) or its shift by one (odd n: label l-1), so that every leaf
// of one tree is an inner node of the other.
func dtree(n, t, l int) (parent, c0, c1 int) {
	if t == 0 {
		return btree(n, l)
	}
	var to, from func(int) int
	if n%2 == 0 {
		to = func(x int) int { return n - 1 - x }
		from = to
	} else {
		to = func(x int) int { return (x - 1 + n) % n }
		from = func(x int) int { return (x + 1) % n }
	}
	p, a, b := btree(n, to(l))
	m := func(x int) int {
		if x < 0 {
			return -1
		}
		return from(x)
	}
	return m(p), m(a), m(b)
}

// treeConns returns the connections to a tree's parent and children,
// with labels being ring positions.
func (g *gen) treeConns(parent, c0, c1 int) (up []*conn, down []*conn) {
	if parent >= 0 {
		up = []*conn{g.at(parent)}
	}
	for _, c := range []int{c0, c1} {
		if c >= 0 {
			down = append(down, g.at(c))
		}
	}
	return up, down
}

// treeAllReduce reduces up channel's tree and broadcasts down, piece by
// piece, the broadcast of a piece trailing its reduction by lead pieces so
// that both directions of the tree stay busy.
func (g *gen) treeAllReduce(lo, hi int) {
	n := len(g.ring)
	parent, c0, c1 := dtree(n, g.ch%2, g.pos)
	up, down := g.treeConns(parent, c0, c1)
	np := ceilDiv(hi-lo, g.slice)
	piece := func(i int) (int, int) { o := lo + i*g.slice; return o, min(g.slice, hi-o) }
	lag := g.lead()
	for i := 0; i < np+lag; i++ {
		if i < np {
			o, k := piece(i)
			switch {
			case parent < 0: // the root: reduce, final, and start down
				g.add(spec{n: k, rx: down, src: o, srcBuf: bufIn, dst: o, dstBuf: bufOut, tx: down, final: true})
			default:
				g.add(spec{n: k, rx: down, src: o, srcBuf: bufIn, dst: -1, tx: up})
			}
		}
		if j := i - lag; j >= 0 && parent >= 0 {
			o, k := piece(j)
			g.add(spec{n: k, rx: up, src: -1, dst: o, dstBuf: bufOut, tx: down})
		}
	}
}

// treeBroadcast sends down one binary tree rooted at root.
func (g *gen) treeBroadcast(root, lo, hi int) {
	n := len(g.ring)
	rel := (g.pos - g.posOf(root) + n) % n
	parent, c0, c1 := btree(n, rel)
	abs := func(x int) int {
		if x < 0 {
			return -1
		}
		return (x + g.posOf(root)) % n
	}
	up, down := g.treeConns(abs(parent), abs(c0), abs(c1))
	g.pieces(lo, hi, func(o, k int) spec {
		if parent < 0 {
			return spec{n: k, src: o, srcBuf: bufIn, dst: o, dstBuf: bufOut, tx: down}
		}
		return spec{n: k, rx: up, src: -1, dst: o, dstBuf: bufOut, tx: down}
	})
}

// treeReduce reduces up one binary tree rooted at root.
func (g *gen) treeReduce(root, lo, hi int) {
	n := len(g.ring)
	rel := (g.pos - g.posOf(root) + n) % n
	parent, c0, c1 := btree(n, rel)
	abs := func(x int) int {
		if x < 0 {
			return -1
		}
		return (x + g.posOf(root)) % n
	}
	up, down := g.treeConns(abs(parent), abs(c0), abs(c1))
	g.pieces(lo, hi, func(o, k int) spec {
		if parent < 0 {
			return spec{n: k, rx: down, src: o, srcBuf: bufIn, dst: o, dstBuf: bufOut, final: true}
		}
		return spec{n: k, rx: down, src: o, srcBuf: bufIn, dst: -1, tx: up}
	})
}

// hdAllReduce is halving-doubling over [lo, hi) (Rabenseifner; recursive
// doubling of whole vectors when small). With p the largest power of two
// not above n and r = n-p, ring positions 0 … 2r-1 pair up first: each
// even one sends its input to its odd neighbour and receives the result
// at the end; the p others (virtual ranks) exchange.
func (g *gen) hdAllReduce(lo, hi int) {
	n := len(g.ring)
	me := g.pos
	p := 1
	for p*2 <= n {
		p *= 2
	}
	rem := n - p
	real := func(v int) int { // virtual rank → ring position
		if v < rem {
			return 2*v + 1
		}
		return v + rem
	}
	vr := -1
	switch {
	case me < 2*rem && me%2 == 0:
		nb := []*conn{g.at(me + 1)}
		g.pieces(lo, hi, func(o, k int) spec { return spec{n: k, src: o, srcBuf: bufIn, dst: -1, tx: nb} })
	case me < 2*rem:
		vr = me / 2
		nb := []*conn{g.at(me - 1)}
		g.pieces(lo, hi, func(o, k int) spec {
			return spec{n: k, rx: nb, src: o, srcBuf: bufIn, dst: o, dstBuf: bufOut}
		})
	default:
		vr = me - rem
		if !sameMem(g.e.in, g.e.out) {
			g.pieces(lo, hi, func(o, k int) spec {
				return spec{n: k, src: o, srcBuf: bufIn, dst: o, dstBuf: bufOut}
			})
		}
	}
	if vr >= 0 {
		sendFrom := func(c []*conn) func(o, k int) spec {
			return func(o, k int) spec { return spec{n: k, src: o, srcBuf: bufOut, dst: -1, tx: c} }
		}
		reduceInto := func(c []*conn) func(o, k int) spec {
			return func(o, k int) spec { return spec{n: k, rx: c, src: o, srcBuf: bufOut, dst: o, dstBuf: bufOut} }
		}
		copyInto := func(c []*conn) func(o, k int) spec {
			return func(o, k int) spec { return spec{n: k, rx: c, src: -1, dst: o, dstBuf: bufOut} }
		}
		divideAt := func(o, k int) spec {
			return spec{n: k, src: o, srcBuf: bufOut, dst: o, dstBuf: bufOut, final: true}
		}
		if (hi-lo)*g.e.esz <= hdWholeBytes || hi-lo < p {
			for mask := 1; mask < p; mask <<= 1 {
				c := []*conn{g.at(real(vr ^ mask))}
				g.queueSend(lo, hi, sendFrom(c))
				g.queueRecv(lo, hi, reduceInto(c))
				g.flush()
			}
			if g.e.op == Avg {
				g.pieces(lo, hi, divideAt)
			}
		} else {
			a, b := lo, hi
			g.levels = g.levels[:0]
			for mask := p / 2; mask >= 1; mask >>= 1 {
				c := []*conn{g.at(real(vr ^ mask))}
				g.levels = append(g.levels, [2]int{a, b})
				mid := a + (b-a)/2
				ka, kb, sa, sb := a, mid, mid, b
				if vr&mask != 0 {
					ka, kb, sa, sb = mid, b, a, mid
				}
				g.queueSend(sa, sb, sendFrom(c))
				g.queueRecv(ka, kb, reduceInto(c))
				g.flush()
				a, b = ka, kb
			}
			if g.e.op == Avg {
				g.pieces(a, b, divideAt)
			}
			for i, mask := len(g.levels)-1, 1; mask < p; i, mask = i-1, mask<<1 {
				c := []*conn{g.at(real(vr ^ mask))}
				pa, pb := g.levels[i][0], g.levels[i][1]
				// The partner holds the rest of the parent range.
				oa, ob := pa, a
				if a == pa {
					oa, ob = b, pb
				}
				g.queueSend(a, b, sendFrom(c))
				g.queueRecv(oa, ob, copyInto(c))
				g.flush()
				a, b = pa, pb
			}
		}
	}
	if me < 2*rem {
		if me%2 == 1 {
			nb := []*conn{g.at(me - 1)}
			g.pieces(lo, hi, func(o, k int) spec { return spec{n: k, src: o, srcBuf: bufOut, dst: -1, tx: nb} })
		} else {
			nb := []*conn{g.at(me + 1)}
			g.pieces(lo, hi, func(o, k int) spec { return spec{n: k, rx: nb, src: -1, dst: o, dstBuf: bufOut} })
		}
	}
}

// hdReduceScatter is recursive halving over the blocks (n a power of
// two): at each level a rank keeps the half of its blocks that holds its
// own and sends the other half, accumulating in the engine's scratch.
func (g *gen) hdReduceScatter(count, lo, hi int) {
	n := len(g.ring)
	vr := g.pos
	block := func(l int) int { return g.ring[l] * count }
	src := bufIn
	a, b := 0, n // the labels whose blocks this rank still holds
	if n == 1 {
		g.pieces(lo, hi, func(o, k int) spec {
			return spec{n: k, src: block(vr) + o, srcBuf: bufIn, dst: o, dstBuf: bufOut, final: true}
		})
		return
	}
	for mask := n / 2; mask >= 1; mask >>= 1 {
		c := []*conn{g.at(vr ^ mask)}
		mid := a + (b-a)/2
		ka, kb, sa, sb := a, mid, mid, b
		if vr&mask != 0 {
			ka, kb, sa, sb = mid, b, a, mid
		}
		last := mask == 1
		from := src
		for l := sa; l < sb; l++ {
			g.queueSend(lo, hi, func(o, k int) spec {
				return spec{n: k, src: block(l) + o, srcBuf: from, dst: -1, tx: c}
			})
		}
		for l := ka; l < kb; l++ {
			g.queueRecv(lo, hi, func(o, k int) spec {
				if last {
					return spec{n: k, rx: c, src: block(l) + o, srcBuf: from, dst: o, dstBuf: bufOut, final: true}
				}
				return spec{n: k, rx: c, src: block(l) + o, srcBuf: from, dst: block(l) + o, dstBuf: bufTmp}
			})
		}
		g.flush()
		src = bufTmp
		a, b = ka, kb
	}
}

// hdAllGather is recursive doubling (n a power of two): at each level a
// rank swaps the blocks it holds with its partner's.
func (g *gen) hdAllGather(count, lo, hi int) {
	n := len(g.ring)
	vr := g.pos
	block := func(l int) int { return g.ring[l] * count }
	g.pieces(lo, hi, func(o, k int) spec {
		return spec{n: k, src: o, srcBuf: bufIn, dst: block(vr) + o, dstBuf: bufOut}
	})
	for mask := 1; mask < n; mask <<= 1 {
		c := []*conn{g.at(vr ^ mask)}
		mine := vr &^ (mask - 1)
		theirs := (vr ^ mask) &^ (mask - 1)
		for l := mine; l < mine+mask; l++ {
			g.queueSend(lo, hi, func(o, k int) spec {
				return spec{n: k, src: block(l) + o, srcBuf: bufOut, dst: -1, tx: c}
			})
		}
		for l := theirs; l < theirs+mask; l++ {
			g.queueRecv(lo, hi, func(o, k int) spec {
				return spec{n: k, rx: c, src: -1, dst: block(l) + o, dstBuf: bufOut}
			})
		}
		g.flush()
	}
}

// allToAll: block b of the input goes to rank b, and rank b's block for
// this rank lands in block b of the output; at step k a rank sends to the
// rank k after it and receives from the rank k before it (ranks, not ring
// positions: the pattern is all-to-all either way).
func (g *gen) allToAll(count, lo, hi int) {
	n := g.c.cfg.Size
	me := g.c.cfg.Rank
	g.pieces(lo, hi, func(o, k int) spec {
		return spec{n: k, src: me*count + o, srcBuf: bufIn, dst: me*count + o, dstBuf: bufOut}
	})
	for step := 1; step < n; step++ {
		to, from := (me+step)%n, (me-step+n)%n
		ct, cf := []*conn{g.conn(to)}, []*conn{g.conn(from)}
		g.queueSend(lo, hi, func(o, k int) spec {
			return spec{n: k, src: to*count + o, srcBuf: bufIn, dst: -1, tx: ct}
		})
		g.queueRecv(lo, hi, func(o, k int) spec {
			return spec{n: k, rx: cf, src: -1, dst: from*count + o, dstBuf: bufOut}
		})
	}
	g.flush()
}

// sendRecv is a point-to-point send, receive or both.
func (g *gen) sendRecv(r *Request, lo, hi int) {
	me := g.c.cfg.Rank
	if r.Kind == KindSend || r.Kind == KindSendRecv {
		if r.Peer == me {
			g.pieces(lo, hi, func(o, k int) spec { return spec{n: k, src: o, srcBuf: bufIn, dst: o, dstBuf: bufOut} })
		} else {
			ct := []*conn{g.conn(r.Peer)}
			g.queueSend(lo, hi, func(o, k int) spec { return spec{n: k, src: o, srcBuf: bufIn, dst: -1, tx: ct} })
		}
	}
	from := r.Peer
	if r.Kind == KindSendRecv {
		from = r.From
	}
	if (r.Kind == KindRecv || r.Kind == KindSendRecv) && from != me {
		cf := []*conn{g.conn(from)}
		g.queueRecv(lo, hi, func(o, k int) spec { return spec{n: k, rx: cf, src: -1, dst: o, dstBuf: bufOut} })
	}
	g.flush()
}
