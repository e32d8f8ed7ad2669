package qp

import (
	"encoding/binary"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/wire"
)

// requester is the send side (rxe_req.c): it turns send WQEs into request
// packets, one PSN per packet (a READ reserves one PSN per response packet).
type requester struct {
	psn       bth.PSN // next PSN to send (req.psn)
	highPSN   bth.PSN // one past the highest PSN ever sent, to count retransmissions
	off       int     // index in the send queue, from its head, of the WQE to send next
	noack     int     // packets since the last AckReq
	rdAtomic  int     // READ/ATOMIC requests outstanding
	needRetry bool    // Go-Back-N from comp.psn before sending anything else
	rnrWait   bool    // waiting out an RNR NAK timer
	rnrAt     time.Time
	flow      flow        // end-to-end flow control (flow.go)
	fields    wire.Fields // scratch, to build without allocating
	// ah is the address handle of the last UD packet built (PacketAH).
	ah    AddressVector
	ahSet bool
}

// MinGatherLen is the shortest payload NextPacketGather leaves in its
// memory region; a shorter one is copied into the packet buffer, as
// NextPacket does. A payload left in its region costs a second lookup of
// the region, a pin and its release (atomics on the region, touched by
// the goroutine that builds the packet and by the one that sends it), the
// region's read lock in the sender and two more I/O vectors for the
// kernel; below about a kilobyte the copy costs less (doc/limits.md §9).
const MinGatherLen = 1024

// TxPayload describes the payload of a packet that NextPacketGather left
// in its memory region instead of copying it into the packet buffer, for a
// link that sends from several buffers (link.Datagram's two-part form).
// Data belongs in the packet at offset At of the buffer, after the headers
// and before the pad and ICRC that follow there. Region is pinned
// (mr.Region.Pin): Data stays registered memory until the caller, having
// sent the packet, calls Region.Release — which it must, exactly once.
// The zero value means the packet is whole in its buffer.
type TxPayload struct {
	Data   []byte
	At     int
	Region *mr.Region
}

// MaxPacketLen returns the largest transport packet this QP can produce for
// a path MTU: the longest header (RC WRITE ONLY with immediate: 32 bytes, or
// an atomic request: 40), the MTU payload and the ICRC.
func MaxPacketLen(mtu MTU) int { return 48 + mtu.Bytes() + bth.ICRCSize }

// NextPacket writes the next packet the QP wants to send into buf — a
// responder reply first (ACK, NAK, READ response, ATOMIC ACK), then a
// request — and returns its length and true, or false when there is
// nothing to send now. buf must hold MaxPacketLen(path MTU) bytes. The
// packet runs from the BTH to the ICRC, whose four bytes are left zero for
// the encapsulation layer, which knows the IP header it covers.
func (q *QP) NextPacket(now time.Time, buf []byte) (int, bool) {
	if n, ok := q.nextReply(buf); ok {
		q.counters.Add(CounterSentPkts, 1)
		return n, true
	}
	if n, ok := q.nextRequest(now, buf); ok {
		q.counters.Add(CounterSentPkts, 1)
		return n, true
	}
	return 0, false
}

// NextPacketGather is NextPacket for a link that sends a packet from
// several buffers: a WRITE or SEND request or a READ response whose payload
// lies in one memory region (for a request, in one scatter/gather element)
// is built with its headers, pad and ICRC placeholder in buf, and *p
// describes its payload where it lies, pinned (see TxPayload). A request's
// region is checked as for a copy (lkey, PD, range) and may not be
// invalidated; a READ response's is the one its rkey named, as for a copy.
// A retransmission or a READ replay pins and reads the region again. Other
// packets (ACKs, READ and ATOMIC requests, inline data, payloads spanning
// elements, payloads shorter than MinGatherLen) are whole in buf and *p is
// zeroed. It returns the length used
// in buf. It does not allocate.
func (q *QP) NextPacketGather(now time.Time, buf []byte, p *TxPayload) (int, bool) {
	q.gathering = true
	n, ok := q.NextPacket(now, buf)
	q.gathering = false
	*p, q.pay = q.pay, TxPayload{}
	return n, ok
}

