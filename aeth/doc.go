// Package aeth encodes and decodes the ACK Extended Transport Header
// (IBA 9.3.5) and its syndrome (IBA 9.7.5.1): ACK with credit count, RNR NAK
// with timer code, and the NAK codes 0x60–0x64. It also holds the IBTA RNR
// timer table and the credit count encoding of end-to-end flow control
// (IBA 9.7.7.2: Credits, CreditCode).
//
// Parse a received AETH with Parse and read its Syndrome: Kind tells ACK,
// RNR NAK and NAK apart, Credit, Timer and Value give the five low bits'
// meaning, and RNRDelay turns an RNR timer code into the wait it stands for.
// Build one with ACK, RNR or a NAK constant and Header.Encode. A Header is a
// zero-copy view over the packet buffer, as in every header package.
//
// Programs doing RDMA import roce and never see this package: the transport
// engine (package qp) and the decoders (packages wire, rocev2, capture) use
// it.
package aeth
