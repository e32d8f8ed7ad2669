package qp

import (
	"errors"
	"fmt"
	"sync"
)

//go:generate stringer -type=EventType -linecomment -output=eventtype_string.go

// ErrBusy is returned when an object is still in use: SRQ.Destroy while QPs
// are attached to the SRQ (ibv_destroy_srq's EBUSY).
var ErrBusy = errors.New("qp: resource busy")

// EventType is the type of an asynchronous event, numbered
// like ibv_event_type. Only the events goroce raises are defined.
type EventType uint8

// Asynchronous event types.
const (
	// EventSRQLimitReached is IBV_EVENT_SRQ_LIMIT_REACHED: the number of
	// WQEs of an SRQ fell below its armed limit (IBA 10.2.9, 11.2.3), an
	// affiliated asynchronous event of the SRQ.
	// The limit disarms as it fires; SRQ.Modify re-arms it.
	EventSRQLimitReached EventType = 15 // SRQ_LIMIT_REACHED
	// EventQPLastWQEReached is IBV_EVENT_QP_LAST_WQE_REACHED: a QP with an
	// SRQ entered ERR, so it takes no more WQEs from the SRQ and the one
	// it held, if any, is flushed (rxe raises it when it flushes such a
	// QP). It is an affiliated event of the QP, delivered through
	// Config.OnEvent; a consumer waits for it before destroying the QP.
	EventQPLastWQEReached EventType = 16 // QP_LAST_WQE_REACHED
)

// SRQConfig configures a shared receive queue (ibv_srq_init_attr).
type SRQConfig struct {
	// MaxWR bounds the receive WRs the SRQ holds (default DefaultMaxWR,
	// at most MaxWR).
	MaxWR int
	// MaxSGE bounds the SGL of one receive WR (default and maximum MaxSGE).
	MaxSGE int
	// Limit arms the SRQ limit at creation, as rxe takes srq_limit from
	// the init attributes (rxe_srq_from_init); 0 leaves it disarmed. It is
	// at most MaxWR. See SRQ.Modify.
	Limit int
	// OnLimit, if set, is called once each time the armed limit is
	// crossed (EventSRQLimitReached). It runs on the goroutine of the QP
	// whose responder took the WQE, from inside that QP's HandlePacket,
	// with no SRQ lock held: it may call the SRQ's methods but no method of
	// that QP, and it must not block (roce hands the event to a channel).
	OnLimit func()
}

// SRQAttr are the attributes of an SRQ (ibv_srq_attr).
type SRQAttr struct {
	MaxWR  int
	MaxSGE int
	// Limit is the armed limit; 0 means disarmed (also after it fired).
	Limit int
}

// SRQ is a shared receive queue (IBA 10.2.9): one FIFO of receive WQEs
// that any number of QPs take from, in posting order, instead of a
// receive queue of their own. A QP uses it when created with Config.SRQ;
// its responder then takes one WQE from the SRQ each time a message that
// consumes one (SEND, RDMA WRITE with immediate) starts, and completes it
// on the QP's receive CQ with the QP's number, as verbs does. An empty SRQ
// makes an RC responder answer RNR NAK, as an empty receive queue does.
//
// An SRQ has a lock of its own: every method may be called from any
// goroutine, concurrently with the QPs that take from it, whichever
// goroutines own those QPs.
type SRQ struct {
	mu        sync.Mutex
	rq        ring[recvWQE]
	maxSGE    int
	limit     int
	users     int
	destroyed bool
	onLimit   func()
}

// NewSRQ creates a shared receive queue (ibv_create_srq).
func NewSRQ(cfg SRQConfig) (*SRQ, error) {
	if cfg.MaxWR == 0 {
		cfg.MaxWR = DefaultMaxWR
	}
	if cfg.MaxSGE == 0 {
		cfg.MaxSGE = MaxSGE
	}
	if cfg.MaxWR < 0 || cfg.MaxWR > MaxWR {
		return nil, fmt.Errorf("%w: SRQ depth %d not in 1..%d", ErrInvalidConfig, cfg.MaxWR, MaxWR)
	}
	if cfg.MaxSGE < 0 || cfg.MaxSGE > MaxSGE {
		return nil, fmt.Errorf("%w: SRQ max SGE %d above %d", ErrInvalidConfig, cfg.MaxSGE, MaxSGE)
	}
	if cfg.Limit < 0 || cfg.Limit > cfg.MaxWR {
		return nil, fmt.Errorf("%w: SRQ limit %d not in 0..%d", ErrInvalidConfig, cfg.Limit, cfg.MaxWR)
	}
	s := &SRQ{maxSGE: cfg.MaxSGE, limit: cfg.Limit, onLimit: cfg.OnLimit}
	s.rq.max = cfg.MaxWR
	return s, nil
}