// nextRequest emits the next request packet (rxe_requester).
func (q *QP) nextRequest(now time.Time, buf []byte) (int, bool) {
	st := q.attr.State
	if !st.sends() {
		return 0, false
	}
	r := &q.req
	if r.rnrWait {
		return 0, false
	}
	// Go-Back-N, or catch up: responses that acknowledge PSNs this
	// requester was about to send again (it is behind comp.psn after a
	// rewind) make it go on at comp.psn instead of resending them. Only
	// PSNs sent before can be skipped so: an ACK past them is bogus.
	if r.needRetry || r.psn.Before(q.comp.psn) && !r.highPSN.Before(q.comp.psn) {
		q.rewind()
	}
	if r.off >= q.sq.len() {
		return 0, false
	}
	w := q.sq.at(r.off)
	// Local operations (LOCAL_INV, BIND_MW) run when the requester reaches
	// them and take no PSN (rxe_requester: rxe_do_local_ops before any
	// packet is built); they complete in post order.
	for w.wr.Opcode.isLocal() {
		if w.state == wqePosted {
			if st == StateSQD {
				return 0, false
			}
			if w.wr.Flags&SendFence != 0 && r.rdAtomic > 0 {
				return 0, false // IBA 10.8.3.3, as for any WR
			}
			q.doLocalOp(w)
		}
		if w.status != cq.StatusSuccess {
			// Blocked here until it is the oldest WQE; then it completes
			// with its error and the QP moves to ERR.
			q.completeLocalOps()
			return 0, false
		}
		r.off++
		q.completeLocalOps()
		if r.off >= q.sq.len() || !q.attr.State.sends() {
			return 0, false
		}
		w = q.sq.at(r.off)
	}
	// The unacknowledged window: at most MaxUnackedPSNs PSNs outstanding
	// (rxe_req.c, RXE_MAX_UNACKED_PSNS).
	if !r.psn.InWindow(q.comp.psn, MaxUnackedPSNs) {
		return 0, false
	}
	if w.state == wqePosted {
		if st == StateSQD {
			return 0, false // SQD: finish started WRs, start none (IBA 10.3.1.4)
		}
		if w.wr.Opcode.isReadOrAtomic() && !w.credit && r.rdAtomic >= max(1, int(q.attr.MaxRdAtomic)) {
			return 0, false // check_init_depth
		}
		if w.wr.Flags&SendFence != 0 && r.rdAtomic > 0 {
			return 0, false // IBA 10.8.3.3: fence waits for prior READ/ATOMIC
		}
		if q.flowHolds(w) {
			return 0, false // IBA 9.7.7.2: beyond the responder's credits
		}
		if !q.startWQE(w) {
			return 0, false
		}
	}
	n, ok := q.buildRequest(w, buf)
	if !ok {
		return 0, false
	}
	if r.psn.Before(r.highPSN) {
		q.counters.Add(CounterRetransmittedPkts, 1)
	}
	if w.next == w.npkts {
		w.state = wqeSent
		r.off++
	}
	if w.wr.Opcode == WRRDMARead {
		r.psn = w.lastPSN.Next()
	} else {
		r.psn = r.psn.Next()
	}
	if r.highPSN.Before(r.psn) {
		r.highPSN = r.psn
	}
	if q.cfg.Type != TypeRC {
		// UC/UD: no ACK to wait for, no retransmission.
		if w.state == wqeSent {
			q.completeUnreliable(w)
		} else {
			q.comp.psn = r.psn
		}
		return n, true
	}
	// rxe arms the retransmit timer when a packet goes out and none is
	// pending (update_state / mod_timer).
	if d, ok := AckTimeout(q.attr.Timeout); ok && !q.comp.timerArmed {
		q.comp.timerArmed = true
		q.comp.timerAt = now.Add(d)
	}
	return n, true
}

