// Package roce is a RoCEv2 device in user space: the verbs objects of an
// RDMA NIC — protection domains, memory regions, completion queues and
// queue pairs (RC, UC, UD) — speaking RoCEv2 (InfiniBand transport
// over UDP port 4791) through a [link.Link].
//
// # The Device
//
// [Open] starts a [Device] on a link: link/udp (the default, unprivileged
// kernel UDP socket, which Open makes itself from Config.Addr when
// Config.Link is nil), link/afpacket or link/afxdp (raw Ethernet frames),
// or link/mem (an in-memory network for tests). A program imports roce
// alone — the verbs types of qp, mr and cq are aliased here (SendWR, SGE,
// Completion, Status, access flags, …) — and follows the verbs sequence:
//
//   - [Device.RegisterMR] makes the memory the peer may reach, with its
//     access flags (a nil PD is the device's default, [Device.PD]);
//     [Device.AllocPD] and [Device.CreateCQ] make more when needed;
//   - [Device.CreateQP] creates an RC queue pair in RESET with a random QPN
//     and a random initial PSN; a zero [QPConfig] uses the default PD and
//     a CQ of the QP's own ([QP.SendCQ], [QP.RecvCQ]);
//   - the two sides exchange [Info] (address, QPN, PSN, and optionally an
//     rkey and address) out of band, as perftest and ibv_rc_pingpong do
//     over TCP, and [QP.Connect] moves each QP RESET → INIT → RTR → RTS
//     towards the other ([ConnectOptions] default to rdma-core's test
//     values); [QP.Modify] is the raw ibv_modify_qp. A UC QP
//     ([QPConfig].Type UC) connects the same way; a UD QP is made ready
//     with [QP.Ready] and names its destination in each send WR ([AH]);
//     its receive buffers start with the 40-byte GRH area;
//   - [QP.PostRecv] and [QP.PostSend] post work requests (SEND, WRITE,
//     READ, atomics, with or without immediate data, SGEs made by
//     [MR.SGE]), [QP.PostSendBatch]
//     and [QP.PostRecvBatch] a list of them in one call (ibv_post_send's
//     linked list, with its bad_wr semantics); their completions arrive on
//     the CQs ([CQ.Poll], [CQ.Wait]);
//   - [Device.CreateSRQ] makes a shared receive queue that QPs created
//     with [QPConfig].SRQ take their receive WQEs from ([SRQ.PostRecv]
//     instead of QP.PostRecv); its limit event, like any asynchronous
//     event, arrives on [Device.Events];
//   - [QP.Destroy] and [Device.Close] flush what is outstanding with
//     WR_FLUSH_ERR; after Close every verb returns [ErrClosed] and a
//     blocked Wait on the device's CQs returns.
//
// The package Example is a whole RDMA WRITE between two devices in this
// shape; examples/ in the repository has WRITE, READ, SEND/RECV and atomics
// over UDP.
//
// A send WR's SGE bytes are read when each packet is built and again on
// every retransmission: leave the buffer untouched until its completion.
//
// # Connections (RDMA CM)
//
// Instead of exchanging Info out of band, two programs can connect as
// rdma_cm programs do, with the InfiniBand Communication Manager (package
// [cm]) over QP1: [Device.Listen] on a port of rdma_cm's TCP port space
// returns a [Listener] whose [Listener.Accept] gives a [Conn], an RC QP
// in RTS with the peer's private data and address; [Device.Dial] connects
// one; [Conn.Close] disconnects (DREQ/DREP) and a refusal is a
// [RejectError]. Peers may be other goroce devices or rdma_cm programs on
// real or soft RoCE devices (ucmatose, rping, rdma_server and rdma_client,
// both ways). The first Listen or Dial makes QP1, a UD QP with Q_Key
// 0x80010000, and a goroutine that runs the connection manager; see
// ExampleDevice_Listen and examples/cm.
//
// UD services use rdma_cm's UDP port space and service ID resolution
// (SIDR) instead: [Device.ListenUD] returns a [UDListener] that answers
// each SIDR_REQ with a new UD QP, ready with Q_Key [UDPQKey], and
// [UDListener.Accept] gives it as a [UDConn]; [Device.DialUD] resolves a
// port to an [AH] for the server's QP ([UDConn.AH]), and a refusal is a
// [SIDRError] (udaddy, both ways); see ExampleDevice_ListenUD.
//
// # The link binding
//
// The Device owns its link and closes it on Close. A receive goroutine
// takes batches of datagrams from the link, verifies the ICRC, matches
// the destination QP and the peer's address (rxe's check_addr), and hands
// each packet to the QP's transport engine (package [qp]); replies are
// sent from the same goroutine. The QPs are spread over shards
// ([Config.Shards], by QPN), each with its own engine lock and a goroutine
// that runs its one timer (retransmissions, RNR waits, pacing). Verbs
// calls may come from any goroutine: they take their QP's engine lock and
// transmit from the caller's goroutine, the link's Send made after the
// lock is released (doc/engine.md) — unless the QP is waiting for a reply to what it sent (with
// a timer armed), in which case what was posted meanwhile leaves with the
// receive goroutine's next transmit pass, together: one link Send, GSO
// runs of equal-length packets across WRs and QPs (the message-rate
// path). Where the link's kernel picks the IPv4 ID that the ICRC
// covers (a UDP socket), the Device recovers it on receive and plans it on
// send ([link.IPIDPlanner]); a recovered ID is accepted only inside a
// window around the sender's ID counter ([Config.ICRCIDRecovery];
// doc/icrc-id.md has the residual strength of the check on each
// binding). Each QP runs DCQCN congestion control ([CCConfig], package
// [cc]) and marks its packets ECT(0) unless configured otherwise. [Device.Stats] and [QP.Counters] count what was
// sent, received, retried and dropped, with rxe's counter names.
//
// # Frames
//
// The wire format itself — Ethernet / IPv4 / IPv6 / UDP 4791 encapsulation,
// the ICRC (IBA 7.8.1, RoCEv2 Annex A17.4) and IPv4-ID recovery — is the
// leaf package rocev2, which the raw bindings and the capture decoder use
// without linking the Device.
package roce
