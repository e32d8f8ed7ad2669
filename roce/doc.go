// Package roce is the RDMA device: a Device over a link.Link (UDP by
// default, or AF_PACKET / AF_XDP) that owns protection domains, memory
// regions, completion queues and queue pairs, demultiplexes received RoCEv2
// packets to their QP by destination QPN, checks and seals the ICRC, and runs
// the QPs' timers and DCQCN congestion control.
//
// The wire format itself (Ethernet / IPv4 / IPv6 / UDP 4791 encapsulation,
// ICRC, IPv4-ID recovery) is package rocev2; the IB transport engine is
// package qp.
package roce
