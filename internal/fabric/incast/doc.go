// Package incast runs an incast on a fabric (package internal/fabric):
// goroce devices in several hosts' namespaces stream RDMA WRITEs into one
// receiver host through the fabric, with DCQCN on or off, and the run
// reports what the receiver's notification point sent (CNPs), what the
// senders' reaction points did (rate cuts, the lowest rate) and what the
// transport had to repair (Go-Back-N retransmissions), beside the
// fabric's own counters (CE marks, tbf drops). It is the demonstration of
// doc/fabric.md "Incast": through one oversubscribed, marked link DCQCN
// keeps the queue under the buffer, where without it the link drops and
// the senders go back N.
//
// All devices run in this process, each on a UDP link opened inside its
// host's namespace, so the traffic crosses the fabric's veths, tbfs and
// markers as separate hosts' would.
package incast
