package qp

import (
	"time"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/reth"
	"github.com/goroce/goroce/wire"
)

// resource is one responder resource (rxe's resp_res): the state of a READ
// or ATOMIC kept so a duplicate request can be replayed (IBA 9.7.5.1.5).
type resource struct {
	gen      uint32 // bumped on every reuse: a replay supersedes only replies of the same request
	kind     uint8  // resNone, resRead, resAtomic
	firstPSN bth.PSN
	lastPSN  bth.PSN
	va       uint64
	length   uint32
	rkey     mr.Key
	region   *mr.Region
	delta    uint64 // READ: region IOVA minus wire VA (a zero-based window's shift, else 0)
	orig     uint64 // atomic: the original value, replayed exactly once
	sent     uint32 // READ: response packets sent so far (to count true resends)
}

const (
	resNone uint8 = iota
	resRead
	resAtomic
)

// outKind is the kind of a queued responder reply.
type outKind uint8

const (
	outACK outKind = iota
	outNAK
	outAtomicACK
	outRead
)

// reply is one queued responder output, sent in order (a READ response must
// leave before the ACK of a later request: that ACK would acknowledge the
// READ's PSNs).
//
// A reply carries everything needed to build it (the READ's PSN range,
// region and address; the atomic's original value), copied when it is
// queued, so recycling its resource for a later request never cancels it.
// rxe keeps the same split: read_reply builds from qp->resp, and a
// resp_res only serves duplicates (rxe_prepare_res recycles the oldest).
// A resource forgets what a later duplicate could replay; a reply still
// owed is always sent (IBA 9.7.5.1.5: the responder answers every request
// in PSN order; issue 17, defect 2).
type reply struct {
	kind outKind
	syn  aeth.Syndrome
	psn  bth.PSN
	msn  uint32 // the MSN as of the request answered (a READ's own, C9-148)
	res  int    // resource index (outAtomicACK, outRead); -1 once the ring was resized
	gen  uint32 // resource generation when queued: a replay supersedes only its own resource's replies
	orig uint64 // outAtomicACK: the original value
	// outRead: packets next..end-1 of the READ whose packet 0 has PSN base
	// and remote address va; a replay starts at the duplicate's packet.
	next   uint32
	end    uint32
	npkts  uint32 // the READ's packet count (for FIRST/MIDDLE/LAST)
	length uint32 // the READ's DMA length
	va     uint64
	delta  uint64 // region IOVA minus va (a zero-based window's shift, else 0)
	base   bth.PSN
	region *mr.Region
	replay bool // outRead: answers a duplicate (for CounterReplayedPkts)
}

// responder is the receive side of requests (rxe_resp.c).
type responder struct {
	epsn       bth.PSN // expected PSN (resp.psn)
	msn        uint32  // message sequence number (24 bits)
	sentNAK    bool    // a PSN-sequence NAK was sent for the current gap
	lastOp     bth.Opcode
	inMessage  bool // a FIRST was received and its LAST not yet
	recvActive bool // the receive WQE at the head of the RQ is in use
	recvOff    uint64
	recvStatus cq.Status // deferred error for the receive WQE in use

	wRegion *mr.Region // WRITE in progress
	wVA     uint64
	wResid  uint32
	wLen    uint32

	res     []resource
	resNext int

	out ring[reply]
	buf wire.Fields
	// errDrain is set when a class C/A error moved the QP to ERR: the
	// replies queued before its NAK answer requests that were executed
	// (the NAK acknowledges them, IBA 9.7.5.2.4), so they still go out.
	errDrain bool

	// dropMsg (UC): the rest of the current message is dropped, up to the
	// next FIRST or ONLY (rxe's resp.drop_msg).
	dropMsg bool
	// rxIP (UD) is the IP header of the packet being handled, when the
	// driver gave it (HandlePacketIP).
	rxIP    IPInfo
	rxIPSet bool
}

// initResources sizes the resource ring: max_dest_rd_atomic rounded up to a
// power of two, as rxe (rxe_qp_from_attr).
func (r *responder) initResources(n uint8) {
	size := 1
	for size < int(n) {
		size <<= 1
	}
	if n == 0 {
		size = 0
	}
	r.res = make([]resource, size)
	r.resNext = 0
	// Replies still queued keep everything they need to be sent (the owed
	// reply rule) but no longer name a resource: the old ring is gone, and
	// an index into it would name a new, unrelated one (or none: SQD→SQD
	// may shrink max_dest_rd_atomic with READ responses still paced out).
	for j := 0; j < r.out.len(); j++ {
		r.out.at(j).res = -1
	}
}

