package roce

import (
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
)

// engineLoop runs the QPs' timers: one Go timer for the whole device,
// armed at the earliest QP deadline (as quic-go does). Packets are processed
// by the receive goroutine and work requests by their callers, all under the
// engine lock, which is what makes the QPs' state single-owner.
func (d *Device) engineLoop() {
	defer d.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-d.done:
			return
		case <-d.wake:
		case <-timer.C:
		}
		d.mu.Lock()
		now := time.Now()
		d.runTimers(now)
		d.transmit(now)
		next, ok := d.timers.earliest()
		if ok {
			d.armed = next
		} else {
			d.armed = time.Time{}
		}
		d.mu.Unlock()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if ok {
			timer.Reset(max(0, time.Until(next)))
		}
	}
}

// receive runs the device's intake for one datagram (rxe_rcv): the QP
// exists, the source is the QP's peer (check_addr), the ICRC verifies; then
// the QP's own checks. Every drop is counted.
func (d *Device) receive(b *rxBuf) {
	data := b.buf[:b.n]
	qpn := bth.QPN(uint32(data[5])<<16 | uint32(data[6])<<8 | uint32(data[7]))
	q := d.qps[qpn]
	if q == nil {
		d.stats.DroppedNoQP.Add(1)
		return
	}
	if !q.acceptsFrom(b.src) {
		d.stats.BadAddr.Add(1)
		return
	}
	if !d.verifyICRC(b, data) {
		d.stats.BadICRC.Add(1)
		q.q.Counters().BadICRC.Add(1)
		return
	}
	p := &d.pkt
	if err := p.ParseTransport(data); err != nil {
		d.stats.BadHdr.Add(1)
		q.q.Counters().BadHdr.Add(1)
		return
	}
	q.q.HandlePacket(time.Now(), &p.Packet)
	d.activate(q)
}

// verifyICRC checks the ICRC over the headers the datagram arrived with. A
// UDP socket does not report the IPv4 ID: Linux peers send ID 0 (checked
// first); for others (rxe picks an ID per packet) the ID is recovered from
// the CRC itself (RecoverIPv4ID), which leaves 16 of the 32 check bits.
func (d *Device) verifyICRC(b *rxBuf, data []byte) bool {
	var ph [ipv6HdrLen + udpHdrLen]byte
	dst := b.dst
	if !dst.IsValid() {
		dst = d.local
	}
	ip, udp := PseudoHeaders(&ph, b.src, dst, b.ipid, len(data))
	body := data[:len(data)-bth.ICRCSize]
	want := ReadICRC(data[len(data)-bth.ICRCSize:])
	got := ComputeICRC(ip, udp, body)
	if got == want {
		return true
	}
	if b.known || len(ip) != ipv4HdrMin {
		return false
	}
	if _, ok := RecoverIPv4ID(got, want, len(data)); ok {
		d.stats.ICRCIDFixups.Add(1)
		return true
	}
	return false
}

// runTimers runs every QP timer that is due.
func (d *Device) runTimers(now time.Time) {
	for {
		e, ok := d.timers.peek()
		if !ok || e.at.After(now) {
			return
		}
		d.timers.pop()
		q := e.q
		if q.timerAt != e.at || q.destroyed {
			continue // stale entry
		}
		q.timerAt = time.Time{}
		q.q.OnTimeout(now)
		d.activate(q)
	}
}

// activate marks q as possibly having packets to send.
func (d *Device) activate(q *QP) {
	if !q.active {
		q.active = true
		d.active = append(d.active, q)
	}
}

// transmit pulls packets from the active QPs into batches for the link and
// re-arms each QP's timer entry.
func (d *Device) transmit(now time.Time) {
	for len(d.active) > 0 {
		// Swap the active list with a spare so QPs activated while this
		// round runs go to the next round, without allocating.
		act := d.active
		d.active, d.spare = d.spare[:0], act
		for _, q := range act {
			q.active = false
			if q.destroyed {
				continue
			}
			for {
				i := len(d.txDgs)
				buf := d.txBufs[i]
				hl := 0
				n, ok := q.q.NextPacket(now, buf[hl:])
				if !ok {
					break
				}
				d.txDgs = append(d.txDgs, link.Datagram{Buf: buf[:n], Src: q.src, Dst: q.dst, ECN: q.ecn})
				d.stats.TxPackets.Add(1)
				if len(d.txDgs) == cap(d.txDgs) {
					d.flushTx()
				}
			}
			d.armTimer(q)
		}
	}
	d.flushTx()
}

// seal computes the ICRC of a transport packet over the IP/UDP headers the
// link will put around it.
func seal(dg *link.Datagram) {
	pkt := dg.Buf
	var ph [ipv6HdrLen + udpHdrLen]byte
	ip, udp := PseudoHeaders(&ph, dg.Src, dg.Dst, dg.IPID, len(pkt))
	PutICRC(pkt[len(pkt)-bth.ICRCSize:], ComputeICRC(ip, udp, pkt[:len(pkt)-bth.ICRCSize]))
}

// flushTx seals and sends the batch. A link whose kernel picks the IPv4 ID
// (link/udp: segment k of a GSO super-packet carries ID k) plans the IDs
// first, since the ICRC covers them; the others send ID 0.
func (d *Device) flushTx() {
	if d.planner != nil {
		d.planner.PlanIPID(d.txDgs)
	}
	for i := range d.txDgs {
		seal(&d.txDgs[i])
	}
	dgs := d.txDgs
	for len(dgs) > 0 {
		n, err := d.link.Send(dgs)
		if err != nil {
			d.stats.SendErrors.Add(uint64(len(dgs) - n))
			break
		}
		dgs = dgs[n:]
	}
	d.txDgs = d.txDgs[:0]
}

func (d *Device) armTimer(q *QP) {
	at, ok := q.q.Deadline()
	if !ok {
		q.timerAt = time.Time{}
		return
	}
	if at.Equal(q.timerAt) {
		return
	}
	q.timerAt = at
	d.timers.push(timerEntry{at: at, q: q})
}

// timerHeap orders QP deadlines; entries whose QP has moved its deadline
// are stale and skipped when popped.
type timerEntry struct {
	at time.Time
	q  *QP
}

type timerHeap []timerEntry

// push and pop keep the min-heap without container/heap, whose interface
// boxing would allocate per timer update.
func (h *timerHeap) push(e timerEntry) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a[i].at.Before(a[p].at) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *timerHeap) pop() timerEntry {
	a := *h
	e := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a[n] = timerEntry{}
	a = a[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && a[l].at.Before(a[m].at) {
			m = l
		}
		if r < n && a[r].at.Before(a[m].at) {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return e
}

func (h timerHeap) peek() (timerEntry, bool) {
	if len(h) == 0 {
		return timerEntry{}, false
	}
	return h[0], true
}

func (h *timerHeap) earliest() (time.Time, bool) {
	for {
		e, ok := h.peek()
		if !ok {
			return time.Time{}, false
		}
		if e.q.timerAt.Equal(e.at) && !e.q.destroyed {
			return e.at, true
		}
		h.pop()
	}
}
