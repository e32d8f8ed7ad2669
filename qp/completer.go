package qp

import (
	"time"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/wire"
)

// completer is the requester's receive side (rxe_comp.c): it matches ACKs,
// NAKs, READ responses and ATOMIC ACKs against outstanding WQEs.
type completer struct {
	psn        bth.PSN // oldest unacknowledged PSN (comp.psn)
	retryLeft  uint8   // transport retries left (reset on progress)
	rnrLeft    uint8   // RNR retries left (reset on progress)
	retrying   bool    // a Go-Back-N for the current loss is under way (started_retry)
	nakPSN     bth.PSN // PSN of the last NAK PSN sequence error a Go-Back-N answered
	nakSet     bool    // nakPSN is valid: not yet acknowledged
	readGap    int     // READ responses seen beyond comp.psn since the last progress
	timerArmed bool
	timerAt    time.Time
}

// handleResponse processes a response packet (rxe_completer). It never
// fails: a packet that matches nothing is dropped and counted.
func (q *QP) handleResponse(now time.Time, p *wire.Packet) {
	if !q.attr.State.sends() {
		q.counters.Add(CounterDroppedResponses, 1)
		return
	}
	c := &q.comp
	psn := p.BTH.PSN()
	op := p.Opcode()
	progress := false
	// check_psn: responses older than comp.psn are duplicates; a response
	// beyond the oldest WQE completes SEND/WRITE WQEs implicitly (a
	// cumulative ACK, IBA 9.7.5.1.1) and means a lost response for a
	// READ/ATOMIC.
	if psn.Before(c.psn) {
		q.counters.Add(CounterDroppedResponses, 1)
		return
	}
	if p.AETH != nil && p.AETH.Syndrome().IsACK() {
		q.flowCredit(p.AETH) // IBA 9.7.7.2: the responder's receive WQEs
	}
	var w *sendWQE
	for {
		if q.sq.len() == 0 || q.sq.at(0).state == wqePosted {
			q.counters.Add(CounterDroppedResponses, 1) // ghost ACK: nothing outstanding
			q.finishResponse(now, progress)
			return
		}
		w = q.sq.at(0)
		if !psn.After(w.lastPSN) {
			break
		}
		if w.wr.Opcode.isReadOrAtomic() || !q.allSent(w) {
			// The READ/ATOMIC response (or the rest of a WQE) was lost:
			// resend from comp.psn once for this loss. A NAK here is
			// answered by that Go-Back-N too, which resends its PSN.
			if !c.retrying && !q.repeatedNAK(p, psn) {
				q.startRetry()
				q.answeredNAK(p, psn)
			}
			q.finishResponse(now, progress)
			return
		}
		// rxe check_psn: reset_retry_counters for each WQE completed so,
		// before a lost READ response below may start a retry.
		c.psn = w.lastPSN.Next()
		q.completeSend(w, cq.StatusSuccess)
		q.progressed()
		progress = true
	}

	switch {
	case op.Mask()&bth.MaskRead != 0: // READ RESPONSE FIRST/MIDDLE/LAST/ONLY
		progress = q.readResponse(p, w, psn) || progress
	case op == bth.RCAtomicAcknowledge:
		if !w.wr.Opcode.isAtomic() || psn != w.firstPSN || !p.AETH.Syndrome().IsACK() {
			q.counters.Add(CounterDroppedResponses, 1)
			break
		}
		if err := q.atomicResult(w, p.AtomicAckETH.OrigRemData()); err != nil {
			q.completeSend(w, cq.StatusLocProtErr)
			q.enterError()
			return
		}
		c.psn = psn.Next()
		q.completeSend(w, cq.StatusSuccess)
		q.progressed()
		progress = true
	case op == bth.RCAcknowledge:
		if q.ack(now, p, w, psn) {
			progress = true
		}
		if q.attr.State == StateErr {
			return
		}
	default:
		q.counters.Add(CounterDroppedResponses, 1)
	}
	q.finishResponse(now, progress)
}