// HandlePacket processes one received packet of this QP at time now. The
// caller (the device) has parsed it, checked its ICRC and matched its
// destination QPN and source address. Requests go to the responder,
// responses to the completer; any packet that fails rxe's intake checks
// (opcode class vs QP type and state, P_Key) is dropped and counted.
func (q *QP) HandlePacket(now time.Time, p *wire.Packet) {
	q.counters.Add(CounterRcvdPkts, 1)
	op := p.Opcode()
	// check_type_state and check_keys (rxe_recv.c): a QP takes only the
	// opcodes of its transport (RC, UC or UD), requests from RTR on,
	// responses in RTS/SQD; a UD request needs the QP's Q_Key.
	if p.BTH == nil || p.Info == nil || op.Transport() != q.transport() ||
		!pkeyMatch(p.BTH.PKey(), q.cfg.PKey) {
		q.counters.Add(CounterBadHdr, 1)
		return
	}
	if q.cfg.Type == TypeUD && !q.checkQKey(p) {
		return
	}
	if op.IsResponse() {
		q.handleResponse(now, p)
		return
	}
	if !q.attr.State.receives() {
		q.counters.Add(CounterBadHdr, 1)
		return
	}
	q.handleRequest(p)
}

// pkeyMatch is rxe's pkey_match (IBA 10.9.3): the low 15 bits are equal and
// at least one of the two keys is a full member.
func pkeyMatch(a, b uint16) bool {
	if a&0x7fff == 0 || b&0x7fff == 0 {
		return false
	}
	return a&0x7fff == b&0x7fff && (a|b)&0x8000 != 0
}

