package qp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// The unreliable transports: UC (IBA 9.8) and UD (IBA 9.8 and 11.4's
// datagram verbs). Both send without ACKs and complete a send WR once its
// last packet is built (rxe_xmit_packet marks a UC/UD WQE done when its
// END packet leaves); their responder never NAKs and never retransmits.
// What an RC responder answers with a NAK and ERR (class B/C) is a silent
// drop here, counted (class D, IBA 9.9.3; rxe_responder's per-type arms of
// RESPST_ERR_*). They share the RC engine's requester and responder: only
// the checks below differ.

// GRHLen is the size of the Global Route Header area at the start of every
// UD receive buffer (IBA 11.4, Post Receive; ibv_post_recv on UD QPs): the message
// starts GRHLen bytes in, and a receive WR must have room for both.
const GRHLen = 40

// IPInfo is what the device knows of the IP header a packet arrived in.
// A UD QP rebuilds that header into the GRH area of the receive buffer, as
// rxe copies the received one (rxe_resp.c execute: for IPv4 the 20-byte
// header goes in bytes 20–39 of the 40, the first 20 zero; for IPv6 the
// 40-byte IPv6 header). A UDP socket does not hand over the header, so
// the device fills in what it has and the QP synthesizes the rest (see
// putGRH).
type IPInfo struct {
	// Src and Dst are the source and destination addresses. An IPv4
	// address (or IPv4-mapped IPv6 address) gives an IPv4 header.
	Src, Dst netip.Addr
	// TOS is the IPv4 TOS byte / IPv6 traffic class (DSCP << 2 | ECN).
	TOS uint8
	// TTL is the IPv4 TTL / IPv6 hop limit.
	TTL uint8
	// ID is the IPv4 identification (the one the ICRC was verified with).
	ID uint16
	// FlowLabel is the IPv6 flow label (20 bits).
	FlowLabel uint32
}

// putGRH writes the 40-byte GRH area for a packet whose transport part
// (BTH to ICRC) is transportLen bytes long, as rxe would have received it.
// IPv4: 20 zero bytes, then the header: version 4 and IHL 5 (0x45), TOS,
// total length (20 + 8 + transportLen), ID, flags DF (rxe and Linux send
// RoCEv2 with DF, no fragments), TTL, protocol 17 (UDP), the header
// checksum (RFC 791) computed over those fields, source and destination.
// IPv6: version 6, traffic class, flow label, payload length (8 +
// transportLen), next header 17, hop limit, source and destination.
func (ip *IPInfo) putGRH(g *[GRHLen]byte, transportLen int) {
	*g = [GRHLen]byte{}
	src, dst := ip.Src.Unmap(), ip.Dst.Unmap()
	if src.Is4() && dst.Is4() {
		h := g[20:]
		h[0] = 0x45
		h[1] = ip.TOS
		binary.BigEndian.PutUint16(h[2:], uint16(20+8+transportLen))
		binary.BigEndian.PutUint16(h[4:], ip.ID)
		binary.BigEndian.PutUint16(h[6:], 0x4000) // DF
		h[8] = ip.TTL
		h[9] = 17
		s, d := src.As4(), dst.As4()
		copy(h[12:16], s[:])
		copy(h[16:20], d[:])
		binary.BigEndian.PutUint16(h[10:], rocev2.IPv4Checksum(h))
		return
	}
	binary.BigEndian.PutUint32(g[0:], 6<<28|uint32(ip.TOS)<<20|ip.FlowLabel&0xfffff)
	binary.BigEndian.PutUint16(g[4:], uint16(8+transportLen))
	g[6] = 17
	g[7] = ip.TTL
	s, d := ip.Src.As16(), ip.Dst.As16()
	copy(g[8:24], s[:])
	copy(g[24:40], d[:])
}

// HandlePacketIP is HandlePacket with the IP header the packet arrived in,
// which a UD QP needs for the GRH of the receive buffer and for the source
// address of the completion. ip may be nil (the GRH area is then zero, the
// completion without a source address); the QP copies what it needs and
// keeps nothing.
func (q *QP) HandlePacketIP(now time.Time, p *wire.Packet, ip *IPInfo) {
	if q.cfg.Type == TypeUD {
		if ip != nil {
			q.resp.rxIP, q.resp.rxIPSet = *ip, true
		}
		defer q.clearRxIP()
	}
	q.HandlePacket(now, p)
}

