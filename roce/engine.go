package roce

import (
	"net/netip"
	"runtime"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
)

// engineLoop runs one shard's QP timers: one timer for the shard, armed
// at its earliest QP deadline (as quic-go does). Packets are processed by
// the receive goroutine and work requests by their callers, all under the
// shard's engine lock, which is what makes the QPs' state single-owner.
//
// Pacer deadlines: the timer (a timerfd on Linux, doc/dcqcn.md §7.4) wakes
// the engine within timerLatency; a pacer plans its wake-ups so that the
// bucket absorbs that, and where it cannot (high rates, small buckets) asks
// for a lead: the timer is armed that much early and the engine watches
// the clock for the rest, without the lock.
func (s *shard) engineLoop() {
	d := s.d
	defer d.wg.Done()
	for s.timer.wait() {
		s.lock()
		for {
			if d.closed.Load() {
				s.unlock()
				return
			}
			now := time.Now()
			s.runTimers(now)
			s.transmit(now)
			s.armed = time.Time{}
			e, ok := s.timers.earliestEntry()
			if !ok || !e.pacing() || e.at.Sub(now) > e.q.paceLead {
				s.rearm(now)
				break
			}
			s.armed = e.at
			s.unlock()
			if !d.spinUntil(e.at) {
				return
			}
			s.lock()
		}
		s.unlock()
	}
}

// rearm arms the shard's timer for the earliest deadline if it is earlier
// than the one armed (a pacer's, its lead early); the caller holds the
// engine lock.
func (s *shard) rearm(now time.Time) {
	e, ok := s.timers.earliestEntry()
	if s.d.closed.Load() || !ok || (!s.armed.IsZero() && !e.at.Before(s.armed)) {
		return
	}
	s.armed = e.at
	wait := e.at.Sub(now)
	if e.pacing() {
		wait -= e.q.paceLead
	}
	s.timer.arm(wait)
}

// spinYield is how often a spinning engine yields its processor.
const spinYield = 20 * time.Microsecond

// spinUntil watches the clock until t, a pacer's lead away at most. It
// returns false when the device closes.
//
// It yields (runtime.Gosched) only every spinYield, not on every look: a
// goroutine that yields in a tight loop is always in the global run queue,
// which the scheduler serves before it polls the network, so the process's
// sockets would be read only by sysmon's 10 ms poll (measured here:
// receive gaps of 3–40 ms next to a sender paced at 100 Mb/s).
func (d *Device) spinUntil(t time.Time) bool {
	yield := time.Now().Add(spinYield)
	for {
		now := time.Now()
		if !now.Before(t) {
			return true
		}
		select {
		case <-d.done:
			return false
		default:
		}
		if now.After(yield) {
			runtime.Gosched()
			yield = now.Add(spinYield)
		}
	}
}

// receive runs the device's intake for one datagram (rxe_rcv): the QP
// exists, the source is the QP's peer (check_addr), the ICRC verifies; then
// the QP's own checks. Every drop is counted. The caller holds the engine
// lock of the shard of the packet's DestQP.
//
// A CNP (doc/dcqcn.md §7.2) goes to the QP's reaction point after the same
// checks; a CE-marked request or data packet first runs the QP's
// notification point, which may queue a CNP to the peer (§7.3).
func (s *shard) receive(b *rxBuf, now time.Time) {
	d := s.d
	data := b.buf[:b.n]
	h, err := bth.Parse(data) // recvLoop passed only datagrams of BTH+ICRC length
	if err != nil {
		d.stats.BadHdr.Add(1)
		return
	}
	q := s.lastRx // a stream's packets go to one QP: no map lookup for them
	if q == nil || q.q.QPN() != h.DestQP() {
		if q = s.qps[h.DestQP()]; q != nil {
			s.lastRx = q
		}
	}
	if q == nil {
		d.stats.DroppedNoQP.Add(1)
		if h.Opcode() == bth.CNP {
			d.stats.CNPsNoQP.Add(1)
		}
		return
	}
	if !q.acceptsFrom(b.src) {
		d.stats.BadAddr.Add(1)
		return
	}
	if !d.verifyICRC(b, data, now) {
		d.stats.BadICRC.Add(1)
		q.q.Counters().Add(qp.CounterBadICRC, 1)
		return
	}
	p := &s.pkt
	if err := p.ParseTransport(data); err != nil {
		d.stats.BadHdr.Add(1)
		q.q.Counters().Add(qp.CounterBadHdr, 1)
		return
	}
	op := p.Opcode()
	if op == bth.CNP {
		d.onCNP(q, now)
		return
	}
	if b.ecn == link.CE {
		s.notify(q, now, b.ecn, op)
	}
	if q.ud {
		s.handleUD(q, b, now)
	} else {
		q.q.HandlePacket(now, &p.Packet)
	}
	s.activate(q)
}

