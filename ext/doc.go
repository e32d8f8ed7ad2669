// Package ext holds the small extension transport headers of IBA chapter 9:
// ImmDt, IETH, DETH, AtomicETH, AtomicAckETH and FETH.
//
// They share one package because each is a handful of lines and has no
// behaviour beyond its accessors; the two headers with semantics of their own
// (RETH with its DMA length rules, AETH with its syndrome and RNR timer table)
// have the packages reth and aeth, as the design card names them. Each header
// is a zero-copy view over a packet buffer, like bth.Header: ParseDETH and
// its siblings check the length once, and the accessors and setters work in
// place; the headers with several fields have a Fields struct for Encode.
//
// Programs doing RDMA import roce and never see this package: the transport
// engine (package qp) and the decoders (packages wire, rocev2, capture) use
// it.
package ext