// ack handles an ACKNOWLEDGE by syndrome (rxe check_ack, IBA 9.7.5.1.3).
func (q *QP) ack(now time.Time, p *wire.Packet, w *sendWQE, psn bth.PSN) bool {
	c := &q.comp
	syn := p.AETH.Syndrome()
	switch {
	case syn.IsACK():
		if w.wr.Opcode.isReadOrAtomic() {
			// An ACK at or past a READ/ATOMIC's first PSN: its response was
			// lost (the responder answers READs with data, not ACKs).
			if !psn.Before(w.firstPSN) {
				if !c.retrying {
					q.startRetry()
				}
				return false
			}
			c.psn = psn.Next()
			q.progressed()
			return true
		}
		advanced := psn.Next() != c.psn
		c.psn = psn.Next()
		if psn == w.lastPSN && q.allSent(w) {
			q.completeSend(w, cq.StatusSuccess)
			advanced = true
		}
		if advanced {
			q.progressed()
		}
		return advanced
	case syn.IsRNR():
		// RNR NAK: the request at psn found no receive WQE; everything before
		// it is acknowledged. Retry after the timer, without spending
		// retry_cnt (IBA 9.7.5.2.8).
		q.counters.Add(CounterRcvdRNRErr, 1)
		advanced := psn != c.psn
		c.psn = psn
		if advanced {
			q.progressed()
		}
		if c.rnrLeft == 0 {
			q.counters.Add(CounterRetryRNRExceededErr, 1)
			q.completeSend(w, cq.StatusRNRRetryExcErr)
			q.enterError()
			return advanced
		}
		if q.attr.RNRRetry != 7 { // 7 = infinite (IBA 9.7.5.2.8)
			c.rnrLeft--
		}
		q.req.rnrWait = true
		q.req.rnrAt = now.Add(aeth.RNRDelay(syn.Timer()))
		q.req.needRetry = true
		c.timerArmed = false
		return advanced
	case syn == aeth.NAKPSNSequenceError:
		// PSN sequence error: everything before psn arrived (implicit ACK,
		// IBA 9.7.5.1.3); Go-Back-N from psn, once per gap (rxe spends
		// retry_cnt on it). The responder NAKs a gap once (rxe check_psn,
		// sent_psn_nak), so a NAK for a later PSN is a new gap and ends the
		// episode. A NAK repeated for a PSN a Go-Back-N already answered —
		// a duplicate, or one that arrives after progress elsewhere — asks
		// for nothing new and starts no other (rxe: started_retry keeps a
		// NAK from starting a second retry sequence; only the timer does,
		// comp.timeout_retry).
		q.counters.Add(CounterRcvdSeqErr, 1)
		advanced := psn != c.psn
		c.psn = psn
		if advanced {
			q.progressed()
		}
		if !c.retrying && !q.repeatedNAK(p, psn) {
			q.startRetry()
			q.answeredNAK(p, psn)
		}
		return advanced
	default:
		// Error NAKs complete the WQE with the mapped status and move the QP
		// to ERR (IBA 9.7.5.2.4, rxe class C on the requester).
		q.completeSend(w, nakStatus(syn))
		q.enterError()
		return false
	}
}

// allSent reports whether every packet of w has been sent at least once,
// so that a response for a PSN past its last acknowledges all of it. A
// SEND/WRITE the requester is sending again after a rewind is complete on
// such a response like one it has finished (rxe completes it only once its
// last packet is sent again, wqe_state_pending, and drops the response
// before: then comp.psn stays short of the NAKed PSN and a later Go-Back-N
// resends packets the responder acknowledged).
func (q *QP) allSent(w *sendWQE) bool {
	return w.state == wqeSent || w.lastPSN.Before(q.req.highPSN)
}

// nakStatus maps a NAK syndrome to the requester's completion status
// (rxe_comp.c; doc/rxe.md §5).
func nakStatus(s aeth.Syndrome) cq.Status {
	switch s {
	case aeth.NAKInvalidRequest:
		return cq.StatusRemInvReqErr
	case aeth.NAKRemoteAccessError:
		return cq.StatusRemAccessErr
	default:
		return cq.StatusRemOpErr
	}
}