// handleRequest is rxe_responder's check sequence for one request.
func (q *QP) handleRequest(p *wire.Packet) {
	r := &q.resp
	psn := p.BTH.PSN()
	// check_psn (IBA 9.7.5.1.2, C9-100): ahead → one NAK per gap; behind →
	// a duplicate. UC resynchronises instead (ucCheckPSN); UD has no PSN
	// sequence: rxe sets the PSN and ignores it on receive.
	d := 0
	switch q.cfg.Type {
	case TypeUC:
		if !q.ucCheckPSN(p, psn) {
			return
		}
	case TypeRC:
		d = int(psn.Compare(r.epsn))
	}
	switch {
	case d > 0:
		q.count(ReasonPSNSequence)
		if !r.sentNAK {
			r.sentNAK = true
			q.queueNAK(ReasonPSNSequence.Syndrome(), r.epsn)
		}
		return
	case d < 0:
		q.counters.Add(CounterDuplicateRequest, 1)
		q.duplicate(p, psn)
		return
	}
	r.sentNAK = false
	op := p.Opcode()
	m := op.Mask()

	// check_op_seq (IBA 9.8.3.1): MIDDLE/LAST continue the message in
	// progress, FIRST/ONLY start one.
	if r.inMessage {
		cont := (r.lastOp.Mask()&bth.MaskSend != 0 && m&bth.MaskSend != 0 ||
			r.lastOp.Mask()&bth.MaskWrite != 0 && m&bth.MaskWrite != 0) &&
			m&(bth.MaskMiddle|bth.MaskLast) != 0 && !op.IsOnly()
		if !cont {
			q.requestError(ReasonOpSequence, psn)
			return
		}
	} else if m&(bth.MaskMiddle) != 0 || op.IsLast() {
		q.requestError(ReasonOpSequence, psn)
		return
	}

	// check_op_valid (matrix C6): the QP's own access flags must enable the
	// remote operation: RDMA WRITE (with or without immediate) needs
	// RemoteWrite, RDMA READ RemoteRead, CMP_SWAP and FETCH_ADD
	// RemoteAtomic; SEND needs none (it lands in a posted receive). The
	// enables are QP attributes set by Modify QP, checked before any R_Key:
	// a request its QP does not enable is a class C responder error, an
	// invalid request (IBA 9.9.3, responder side errors), so NAK 0x61 and
	// the QP to ERR, as rxe's check_op_valid answers it
	// (RESPST_ERR_UNSUPPORTED_OPCODE) and rdmavt's qib/hfi1 (nack_inv). A
	// region whose own access lacks the operation is an R_Key violation
	// instead: NAK remote access error 0x62 (rxe check_rkey). See
	// ReasonOpNotEnabled and ReasonRKeyViolation.
	acc := q.attr.AccessFlags
	switch {
	case m&(bth.MaskFlush|bth.MaskAtomicWrite) != 0:
		// FLUSH and ATOMIC WRITE are not implemented: unsupported opcodes
		// are invalid requests, as rxe answers them.
		q.requestError(ReasonUnsupportedOpcode, psn)
		return
	case m&bth.MaskWrite != 0 && !acc.Has(mr.RemoteWrite),
		m&bth.MaskRead != 0 && !acc.Has(mr.RemoteRead),
		m&bth.MaskAtomic != 0 && !acc.Has(mr.RemoteAtomic):
		q.requestError(ReasonOpNotEnabled, psn)
		return
	}

	// check_resource: READ/ATOMIC need responder resources (matrix B12); SEND and
	// WRITE with immediate need a receive WQE, from the RQ or the SRQ
	// (acquireRecv), else RNR NAK (class B: no state change).
	if m&(bth.MaskRead|bth.MaskAtomic) != 0 && len(r.res) == 0 {
		q.requestError(ReasonNoResources, psn)
		return
	}
	needWQE := m&bth.MaskRecvWR != 0 && !r.recvActive
	if needWQE && !q.acquireRecv() && q.cfg.Type != TypeRC {
		// UC/UD: no RNR NAK, a class D drop (rxe RESPST_ERR_RNR for
		// UC/UD sets drop_msg).
		q.counters.Add(CounterDroppedNoRecvWQE, 1)
		if q.cfg.Type == TypeUC {
			q.ucAbort()
		}
		return
	}
	if needWQE && q.rq.len() == 0 {
		q.count(ReasonRNR)
		q.queueNAK(aeth.RNR(q.attr.MinRNRTimer), psn) // ReasonRNR's syndrome with the QP's timer
		// The RNR NAK is this gap's NAK: the rest of the message and what
		// follows are dropped without a PSN-sequence NAK until the ePSN comes
		// again (rdmavt qib/hfi1 rc.c: r_nak_state = IB_RNR_NAK). Otherwise
		// that NAK would spend the requester's retry_cnt, which RNR must
		// leave unchanged (IBA 9.7.5.2.8; matrix B10, doc/matrix.md §3).
		r.sentNAK = true
		return
	}

	// check_length (rxe check_length, IBA 9.7.4.1.6).
	pl := uint32(len(p.Payload))
	mtu := uint32(q.mtu)
	lenOK := true
	switch {
	case op.IsOnly():
		lenOK = pl <= mtu
	case op.IsFirst(), op.IsMiddle():
		lenOK = pl == mtu
	case op.IsLast():
		lenOK = pl > 0 && pl <= mtu
	}
	if p.RETH != nil && p.RETH.DMALength() > reth.MaxDMALength {
		lenOK = false
	}
	if !lenOK {
		q.requestError(ReasonLength, psn)
		return
	}

	switch {
	case m&bth.MaskSend != 0:
		q.executeSend(p, psn, needWQE)
	case m&bth.MaskWrite != 0:
		q.executeWrite(p, psn)
	case m&bth.MaskRead != 0:
		q.executeRead(p, psn)
	case m&bth.MaskAtomic != 0:
		q.executeAtomic(p, psn)
	}
}

