// Package wire parses and builds InfiniBand transport packets — a BTH, the
// extension headers its opcode calls for, payload, pad and ICRC — the part of
// a RoCEv2 datagram that a UDP socket delivers.
//
// It sits below both package qp (which builds requests and responses and
// consumes parsed packets) and package roce (which adds the IP/UDP
// encapsulation and the ICRC, which covers them). Keeping it separate lets
// the transport engine be built and tested without the encapsulation layer
// and keeps the dependency graph acyclic (no package imports upward).
package wire
