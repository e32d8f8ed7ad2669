// Package roce is a RoCEv2 device in user space: the verbs objects of an
// RDMA NIC — protection domains, memory regions and windows, completion
// queues, shared receive queues and queue pairs (RC, UC, UD) — speaking
// RoCEv2 (InfiniBand transport over UDP port 4791) through a [link.Link].
//
// # The Device
//
// [Open] starts a [Device] on a link: link/udp (the default, an
// unprivileged kernel UDP socket that Open makes from Config.Addr when
// Config.Link is nil), link/afpacket or link/afxdp (raw Ethernet frames),
// or link/mem (an in-memory network for tests). A program imports roce
// alone: the types, constants and errors of the packages underneath (qp,
// mr, cq, bth, cm) have roce names here ([SendWR], [MR], [Completion],
// [QPState], [QPN], [ErrQueueFull], …), aliases that pass to and from those
// packages without conversion. The verbs sequence:
//
//   - [Device.RegisterMR] registers the memory the peer may reach with its
//     access flags ([Device.RegisterMRConfig] with more options); a nil PD
//     is the device's default, [Device.PD]; [Device.AllocPD] and
//     [Device.CreateCQ] make more when needed;
//   - [Device.CreateQP] creates a queue pair in RESET with a random QPN and
//     initial PSN; a zero [QPConfig] gives it the default PD and a CQ of
//     its own ([QP.SendCQ], [QP.RecvCQ]);
//   - the two sides exchange [Info] (address, QPN, PSN, optionally an rkey
//     and address) out of band, as perftest and ibv_rc_pingpong do over
//     TCP, and [QP.Connect] moves each QP RESET → INIT → RTR → RTS towards
//     the other ([ConnectOptions] default to rdma-core's test values);
//     [QP.Modify] is the raw ibv_modify_qp. A UC QP connects the same way;
//     a UD QP is made ready with [QP.Ready], names its destination in each
//     send WR ([AH]) and receives into buffers that start with the
//     [GRHLen]-byte GRH area;
//   - [QP.PostRecv] and [QP.PostSend] post work requests (SEND, WRITE,
//     READ, atomics, with or without immediate data; SGEs from [MR.SGE]),
//     [QP.PostSendBatch] and [QP.PostRecvBatch] a list in one call
//     (ibv_post_send's linked list and bad_wr); completions arrive on the
//     CQs ([CQ.Poll], [CQ.Wait]); a full work queue is [ErrQueueFull];
//   - [Device.CreateSRQ] makes a shared receive queue for QPs created with
//     [QPConfig].SRQ; its limit event, like every asynchronous event,
//     arrives on [Device.Events];
//   - [QP.Destroy] and [Device.Close] flush what is outstanding with
//     WR_FLUSH_ERR; after Close every verb returns [ErrClosed] and a
//     blocked Wait on the device's CQs returns.
//
// A send WR's SGE bytes are read when each packet is built and again on
// every retransmission: leave the buffer untouched until its completion.
// The package Example is a whole RDMA WRITE between two devices;
// examples/ in the repository has WRITE, READ, SEND/RECV, atomics and CM
// programs over UDP.
//
// # Connections (RDMA CM)
//
// Two programs can also connect as rdma_cm programs do, with the
// InfiniBand Communication Manager over QP1: [Device.Listen] on a port of
// rdma_cm's TCP port space returns a [Listener] whose Accept gives a
// [Conn], an RC QP in RTS with the peer's private data; [Device.Dial]
// connects; [Conn.Close] disconnects (DREQ/DREP); a refusal is a
// [RejectError]. Peers may be goroce devices or rdma_cm programs on real or
// soft RoCE devices (ucmatose, rping, rdma_server and rdma_client). UD
// services use the UDP port space and service ID resolution (SIDR):
// [Device.ListenUD] and [Device.DialUD] give a [UDConn], a UD QP with
// Q_Key [UDPQKey] and the [AH] of its peer (udaddy); a refusal is a
// [SIDRError]. The first Listen or Dial makes QP1 and a goroutine that
// runs the connection manager; see ExampleDevice_Listen and
// ExampleDevice_ListenUD.
//
// # Inside
//
// The Device owns its link and closes it on Close. One receive goroutine
// reads batches from the link, parses each packet's headers once, checks
// the destination QP, the peer's address (rxe's check_addr) and the ICRC,
// and hands the packet to the QP's transport engine (package qp). QPs are
// spread over shards by QPN ([Config].Shards), each with its own engine
// lock and one timer goroutine (retransmissions, RNR waits, pacing). Verbs
// may be called from any goroutine: they take their QP's engine lock, and
// the link's Send is made after it is released, by the caller or, while
// the QP waits for a reply, by the receive goroutine's next transmit pass,
// which sends what many WRs and QPs posted in one batch. doc/engine.md in
// the repository has the locks, the shards and the send path.
//
// Where the link's kernel picks the IPv4 ID the ICRC covers (a UDP
// socket), the Device recovers it on receive and plans it on send, and
// accepts a recovered ID only near the sender's counter
// ([Config].ICRCIDRecovery; doc/icrc-id.md). Each QP runs DCQCN congestion
// control ([CCConfig], package cc) and marks its packets ECT(0) unless
// configured otherwise.
//
// # Counters
//
// [Device.Stats] and [QP.Counters] count what was sent, received, retried
// and dropped, with rxe's counter names; [Device.Snapshot] copies them all
// at once in plain values, which package roce/metrics exports to
// Prometheus, expvar and `rdma statistic` lines.
//
// # Frames
//
// The wire format — Ethernet / IPv4 / IPv6 / UDP 4791 encapsulation, the
// ICRC (IBA 7.8.1, RoCEv2 Annex A17.4) and IPv4-ID recovery — is the leaf
// package rocev2, which the raw bindings and the capture decoder use
// without linking the Device.
package roce