// executeSend places a SEND packet in the receive WQE at the RQ head.
func (q *QP) executeSend(p *wire.Packet, psn bth.PSN, start bool) {
	r := &q.resp
	if start {
		r.recvActive = true
		r.recvOff = 0
		r.recvStatus = cq.StatusSuccess
	}
	wqe := q.rq.at(0)
	if start && q.cfg.Type == TypeUD && !q.placeGRH(wqe, p, psn) {
		return
	}
	pl := uint64(len(p.Payload))
	if r.recvOff+pl > wqe.length {
		// matrix C8: a SEND larger than the receive buffer. The requester gets NAK
		// invalid request (REM_INV_REQ_ERR); the receive WQE completes with
		// LOC_LEN_ERR, as hardware reports it (rxe reports
		// REM_INV_REQ_ERR there; doc/rxe.md §5 leaves the choice).
		q.requestError(ReasonRecvLength, psn)
		return
	}
	if err := q.scatter(p.Payload, wqe.sgl, r.recvOff); err != nil {
		// Class A: a bad local SGE in the receive WQE → NAK remote
		// operational error, receive WQE LOC_QP_OP_ERR (doc/rxe.md §5).
		q.requestError(ReasonRecvSGE, psn)
		return
	}
	r.recvOff += pl
	if p.Opcode().Mask()&bth.MaskLast == 0 {
		q.advance(p, psn)
		return
	}
	{
		wc := cq.Completion{WRID: wqe.wrid, Status: cq.StatusSuccess, Opcode: cq.OpRecv, ByteLen: uint32(r.recvOff)}
		if p.ImmDt != nil {
			wc.Imm = p.ImmDt.Imm()
			wc.Flags |= cq.FlagWithImm
		}
		if p.DETH != nil {
			q.udCompletion(&wc, p)
		}
		if p.IETH != nil {
			// SEND with invalidate (IBA 9.4.1.1): invalidate the IETH's
			// rkey, a region's or a type 2 window's, once the data is placed
			// (rxe execute → invalidate_rkey).
			rkey := p.IETH.RKey()
			if q.cfg.MRs.Invalidate(q.cfg.PD, mr.Key(rkey)) != nil {
				q.invalidateError(p, psn)
				return
			}
			wc.InvalidatedRKey = rkey
			wc.Flags |= cq.FlagWithInv
		}
		q.advance(p, psn)
		r.recvActive = false
		q.rq.pop()
		q.push(q.cfg.RecvCQ, wc)
	}
}

// invalidateError ends a SEND with invalidate whose rkey cannot be
// invalidated as rxe does (RESPST_ERR_INVALIDATE_RKEY, "RC - Class J"):
// the data is placed, the receive WQE completes with REM_INV_REQ_ERR, the
// request is acknowledged as executed — no NAK: rxe's acknowledge() still
// holds ACK_UNLIMITED — and the QP moves to ERR. The ePSN and MSN are left
// where they were, as rxe's execute returns before advancing them.
func (q *QP) invalidateError(p *wire.Packet, psn bth.PSN) {
	r := &q.resp
	why := ReasonInvalidateRKey
	q.count(why)
	wqe := q.rq.at(0)
	q.push(q.cfg.RecvCQ, cq.Completion{WRID: wqe.wrid, Status: why.Status(), Opcode: cq.OpRecv,
		VendorErr: why.VendorErr()})
	q.rq.pop()
	r.recvActive = false
	r.inMessage = false
	if p.BTH.AckReq() {
		q.queueACK(psn)
	}
	r.errDrain = true // the ACK goes out after the QP is in ERR
	q.enterError()
}

// executeWrite places an RDMA WRITE packet (rxe write_data_in, check_rkey).
func (q *QP) executeWrite(p *wire.Packet, psn bth.PSN) {
	r := &q.resp
	op := p.Opcode()
	if p.RETH != nil { // FIRST or ONLY
		va, rkey, dlen := p.RETH.VA(), mr.Key(p.RETH.RKey()), p.RETH.DMALength()
		r.wRegion, r.wVA, r.wResid, r.wLen = nil, va, dlen, dlen
		if dlen > 0 {
			// The rkey may be a memory window's (rxe check_rkey → rxe_lookup_mw).
			reg, xva, err := q.remoteRegion(rkey, va, uint64(dlen), mr.RemoteWrite)
			if err != nil {
				q.requestError(ReasonRKeyViolation, psn)
				return
			}
			r.wRegion, r.wVA = reg, xva
		}
		// matrix C9: a zero-length WRITE needs no valid rkey ("a zero-byte op is
		// not required to set an addr or rkey", rxe check_rkey).
	}
	pl := uint32(len(p.Payload))
	// The payload must match what the RETH announced: full MTU packets while
	// more than an MTU remains, exactly the rest in the last one, and the pad
	// that rounds it (rxe check_rkey length checks, matrix C8).
	mtu := uint32(q.mtu)
	bad := false
	if r.wResid > mtu {
		bad = pl != mtu || p.BTH.PadCount() != 0 || op.Mask()&bth.MaskLast != 0
	} else {
		bad = pl != r.wResid || op.Mask()&bth.MaskLast == 0 ||
			p.BTH.PadCount() != wire.PadFor(int(r.wResid))
	}
	if bad {
		q.requestError(ReasonLength, psn)
		return
	}
	if pl > 0 {
		if r.wRegion == nil || r.wRegion.WriteAt(p.Payload, r.wVA) != nil {
			q.requestError(ReasonRKeyViolation, psn)
			return
		}
	}
	r.wVA += uint64(pl)
	r.wResid -= pl
	q.advance(p, psn)
	if op.Mask()&bth.MaskLast != 0 {
		r.wRegion = nil
		if p.ImmDt != nil { // WRITE WITH IMMEDIATE consumes a receive WQE
			wqe := q.rq.at(0)
			wc := cq.Completion{WRID: wqe.wrid, Status: cq.StatusSuccess, Opcode: cq.OpRecvRDMAWithImm,
				ByteLen: r.wLen, Imm: p.ImmDt.Imm(), Flags: cq.FlagWithImm}
			q.rq.pop()
			q.push(q.cfg.RecvCQ, wc)
		}
	}
}

