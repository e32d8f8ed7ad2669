package coll

import "fmt"

// Request is one collective for Comm.Run, the untyped form of the typed
// functions (AllReduce, …): buffers as bytes with their element type.
// Buffer sizes, by kind (count = the element count the typed function
// takes):
//
//   - AllReduce: Send and Recv count elements each;
//   - ReduceScatter: Send Size × count, Recv count (this rank's block);
//   - AllGather: Send count, Recv Size × count (rank b's block at b);
//   - Broadcast: Send count at Root (ignored elsewhere), Recv count;
//   - Reduce: Send count, Recv count at Root (ignored elsewhere);
//   - AllToAll: Send and Recv Size × count, block b to and from rank b;
//   - Send: Send to Peer; Recv: Recv from Peer; SendRecv: Send to Peer
//     and Recv from From, the same count.
//
// Send and Recv may be the same memory (in place); for ReduceScatter and
// AllGather they must then overlap as NCCL's in-place buffers do (the
// smaller one is this rank's block of the larger). AllToAll and SendRecv
// in place send from a copy.
type Request struct {
	Kind       Kind
	Send, Recv []byte
	Type       DataType
	Op         Op
	Root       int
	Peer, From int
	// Algorithm, if not AlgoAuto, forces an algorithm for this call
	// (where it applies; Comm.Choose).
	Algorithm Algorithm
}

// progKey identifies a call's programs: a call with the same key reuses
// the last call's (nccl-tests' loops repeat one call), so that the steady
// state allocates nothing.
type progKey struct {
	kind              Kind
	dt                DataType
	avg               bool
	count, root, peer int
	from              int
	algo              Algorithm
	inPlace           bool
	sendNil, recvNil  bool
}

// Run runs one collective. Every rank of the job must call it with the
// same Kind, Type, Op, Root and count (and matching peers); it returns when
// this rank's part is done: its Recv holds the result and its Send may be
// reused. An error is fatal to the communicator: every later call returns
// it, and every other rank's call fails too (it names the rank at fault).
func (c *Comm) Run(r *Request) error {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	if err := c.failed(); err != nil {
		return err
	}
	count, err := c.check(r)
	if err != nil {
		return err
	}
	e := &c.eng
	algo := c.Choose(r.Kind, max(len(r.Send), len(r.Recv)), r.Algorithm)
	e.in, e.out, e.dt, e.op = r.Send, r.Recv, r.Type, r.Op
	if (r.Kind == KindAllToAll || r.Kind == KindSendRecv) && overlaps(r.Send, r.Recv) {
		// In place: received blocks would overwrite blocks not yet sent,
		// so the sends read a copy.
		if len(e.tmp) < len(r.Send) {
			e.tmp = make([]byte, len(r.Send))
		}
		e.in = e.tmp[:len(r.Send)]
		copy(e.in, r.Send)
	}
	key := progKey{kind: r.Kind, dt: r.Type, avg: r.Op == Avg, count: count, root: r.Root, peer: r.Peer, from: r.From,
		algo: algo, inPlace: sameMem(e.in, r.Recv), sendNil: len(r.Send) == 0, recvNil: len(r.Recv) == 0}
	if r.Kind == KindReduceScatter && algo == AlgoHD && len(e.tmp) < len(r.Send) {
		e.tmp = make([]byte, len(r.Send))
	}
	if key != e.key || !e.keyOK {
		e.keyOK = false
		e.gen.build(r, algo, count)
		e.key, e.keyOK = key, true
	}
	return c.run()
}

// check validates r and returns its per-rank element count.
func (c *Comm) check(r *Request) (int, error) {
	n := c.cfg.Size
	if !r.Type.Valid() {
		return 0, fmt.Errorf("%w: data type %d", ErrInvalidArg, r.Type)
	}
	if !r.Op.Valid() {
		return 0, fmt.Errorf("%w: reduction %d", ErrInvalidArg, r.Op)
	}
	if !r.Algorithm.valid() {
		return 0, fmt.Errorf("%w: algorithm %d", ErrInvalidArg, r.Algorithm)
	}
	esz := r.Type.Size()
	ls, lr := len(r.Send), len(r.Recv)
	if ls%esz != 0 || lr%esz != 0 {
		return 0, fmt.Errorf("%w: buffers of %d and %d bytes are not whole %v elements", ErrInvalidArg, ls, lr, r.Type)
	}
	bad := func(format string, a ...any) (int, error) {
		return 0, fmt.Errorf("%w: %v: "+format, append([]any{ErrInvalidArg, r.Kind}, a...)...)
	}
	root := func() error {
		if r.Root < 0 || r.Root >= n {
			return fmt.Errorf("%w: %v: root %d of %d ranks", ErrInvalidArg, r.Kind, r.Root, n)
		}
		return nil
	}
	peer := func(p int) error {
		if p < 0 || p >= n {
			return fmt.Errorf("%w: %v: peer %d of %d ranks", ErrInvalidArg, r.Kind, p, n)
		}
		return nil
	}
	me := c.cfg.Rank
	switch r.Kind {
	case KindAllReduce:
		if ls != lr {
			return bad("send %d bytes, receive %d", ls, lr)
		}
		return lr / esz, nil
	case KindReduceScatter:
		if ls != lr*n {
			return bad("send %d bytes for a receive of %d on %d ranks", ls, lr, n)
		}
		if overlaps(r.Send, r.Recv) && !sameMem(r.Send[me*lr:], r.Recv) {
			return bad("in place, the receive buffer must be this rank's block of the send buffer")
		}
		return lr / esz, nil
	case KindAllGather:
		if lr != ls*n {
			return bad("receive %d bytes for a send of %d on %d ranks", lr, ls, n)
		}
		if overlaps(r.Send, r.Recv) && !sameMem(r.Recv[me*ls:], r.Send) {
			return bad("in place, the send buffer must be this rank's block of the receive buffer")
		}
		return ls / esz, nil
	case KindBroadcast:
		if err := root(); err != nil {
			return 0, err
		}
		if me == r.Root && ls != lr {
			return bad("send %d bytes, receive %d", ls, lr)
		}
		return lr / esz, nil
	case KindReduce:
		if err := root(); err != nil {
			return 0, err
		}
		if me == r.Root && ls != lr {
			return bad("send %d bytes, receive %d", ls, lr)
		}
		return ls / esz, nil
	case KindAllToAll:
		if ls != lr || ls%(n*esz) != 0 {
			return bad("send %d bytes, receive %d: both Size × count elements", ls, lr)
		}
		if overlaps(r.Send, r.Recv) && !sameMem(r.Send, r.Recv) {
			return bad("send and receive buffers overlap without being the same")
		}
		return ls / esz / n, nil
	case KindSend:
		return ls / esz, peer(r.Peer)
	case KindRecv:
		return lr / esz, peer(r.Peer)
	case KindSendRecv:
		if err := peer(r.Peer); err != nil {
			return 0, err
		}
		if err := peer(r.From); err != nil {
			return 0, err
		}
		if ls != lr {
			return bad("send %d bytes, receive %d", ls, lr)
		}
		if overlaps(r.Send, r.Recv) && !sameMem(r.Send, r.Recv) {
			return bad("send and receive buffers overlap without being the same")
		}
		return ls / esz, nil
	}
	return 0, fmt.Errorf("%w: collective %d", ErrInvalidArg, r.Kind)
}

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := addr(a), addr(b)
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

