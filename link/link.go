package link

import (
	"errors"
	"net/netip"
)

// Errors common to every Link.
var (
	// ErrClosed is returned by Send and Recv after Close.
	ErrClosed = errors.New("link: closed")
	// ErrNotSupported is matched (errors.Is) by the errors of transports
	// that need a privilege or kernel feature the process lacks; their
	// message names what is missing.
	ErrNotSupported = errors.New("link: not supported")
)

// ECN codepoints of the IP header's two low TOS / traffic-class bits
// (RFC 3168).
const (
	NotECT uint8 = 0
	ECT1   uint8 = 1
	ECT0   uint8 = 2
	CE     uint8 = 3
)

// Datagram is one RoCEv2 UDP datagram. Buf holds the UDP payload (BTH up to
// and including the ICRC); its capacity is the room a receive may fill.
//
// On Send to a link that implements Gatherer, a datagram may instead come in
// two parts: Buf holds the headers and, from PayloadAt on, the pad and ICRC,
// and Payload is the data carried between them, typically a slice of a
// registered memory region that is read where it lies instead of being
// copied into a packet buffer. The bytes on the wire are then
//
//	Buf[:PayloadAt] | Payload | Buf[PayloadAt:]
//
// and the ICRC is still Buf's last four bytes. Len and CopyTo see both forms
// alike; links that need one contiguous frame never receive the two-part
// form. Recv never sets Payload.
type Datagram struct {
	Buf []byte
	// Payload, when not empty, is spliced into Buf at PayloadAt on Send
	// (see above). The sender owns it and keeps it unchanged until Send
	// returns; the link only reads it.
	Payload   []byte
	PayloadAt int
	// Src and Dst are the IP addresses and UDP ports. On Send, Src's
	// address is ignored by transports bound to one address, and Src's
	// port is honoured by the transports that implement SourcePorter (0
	// means the link's own port); Dst's port is normally 4791.
	Src netip.AddrPort
	Dst netip.AddrPort
	// ECN is the IP ECN field: set on the packet by Send (where the
	// transport supports it), reported by Recv.
	ECN uint8
	// IPID is the IPv4 identification the packet carried (raw transports,
	// link/mem) or will carry (Send); IPIDKnown says whether Recv knows it.
	// A UDP socket does not report it: Linux sends unconnected DF datagrams
	// with ID 0, rxe steps a per-destination counter. Without IPIDKnown, Recv's
	// IPID is the transport's best guess (link/udp: the segment's index in
	// its GRO buffer), which the receiver may try first.
	IPID      uint16
	IPIDKnown bool
	// DSCP is the IP DSCP (the TOS / traffic-class byte's high six bits):
	// set on the packet by Send where the transport supports it, 0 meaning
	// the link's default (link/udp: its Config.TOS); reported by Recv
	// where the transport sees it.
	DSCP uint8
	// TTL is the IPv4 TTL / IPv6 hop limit the datagram arrived with,
	// reported by Recv where the transport sees it (link/udp: IP_RECVTTL,
	// IPV6_RECVHOPLIMIT); 0 when unknown. Send ignores it.
	TTL uint8
	// Priority is the 802.1Q PCP (0–7) a raw transport that tags its
	// frames writes; ignored by the others. Reported by Recv for tagged
	// frames.
	Priority uint8
	// FlowLabel is the IPv6 flow label (20 bits) Send puts on the packet
	// where the transport supports it (0: the kernel's choice, or none);
	// ignored on IPv4. RoCEv2's ICRC masks it (Annex A17.4.1).
	FlowLabel uint32
}

// Len returns the datagram's length on the wire: Buf's plus Payload's.
func (d *Datagram) Len() int { return len(d.Buf) + len(d.Payload) }

// CopyTo copies the datagram's wire bytes (Buf with Payload spliced in at
// PayloadAt) into dst, as much as fits, and returns the count, like copy.
// It serves links and captures that need one contiguous frame. A PayloadAt
// outside Buf is taken as len(Buf).
func (d *Datagram) CopyTo(dst []byte) int {
	if len(d.Payload) == 0 {
		return copy(dst, d.Buf)
	}
	at := d.PayloadAt
	if at < 0 || at > len(d.Buf) {
		at = len(d.Buf)
	}
	n := copy(dst, d.Buf[:at])
	n += copy(dst[n:], d.Payload)
	n += copy(dst[n:], d.Buf[at:])
	return n
}

// Gatherer is implemented by links whose Send takes the two-part datagrams
// of Datagram's doc (a Payload spliced into Buf) and sends them with the
// kernel's scatter/gather I/O, never joining the parts in user space. A
// device gives the two-part form only to a link whose Gathers reports true;
// a wrapper reports what the link it wraps does, or false.
type Gatherer interface {
	Link
	// Gathers reports whether Send accepts two-part datagrams.
	Gathers() bool
}