// readResponse places one READ response packet (rxe read_reply on the
// requester side). Only the packet at comp.psn is accepted: a gap means a
// lost response, so the READ is reissued from comp.psn at once (as hardware
// requesters do; rxe waits for the retransmit timer) — once per loss.
func (q *QP) readResponse(p *wire.Packet, w *sendWQE, psn bth.PSN) bool {
	c := &q.comp
	if w.wr.Opcode != WRRDMARead || psn.Before(w.firstPSN) {
		q.counters.Add(CounterDroppedResponses, 1)
		return false
	}
	if psn != c.psn {
		// A response beyond comp.psn means one was lost — or only
		// reordered. Like TCP's duplicate-ACK threshold, wait for
		// readGapThreshold of them before Go-Back-N, so a reordered packet
		// does not restart a whole READ (each restart queues another copy of
		// the rest behind the stale one on real links).
		c.readGap++
		if c.readGap >= readGapThreshold && !c.retrying {
			q.startRetry()
		}
		return false
	}
	k := psn.Sub(w.firstPSN)
	mtu := uint32(q.mtu)
	off := k * mtu
	want := min(mtu, w.length-off)
	op := p.Opcode()
	last := k == w.npkts-1
	if op != readResponseOpcode(bth.PositionOf(k == 0, last)) || uint32(len(p.Payload)) != want || (p.AETH != nil && !p.AETH.Syndrome().IsACK()) {
		q.counters.Add(CounterDroppedResponses, 1)
		return false
	}
	if err := q.scatter(p.Payload, w.wr.SGL, uint64(off)); err != nil {
		q.completeSend(w, cq.StatusLocProtErr)
		q.enterError()
		return false
	}
	c.psn = psn.Next()
	if last {
		q.completeSend(w, cq.StatusSuccess)
	}
	q.progressed()
	return true
}

// progressed records forward progress: the retry counters count
// consecutive retries without progress, so they start over (rxe
// reset_retry_counters), and the current loss episode is over.
func (q *QP) progressed() {
	c := &q.comp
	c.retryLeft = q.attr.RetryCnt
	c.rnrLeft = q.attr.RNRRetry
	c.retrying = false
	c.readGap = 0
	if c.nakSet && c.psn.After(c.nakPSN) {
		c.nakSet = false // acknowledged: a NAK for it is stale now
	}
}

// repeatedNAK reports whether p is a NAK PSN sequence error for psn whose
// Go-Back-N has already been started and psn is still unacknowledged.
func (q *QP) repeatedNAK(p *wire.Packet, psn bth.PSN) bool {
	c := &q.comp
	return isSeqNAK(p) && c.nakSet && psn == c.nakPSN
}

// answeredNAK records that a Go-Back-N now under way answers p, if p is a
// NAK PSN sequence error.
func (q *QP) answeredNAK(p *wire.Packet, psn bth.PSN) {
	if isSeqNAK(p) && q.comp.retrying {
		q.comp.nakPSN, q.comp.nakSet = psn, true
	}
}

// isSeqNAK reports whether p is a NAK PSN sequence error.
func isSeqNAK(p *wire.Packet) bool {
	return p.Opcode() == bth.RCAcknowledge && p.AETH != nil && p.AETH.Syndrome() == aeth.NAKPSNSequenceError
}

// readGapThreshold is how many out-of-order READ responses make the
// requester resend a READ before its timer fires (TCP's dupthresh, RFC 5681
// §3.2). rxe waits for the timer alone; this is faster on loss and as calm
// on reordering of up to three packets.
const readGapThreshold = 3

// finishResponse moves the retransmit timer after progress: pushed back
// while work is outstanding, stopped when none is (rxe COMPST_EXIT).
func (q *QP) finishResponse(now time.Time, progress bool) {
	c := &q.comp
	if !progress {
		return
	}
	outstanding := q.sq.len() > 0 && q.sq.at(0).state != wqePosted
	if d, ok := AckTimeout(q.attr.Timeout); ok && outstanding && !q.req.rnrWait {
		c.timerArmed = true
		c.timerAt = now.Add(d)
	} else {
		c.timerArmed = false
	}
}