// AllReduce reduces send over every rank with op into recv on every rank
// (ncclAllReduce). send and recv may be the same slice.
func AllReduce[T Elem](c *Comm, send, recv []T, op Op) error {
	r := Request{Kind: KindAllReduce, Send: Bytes(send), Recv: Bytes(recv), Type: TypeOf[T](), Op: op}
	return c.Run(&r)
}

// ReduceScatter reduces send (Size blocks of len(recv)) over every rank
// and leaves block Rank of the result in recv (ncclReduceScatter).
func ReduceScatter[T Elem](c *Comm, send, recv []T, op Op) error {
	r := Request{Kind: KindReduceScatter, Send: Bytes(send), Recv: Bytes(recv), Type: TypeOf[T](), Op: op}
	return c.Run(&r)
}

// AllGather gathers every rank's send into recv, rank b's at block b
// (ncclAllGather).
func AllGather[T Elem](c *Comm, send, recv []T) error {
	r := Request{Kind: KindAllGather, Send: Bytes(send), Recv: Bytes(recv), Type: TypeOf[T]()}
	return c.Run(&r)
}

// Broadcast copies root's send into every rank's recv (ncclBroadcast);
// send is read at the root only.
func Broadcast[T Elem](c *Comm, send, recv []T, root int) error {
	r := Request{Kind: KindBroadcast, Send: Bytes(send), Recv: Bytes(recv), Type: TypeOf[T](), Root: root}
	return c.Run(&r)
}

// Reduce reduces send over every rank with op into root's recv
// (ncclReduce); recv is written at the root only.
func Reduce[T Elem](c *Comm, send, recv []T, op Op, root int) error {
	r := Request{Kind: KindReduce, Send: Bytes(send), Recv: Bytes(recv), Type: TypeOf[T](), Op: op, Root: root}
	return c.Run(&r)
}

// AllToAll sends block b of send (len(send)/Size elements) to rank b and
// receives rank b's block for this rank into block b of recv.
func AllToAll[T Elem](c *Comm, send, recv []T) error {
	r := Request{Kind: KindAllToAll, Send: Bytes(send), Recv: Bytes(recv), Type: TypeOf[T]()}
	return c.Run(&r)
}

// Send sends buf to rank peer, which must call Recv (ncclSend): it
// returns once buf is staged and its messages are on their way.
func Send[T Elem](c *Comm, buf []T, peer int) error {
	r := Request{Kind: KindSend, Send: Bytes(buf), Type: TypeOf[T](), Peer: peer}
	return c.Run(&r)
}

// Recv receives len(buf) elements from rank peer's Send (ncclRecv).
func Recv[T Elem](c *Comm, buf []T, peer int) error {
	r := Request{Kind: KindRecv, Recv: Bytes(buf), Type: TypeOf[T](), Peer: peer}
	return c.Run(&r)
}

// SendRecv sends send to rank to and receives recv from rank from at the
// same time (ncclSend and ncclRecv in one group): a ring shift needs it,
// since every rank sends before it receives.
func SendRecv[T Elem](c *Comm, send []T, to int, recv []T, from int) error {
	r := Request{Kind: KindSendRecv, Send: Bytes(send), Recv: Bytes(recv), Type: TypeOf[T](), Peer: to, From: from}
	return c.Run(&r)
}

// Barrier returns once every rank has called it (an all-reduce of one
// byte).
func (c *Comm) Barrier() error {
	r := Request{Kind: KindAllReduce, Send: c.eng.barrier[:1], Recv: c.eng.barrier[1:2], Type: Uint8, Op: Max}
	return c.Run(&r)
}
