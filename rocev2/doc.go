// Package rocev2 is the RoCEv2 encapsulation codec: Ethernet (up to two VLAN
// tags) / IPv4 / IPv6 / UDP port 4791 around the InfiniBand transport packet
// of package wire, and the ICRC that covers them (IBA 7.8.1, RoCEv2 Annex
// A17.4), including the recovery of an IPv4 ID that a UDP socket does not
// show (RecoverIPv4ID).
//
// It is a leaf: it imports only the header packages (bth, wire and the
// extension headers), so the raw link bindings and the capture decoder use it
// without linking the RC engine or the Device (package roce).
//
// Parsing fills a reusable Packet of views into the caller's buffer without
// allocating; building writes into a caller-supplied buffer sized from the
// opcode table (headers, payload, pad, ICRC). Packets are built as rxe sends
// them: UDP checksum 0, IPv4 DF set.
//
// Buffer ownership: every view in a Packet aliases the buffer passed to the
// Parse method; the caller owns that buffer and must not reuse it while the
// Packet is in use.
package rocev2