func (q *QP) clearRxIP() { q.resp.rxIPSet = false }

// transport returns the BTH transport class of the QP's opcodes.
func (q *QP) transport() bth.Transport {
	switch q.cfg.Type {
	case TypeUC:
		return bth.TransportUC
	case TypeUD:
		return bth.TransportUD
	}
	return bth.TransportRC
}

// checkOpType refuses a WR its QP type does not have (IBA 9.8 for UC: no
// READ or atomics; 11.4 for UD: SEND only; rdma-core's rxe provider lists
// the same per type, and ibv_post_send returns EINVAL). The error matches
// both ErrUnsupportedOp and ErrInvalidArg.
func (q *QP) checkOpType(wr *SendWR) error {
	op := wr.Opcode
	ok := true
	switch q.cfg.Type {
	case TypeUC:
		// UC has no SEND with invalidate: no UC opcode carries an IETH.
		ok = !op.isReadOrAtomic() && op != WRSendWithInv
	case TypeUD:
		ok = op == WRSend || op == WRSendWithImm
		if ok && (!wr.UD.AH.Remote.IsValid() || !wr.UD.RemoteQPN.Valid()) {
			return fmt.Errorf("%w: UD send without a valid address handle or remote QPN", ErrInvalidArg)
		}
	}
	if !ok {
		return fmt.Errorf("%w: %v on a %v QP (%w)", ErrUnsupportedOp, op, q.cfg.Type, ErrInvalidArg)
	}
	return nil
}

// datagramQKey is the Q_Key a UD send puts in its DETH: the WR's, or the
// QP's own when the WR's is a controlled Q_Key (IBA 10.2.5).
func (q *QP) datagramQKey(d *UDDest) uint32 {
	if d.RemoteQKey&ControlledQKey != 0 {
		return q.attr.QKey
	}
	return d.RemoteQKey
}

// PacketAH returns the address handle of the packet NextPacket returned
// last, when it was a UD datagram: its WR's UD.AH, which says where the
// device sends it. It returns false for the packets of connected QPs,
// which go to the QP's address vector.
func (q *QP) PacketAH() (AddressVector, bool) {
	if q.cfg.Type != TypeUD || !q.req.ahSet {
		return AddressVector{}, false
	}
	return q.req.ah, true
}

// completeUnreliable completes a UC/UD WQE whose last packet was just built:
// without ACKs there is nothing else to wait for (rxe_xmit_packet marks it
// done when its END packet is sent).
func (q *QP) completeUnreliable(w *sendWQE) {
	q.comp.psn = q.req.psn
	if q.sq.len() > 0 && q.sq.at(0) == w {
		q.completeSend(w, cq.StatusSuccess)
	}
}

// checkQKey is the UD half of rxe's check_keys: a request whose DETH Q_Key
// is not the QP's is dropped silently and counted (IBA 10.2.5).
// QP1 (GSI), which rxe checks against IB_QP1_QKEY 0x80010000, is made
// ready with that Q_Key by the device's connection manager (roce/cm.go),
// so the same check applies to it.
func (q *QP) checkQKey(p *wire.Packet) bool {
	if p.DETH == nil || p.DETH.QKey() != q.attr.QKey {
		q.counters.Add(CounterQKeyViolation, 1)
		return false
	}
	return true
}

// ucCheckPSN is the UC half of check_psn (IBA 9.8; rxe check_psn for
// IB_QPT_UC): a packet at the expected PSN continues the message; after a
// gap — or an earlier error that dropped the message — packets are dropped
// until a FIRST or ONLY, which starts afresh at its own PSN. The receive
// WQE a dropped SEND was filling is not completed: the next SEND reuses it
// from its start (rxe do_class_d1e_error resets it the same way). It
// returns false when p is dropped.
//
// rxe differs in one case: a FIRST or ONLY that arrives while an aborted
// message is still in progress is dropped as well (check_op_seq →
// do_class_d1e_error), so rxe resynchronises one message later. IBA 9.8
// restarts at that packet, as done here.
func (q *QP) ucCheckPSN(p *wire.Packet, psn bth.PSN) bool {
	r := &q.resp
	op := p.Opcode()
	if op.IsFirst() || op.IsOnly() {
		if psn != r.epsn && !r.dropMsg { // a gap not seen yet: count it once
			q.counters.Add(CounterOutOfSeqRequest, 1)
		}
		if r.inMessage {
			q.count(ReasonOpSequence) // the message in progress lost its LAST
			q.ucAbort()
		}
		r.dropMsg = false
		r.epsn = psn
		return true
	}
	if !r.dropMsg && psn == r.epsn {
		return true
	}
	if !r.dropMsg && psn != r.epsn {
		q.counters.Add(CounterOutOfSeqRequest, 1)
	}
	q.counters.Add(CounterUCDroppedPkts, 1)
	q.ucAbort()
	return false
}