// advance moves the responder past an executed SEND/WRITE packet and queues
// an ACK when the requester asked for one (IBA 9.7.5.1.1: ACKs only on
// AckReq; rxe acknowledge()).
func (q *QP) advance(p *wire.Packet, psn bth.PSN) {
	r := &q.resp
	op := p.Opcode()
	r.lastOp = op
	r.inMessage = op.Mask()&bth.MaskLast == 0
	r.epsn = psn.Next()
	if op.Mask()&bth.MaskLast != 0 {
		r.msn = (r.msn + 1) & 0xffffff
	}
	if p.BTH.AckReq() && q.cfg.Type == TypeRC { // UC and UD never ACK (rxe acknowledge)
		q.queueACK(psn)
	}
}

// executeRead starts a READ: takes the next resource slot (the oldest is
// recycled, rxe rxe_prepare_res), counts the message at arrival (C9-148) and
// queues the response packets.
func (q *QP) executeRead(p *wire.Packet, psn bth.PSN) {
	r := &q.resp
	va, rkey, dlen := p.RETH.VA(), mr.Key(p.RETH.RKey()), p.RETH.DMALength()
	var reg *mr.Region
	xva := va
	if dlen > 0 {
		var err error
		reg, xva, err = q.remoteRegion(rkey, va, uint64(dlen), mr.RemoteRead)
		if err != nil {
			q.requestError(ReasonRKeyViolation, psn)
			return
		}
	}
	npkts := uint32(1)
	if dlen > 0 {
		npkts = (dlen + uint32(q.mtu) - 1) / uint32(q.mtu)
	}
	i := q.takeResource()
	res := &r.res[i]
	res.kind, res.firstPSN, res.lastPSN = resRead, psn, psn.Add(npkts-1)
	res.va, res.length, res.rkey, res.region, res.sent = va, dlen, rkey, reg, 0
	res.delta = xva - va
	r.lastOp = p.Opcode()
	r.inMessage = false
	r.epsn = res.lastPSN.Next()
	r.msn = (r.msn + 1) & 0xffffff
	q.queueReply(reply{kind: outRead, msn: r.msn, res: i, gen: res.gen, next: 0, end: npkts, npkts: npkts,
		length: dlen, base: psn, va: va, delta: res.delta, region: reg})
}

// executeAtomic performs a CmpSwap/FetchAdd exactly once and saves the
// original value for replays (IBA 9.4.5, rxe atomic_reply).
func (q *QP) executeAtomic(p *wire.Packet, psn bth.PSN) {
	r := &q.resp
	a := p.AtomicETH
	va := a.VA()
	if va%8 != 0 {
		q.requestError(ReasonMisalignedAtomic, psn) // matrix C7
		return
	}
	reg, xva, err := q.remoteRegion(mr.Key(a.RKey()), va, 8, mr.RemoteAtomic)
	if err != nil {
		q.requestError(ReasonRKeyViolation, psn)
		return
	}
	if xva%8 != 0 {
		q.requestError(ReasonMisalignedAtomic, psn) // through a window
		return
	}
	var orig uint64
	if p.Opcode() == bth.RCCompareSwap {
		orig, err = reg.CompareAndSwap(xva, a.CompareData(), a.SwapData())
	} else {
		orig, err = reg.FetchAndAdd(xva, a.SwapData())
	}
	if err != nil {
		q.requestError(ReasonRKeyViolation, psn)
		return
	}
	i := q.takeResource()
	res := &r.res[i]
	res.kind, res.firstPSN, res.lastPSN, res.orig = resAtomic, psn, psn, orig
	res.va, res.rkey, res.length, res.region = va, mr.Key(a.RKey()), 8, nil
	r.lastOp = p.Opcode()
	r.inMessage = false
	r.epsn = psn.Next()
	r.msn = (r.msn + 1) & 0xffffff
	q.queueReply(reply{kind: outAtomicACK, psn: psn, msn: r.msn, res: i, gen: res.gen, orig: orig})
}

