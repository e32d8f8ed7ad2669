// Package reth encodes and decodes the RDMA Extended Transport Header
// (IBA 9.3.3): the remote virtual address, remote key and DMA length carried
// by RDMA WRITE FIRST/ONLY, RDMA READ REQUEST, FLUSH and ATOMIC WRITE.
//
// A Header is a zero-copy view over a packet buffer, following the gVisor
// netstack header pattern: Parse checks the length once, accessors (VA,
// RKey, DMALength) never panic afterwards, and Header.Encode writes one from
// Fields.
//
// Programs doing RDMA import roce and never see this package: the transport
// engine (package qp) and the decoders (packages wire, rocev2, capture) use
// it.
package reth
