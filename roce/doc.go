// Package roce is the RoCEv2 encapsulation layer: Ethernet / IPv4 / IPv6 /
// UDP port 4791 around the InfiniBand transport headers, and the ICRC that
// covers them (IBA 7.8.1, RoCEv2 Annex A17.4).
//
// Parsing fills a reusable Packet of views into the caller's buffer without
// allocating; building writes into a caller-supplied buffer sized from the
// opcode table (headers, payload, pad, ICRC). Packets are built as rxe sends
// them: UDP checksum 0, IPv4 DF set.
//
// Buffer ownership: every view in a Packet aliases the buffer passed to the
// Parse method; the caller owns that buffer and must not reuse it while the
// Packet is in use.
package roce