// startWQE checks a WQE's local buffers and assigns its PSNs (rxe's
// update_wqe_psn). A bad lkey completes it with LOC_PROT_ERR and moves the
// QP to ERR without a packet (matrix C10).
func (q *QP) startWQE(w *sendWQE) bool {
	var err error
	switch {
	case w.localErr:
		err = errSGLShort
	case w.isInline:
	case w.wr.Opcode == WRRDMARead:
		err = q.checkSGL(w.wr.SGL, mr.LocalWrite)
	case w.wr.Opcode.isAtomic():
		if len(w.wr.SGL) != 1 || w.wr.SGL[0].Length != 8 {
			err = errSGLShort
		} else {
			err = q.checkSGL(w.wr.SGL, mr.LocalWrite)
		}
	default:
		err = q.checkSGL(w.wr.SGL, 0)
	}
	if err != nil {
		q.localError(w)
		return false
	}
	w.npkts = 1 // atomics and zero-length messages take one PSN
	if !w.wr.Opcode.isAtomic() && w.length > 0 {
		w.npkts = (w.length + uint32(q.mtu) - 1) / uint32(q.mtu)
	}
	w.firstPSN = q.req.psn
	w.lastPSN = q.req.psn.Add(w.npkts - 1)
	w.next = 0
	w.state = wqeStarted
	if w.wr.Opcode.isReadOrAtomic() && !w.credit {
		w.credit = true
		q.req.rdAtomic++
	}
	q.flowStart(w)
	return true
}

// doLocalOp runs a LOCAL_INV or BIND_MW WQE (rxe_do_local_ops): the
// memory-key table does the work; a failure is LOC_QP_OP_ERR for
// LOCAL_INV and MW_BIND_ERR for BIND_MW, as in rxe.
func (q *QP) doLocalOp(w *sendWQE) {
	w.state = wqeSent
	w.status = cq.StatusSuccess
	switch w.wr.Opcode {
	case WRLocalInv:
		if q.cfg.MRs.Invalidate(q.cfg.PD, w.wr.InvalidateRKey) != nil {
			w.status = cq.StatusLocQPOpErr
		}
	case WRBindMW:
		b := &w.wr.BindMW
		if b.Window == nil {
			w.status = cq.StatusMWBindErr
			break
		}
		if _, err := q.cfg.MRs.Bind(b.Window, q.cfg.PD, q.qpn, b.BindConfig); err != nil {
			w.status = cq.StatusMWBindErr
		}
	}
}

// completeLocalOps completes the local operations at the head of the send
// queue that have run, in post order (rxe marks them wqe_state_done for
// the completer). A failed one moves the QP to ERR, flushing the rest.
func (q *QP) completeLocalOps() {
	for q.sq.len() > 0 {
		w := q.sq.at(0)
		if !w.wr.Opcode.isLocal() || w.state != wqeSent {
			return
		}
		st := w.status
		q.finishWQE(w, st)
		if st != cq.StatusSuccess {
			q.enterError()
			return
		}
	}
}

// localError reports a WQE whose local buffers cannot be used with
// LOC_PROT_ERR and moves the QP to ERR — but only once it is the oldest:
// completions follow post order, so WQEs ahead of it, already on the wire,
// complete first (IBA 10.7.3.1; rxe req_error leaves the WQE for the
// completer to reach in order). Until then the requester stays blocked on
// it and sends nothing more; the check fails again when it is retried, so
// this runs again at the head (matrix C10, cf. CVE-2021-47076).
func (q *QP) localError(w *sendWQE) {
	if q.sq.at(0) != w {
		return
	}
	q.completeSend(w, cq.StatusLocProtErr)
	q.enterError()
}

