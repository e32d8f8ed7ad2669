// Package udp is the default, unprivileged RoCEv2 transport: one kernel UDP
// socket (IPv4 or IPv6, normally bound to port 4791) driven with batched
// sendmmsg/recvmmsg system calls, UDP GSO on send and UDP GRO on receive.
//
// # Batching, GSO and GRO
//
// Send packs consecutive datagrams of equal length (the last of a run may be
// shorter) to the same destination with the same ECN bits into one
// UDP_SEGMENT super-packet of at most 64 segments and 64 KiB. Every segment
// stays a whole RoCE packet with its own BTH and ICRC: UDP GSO only cuts the
// payload at gso_size and never touches it. If the kernel refuses a
// super-packet (EIO or EINVAL: no checksum offload on the route, IPsec, an
// old kernel), the link turns GSO off for good, counts it
// (Info.GSORefused) and sends the rest one datagram per packet.
//
// # Sending from memory regions
//
// Send takes link.Datagram's two-part form (the link is a link.Gatherer):
// a datagram whose payload stays where it lies, typically in a registered
// memory region, goes out as up to three iovecs — headers, payload, pad
// and ICRC — and the kernel gathers them as it copies into the socket
// buffer, so the payload is copied once (by the kernel) instead of twice.
// Within a super-packet the iovecs of consecutive datagrams simply follow
// one another: the kernel cuts segments by length (gso_size, the datagram
// length the run shares), not by iovec. The plan of IPv4 IDs (PlanIPID)
// reads the datagrams' full lengths, so it is made once their payloads are
// set.
//
// Recv enables UDP_GRO and splits each coalesced buffer back at the
// gso_size the kernel reports. It predicts the next buffers' gso_size and
// segment count from the last ones: for segments of 2 KiB and more it
// hands the kernel the caller's buffers cut at that size, so a coalesced
// buffer lands already split (no copy); smaller segments, and whatever
// does not fit the prediction, go to a link-owned arena (BatchSize × 64 KiB
// of anonymous memory) and are copied out, in order, by this and later
// calls (Info.GROCopied). Without GRO, recvmmsg fills the caller's buffers
// directly.
//
// RecvLend (link.Lender), which the roce device uses, copies nothing: each
// message lands whole in the arena and the datagrams are handed out as
// slices of it, valid until the next receive call. A RoCE WRITE's runs
// alternate gso_size (a 4128-byte FIRST with its RETH, then 4112-byte
// MIDDLEs), which defeats Recv's prediction and costs it a copy of every
// datagram.
//
// # IPv4 identification
//
// The ICRC covers the IPv4 ID (IBA Annex A17.4.1). Linux gives an
// unconnected DF datagram ID 0 (ip_select_ident_segs), but when it or the
// NIC cuts a GSO super-packet the k-th segment carries ID k (inet_gso_segment
// increments the ID; verified through a TUN device in TestGSOSegmentIPID).
// Link implements link.IPIDPlanner: PlanIPID writes those IDs into the
// datagrams, and Send only coalesces IPv4 datagrams whose IPID matches their
// place in the run, so without planning every IPv4 packet carries ID 0. On
// receive a UDP socket cannot see the ID: Recv reports IPIDKnown false and,
// as a guess, IPID k for the k-th segment of a coalesced (GRO) buffer, 0 for
// a datagram that came alone. A buffer that is one super-packet (loopback
// delivers them whole) or that GRO merged from one holds exactly those IDs;
// the device checks the ICRC with the guess first and otherwise recovers
// the ID from the ICRC (rocev2.RecoverIPv4ID), accepting it only inside the
// window of the peer's ID counter (roce.ICRCIDRecovery, doc/icrc-id.md).
//
// # Checksums, DF and ECN
//
// rxe sends UDP checksum 0 (rxe_net.c). Linux refuses GSO when the socket
// sends checksum 0 (udp_send_skb: EINVAL), so the default ChecksumAuto sends
// 0 (SO_NO_CHECK, UDP_NO_CHECK6_TX) on datagrams sent alone and lets the
// kernel (or the NIC) fill the checksum of GSO super-packets, switching the
// socket option between system calls only when the kind of batch changes.
// Receivers ignore it either way: the UDP checksum is masked out of the ICRC.
// IPv6 sockets set UDP_NO_CHECK6_RX, without which Linux drops zero-checksum
// IPv6 datagrams (RFC 6935/6936) such as rxe's. DF is always set
// (IP_PMTUDISC_DO, IPV6_DONTFRAG): a datagram above the path MTU fails with
// EMSGSIZE instead of being fragmented, as RoCE requires.
//
// The socket's TOS (Config.TOS) carries the default DSCP; each datagram's
// DSCP (Datagram.DSCP, when not 0) and ECN bits (Datagram.ECN) are sent as
// an IP_TOS / IPV6_TCLASS control message when the byte they make differs
// from TOS. On IPv6, a datagram's FlowLabel goes in sin6_flowinfo
// (IPV6_FLOWINFO_SEND); 0 leaves the label to the kernel. Recv reports the DSCP and ECN
// fields of every datagram from the IP_TOS / IPV6_TCLASS control message
// (IP_RECVTOS, IPV6_RECVTCLASS), and its TTL / hop limit from IP_TTL /
// IPV6_HOPLIMIT (IP_RECVTTL, IPV6_RECVHOPLIMIT): a UD receiver rebuilds the
// IP header into its GRH area from them.
//
// # Addresses
//
// A link bound to a specific address reports it as Datagram.Dst on receive
// and ignores Datagram.Src on send. A link bound to the unspecified address
// (0.0.0.0 or ::) reads the destination of each datagram from IP_PKTINFO /
// IPV6_PKTINFO and, when Datagram.Src carries an address, sends from it.
// IPv6 sockets are IPV6_V6ONLY.
//
// # Source ports
//
// Receive stays on the bound port (4791). Switches spread RoCEv2 over
// equal-cost paths by the 5-tuple, whose only per-QP part is the UDP
// source port, so Link implements link.SourcePorter: SourcePort(p) opens,
// the first time p is asked for, a send-only socket bound to the link's
// address and port p (no SO_REUSEADDR / SO_REUSEPORT; a BPF filter drops
// anything it would receive), and Send sends each run of datagrams whose
// Src port is p from that socket, with GSO and the checksum toggle per
// socket. QPs whose ports coincide share the socket. The sockets are
// bounded by Config.MaxSourcePorts (one file descriptor each; default
// DefaultMaxSourcePorts, at most a quarter of RLIMIT_NOFILE); past the
// bound, or when a port is taken by another socket, the port is mapped to
// an open socket (p modulo their number) and SourcePort returns that
// socket's port, so the caller seals its ICRC with the port the packet
// really carries; Stats().SourcePortShared counts those ports. It never
// fails. Datagrams with Src port 0, the bound port, or a port SourcePort
// was not asked for leave from the receive socket.
//
// The cost: one file descriptor per port in use (goroce perf -q 16 on
// loopback: 45 fds instead of 13, two devices × 16 send sockets), and one
// sendmmsg per run of datagrams from one socket, so a batch interleaving
// many QPs takes as many system calls as it has runs. BenchmarkSourcePorts
// (64 × 1068 B per batch, 2 shared cores, noisy): about 26 µs from the
// receive socket, 35 µs from one send socket, 45 µs over 4, 125 µs over 16
// (4 datagrams per GSO run).
//
// # Buffers and goroutines
//
// Send reads dgs[i].Buf only during the call. Recv writes into dgs[i].Buf
// (resliced within its capacity); a datagram longer than that capacity is
// dropped and counted in Stats().RecvDropped. Send and Recv may run
// concurrently; concurrent calls of the same method are serialized. Both
// block in the Go netpoller (no spinning goroutine), and Close unblocks
// them. Neither allocates per datagram. The link starts no goroutine.
package udp
