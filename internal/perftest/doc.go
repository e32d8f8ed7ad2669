// Package perftest speaks the out-of-band TCP exchange of perftest 4.5
// (linux-rdma/perftest v4.5-0.17, whose internal VERSION is "6.06"): the
// messages ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw and the _lat
// tools trade on TCP port [Port] (18515) before, between and after their RDMA
// traffic, and the order each tool trades them in.
//
// It knows nothing about RDMA itself: package internal/perf runs the
// traffic and calls a Session at the points where perftest synchronises.
// The formats and sequences were read from perftest's sources
// (src/perftest_communication.c, the tools' main functions) and checked
// against captures of the real tools between two rdma_rxe guests
// (doc/oob.md §3; testdata in this package).
//
// # Rules of the exchange
//
// Every message is one write of a fixed size, read by perftest with one
// read that must return exactly that size. The client (the side given the
// server's name) always writes first and then reads; the server reads
// first and then writes. Text messages include their terminating NUL.
package perftest