// buildRequest writes packet w.next of w into buf.
func (q *QP) buildRequest(w *sendWQE, buf []byte) (int, bool) {
	r := &q.req
	f := &r.fields
	*f = wire.Fields{}
	f.BTH.PKey = q.cfg.PKey
	f.BTH.DestQP = q.attr.DestQPN
	f.BTH.PSN = r.psn
	if q.cfg.Type == TypeUD {
		// A datagram: the WR names the destination and carries the DETH
		// (IBA 9.3.2; rxe init_req_packet takes wr.ud.remote_qpn).
		ud := &w.wr.UD
		f.BTH.DestQP = ud.RemoteQPN
		f.DETH.QKey = q.datagramQKey(ud)
		f.DETH.SrcQP = uint32(q.qpn)
		r.ah, r.ahSet = ud.AH, true
	}
	mtu := uint32(q.mtu)
	idx := w.next
	first, last := idx == 0, idx == w.npkts-1
	var payload uint32
	switch w.wr.Opcode {
	case WRRDMARead:
		// One request covers every remaining response packet; after a
		// retry it resumes at packet idx (rxe req_retry: iova += npsn*mtu).
		off := idx * mtu
		f.BTH.Opcode = bth.RCRDMAReadRequest
		f.RETH.VA = w.wr.RemoteAddr + uint64(off)
		f.RETH.RKey = uint32(w.wr.RKey)
		f.RETH.DMALength = w.length - off
		w.next = w.npkts
		first, last = true, true
	case WRAtomicCmpAndSwp, WRAtomicFetchAdd:
		f.BTH.Opcode = bth.RCFetchAdd
		if w.wr.Opcode == WRAtomicCmpAndSwp {
			f.BTH.Opcode = bth.RCCompareSwap
			f.AtomicETH.SwapData = w.wr.Swap
			f.AtomicETH.CompareData = w.wr.CompareAdd
		} else {
			f.AtomicETH.SwapData = w.wr.CompareAdd
		}
		f.AtomicETH.VA = w.wr.RemoteAddr
		f.AtomicETH.RKey = uint32(w.wr.RKey)
		w.next = 1
		first, last = true, true
	default:
		off := idx * mtu
		payload = min(mtu, w.length-off)
		f.BTH.Opcode = requestOpcode(q.cfg.Type, w.wr.Opcode, bth.PositionOf(first, last))
		if w.wr.Opcode == WRRDMAWrite || w.wr.Opcode == WRRDMAWriteWithImm {
			if first {
				f.RETH.VA = w.wr.RemoteAddr
				f.RETH.RKey = uint32(w.wr.RKey)
				f.RETH.DMALength = w.length
			}
		}
		if last && w.wr.Opcode.hasImm() {
			f.ImmDt = w.wr.Imm
		}
		if last && w.wr.Opcode == WRSendWithInv {
			f.IETH = uint32(w.wr.InvalidateRKey) // IBA 9.3.7
		}
		if last && w.wr.Flags&SendSolicited != 0 && w.wr.Opcode.isSend() {
			f.BTH.SolicitedEvent = true
		}
		w.next++
	}
	// AckReq at the end of a message and at least every MaxPktsPerAck
	// packets (rxe init_req_packet). UC and UD packets ask for nothing:
	// nobody acknowledges them (rxe sets the bit there too, and its
	// responder ignores it).
	r.noack++
	if q.cfg.Type == TypeRC && (last || r.noack >= MaxPktsPerAck) {
		f.BTH.AckReq = true
		r.noack = 0
	}
	n, pl, err := wire.BuildHeader(buf, f, int(payload))
	if err != nil {
		w.next = idx
		return 0, false
	}
	if payload > 0 {
		off := uint64(idx) * uint64(mtu)
		if w.isInline {
			copy(pl, w.inline[off:])
		} else if k, err := q.pinPayload(buf[:n], pl, w.wr.SGL, off); k > 0 || err != nil {
			if err != nil {
				w.next = idx
				q.localError(w)
				return 0, false
			}
			n = k
		} else if err := q.gather(pl, w.wr.SGL, off); err != nil {
			// The region went away between post and send: LOC_PROT_ERR.
			w.next = idx
			q.localError(w)
			return 0, false
		}
	}
	return n, true
}

