package roce

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
)

// The transmit path (rxe_req.c's and rxe_net.c's sending side): a
// transmit pass pulls packets from a shard's active QPs into batches
// under the engine lock (transmit), the holder of the shard's sender role
// seals them (ICRC) and hands them to the link outside every engine lock
// (txQueue, sendBatch); the receive goroutine hands bulk request data to
// the shard's sender goroutine (handOffMin).

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
				if !q.cc.ready(now) && q.q.State() != qp.StateErr {
					// Held by the pacer: the engine resumes the QP at
					// the pacer's time (armTimer, spinning if near). A
					// QP in ERR is not held: it sends only the replies
					// it owes (qp's nextReply), and Close's and
					// Destroy's last pass must not leave them behind.
					q.paceAt, q.paceLead = q.cc.pace.Wake(timerLatency)
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
// response stays in its memory region, pinned, and *pay describes it
// (qp.TxPayload); otherwise the packet is whole in buf and *pay stays
// zero. The pin travels with the batch (txBatch.pay) to its sender, which
// releases it once the link's Send returned (sendBatch), outside the
// shard's lock: DeregisterMR waits for it, so the memory is never read
// after it returns. An invalidated region (LOCAL_INV, SEND with
// invalidate) is not pinned again, so later packets fail as with a copy;
// a packet built before the invalidation still goes out, as rxe sends the
// skb it built before rxe_invalidate_mr ran.
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

// txBatches is the number of transmit batches a shard cycles through: one
// being filled under the engine lock while the others wait for or are in
// the link's Send. When all are queued, a goroutine that needs one waits
// for the sender to return one (back-pressure from the socket); if it
// holds the sender role itself, its transmit pass stops there and resumes
// once it has sent them, after releasing the lock (shard.unlock).
const txBatches = 3

// handOffMin is the send work of queued request data (WRITE and SEND
// packets, weighed by txBatch.weigh: each large packet, or each run of
// one QP's small ones, counts one) from which the receive goroutine hands
// its sender role to the shard's sender goroutine. A WRITE stream's ACK opens the window
// for about 31 packets of 4 KiB, whose sealing and sendmmsg would take
// most of the receive goroutine's core; handed off, they run beside it,
// and it goes back to receiving. Responses, and anything else (an ACK),
// are sent where they were made: the responder's receive goroutine would
// hand over after every batch of READ requests, a wake-up each. Figures
// for both: doc/limits.md §8.
const handOffMin = 8

// txBatch is one batch of datagrams for the link's Send and the packet
// buffers they point into. Its owner is whoever holds it: the shard's lock
// while it is filled, the sender role while it is queued and sent.
type txBatch struct {
	bufs [][]byte
	dgs  []link.Datagram
	reqs int            // the send work of the request data among dgs, in handOffMin's units (weigh)
	last *QP            // the QP of the last request with payload weighed
	pay  []qp.TxPayload // dgs[i]'s payload left in its region, pinned until sendBatch has sent it
	// locked: the regions whose ReadLock sendBatch holds (readLock).
	locked []*mr.Region
}

func newTxBatch(n int) *txBatch {
	b := &txBatch{bufs: make([][]byte, n), dgs: make([]link.Datagram, 0, n), pay: make([]qp.TxPayload, n),
		locked: make([]*mr.Region, 0, n)}
	for i := range b.bufs {
		b.bufs[i] = make([]byte, maxFrame)
	}
	return b
}

// txQueue hands a shard's filled batches to the goroutine that sends
// them. At most one goroutine holds the sender role (sending) at a time
// and sends the queued batches in the order they were filled, so a QP's
// packets leave in the order its engine built them (PSN order, a
// retransmission after what it follows) with no lock held but this
// queue's, and only between sends.
//
// The role goes to the goroutine that queues a batch when no one holds it
// (the verb's caller, the receive goroutine or the timer goroutine), which
// sends once it has released the engine lock (shard.unlock). Others queue
// and leave: a PostSend never waits for another QP's sendmmsg.
type txQueue struct {
	mu      sync.Mutex
	cond    sync.Cond  // on mu: a batch was freed or the role released
	queue   []*txBatch // filled, in fill order
	free    []*txBatch
	sending bool // the sender role is held
}

// batch returns the batch to fill, taking a free one if the last was
// queued; the caller holds the engine lock. When none is free it waits for
// the goroutine holding the sender role to free one, unless that is the
// caller: then it returns nil, and the caller must release the lock (and
// so send) before it can build more. Every batch that is not free is
// queued or being sent by the role's holder, so the wait ends.
func (s *shard) batch() *txBatch {
	if s.tx != nil {
		return s.tx
	}
	t := &s.txq
	t.mu.Lock()
	for len(t.free) == 0 {
		if s.drain {
			t.mu.Unlock()
			return nil
		}
		t.cond.Wait()
	}
	s.tx = t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	t.mu.Unlock()
	return s.tx
}

// flushTx queues the batch being filled for the link; the caller holds
// the engine lock. If no one holds the sender role, the caller takes it
// and sends on unlock.
func (s *shard) flushTx() {
	b := s.tx
	if b == nil || len(b.dgs) == 0 {
		return
	}
	t := &s.txq
	t.mu.Lock()
	t.queue = append(t.queue, b)
	if !t.sending {
		t.sending, s.drain = true, true
	}
	t.mu.Unlock()
	s.tx = nil
}

// stall ends a transmit pass that found no free batch (batch returned
// nil): qs, the QPs it had not finished, stay active, and unlock resumes
// the pass once it has sent the queued batches.
func (s *shard) stall(qs []*QP) {
	for _, q := range qs {
		q.active = false // those after the first were not reached yet
		s.activate(q)
	}
	s.stalled = true
}

// sendQueued sends the queued batches in order and frees them; the caller
// holds the sender role, and gives it up at the end with release.
func (s *shard) sendQueued(release bool) {
	t := &s.txq
	t.mu.Lock()
	for len(t.queue) > 0 {
		b := t.queue[0]
		n := copy(t.queue, t.queue[1:])
		t.queue[n] = nil
		t.queue = t.queue[:n]
		t.mu.Unlock()
		s.d.sendBatch(b)
		t.mu.Lock()
		t.free = append(t.free, b)
		t.cond.Broadcast()
	}
	if release {
		t.sending = false
		t.cond.Broadcast()
	}
	t.mu.Unlock()
}

// senderLoop is the shard's sender goroutine: it sends the queues the
// receive goroutine hands it with the sender role (unlock) and gives the
// role up when the queue is empty. It ends with the device: Close waits
// for the role to be given up (waitSent) before it ends the device.
func (s *shard) senderLoop() {
	defer s.d.wg.Done()
	for {
		select {
		case <-s.kick:
			s.sendQueued(true)
		case <-s.d.done:
			return
		}
	}
}

// queuedReqs returns the send work of the request data in the queued
// batches (txBatch.weigh).
func (t *txQueue) queuedReqs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, b := range t.queue {
		n += b.reqs
	}
	return n
}