// SourcePorter is implemented by links that send each datagram from the
// UDP source port in its Src (RoCEv2 Annex A17.3 leaves the port to the
// sender as ECMP entropy; Linux picks it per QP, rdma_get_udp_sport). The
// ICRC covers the port, so a device asks the link once per connection
// which port a datagram meant to leave from want will really carry, and
// seals with that. Links that do not implement it send from LocalAddr's
// port whatever Src says.
type SourcePorter interface {
	// SourcePort prepares the link to send from UDP port want and returns
	// the port datagrams with Src port want will carry: want itself, or,
	// where the link cannot use want (link/udp past its socket bound or
	// when the port is taken), another port it sends from. It never
	// fails. It may block briefly (opening a socket) and must not be
	// called on the data path.
	SourcePort(want uint16) uint16
}

// Link sends and receives datagrams. Send and Recv may be called
// concurrently with each other, each from one goroutine.
type Link interface {
	// Send transmits the datagrams in order and returns how many it sent;
	// an error says why the rest were not.
	Send(dgs []Datagram) (int, error)
	// Recv blocks until at least one datagram arrives, fills dgs[i].Buf
	// (resliced within its capacity) and the other fields, and returns the
	// count. After Close it returns ErrClosed.
	Recv(dgs []Datagram) (int, error)
	// LocalAddr is the address the link receives on.
	LocalAddr() netip.AddrPort
	// Close stops the link; a blocked Recv returns ErrClosed.
	Close() error
}

// Lender is implemented by links that can lend received datagrams out of
// their own memory instead of copying them into the caller's buffers
// (link/udp with GRO: a coalesced buffer is cut in place).
type Lender interface {
	Link
	// RecvLend is Recv, except that it may point dgs[i].Buf at memory the
	// link owns instead of filling the caller's buffer; the caller may
	// read and write that memory until its next Recv or RecvLend call on
	// the link, or Close, and must not keep it longer. Buffers the link
	// does not use keep their index, as with Recv.
	RecvLend(dgs []Datagram) (int, error)
}

// Pumper is implemented by links that can run the receive loop for the
// caller (link/udp). A loop of Recv calls reads the socket once more after
// every batch, to learn that it is empty, before it waits; a pump skips
// that read when the last one came back short (the socket was drained),
// which saves a system call per wake-up on the latency path. A device
// prefers Pump to Recv: a wrapper that embeds a Pumper to watch or change
// what Recv returns must wrap Pump as well (or hide it), or it is bypassed.
type Pumper interface {
	Link
	// Pump receives into dgs as RecvLend does and calls fn with the count
	// n of each batch, until fn returns false (Pump returns nil), the link
	// is closed (ErrClosed) or receiving fails. A batch changes only
	// dgs[:n]. fn must be done with the datagrams when it returns, and
	// must leave dgs as it would pass them to RecvLend (buffers at their
	// index). Nothing else may receive on the link while Pump runs.
	Pump(dgs []Datagram, fn func(n int) bool) error
}

// Stats are counters a Link may expose.
type Stats struct {
	SentPackets, SentBytes uint64
	RecvPackets, RecvBytes uint64
	RecvDropped            uint64 // dropped by the transport (queue full, truncated, not ours)
	SendErrors             uint64
	// SourcePortShared counts source ports (SourcePorter) the link could
	// not send from and mapped to another port it already uses.
	SourcePortShared uint64
}

// RcvBufGrower is implemented by links whose kernel receive buffer can
// grow while they run (link/udp). A device grows it as its QPs are made,
// to what its peers may have in flight to it (each QP's window of
// unacknowledged packets): a clean path then loses nothing to an
// overrun socket, which the peers would only see as loss to retransmit.
type RcvBufGrower interface {
	// GrowRcvBuf raises the receive buffer to n bytes if it was asked for
	// less, and returns the size the kernel reports (Linux doubles what
	// it is asked, for its bookkeeping). It never shrinks the buffer.
	GrowRcvBuf(n int) (int, error)
}

// StatsLink is implemented by links that count.
type StatsLink interface {
	Link
	// Stats returns the link's counters so far.
	Stats() Stats
}

// IPIDPlanner is implemented by links whose kernel, not the caller, picks
// the IPv4 identification of sent datagrams. The ICRC covers that field
// (IBA Annex A17.4.1; rxe_icrc.c masks TOS, TTL and checksums but not the
// ID), so a device that computes ICRCs for such a link first lets it plan
// the IDs, then computes (or patches, CRC-32 being linear) each ICRC with
// dgs[i].IPID, then passes the same slice, in the same order, to Send.
//
// link/udp: a datagram sent alone carries ID 0 (Linux, unconnected socket,
// DF set); the k-th segment (from 0) of a UDP GSO super-packet carries ID k
// once the kernel or the NIC segments it. Send only coalesces IPv4
// datagrams whose IPID already says so, so a caller that never plans gets
// no IPv4 GSO and every packet carries ID 0.
type IPIDPlanner interface {
	// PlanIPID sets dgs[i].IPID to the IPv4 identification datagram i will
	// carry when dgs is next passed unchanged to Send (0 for IPv6). It does
	// not allocate and may be called from the goroutine that calls Send.
	PlanIPID(dgs []Datagram)
}
