package impair

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/link"
)

// bthSize is the length of the base transport header at the start of every
// RoCEv2 datagram (IBA 9.2); corruption keeps off its destination QPN.
const bthSize = 12

// Counters counts what one direction did.
type Counters struct {
	Packets    uint64 `json:"packets"`    // packets that entered the direction
	Dropped    uint64 `json:"dropped"`    // by Loss, GilbertElliott or Burst
	Duplicated uint64 `json:"duplicated"` // extra copies delivered
	Reordered  uint64 `json:"reordered"`  // packets held back
	Corrupted  uint64 `json:"corrupted"`  // copies delivered with a flipped bit
	// Oversize counts received datagrams larger than Config.MaxDatagram or
	// than the caller's buffer, dropped.
	Oversize uint64 `json:"oversize,omitempty"`
}

// counters are a direction's Counters, updated by its owner and read by
// Stats from any goroutine.
type counters struct {
	packets, dropped, duplicated, reordered, corrupted, oversize atomic.Uint64
}

func (c *counters) load() Counters {
	return Counters{Packets: c.packets.Load(), Dropped: c.dropped.Load(), Duplicated: c.duplicated.Load(),
		Reordered: c.reordered.Load(), Corrupted: c.corrupted.Load(), Oversize: c.oversize.Load()}
}

// holdState is a hold slot's state.
type holdState uint8

const (
	slotFree    holdState = iota
	slotHeld              // holding a packet
	slotPending           // released into the output, buffer still in use
)

// hold is a packet held back for reordering, in its own buffer.
type hold struct {
	buf   []byte
	dg    link.Datagram
	left  int // later packets still to pass it
	until time.Time
	state holdState
}

// dir is the impairment of one direction: its decisions, its held packets
// and its scratch buffers. One goroutine at a time uses it (the caller
// holds the direction's lock).
type dir struct {
	cfg     Direction
	holdMax time.Duration
	rng     *rand.PCG
	geBad   bool
	burst   int // drops left in the current burst
	holds   []hold
	nheld   int
	c       counters
	// scratch holds corrupted copies until the output is consumed; it grows
	// to the largest batch seen and is reused after that.
	scratch  [][]byte
	nscratch int
	maxBuf   int
}

func newDir(cfg Direction, seed, stream uint64, holdMax time.Duration, slots, maxBuf int) *dir {
	d := &dir{cfg: cfg, holdMax: holdMax, rng: rand.NewPCG(seed, stream), maxBuf: maxBuf}
	if cfg.Reorder > 0 {
		d.holds = make([]hold, slots)
	}
	return d
}

// chance returns true with probability p.
func (d *dir) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	return float64(d.rng.Uint64()>>11)/(1<<53) < p
}

// drop decides whether the next packet is lost. Every enabled knob is
// consulted, so each keeps its own pattern.
func (d *dir) drop() bool {
	lost := d.chance(d.cfg.Loss)
	if ge := &d.cfg.GilbertElliott; ge.PGB > 0 {
		if d.geBad && d.chance(ge.LossBad) {
			lost = true
		}
		if d.geBad {
			d.geBad = !d.chance(ge.PBG)
		} else {
			d.geBad = d.chance(ge.PGB)
		}
	}
	if b := &d.cfg.Burst; b.Start > 0 {
		if d.burst > 0 {
			d.burst--
			lost = true
		} else if d.chance(b.Start) {
			d.burst = b.Len - 1
			lost = true
		}
	}
	return lost
}

// process runs one packet through the direction and appends what is
// delivered now to out. dg.Buf must stay valid until out is consumed;
// corrupted and held packets are copied into the direction's buffers,
// which stay valid until done is called.
func (d *dir) process(out []link.Datagram, dg link.Datagram, now time.Time) []link.Datagram {
	d.c.packets.Add(1)
	if d.drop() {
		d.c.dropped.Add(1)
		return out
	}
	corrupted := d.chance(d.cfg.Corrupt) && len(dg.Buf) >= bthSize
	if corrupted {
		dg.Buf = d.corrupt(dg.Buf)
		d.c.corrupted.Add(1)
	}
	dup := d.chance(d.cfg.Dup)
	if dup && corrupted {
		d.c.corrupted.Add(1) // the copy is corrupted too
	}
	if d.chance(d.cfg.Reorder) && d.nheld < len(d.holds) && len(dg.Buf) <= d.maxBuf {
		d.hold(dg, now)
	} else {
		out = d.deliver(out, dg)
	}
	if dup {
		d.c.duplicated.Add(1)
		out = d.deliver(out, dg)
	}
	return out
}

// corrupt copies b into a scratch buffer and flips one bit of the copy: in
// the payload after the BTH, or in the BTH's PSN (bytes 9–11) when there is
// none, so the packet still reaches its QP (IBA 9.2: the destination QPN is
// bytes 5–7) and fails the ICRC there.
func (d *dir) corrupt(b []byte) []byte {
	if d.nscratch == len(d.scratch) {
		d.scratch = append(d.scratch, make([]byte, 0, len(b)))
	}
	c := append(d.scratch[d.nscratch][:0], b...)
	d.scratch[d.nscratch] = c
	d.nscratch++
	lo, hi := bthSize, len(c)-4 // the ICRC is the last 4 bytes
	if hi <= lo {
		lo, hi = 9, bthSize
	}
	r := d.rng.Uint64()
	i := lo + int(r%uint64(hi-lo))
	c[i] ^= 1 << ((r >> 32) % 8)
	return c
}

// hold copies dg into a free slot.
func (d *dir) hold(dg link.Datagram, now time.Time) {
	for i := range d.holds {
		h := &d.holds[i]
		if h.state != slotFree {
			continue
		}
		if h.buf == nil {
			h.buf = make([]byte, 0, d.maxBuf)
		}
		h.buf = append(h.buf[:0], dg.Buf...)
		h.dg = dg
		h.dg.Buf = h.buf
		h.left = max(d.cfg.ReorderDepth, 1)
		h.until = now.Add(d.holdMax)
		h.state = slotHeld
		d.nheld++
		d.c.reordered.Add(1)
		return
	}
}

// deliver appends dg to out and lets each held packet that dg was the last
// to pass follow it.
func (d *dir) deliver(out []link.Datagram, dg link.Datagram) []link.Datagram {
	out = append(out, dg)
	if d.nheld == 0 {
		return out
	}
	for i := range d.holds {
		h := &d.holds[i]
		if h.state == slotHeld {
			if h.left--; h.left <= 0 {
				out = d.release(out, h)
			}
		}
	}
	return out
}

// release appends h's packet to out; its slot is busy until done.
func (d *dir) release(out []link.Datagram, h *hold) []link.Datagram {
	h.state = slotPending
	d.nheld--
	return append(out, h.dg)
}

// expire releases the held packets whose time is up (all of them if all)
// and returns the earliest time left, if any packet is still held.
func (d *dir) expire(out []link.Datagram, now time.Time, all bool) ([]link.Datagram, time.Time, bool) {
	var next time.Time
	for i := range d.holds {
		h := &d.holds[i]
		if h.state != slotHeld {
			continue
		}
		if all || !h.until.After(now) {
			out = d.release(out, h)
			continue
		}
		if next.IsZero() || h.until.Before(next) {
			next = h.until
		}
	}
	return out, next, !next.IsZero()
}

// done frees the buffers of released packets and corrupted copies: the
// output they were in has been consumed.
func (d *dir) done() {
	for i := range d.holds {
		if d.holds[i].state == slotPending {
			d.holds[i].state = slotFree
		}
	}
	d.nscratch = 0
}