// PostRecv queues a receive work request on the SRQ (ibv_post_srq_recv).
// It copies wr and its SGL. It returns ErrQueueFull when MaxWR WRs are
// queued, ErrTooManySGE for an SGL longer than MaxSGE and ErrInvalidState
// after Destroy.
func (s *SRQ) PostRecv(wr *RecvWR) error {
	if len(wr.SGL) > s.maxSGE {
		return fmt.Errorf("%w: %d > %d", ErrTooManySGE, len(wr.SGL), s.maxSGE)
	}
	var total uint64
	for _, g := range wr.SGL {
		total += uint64(g.Length)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return fmt.Errorf("%w: SRQ destroyed", ErrInvalidState)
	}
	if s.rq.full() {
		return fmt.Errorf("%w: %d receive WRs in the SRQ", ErrQueueFull, s.rq.max)
	}
	r := s.rq.push()
	r.wrid = wr.WRID
	r.sgl = append(r.sgl[:0], wr.SGL...)
	r.length = total
	return nil
}

// Modify arms the SRQ limit (ibv_modify_srq with IBV_SRQ_LIMIT): once the
// number of WQEs in the SRQ drops below limit as a QP takes one,
// EventSRQLimitReached fires once (OnLimit) and the limit disarms until
// the next Modify (IBA 10.2.9, 11.2.3; rxe get_srq_wqe). Arming it when
// fewer than limit WQEs are queued fires at the next WQE taken, as rxe
// does. 0 disarms it. A limit above MaxWR is ErrInvalidArg, as in
// rxe_srq_chk_attr; resizing (IBV_SRQ_MAX_WR) is not supported.
func (s *SRQ) Modify(limit int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return fmt.Errorf("%w: SRQ destroyed", ErrInvalidState)
	}
	if limit < 0 || limit > s.rq.max {
		return fmt.Errorf("%w: SRQ limit %d not in 0..%d", ErrInvalidArg, limit, s.rq.max)
	}
	s.limit = limit
	return nil
}

// Query returns the SRQ's attributes (ibv_query_srq).
func (s *SRQ) Query() SRQAttr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SRQAttr{MaxWR: s.rq.max, MaxSGE: s.maxSGE, Limit: s.limit}
}

// Len returns the number of receive WQEs queued in the SRQ.
func (s *SRQ) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rq.len()
}

// Destroy destroys the SRQ (ibv_destroy_srq): the WQEs it holds are
// dropped without completions and later calls fail with ErrInvalidState.
// While QPs are attached (created with it and not yet destroyed) it
// returns ErrBusy and changes nothing, as ibv_destroy_srq fails with EBUSY.
func (s *SRQ) Destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return fmt.Errorf("%w: SRQ destroyed", ErrInvalidState)
	}
	if s.users > 0 {
		return fmt.Errorf("%w: %d QPs use the SRQ", ErrBusy, s.users)
	}
	s.destroyed = true
	s.rq.clear()
	s.rq.buf = nil
	return nil
}

// attach counts a QP that takes from the SRQ.
func (s *SRQ) attach() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return fmt.Errorf("%w: SRQ destroyed", ErrInvalidConfig)
	}
	s.users++
	return nil
}

// detach undoes attach.
func (s *SRQ) detach() {
	s.mu.Lock()
	s.users--
	s.mu.Unlock()
}

// take moves the oldest WQE of the SRQ into dst (a QP's one-slot receive
// queue) and reports whether there was one. This is rxe's get_srq_wqe: the
// WQE leaves the SRQ when the message that consumes it starts, so that
// WQEs are taken in posting order across every QP of the SRQ and a QP
// keeps its own for the rest of the message. If the count left is below
// the armed limit, the limit disarms and OnLimit runs after the lock is
// released. It does not allocate once dst's slot has grown to the SGL.
func (s *SRQ) take(dst *ring[recvWQE]) bool {
	s.mu.Lock()
	if s.rq.len() == 0 {
		s.mu.Unlock()
		return false
	}
	src := s.rq.at(0)
	w := dst.push()
	w.wrid, w.length = src.wrid, src.length
	w.sgl = append(w.sgl[:0], src.sgl...)
	s.rq.pop()
	fire := s.limit > 0 && s.rq.len() < s.limit
	if fire {
		s.limit = 0
	}
	s.mu.Unlock()
	if fire && s.onLimit != nil {
		s.onLimit()
	}
	return true
}