// takeResource takes the next resource slot, recycling the oldest (rxe
// rxe_prepare_res). The slot's earlier request loses only its replay; a
// reply queued for it is self-contained and still goes out.
func (q *QP) takeResource() int {
	r := &q.resp
	i := r.resNext
	r.resNext = (r.resNext + 1) % len(r.res)
	r.res[i].gen++
	return i
}

// duplicate answers a request behind the expected PSN (rxe
// duplicate_request): SEND/WRITE are re-ACKed, never re-executed (C9-105);
// a READ inside a saved resource is replayed from its PSN with the MR
// re-checked; an ATOMIC is answered from its saved original value. Anything
// else is a silent drop (class D); the requester recovers by retry.
func (q *QP) duplicate(p *wire.Packet, psn bth.PSN) {
	r := &q.resp
	m := p.Opcode().Mask()
	switch {
	case m&(bth.MaskSend|bth.MaskWrite) != 0:
		// ACK the last PSN executed: a cumulative ACK (rxe prev_psn).
		q.queueACK(r.epsn.Add(bth.PSNMask))
	case m&bth.MaskRead != 0:
		va, rkey, dlen := p.RETH.VA(), mr.Key(p.RETH.RKey()), p.RETH.DMALength()
		for i := range r.res {
			res := &r.res[i]
			if res.kind != resRead || !psn.InWindow(res.firstPSN, res.lastPSN.Sub(res.firstPSN)+1) {
				continue
			}
			k := psn.Sub(res.firstPSN)
			off := uint64(k) * uint64(q.mtu)
			// The new request must be the same or a subset of the original:
			// same rkey, va at the packet boundary, ending where it ended.
			if rkey != res.rkey || va != res.va+off || uint64(dlen) != uint64(res.length)-off {
				return
			}
			if res.length > 0 {
				if q.cfg.MRs.RecheckRemote(q.cfg.PD, q.qpn, res.region, res.rkey, res.va, uint64(res.length), res.va+res.delta) != nil {
					// rxe_recheck_mr: the MR went away — a remote access error,
					// never a read of freed memory (matrix C5).
					q.requestError(ReasonRKeyViolation, psn)
					return
				}
			}
			q.counters.Add(CounterReadReplays, 1)
			// A response still queued for this resource is superseded: the
			// requester discards everything past its gap, so stop sending it
			// (as hardware responders do) and restart from the requested PSN.
			for j := 0; j < r.out.len(); j++ {
				if o := r.out.at(j); o.kind == outRead && o.res == i && o.gen == res.gen {
					o.end = o.next
				}
			}
			npkts := res.lastPSN.Sub(res.firstPSN) + 1
			q.queueReply(reply{kind: outRead, msn: r.msn, res: i, gen: res.gen, next: k, end: npkts, npkts: npkts,
				length: res.length, base: res.firstPSN, va: res.va, delta: res.delta, region: res.region, replay: true})
			return
		}
	case m&bth.MaskAtomic != 0:
		for i := range r.res {
			res := &r.res[i]
			if res.kind == resAtomic && res.firstPSN == psn {
				q.counters.Add(CounterAtomicReplays, 1)
				q.queueReply(reply{kind: outAtomicACK, psn: psn, msn: r.msn, res: i, gen: res.gen, orig: res.orig})
				return
			}
		}
	}
}

// count counts one responder error of reason why.
func (q *QP) count(why Reason) { q.counters.Add(why.Counter(), 1) }

// requestError handles a class C/A responder error (rxe do_class_ac_error)
// from the responder error table: it is counted, why's NAK is queued, the
// receive WQE in use (if any) completes with why's status and VendorErr,
// and the QP moves to ERR, flushing the rest (doc/rxe.md §5).
func (q *QP) requestError(why Reason, psn bth.PSN) {
	if q.cfg.Type != TypeRC {
		q.unreliableError(why, psn)
		return
	}
	q.fatalRequestError(why, psn, true)
}

