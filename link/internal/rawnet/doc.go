// Package rawnet holds what the raw RoCEv2 bindings (link/afpacket and
// link/afxdp) share: a small rtnetlink client (interfaces, addresses,
// routes, neighbours), the receive classifier that decides whether a frame
// is a RoCEv2 datagram for the link's address, the Ethernet/IP/UDP header
// writer built on rocev2.Encap and its per-destination cache (Templates),
// next-hop MAC resolution with its own ARP / neighbour-solicitation
// fallback and responder, and the guard socket that keeps the kernel from
// answering RoCE frames with ICMP port unreachable.
//
// Every socket is opened by the constructor, in the network namespace of
// the calling thread; nothing opens a socket later, so a caller may enter a
// namespace (runtime.LockOSThread + setns), construct, and leave.
package rawnet