// ucAbort drops the rest of the UC message in progress: nothing of it is
// completed, and the receive WQE it was filling stays at the head of the
// receive queue, for the next SEND to fill from its start.
func (q *QP) ucAbort() {
	r := &q.resp
	r.dropMsg = true
	r.inMessage = false
	r.recvActive = false
	r.recvOff = 0
	r.wRegion = nil
}

// unreliableError is requestError on a UC or UD QP (rxe_responder's
// per-type arms): no NAK. A bad receive SGL is still a class A error
// (LOC_QP_OP_ERR, QP to ERR). A message longer than its receive WQE
// completes that WQE with LOC_LEN_ERR, as hardware reports it and
// ReasonRecvLength says (rxe drops it as class D instead), and leaves the
// QP in its state. Every other error drops the packet and, on UC, the rest
// of its message (class D).
func (q *QP) unreliableError(why Reason, psn bth.PSN) {
	r := &q.resp
	if why == ReasonRecvSGE {
		q.fatalRequestError(why, psn, false)
		return
	}
	q.count(why)
	if why == ReasonRecvLength {
		if r.recvActive && q.rq.len() > 0 {
			wqe := q.rq.at(0)
			q.push(q.cfg.RecvCQ, cq.Completion{WRID: wqe.wrid, Status: why.Status(), Opcode: cq.OpRecv,
				VendorErr: why.VendorErr()})
			q.rq.pop()
			r.recvActive = false
		}
	}
	if q.cfg.Type == TypeUC {
		q.ucAbort()
	} else {
		r.recvActive = false
		r.recvOff = 0
	}
}

// placeGRH writes the GRH area at the start of the receive WQE of a UD
// SEND whose payload is pl bytes, and reports whether the WQE has room for
// both (if not, the WQE completes with LOC_LEN_ERR).
func (q *QP) placeGRH(wqe *recvWQE, p *wire.Packet, psn bth.PSN) bool {
	r := &q.resp
	if wqe.length < GRHLen+uint64(len(p.Payload)) {
		q.requestError(ReasonRecvLength, psn)
		return false
	}
	var g [GRHLen]byte
	if r.rxIPSet {
		r.rxIP.putGRH(&g, len(p.Transport))
	}
	if err := q.scatter(g[:], wqe.sgl, 0); err != nil {
		q.requestError(ReasonRecvSGE, psn)
		return false
	}
	r.recvOff = GRHLen
	return true
}

// udCompletion adds what a UD receive completion reports (IBA 11.4):
// the source QP (DETH) and the GRH flag — the source address is in the GRH
// area the buffer starts with, as for ibv_wc (GRHSource reads it).
func (q *QP) udCompletion(wc *cq.Completion, p *wire.Packet) {
	wc.SrcQP = p.DETH.SrcQP()
	wc.Flags |= cq.FlagGRH
}

// GRHSource returns the source address of the GRH area grh (the first
// GRHLen bytes of a UD receive buffer), telling the two RoCEv2 forms apart
// as rdma-core's get_grh_header_version does: an IPv6 header (version 6 in
// byte 0), or an IPv4 header in bytes 20–39 (0x45 and a valid checksum).
// It returns false for a GRH area that holds neither (a zero area: the
// driver did not know the IP header).
func GRHSource(grh []byte) (netip.Addr, bool) {
	if len(grh) < GRHLen {
		return netip.Addr{}, false
	}
	if h := grh[20:40]; h[0] == 0x45 && rocev2.IPv4Checksum(h) == 0 {
		return netip.AddrFrom4([4]byte(h[12:16])), true
	}
	if grh[0]>>4 == 6 {
		return netip.AddrFrom16([16]byte(grh[8:24])), true
	}
	return netip.Addr{}, false
}