// handleUD hands a UD QP its packet with the IP header it came in, for the
// GRH area of the receive buffer (qp.IPInfo). What a UDP socket does not
// report is synthesized as the sender most likely set it: the TOS is the
// DSCP and ECN fields the link reports (link/udp: IP_RECVTOS), the TTL the
// one it reports (IP_RECVTTL), else 64 (Linux's and rdma_cm's default hop
// limit); the IPv4 ID is the one the ICRC verified (known, guessed or
// recovered, see verifyICRC). With link/udp the GRH area then equals the
// header rxe would copy (rxe_resp.c), as the pyverbs-ud grh interop cell
// checks against a capture.
//
// Datagrams to QP1 (GSI) come here too once Listen or Dial made it: QP1 is
// a UD QP like the others, whose completions the CM goroutine reads
// (cm.go).
func (s *shard) handleUD(q *QP, b *rxBuf, now time.Time) {
	dst := b.dst
	if !dst.IsValid() {
		dst = s.d.local
	}
	ttl := b.ttl
	if ttl == 0 {
		ttl = 64
	}
	s.rxIP = qp.IPInfo{Src: b.src.Addr(), Dst: dst.Addr(), TOS: b.dscp<<2 | b.ecn, TTL: ttl, ID: b.ipid}
	q.q.HandlePacketIP(now, &s.pkt.Packet, &s.rxIP)
}

// verifyICRC checks the ICRC over the headers the datagram arrived with. A
// UDP socket does not report the IPv4 ID: the ID the link guessed (0 for a
// datagram that came alone, as Linux peers send it; k for segment k of a
// GRO buffer, as a GSO super-packet's segments carry) is checked first;
// for other IDs (rxe's come from a per-destination counter) the ID is
// recovered from the CRC itself (rocev2.RecoverIPv4ID, which by linearity
// works from any guess) and, under ICRCIDWindow, accepted only inside the
// window of the peer's counter (idTracker). Where the link sees the ID
// (b.known: the raw bindings, link/mem) it is checked exactly, never
// recovered.
func (d *Device) verifyICRC(b *rxBuf, data []byte, now time.Time) bool {
	var ph [rocev2.PseudoHeaderLen]byte
	dst := b.dst
	if !dst.IsValid() {
		dst = d.local
	}
	ip, udp := rocev2.PseudoHeaders(&ph, b.src, dst, b.ipid, len(data))
	body := data[:len(data)-bth.ICRCSize]
	want := rocev2.ReadICRC(data[len(data)-bth.ICRCSize:])
	got := rocev2.ComputeICRC(ip, udp, body)
	if got == want {
		return true
	}
	mode := d.cfg.ICRCIDRecovery
	if b.known || len(ip) != rocev2.IPv4HeaderLen || mode == ICRCIDOff {
		return false
	}
	x, ok := rocev2.RecoverIPv4ID(got, want, len(data))
	if !ok {
		return false
	}
	if mode == ICRCIDWindow {
		// got was computed with the guess, so x is the guess XOR the ID.
		d.idsMu.Lock()
		ok, reseed := d.ids.accept(b.src.Addr(), b.ipid^x, now)
		d.idsMu.Unlock()
		if reseed {
			d.stats.ICRCIDReseeds.Add(1)
		}
		if !ok {
			d.stats.ICRCIDOutOfWindow.Add(1)
			return false
		}
	}
	b.ipid ^= x // the ID the ICRC covers: the self-capture writes it
	d.stats.ICRCIDFixups.Add(1)
	return true
}

// runTimers runs every QP timer of the shard that is due.
func (s *shard) runTimers(now time.Time) {
	for {
		e, ok := s.timers.peek()
		if !ok || e.at.After(now) {
			return
		}
		s.timers.pop()
		q := e.q
		if q.timerAt != e.at || q.destroyed {
			continue // stale entry
		}
		q.timerAt = time.Time{}
		endPaceWait(q)
		q.q.OnTimeout(now)
		s.activate(q)
	}
}

// activate marks q as possibly having packets to send.
func (s *shard) activate(q *QP) {
	if !q.active {
		q.active = true
		s.active = append(s.active, q)
	}
}