// leavePayload records data, pinned in r, as the payload of packet pkt
// (q.pay) in place of pl, the part of pkt it would have been copied into:
// it moves the pad and ICRC placeholder that follow pl up to pl's start and
// returns pkt's new length.
func (q *QP) leavePayload(pkt, pl, data []byte, r *mr.Region) int {
	at := len(pkt) - len(pl) - wire.PadFor(len(pl)) - bth.ICRCSize
	copy(pkt[at:], pkt[at+len(pl):])
	q.pay = TxPayload{Data: data, At: at, Region: r}
	return len(pkt) - len(pl)
}

// pinPayload leaves the payload pl of packet pkt in its region when
// NextPacketGather asked for it and the message bytes [off, off+len(pl))
// lie in one element of sgl: it pins them and returns pkt's new length
// (leavePayload). It returns 0 and nil where the caller copies instead,
// and an error where the region fails the checks a copy makes.
func (q *QP) pinPayload(pkt, pl []byte, sgl []SGE, off uint64) (int, error) {
	if !q.gathering || len(pl) < MinGatherLen {
		return 0, nil
	}
	n := uint64(len(pl))
	for _, s := range sgl {
		l := uint64(s.Length)
		if off >= l {
			off -= l
			continue
		}
		if n > l-off {
			return 0, nil // spans elements: gather copies it
		}
		r, err := q.localRegion(s, off, n, 0)
		if err != nil {
			return 0, err
		}
		data, err := r.Pin(s.Addr+off, n)
		if err != nil {
			return 0, err
		}
		return q.leavePayload(pkt, pl, data, r), nil
	}
	return 0, nil // shorter than the message: gather reports it
}

// requestOpcode picks the SEND/WRITE opcode for a packet's position, from
// the opcode table (rxe next_opcode_rc): the with-immediate forms on the
// LAST or ONLY packet of a WR that has immediate data.
// SEND with invalidate is SEND FIRST/MIDDLE, then SEND LAST/ONLY WITH
// INVALIDATE, whose IETH the opcode table's positions leave out.
// A UC QP uses the UC opcodes of the same names (rxe next_opcode_uc), a UD
// QP SEND ONLY (WITH IMMEDIATE), its messages being one packet.
func requestOpcode(t Type, op WROpcode, pos bth.Position) bth.Opcode {
	base := bth.RCRDMAWriteOnly
	if op.isSend() {
		base = bth.RCSendOnly
	}
	switch t {
	case TypeUC:
		base = bth.UCRDMAWriteOnly
		if op.isSend() {
			base = bth.UCSendOnly
		}
	case TypeUD:
		base = bth.UDSendOnly
	}
	if op == WRSendWithInv {
		switch pos {
		case bth.PositionLast:
			return bth.RCSendLastWithInvalidate
		case bth.PositionOnly:
			return bth.RCSendOnlyWithInvalidate
		}
	}
	o, _ := base.AtPosition(pos, op.hasImm()) // always found for SEND and WRITE
	return o
}

