package roce

import (
	"fmt"

	"github.com/goroce/goroce/qp"
)

// EventQueueLen is the capacity of the channel Device.Events returns.
const EventQueueLen = 64

// Event is an asynchronous event of a device (ibv_async_event): its type
// and the object it concerns.
type Event struct {
	Type EventType
	// SRQ is the shared receive queue of EventSRQLimitReached, and the QP's
	// of EventQPLastWQEReached.
	SRQ *SRQ
	// QP is the queue pair of EventQPLastWQEReached.
	QP *QP
}

// SRQConfig configures a shared receive queue created by
// Device.CreateSRQ (ibv_srq_init_attr); zero fields pick the defaults.
type SRQConfig struct {
	// MaxWR bounds the receive WRs the SRQ holds (default 1024, at most 16384).
	MaxWR int
	// MaxSGE bounds the SGL of one receive WR (default and at most 32).
	MaxSGE int
	// Limit arms the SRQ limit at creation (0: disarmed); see SRQ.Modify.
	Limit int
}

// SRQ is a shared receive queue of a Device (IBA 10.2.9): the QPs created
// with it in QPConfig.SRQ take their receive WQEs from it, in posting
// order, and complete them on their own receive CQs with their own QPNs.
// Its methods may be called from any goroutine: the SRQ has a lock of its
// own (qp.SRQ), so PostRecv does not take the engine lock.
type SRQ struct {
	dev *Device
	s   *qp.SRQ
}

// CreateSRQ creates a shared receive queue (ibv_create_srq). Its limit
// event (EventSRQLimitReached) is delivered on Device.Events. It returns
// ErrClosed after Close and an error matching ErrInvalidArg for a bad
// configuration.
func (d *Device) CreateSRQ(cfg SRQConfig) (*SRQ, error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	h := &SRQ{dev: d}
	s, err := qp.NewSRQ(qp.SRQConfig{MaxWR: cfg.MaxWR, MaxSGE: cfg.MaxSGE, Limit: cfg.Limit,
		OnLimit: func() { d.raise(Event{Type: EventSRQLimitReached, SRQ: h}) }})
	if err != nil {
		return nil, err
	}
	h.s = s
	return h, nil
}

// Events returns the channel the device's asynchronous events arrive on
// (ibv_get_async_event). The engine never waits for a reader: when
// EventQueueLen events are unread, later ones are dropped and counted in
// Stats.EventsDropped. Close closes the channel.
func (d *Device) Events() <-chan Event { return d.events }

// raise queues ev on Events. It runs under an engine lock (from the
// qp.SRQ OnLimit callback, which a QP calls in HandlePacket, and from a
// QP's qp.Config.OnEvent, called in whichever verb or packet moved it to
// ERR), so it never blocks, and sends nothing once Close closed the
// channel. Engines of several shards may raise at once: evMu orders them
// with Close.
func (d *Device) raise(ev Event) {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	if d.evClosed {
		return
	}
	select {
	case d.events <- ev:
	default:
		d.stats.EventsDropped.Add(1)
	}
}

// PostRecv posts a receive work request to the SRQ (ibv_post_srq_recv). It
// copies wr and its SGL. It returns ErrQueueFull when the SRQ holds MaxWR
// WRs, ErrTooManySGE, ErrInvalidState after Destroy and ErrClosed after
// the device's Close.
func (h *SRQ) PostRecv(wr *RecvWR) error {
	if h.dev.isClosed() {
		return ErrClosed
	}
	return h.s.PostRecv(wr)
}

// Modify arms the SRQ limit (ibv_modify_srq with IBV_SRQ_LIMIT): when a QP
// takes a WQE and fewer than limit are left, one EventSRQLimitReached
// arrives on Device.Events and the limit disarms until the next Modify
// (IBA 11.2.3; rxe get_srq_wqe). 0 disarms it; above MaxWR is
// ErrInvalidArg.
func (h *SRQ) Modify(limit int) error {
	if h.dev.isClosed() {
		return ErrClosed
	}
	return h.s.Modify(limit)
}

// Query returns the SRQ's attributes (ibv_query_srq); Limit is 0 when
// disarmed.
func (h *SRQ) Query() SRQAttr { return h.s.Query() }

// Len returns the number of receive WQEs waiting in the SRQ.
func (h *SRQ) Len() int { return h.s.Len() }

// Destroy destroys the SRQ (ibv_destroy_srq). It fails with ErrBusy while
// a QP created with it is not destroyed, and returns ErrClosed after the
// device's Close (which ends the SRQ with the device).
func (h *SRQ) Destroy() error {
	if h.dev.isClosed() {
		return ErrClosed
	}
	return h.s.Destroy()
}

// check returns the qp.SRQ of h for a QP of device d.
func (h *SRQ) check(d *Device) (*qp.SRQ, error) {
	if h == nil {
		return nil, nil
	}
	if h.dev != d {
		return nil, fmt.Errorf("%w: SRQ", ErrNotAttached)
	}
	return h.s, nil
}