// transmit pulls packets from the active QPs into batches for the link and
// re-arms each QP's timer entry; the caller holds the engine lock. Full
// batches are queued for the sender (flushTx), the last one too. When
// the link is slower than the QPs and every batch is queued, the pass
// stops (stall) and the engine lock's holder resumes it after sending.
func (s *shard) transmit(now time.Time) {
	d := s.d
	for len(s.active) > 0 {
		// Swap the active list with a spare so QPs activated while this
		// round runs go to the next round, without allocating.
		act := s.active
		s.active, s.spare = s.spare[:0], act
		for k, q := range act {
			q.active = false
			if q.destroyed {
				continue
			}
			endPaceWait(q)
			for {
				if !q.cc.ready(now) {
					// Held by the pacer: the engine resumes the QP at
					// the pacer's time (armTimer, spinning if near).
					q.paceAt, q.paceLead = q.cc.pace.wake(timerLatency)
					q.cc.paceWaits++
					break
				}
				tx := s.batch()
				if tx == nil {
					// Every batch is queued and this goroutine sends
					// them: it does so once it releases the lock, and
					// then goes on with q and the rest (unlock).
					s.stall(act[k:])
					return
				}
				i := len(tx.dgs)
				buf := tx.bufs[i]
				n, ok := d.nextPacket(q, now, buf, &tx.pay[i])
				if !ok {
					break
				}
				dg := q.datagram(buf[:n])
				dg.Payload, dg.PayloadAt = tx.pay[i].Data, tx.pay[i].At
				if av, ok := q.q.PacketAH(); ok { // a UD datagram goes to its WR's AH
					dg.Dst = netip.AddrPortFrom(av.Remote, d.cfg.DestPort)
				}
				tx.dgs = append(tx.dgs, dg)
				tx.weigh(q, &tx.dgs[len(tx.dgs)-1])
				d.stats.TxPackets.Add(1)
				q.cc.sent(now, dg.Len()+q.outer)
				if len(tx.dgs) == cap(tx.dgs) {
					s.flushTx()
				}
			}
			s.armTimer(q)
		}
	}
	s.flushTx()
}

// nextPacket pulls q's next packet into buf. Over a link that gathers
// (link.Gatherer) the payload of a WRITE or SEND request or of a READ
// response stays in its memory region, pinned,
// and *pay describes it (qp.TxPayload); flushTx releases the pin once the
// link has sent the packet, so DeregisterMR waits for that and the memory
// is never read once it returns. A region invalidated (LOCAL_INV, SEND
// with invalidate) is not pinned again, so later packets and
// retransmissions fail as with a copy; a packet built before the
// invalidation in the same batch still goes out, as rxe sends the skb it
// built before rxe_invalidate_mr ran. Otherwise the packet is whole in buf
// and *pay stays zero.
//
// The pins travel with the batch (txBatch.pay) to its sender, which
// releases them after the link's Send returned (sendBatch): the send runs
// outside the shard's lock, and the region stays pinned until then.
func (d *Device) nextPacket(q *QP, now time.Time, buf []byte, pay *qp.TxPayload) (int, bool) {
	if d.gather {
		n, ok := q.q.NextPacketGather(now, buf, pay)
		if pay.Region != nil {
			d.stats.TxGathered.Add(1)
		}
		return n, ok
	}
	return q.q.NextPacket(now, buf)
}

// seal computes the ICRC of a transport packet over the IP/UDP headers the
// link will put around it; a two-part datagram's (link.Datagram) runs on
// from the headers through the payload in its region to the pad, without
// joining them.
func seal(dg *link.Datagram) {
	pkt := dg.Buf
	var ph [rocev2.PseudoHeaderLen]byte
	ip, udp := rocev2.PseudoHeaders(&ph, dg.Src, dg.Dst, dg.IPID, dg.Len())
	end := len(pkt) - bth.ICRCSize
	var crc uint32
	if len(dg.Payload) == 0 {
		crc = rocev2.ComputeICRC(ip, udp, pkt[:end])
	} else {
		crc = rocev2.ComputeICRCGather(ip, udp, pkt[:dg.PayloadAt], dg.Payload, pkt[dg.PayloadAt:end])
	}
	rocev2.PutICRC(pkt[end:], crc)
}

// releasePayloads drops the pins of the batch's payloads (nextPacket) once
// the link is done with them, sent or not.
func (b *txBatch) releasePayloads() {
	for i := range b.dgs {
		if p := &b.pay[i]; p.Region != nil {
			p.Region.Release()
			*p = qp.TxPayload{}
			b.dgs[i].Payload = nil
		}
	}
}

// endPaceWait ends q's wait for its pacer; transmit starts another if the
// pacer still holds it.
func endPaceWait(q *QP) {
	q.paceAt, q.paceLead = time.Time{}, 0
}

// armTimer makes sure the timer heap holds q's earliest deadline: its
// transport timers or its pacer's release.
func (s *shard) armTimer(q *QP) {
	at, ok := q.q.Deadline()
	if !q.paceAt.IsZero() && (!ok || q.paceAt.Before(at)) {
		at, ok = q.paceAt, true
	}
	if !ok {
		q.timerAt = time.Time{}
		return
	}
	if at.Equal(q.timerAt) {
		return
	}
	q.timerAt = at
	s.timers.push(timerEntry{at: at, q: q})
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

// earliestEntry returns the earliest live entry, dropping stale ones.
func (h *timerHeap) earliestEntry() (timerEntry, bool) {
	for {
		e, ok := h.peek()
		if !ok {
			return timerEntry{}, false
		}
		if e.q.timerAt.Equal(e.at) && !e.q.destroyed {
			return e, true
		}
		h.pop()
	}
}

// pacing reports whether e is its QP's pacer deadline.
func (e timerEntry) pacing() bool { return e.q.paceAt.Equal(e.at) }
