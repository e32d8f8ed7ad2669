// Package afpacket is a raw RoCEv2 transport over an AF_PACKET socket: a
// memory-mapped TPACKET_V2 (or TPACKET_V3) receive ring behind an
// in-kernel classic-BPF filter, and batched sendmmsg of whole Ethernet
// frames straight to the driver (PACKET_QDISC_BYPASS). It skips the kernel
// UDP stack on both paths and needs CAP_NET_RAW.
//
// # Frames
//
// Send wraps each datagram (BTH to ICRC, as the device built and sealed
// it) in Ethernet, IPv4 or IPv6 and UDP headers written from a
// per-destination template that rocev2.Encap built: rxe's choices (UDP
// checksum 0, DF set, TTL 64), the datagram's ECN bits, and its IPID as
// the IPv4 identification — the device seals the ICRC with ID 0 and leaves
// IPID 0, so the frames carry ID 0. Recv reports the real IPv4 ID with
// IPIDKnown, so the device checks the ICRC of a foreign sender (rxe picks
// IDs) exactly instead of recovering the ID.
//
// # Receive ring and filter
//
// The socket is bound to the interface for EtherType IPv4 (or IPv6). A
// classic-BPF filter in the kernel passes only untagged, unfragmented
// frames of UDP to the link's address and port, addressed to the
// interface's MAC; the link classifies what reaches the ring again
// (rawnet.Classify) and counts what it skips by reason (Drops): frames
// that are not ours (other protocols, addresses, ports, VLAN tags),
// frames whose IP or UDP length lies (the filter reads no lengths), and
// frames longer than the ring slot or the caller's buffer. No frame is
// parsed past its length. A full ring makes the kernel drop frames; that
// is counted (Drops.RingFull), not fatal. With Config.NoFilter every IP
// frame reaches the classifier.
//
// The ring is TPACKET_V2 by default, TPACKET_V3 on request (Config.Ring).
// TPACKET_V3 packs frames into blocks and hands a block to the reader when
// it is full or when RetireTimeout (≥ 1 ms) expires: the most efficient
// receiver for a one-way stream (doc/limits.md §3), but a packet arriving
// alone waits for the timer. RoCE is request / acknowledge traffic — a
// requester stops at 128 unacknowledged packets — so that timer throttles
// it, by half its throughput and to milliseconds of latency
// (doc/limits.md §3.1).
//
// # Next hop and ARP / ND
//
// The destination MAC is the kernel's neighbour-table entry for the route's
// next hop (rtnetlink); if the kernel has none, the link sends its own ARP
// request or neighbour solicitation and waits up to ResolveTimeout on
// first contact. When the kernel does not own the link's address, the link
// answers ARP requests and neighbour solicitations for it itself, with the
// interface's MAC.
//
// # The kernel sees the frames too
//
// A packet socket receives a copy; the kernel still processes each frame.
// When the address is not configured in the namespace, the kernel drops
// the frames as not addressed to it (IPv4 forwarding off). When it is
// configured, the kernel's UDP layer finds no socket on the port and
// answers every RoCE frame with an ICMP port unreachable (rate-limited to
// icmp_msgs_per_sec). GuardAuto (the default) prevents that by binding a
// UDP socket to the address and port whose socket filter drops everything:
// the kernel then finds a socket and drops the datagram silently and
// cheaply, without ICMP and without queueing. Open fails with
// rawnet.ErrPortInUse if another socket (rxe, link/udp) owns the port
// there. GuardOff leaves it to the administrator (for example an nftables
// netdev-ingress rule dropping udp dport 4791, which also spares the
// kernel the IP and UDP work).
//
// # Goroutines and buffers
//
// Send and Recv may run concurrently (each serialized with itself). Recv
// waits in the Go netpoller, after polling the ring for Config.BusyPoll if
// set; neither allocates per packet. Send reads dgs[i].Buf only during the
// call; Recv copies each payload out of the ring into dgs[i].Buf. The link
// owns one goroutine (the ARP/ND resolver), which Close stops and joins.
package afpacket
