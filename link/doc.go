// Package link is the leaf a device sends and receives RoCEv2 datagrams
// through: the Datagram type (a UDP payload — BTH to ICRC — with its
// addresses, ECN bits and IPv4 ID) and the Link interface of four methods,
// Send, Recv, LocalAddr and Close.
//
// The transports live beside it: link/udp (a kernel UDP socket, the default
// and unprivileged), link/mem (an in-memory network, for tests), and the raw
// bindings link/afpacket and link/afxdp (Ethernet frames, root). Most
// programs never name a Link: roce.Open makes a link/udp one from
// roce.Config.Addr. To run a device over another, pass it as
// roce.Config.Link; the device owns it from then on and closes it.
//
// A transport may do more than the four methods, each an optional interface
// that the device discovers with a type assertion: send a packet's payload
// from where it lies (Gatherer), choose the UDP source port per datagram
// (SourcePorter), plan the IPv4 ID the kernel will give (IPIDPlanner), lend
// its receive buffers (Lender), run its own receive loop (Pumper), grow its
// socket buffer (RcvBufGrower) and count what it dropped (StatsLink). A
// wrapper (link/impair) offers what it can honour of the link it wraps,
// and nothing more: a device falls back to the four methods for the rest.
package link