// fatalRequestError is requestError's class C/A handling; nak is false on
// UC and UD QPs, which never NAK.
func (q *QP) fatalRequestError(why Reason, psn bth.PSN, nak bool) {
	r := &q.resp
	e := why.info()
	q.counters.Add(e.counter, 1)
	if nak {
		q.queueNAK(e.syn, psn)
	}
	r.errDrain = true
	if r.recvActive && q.rq.len() > 0 {
		wqe := q.rq.at(0)
		q.push(q.cfg.RecvCQ, cq.Completion{WRID: wqe.wrid, Status: e.status, Opcode: cq.OpRecv,
			VendorErr: why.VendorErr()})
		q.rq.pop()
		r.recvActive = false
	}
	q.enterError()
}

// dropRepliesFromRead drops the READ response at the head of the reply
// queue and every reply behind it but the NAKs, which keep their order
// (nextReply in ERR).
func (q *QP) dropRepliesFromRead() {
	r := &q.resp
	for n := r.out.len(); n > 0; n-- {
		rp := *r.out.at(0)
		r.out.pop()
		if rp.kind == outNAK {
			*r.out.push() = rp
		}
	}
}

func (q *QP) queueACK(psn bth.PSN) {
	r := &q.resp
	// Coalesce with a queued ACK: ACKs are cumulative.
	if n := r.out.len(); n > 0 {
		if last := r.out.at(n - 1); last.kind == outACK {
			last.psn, last.msn = psn, r.msn
			q.counters.Add(CounterAckDeferred, 1)
			return
		}
	}
	q.queueReply(reply{kind: outACK, psn: psn, msn: r.msn}) // its syndrome is made when it is sent
}

func (q *QP) queueNAK(syn aeth.Syndrome, psn bth.PSN) {
	q.queueReply(reply{kind: outNAK, syn: syn, psn: psn, msn: q.resp.msn})
}

func (q *QP) queueReply(rp reply) {
	r := &q.resp
	if r.out.max == 0 {
		r.out.max = outputQueueLen
	}
	if r.out.full() {
		q.counters.Add(CounterOutputOverflow, 1)
		return
	}
	*r.out.push() = rp
}

// nextReply writes the next queued responder reply into buf. In ERR the
// acknowledgements of requests executed before the QP left RTS still go
// out, and the NAK that reports an error; READ responses only when the
// error was a class C/A one (errDrain).
func (q *QP) nextReply(buf []byte) (int, bool) {
	r := &q.resp
	for r.out.len() > 0 {
		rp := r.out.at(0)
		// After a class C/A error every reply queued ahead of its NAK goes
		// out: a READ executed before the offending request is answered
		// with its data, as in rxe, which finishes a READ's responses before
		// taking the next request; dropping them would turn the READ into
		// RETRY_EXC_ERR and hide the error status (C rows).
		//
		// Otherwise (Modify to ERR, Destroy, Close, a requester error) the
		// queued ACKs and ATOMIC ACKs still go out: their requests were
		// executed, and their receive completions may have been polled.
		// rxe sends its ACK in the responder pass that completes the
		// receive (rxe_responder: RESPST_COMPLETE, then
		// RESPST_ACKNOWLEDGE), so a program that polls the completion and
		// then destroys its QP has acknowledged; without the ACK the
		// peer's requester retries against a QP that no longer answers
		// (forever with retry_cnt 7 on rxe, doc/rxe.md §6: an
		// ibv_rc_pingpong server hung so). A READ response is not sent
		// from ERR: the READ and the replies queued behind it are dropped
		// (an ACK behind it would acknowledge the READ's PSNs, an implied
		// NAK, C9-146), NAKs excepted.
		if q.attr.State == StateErr && !r.errDrain && rp.kind == outRead {
			q.dropRepliesFromRead()
			continue
		}
		f := &r.buf
		*f = wire.Fields{}
		f.BTH.PKey = q.cfg.PKey
		f.BTH.DestQP = q.attr.DestQPN
		switch rp.kind {
		case outACK, outNAK:
			f.BTH.Opcode = bth.RCAcknowledge
			f.BTH.PSN = rp.psn
			f.AETH.Syndrome, f.AETH.MSN = rp.syn, rp.msn
			if rp.kind == outACK {
				f.AETH.Syndrome = q.ackSyndrome() // the credits as of now
			}
			r.out.pop()
			n, _, err := wire.BuildHeader(buf, f, 0)
			return n, err == nil
		case outAtomicACK:
			r.out.pop()
			f.BTH.Opcode = bth.RCAtomicAcknowledge
			f.BTH.PSN = rp.psn
			f.AETH.Syndrome, f.AETH.MSN = q.ackSyndrome(), rp.msn
			f.AtomicAckETH = rp.orig
			n, _, err := wire.BuildHeader(buf, f, 0)
			return n, err == nil
		case outRead:
			n, ok, done := q.readReplyPacket(rp, buf)
			if done {
				r.out.pop()
			}
			if ok {
				return n, true
			}
		}
	}
	return 0, false
}

