package qp

import "github.com/goroce/goroce/aeth"

// End-to-end flow control (IBA 9.7.7.2), RC only.
//
// A responder reports in every ACK how many receive WQEs it has posted,
// as a logarithmic credit code in the AETH (aeth.CreditCode), beside its
// MSN: the number of messages it has completed. The requester numbers its
// messages (the SSN: the first is 1, the responder's MSN counts the same
// messages), and from an ACK knows that the messages up to MSN + credits
// — its limit sequence number, LSN — find a receive WQE. It starts a new
// message that needs one (SEND, RDMA WRITE with immediate) only up to one
// past the LSN: that one may find a WQE posted since, and its ACK brings
// the new count (rdmavt's rvt_rc_credit_avail and rvt_get_credit behave
// alike). A message that needs no WQE (RDMA WRITE, READ, atomics) is never
// held, and moves the LSN on by one: the responder counts it in its MSN
// without taking a WQE. So a SEND stream stops where the peer's receive
// queue ends, instead of running into RNR NAKs and retransmitting the
// window behind each (doc/limits.md §9).
//
// The credit code 0x1F (aeth.CreditInvalid) means the responder does not
// count: rxe sends it in every ACK, hardware from a QP with a shared
// receive queue. The requester then sends without limit for the rest of
// the connection. A responder is free to accept more than it reported,
// and goroce's does: a SEND beyond its credits still lands if a WQE has
// been posted meanwhile, and gets an RNR NAK if none has, as before.
//
// Until the first ACK that carries a count the requester has none and
// does not limit itself: a fresh connection starts as it did before and
// as it does against rxe (rdmavt instead starts at zero credits and sends
// one message to learn the count; rvt_reset_qp). And whenever none of its
// messages waits for a response, it may start the next whatever its LSN
// says: that message is what brings the next count, so a peer whose MSN
// falls behind the SSNs (a peer that counts messages otherwise) cannot
// stall the QP.

// msnMask is the width of MSNs, SSNs and LSNs: 24 bits.
const msnMask = 1<<24 - 1

// msnAfter reports whether sequence number a comes after b, modulo 2^24.
func msnAfter(a, b uint32) bool {
	d := (a - b) & msnMask
	return d != 0 && d < 1<<23
}

// flowMode is what the requester knows of its responder's credits.
type flowMode uint8

const (
	flowUnknown   flowMode = iota // no ACK with a count yet: no limit
	flowLimited                   // the LSN limits SENDs
	flowUnlimited                 // an ACK carried aeth.CreditInvalid
)

// flow is the requester's end-to-end flow control state; the zero value
// is a fresh connection's.
type flow struct {
	mode    flowMode
	ssn     uint32 // SSN of the last message started (the next takes ssn+1)
	lsn     uint32 // limit sequence number: MSN + credits of the best ACK, plus the messages since that need no WQE
	waiting bool   // a message waits for credits (CounterCreditWaits counts each wait once)
}

// needsRecvWQE reports whether a message of opcode o takes a receive WQE
// at the responder.
func (o WROpcode) needsRecvWQE() bool { return o.isSend() || o == WRRDMAWriteWithImm }

// flowHolds reports whether end-to-end flow control holds back w, the
// next WQE to start, and counts the start of a wait.
func (q *QP) flowHolds(w *sendWQE) bool {
	f := &q.req.flow
	if q.cfg.Type != TypeRC || f.mode != flowLimited || !w.wr.Opcode.needsRecvWQE() ||
		!msnAfter((f.ssn+1)&msnMask, (f.lsn+1)&msnMask) || q.sq.at(0) == w {
		f.waiting = false
		return false
	}
	if !f.waiting {
		f.waiting = true
		q.counters.Add(CounterCreditWaits, 1)
	}
	return true
}

// flowStart gives w, a message that is starting, its SSN.
func (q *QP) flowStart(w *sendWQE) {
	f := &q.req.flow
	f.ssn = (f.ssn + 1) & msnMask
	if f.mode == flowLimited && !w.wr.Opcode.needsRecvWQE() {
		f.lsn = (f.lsn + 1) & msnMask
	}
}

// flowCredit takes the credit count of an ACK, ATOMIC ACK or READ
// response whose AETH a carries an ACK syndrome: the LSN moves up to its
// MSN + credits (never back: an older ACK that arrives late says less),
// the first count sets it, and aeth.CreditInvalid ends the counting for
// the rest of the connection.
func (q *QP) flowCredit(a aeth.Header) {
	f := &q.req.flow
	if q.cfg.Type != TypeRC || f.mode == flowUnlimited {
		return
	}
	n, ok := aeth.Credits(a.Syndrome().Credit())
	if !ok {
		f.mode = flowUnlimited
		return
	}
	lsn := (a.MSN() + uint32(n)) & msnMask
	if f.mode == flowUnknown || msnAfter(lsn, f.lsn) {
		f.mode, f.lsn = flowLimited, lsn
	}
}

// ackSyndrome returns the syndrome of an ACK the responder builds now:
// ACK with the credit code of its receive queue (IBA 9.7.7.2). The
// receive WQEs serve the messages after the MSN the ACK carries, the one
// in progress (if any) included, so all of them count. A QP with an SRQ
// reports aeth.CreditInvalid, as hardware does (rdmavt rvt_compute_aeth:
// other QPs take WQEs from it too), and so does one that no longer takes
// requests (ERR).
func (q *QP) ackSyndrome() aeth.Syndrome {
	if q.cfg.SRQ != nil || !q.attr.State.receives() {
		return aeth.ACKUnlimited
	}
	return aeth.ACK(aeth.CreditCode(q.rq.len()))
}
