// Package reth encodes and decodes the RDMA Extended Transport Header
// (IBA 9.3.3): the remote virtual address, remote key and DMA length carried
// by RDMA WRITE FIRST/ONLY, RDMA READ REQUEST, FLUSH and ATOMIC WRITE.
//
// A Header is a zero-copy view over a packet buffer, following the gVisor
// netstack header pattern: Parse checks the length once, accessors never
// panic afterwards.
package reth
