package qp

import (
	"errors"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
)

var errSGLShort = errors.New("qp: message longer than its SGL")

// ring is a FIFO of T with a fixed maximum length. Its storage grows by
// doubling on demand, so an idle QP costs a few words, and slots are reused
// in place (their slices keep their capacity).
type ring[T any] struct {
	buf  []T
	head int
	n    int
	max  int
}

func (r *ring[T]) len() int   { return r.n }
func (r *ring[T]) full() bool { return r.n >= r.max }

// at returns the i-th element from the head (0 = oldest).
func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)%len(r.buf)] }

// push appends a slot and returns it; the caller must check full first.
func (r *ring[T]) push() *T {
	if r.n == len(r.buf) {
		size := max(4, 2*len(r.buf))
		if size > r.max {
			size = r.max
		}
		nb := make([]T, size)
		for i := 0; i < r.n; i++ {
			nb[i] = *r.at(i)
		}
		r.buf, r.head = nb, 0
	}
	r.n++
	return r.at(r.n - 1)
}

// pop removes the head.
func (r *ring[T]) pop() {
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

func (r *ring[T]) clear() { r.head, r.n = 0, 0 }

// wqeState tracks a send WQE (rxe's wqe_state_*).
type wqeState uint8

const (
	wqePosted  wqeState = iota // not started
	wqeStarted                 // some packets sent
	wqeSent                    // every packet sent; waiting for the ACK or response
)

// sendWQE is the engine's copy of a send WR and its progress.
type sendWQE struct {
	wr       SendWR
	sgl      []SGE // storage for wr.SGL
	inline   []byte
	isInline bool
	localErr bool // inline data could not be read at post time

	length   uint32
	state    wqeState
	firstPSN bth.PSN
	lastPSN  bth.PSN
	npkts    uint32
	next     uint32    // index of the next packet to send
	credit   bool      // holds a READ/ATOMIC credit
	status   cq.Status // a local operation's outcome, once it ran (state wqeSent)
}

func (w *sendWQE) reset(wr *SendWR) {
	sgl := append(w.sgl[:0], wr.SGL...)
	inl := w.inline[:0]
	*w = sendWQE{wr: *wr, sgl: sgl, inline: inl}
	w.wr.SGL = sgl
}

func (w *sendWQE) signaled(all bool) bool { return all || w.wr.Flags&SendSignaled != 0 }

func (w *sendWQE) cqOpcode() cq.Opcode {
	switch w.wr.Opcode {
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return cq.OpRDMAWrite
	case WRRDMARead:
		return cq.OpRDMARead
	case WRAtomicCmpAndSwp:
		return cq.OpCompSwap
	case WRAtomicFetchAdd:
		return cq.OpFetchAdd
	case WRLocalInv:
		return cq.OpLocalInv
	case WRBindMW:
		return cq.OpBindMW
	}
	return cq.OpSend
}

// recvWQE is the engine's copy of a receive WR.
type recvWQE struct {
	wrid   uint64
	sgl    []SGE
	length uint64
}