// readReplyPacket builds the next READ response packet of rp (rxe
// read_reply): FIRST/MIDDLE/LAST by position, ONLY for one packet; the AETH
// on FIRST, LAST and ONLY. Memory is read at send time, so a replay reads it
// again.
func (q *QP) readReplyPacket(rp *reply, buf []byte) (n int, ok, done bool) {
	r := &q.resp
	if rp.next >= rp.end {
		return 0, false, true
	}
	npkts := rp.npkts
	k := rp.next
	mtu := uint32(q.mtu)
	off := k * mtu
	pl := uint32(0)
	if rp.length > 0 {
		pl = min(mtu, rp.length-off)
	}
	f := &r.buf
	f.BTH.Opcode = readResponseOpcode(bth.PositionOf(k == 0, k == npkts-1))
	// A replay that starts mid-message begins with MIDDLE or LAST, as rxe's
	// rdatm_res_state_replay does; the requester accepts both.
	f.BTH.PSN = rp.base.Add(k)
	// The MSN is the READ's own, taken when it arrived (C9-148), not the
	// responder's current one: the reply leaves at line rate, possibly
	// after later requests were executed, and the MSN never goes back on
	// the wire (rxe builds the whole response before the next request).
	f.AETH.Syndrome, f.AETH.MSN = q.ackSyndrome(), rp.msn
	n, payload, err := wire.BuildHeader(buf, f, int(pl))
	if err != nil {
		return 0, false, true
	}
	if pl > 0 {
		va := rp.va + rp.delta + uint64(off)
		if q.gathering && rp.region != nil && pl >= MinGatherLen {
			// Over a gathering link the payload stays in the region,
			// pinned (NextPacketGather). An invalidated region, which Pin
			// refuses, is read as before: its rkey was checked when the
			// READ arrived, and ReadAt decides as it always has.
			if data, err := rp.region.Pin(va, uint64(pl)); err == nil {
				n = q.leavePayload(buf[:n], payload, data, rp.region)
				payload = nil
			}
		}
		if payload != nil && (rp.region == nil || rp.region.ReadAt(payload, va) != nil) {
			// The MR was deregistered under the READ: answer with a remote
			// access error instead of data (matrix C5, E6).
			q.count(ReasonRKeyViolation)
			*f = wire.Fields{}
			f.BTH.PKey, f.BTH.DestQP = q.cfg.PKey, q.attr.DestQPN
			f.BTH.Opcode, f.BTH.PSN = bth.RCAcknowledge, rp.base.Add(k)
			f.AETH.Syndrome, f.AETH.MSN = ReasonRKeyViolation.Syndrome(), r.msn
			n, _, err = wire.BuildHeader(buf, f, 0)
			q.enterError()
			return n, err == nil, true
		}
	}
	// Count true resends: against the resource's high-water mark while it
	// still holds this READ, else by the reply's own kind.
	if rp.res >= 0 && r.res[rp.res].gen == rp.gen {
		res := &r.res[rp.res]
		if k < res.sent {
			q.counters.Add(CounterReplayedPkts, 1)
		} else {
			res.sent = k + 1
		}
	} else if rp.replay {
		q.counters.Add(CounterReplayedPkts, 1)
	}
	rp.next++
	return n, true, rp.next >= rp.end
}

// readResponseOpcode is the READ response opcode at pos, from the opcode
// table (rxe read_reply's choice of RDMA_READ_RESPONSE_*).
func readResponseOpcode(pos bth.Position) bth.Opcode {
	o, _ := bth.RCRDMAReadResponseOnly.AtPosition(pos, false) // every position exists
	return o
}