// waitSent returns once no goroutine holds the sender role: every batch
// queued so far is sent. Close calls it after the last engine pass.
func (s *shard) waitSent() {
	t := &s.txq
	t.mu.Lock()
	for t.sending {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

// sendBatch plans, seals and sends a batch, then empties it. A link whose
// kernel picks the IPv4 ID (link/udp: segment k of a GSO super-packet
// carries ID k) plans the IDs first, since the ICRC covers them; the
// others send ID 0. It runs in the goroutine holding the shard's sender
// role, with no engine lock held (but for a CNP under back-pressure,
// notify).
func (d *Device) sendBatch(b *txBatch) {
	// link.Link allows one sending goroutine: the shards' senders take
	// turns. A two-part datagram's payload is read twice, by seal and by
	// the link's Send: its region's ReadLock spans both, so a WRITE landing
	// in the region meanwhile (the receive goroutine) cannot make the bytes
	// sent differ from those the ICRC covers. Only the holder of sendMu
	// takes several regions' locks, so they cannot deadlock.
	d.sendMu.Lock()
	if d.planner != nil {
		// Under sendMu: the plan follows the link's GSO state, which
		// another shard's Send may change (link/udp turns GSO off when
		// the kernel refuses it).
		d.planner.PlanIPID(b.dgs)
	}
	b.readLock()
	for i := range b.dgs {
		seal(&b.dgs[i])
	}
	ts := d.cap.beginSend()
	dgs := b.dgs
	for len(dgs) > 0 {
		n, err := d.link.Send(dgs)
		d.cap.sent(dgs[:n], ts)
		if err != nil {
			d.stats.SendErrors.Add(uint64(len(dgs) - n))
			break
		}
		dgs = dgs[n:]
	}
	d.cap.endSend()
	b.readUnlock()
	d.sendMu.Unlock()
	b.releasePayloads()
	b.dgs, b.reqs, b.last = b.dgs[:0], 0, nil
}

// readLock takes the ReadLock of each region the batch's payloads lie in,
// once per region; readUnlock releases them.
func (b *txBatch) readLock() {
	b.locked = b.locked[:0]
	for i := range b.dgs {
		r := b.pay[i].Region
		if r == nil || slices.Contains(b.locked, r) {
			continue
		}
		r.ReadLock()
		b.locked = append(b.locked, r)
	}
}

func (b *txBatch) readUnlock() {
	for i, r := range b.locked {
		r.ReadUnlock()
		b.locked[i] = nil
	}
	b.locked = b.locked[:0]
}

// datagram returns the link datagram of one of q's packets (data, ACK or
// READ response): from the QP's source port, with its DSCP, ECN, PCP and
// flow label. It does not allocate.
func (q *QP) datagram(b []byte) link.Datagram {
	return link.Datagram{Buf: b, Src: q.src, Dst: q.dst, ECN: q.ecn, DSCP: q.dscp, Priority: q.prio, FlowLabel: q.flow}
}
