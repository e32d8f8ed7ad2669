// Package aeth encodes and decodes the ACK Extended Transport Header
// (IBA 9.3.5) and its syndrome (IBA 9.7.5.1): ACK with credit count, RNR NAK
// with timer code, and the NAK codes 0x60–0x64. It also holds the IBTA RNR
// timer table and the credit count encoding of end-to-end flow control
// (IBA 9.7.7.2: Credits, CreditCode).
package aeth