// rewind implements Go-Back-N (rxe req_retry): resend from comp.psn. Every
// started WQE keeps the PSNs it was given. The one holding comp.psn resumes
// at that packet, (comp.psn - firstPSN) packets in — a MIDDLE or LAST
// without RETH for SEND/WRITE (rxe retry_first_write_send), a READ request
// for the remaining bytes with its RETH moved on by as many MTUs (iova +=
// npsn * mtu) — and the started WQEs after it restart from their first
// packet. WQEs wholly before comp.psn whose response is still due are
// skipped. The first packet sent is therefore always the one at comp.psn:
// the PSN a NAK asked for, or the oldest one unacknowledged at a timeout.
func (q *QP) rewind() {
	r := &q.req
	c := &q.comp
	r.needRetry = false
	r.psn = c.psn
	r.noack = 0
	r.off = -1
	for i := 0; i < q.sq.len(); i++ {
		w := q.sq.at(i)
		if w.state == wqePosted {
			break // started WQEs are a prefix of the queue
		}
		if w.wr.Opcode.isLocal() {
			// Run already, no PSN. A failed one blocks the requester.
			if w.status != cq.StatusSuccess && r.off < 0 {
				r.off = i
			}
			continue
		}
		w.next = 0
		if !c.psn.Before(w.firstPSN) {
			w.next = min(c.psn.Sub(w.firstPSN), w.npkts)
		}
		w.state = wqeStarted
		if w.next == w.npkts {
			// Every packet acknowledged, the response still due (a READ
			// or ATOMIC; a SEND/WRITE completes on its ACK).
			w.state = wqeSent
		} else if r.off < 0 {
			r.off = i
			r.psn = w.firstPSN.Add(w.next)
		}
	}
	if r.off < 0 {
		// Nothing started is left to send: go on with the first posted WQE.
		r.off = 0
		for r.off < q.sq.len() && q.sq.at(r.off).state == wqeSent {
			r.off++
		}
	}
}

// retransmitTimeout runs when the retransmit timer fires (rxe
// retransmit_timer → COMPST_ERROR_RETRY): with work outstanding, spend one
// retry or fail the oldest WQE with RETRY_EXC_ERR.
func (q *QP) retransmitTimeout() {
	if !q.attr.State.sends() {
		return
	}
	if q.sq.len() == 0 || q.sq.at(0).state == wqePosted {
		return // nothing outstanding: a spurious timeout, tolerated as in rxe
	}
	q.startRetry()
}

// startRetry spends one transport retry (retry_cnt counts consecutive
// retries without progress, IBA 9.7.6.1.3; 7 is a count, not infinite, as in
// the spec and ConnectX — rxe alone treats it as infinite) and schedules
// Go-Back-N, or completes the oldest WQE with RETRY_EXC_ERR and moves the
// QP to ERR.
func (q *QP) startRetry() {
	c := &q.comp
	if c.retryLeft == 0 {
		q.counters.Add(CounterRetryExceededErr, 1)
		q.completeSend(q.sq.at(0), cq.StatusRetryExcErr)
		q.enterError()
		return
	}
	c.retryLeft--
	c.retrying = true
	q.counters.Add(CounterCompleterRetryErr, 1)
	q.req.needRetry = true
}

// completeSend completes the WQE at the head of the send queue with status
// and pops it. Successful unsignaled WRs produce no CQE; errors always do
// (IBA 10.7.3.1).
func (q *QP) completeSend(w *sendWQE, status cq.Status) {
	q.finishWQE(w, status)
	q.completeLocalOps() // local operations that waited behind w
}

// finishWQE is completeSend without the local operations behind w.
func (q *QP) finishWQE(w *sendWQE, status cq.Status) {
	if w.credit {
		w.credit = false
		q.req.rdAtomic--
	}
	if status != cq.StatusSuccess || w.signaled(q.cfg.SigAll) {
		q.push(q.cfg.SendCQ, cq.Completion{
			WRID: w.wr.WRID, Status: status, Opcode: w.cqOpcode(), ByteLen: w.length,
		})
	}
	if q.sq.len() > 0 && q.sq.at(0) == w {
		q.sq.pop()
		if q.req.off > 0 {
			q.req.off--
		}
	}
}

// atomicResult stores an ATOMIC ACK's original value in the WR's 8-byte
// local buffer, in host (little-endian) order like the verbs API.
func (q *QP) atomicResult(w *sendWQE, orig uint64) error {
	binary.LittleEndian.PutUint64(q.atomicBuf[:], orig)
	return q.scatter(q.atomicBuf[:], w.wr.SGL, 0)
}
