// Package wire parses and builds InfiniBand transport packets — a BTH, the
// extension headers its opcode calls for, payload, pad and ICRC — the part of
// a RoCEv2 datagram that a UDP socket delivers.
//
// Packet.Parse takes such a datagram apart into views of its headers
// without copying or allocating; Build (or BuildHeader, which leaves the
// payload for the caller to fill in place) writes one from Fields into a
// buffer of TransportLen bytes. The opcode table of package bth decides which
// headers an opcode carries. Neither computes the ICRC: it covers the IP and
// UDP headers too, so package rocev2, which adds those, seals and checks it.
//
// Package qp builds its requests and responses with it and consumes parsed
// packets, and rocev2 wraps them: keeping wire separate lets the transport
// engine be built and tested without the encapsulation layer, and keeps the
// dependency graph acyclic (no package imports upward). A program doing RDMA
// imports roce and never sees this package; decoders and tests use it.
package wire
