// Package qp is the transport engine of one queue pair — reliable
// connected (RC), and the unreliable UC and UD services — written sans-IO:
// it holds the protocol state of IBA Vol. 1 ch. 9 and nothing else. It never blocks, sleeps, starts goroutines, reads a
// clock or touches a socket; its driver (package roce's Device, or a test
// harness) gives it everything from outside:
//
//   - work requests: [QP.PostSend] and [QP.PostRecv], with [SendWR],
//     [RecvWR] and their [SGE] lists pointing into [mr] regions;
//   - received packets: [QP.HandlePacket], one parsed transport packet
//     (BTH to ICRC) whose ICRC, destination QPN and source address the
//     driver has already checked;
//   - packets to send: [QP.NextPacket] writes the next one into a buffer
//     of [MaxPacketLen] bytes, the ICRC left zero for the encapsulation
//     layer, until it returns false;
//   - time: [QP.Deadline] says when the next timer is due (the retransmit
//     timer or an RNR wait), and [QP.OnTimeout] runs what is due at the
//     time given. Every method takes "now" from the caller, so tests run
//     the engine in virtual time.
//
// UC and UD QPs (datagram.go) share the RC machinery without its
// reliability: no ACKs, no retransmission; a send WR completes once its
// last packet is built. UC resynchronises on the next FIRST or ONLY after a
// PSN gap (IBA 9.8); UD sends one-packet messages to the address handle
// of each WR ([UDDest]) with a DETH, checks the Q_Key on receive, and puts
// the 40-byte GRH area ([GRHLen], from the [IPInfo] the driver passes to
// [QP.HandlePacketIP]) at the start of each receive buffer. The driver
// sends a UD packet to [QP.PacketAH].
//
// Completions go to the [CompletionQueue] of each queue ([cq.CQ]
// implements it); counters ([QP.Counters]) mirror rxe's hw_counters.
//
// # Inside
//
// The three roles of rxe's RC code, under one QP:
//
//   - the requester (rxe_req.c) turns send WQEs into request packets: one
//     PSN per packet, a READ reserving one per response packet; AckReq on
//     every last packet and at least every [MaxPktsPerAck]; at most
//     [MaxUnackedPSNs] outstanding and no more READ/ATOMIC than the peer's
//     max_dest_rd_atomic; Go-Back-N on a NAK or a timeout;
//   - the completer (rxe_comp.c) matches ACKs, NAKs, READ responses and
//     ATOMIC ACKs to outstanding WQEs, completes them in order, arms the
//     retransmit timer, and spends retry_cnt and rnr_retry;
//   - the responder (rxe_resp.c) checks requests in rxe's order (PSN,
//     opcode sequence, access, resources, length, rkey), executes them
//     into the [mr.Table], keeps the ring of READ/ATOMIC resources for
//     duplicates, and queues ACKs, NAKs and responses, which NextPacket
//     sends before any request.
//
// Beyond rxe, RC QPs take part in end-to-end flow control (IBA 9.7.7.2,
// flow.go): the responder reports its receive WQEs as the credit count of
// each ACK (0x1F, none, from a QP with an SRQ), and the requester starts
// no SEND or WRITE with immediate past the count of the last ACK but one
// ([CounterCreditWaits]). rxe sends 0x1F and ignores the count, so against
// rxe nothing changes.
//
// doc/rxe.md in the repository lists the rxe behaviours matched, section
// by section; doc/matrix.md the test-matrix rows that pin them.
//
// # States
//
// A QP starts in RESET ([New]). [QP.Modify] moves it along the IBA 10.3.1
// state table, as the kernel's ib_modify_qp_is_ok checks it: each
// transition lists, per QP type, the attributes ([AttrMask]) it requires
// and those it allows; a move the table does not have returns
// [ErrInvalidTransition], a missing or extra attribute [ErrInvalidAttr].
// Requests are sent in RTS (and SQD), received from RTR on. An error —
// retries exhausted, a NAK, a class C request error, a CQ overflow —
// moves the QP to ERR, which completes every outstanding work request in
// posting order with WR_FLUSH_ERR, signaled or not (IBA 10.7.3.1).
//
// # Shared receive queues
//
// A QP created with Config.SRQ takes its receive WQEs from an [SRQ]
// shared with other QPs (IBA 10.2.9) instead of a receive queue of its
// own: the responder moves the oldest WQE of the SRQ into the QP when a
// message that needs one starts (rxe get_srq_wqe), so WQEs are consumed in
// posting order across the QPs, each completes on its QP's receive CQ
// with that QP's number, and an empty SRQ is answered with RNR NAK as an
// empty receive queue is. The SRQ's armed limit raises
// [EventSRQLimitReached] once (SRQConfig.OnLimit) and disarms until
// [SRQ.Modify]. An SRQ has its own lock; see [SRQ] for who may call what.
//
// # Ownership
//
// A QP belongs to one goroutine: every method except QPN and [QP.Counters]
// (whose fields are atomic) must be called from it, or under one lock, as
// roce does with its engine lock. HandlePacket does not keep the packet or
// its buffer after it returns. The SGE bytes of a send WR are read when
// each packet is built and again on every retransmission, so the buffer
// must stay untouched until the WR's completion (inline data, SendInline,
// is copied at PostSend instead); received data is written into the
// receive WR's SGEs or the target region directly.
package qp
