package mem

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/goroce/goroce/link"
)

// Defaults applied to zero Config fields.
const (
	DefaultQueueLen = 1024
	DefaultMTU      = 65507 // the largest IPv4 UDP payload
)

// ErrTooBig is matched (errors.Is) by the Send error for a datagram larger
// than the network's MTU.
var ErrTooBig = errors.New("mem: datagram larger than MTU")

// Config configures a Network.
type Config struct {
	// QueueLen is the number of datagrams each link's receive queue holds
	// (default 1024); beyond it datagrams are dropped and counted in the
	// receiver's Stats().RecvDropped.
	QueueLen int
	// MTU is the largest UDP payload Send accepts (default 65507).
	MTU int
	// Deliver, if set, is called for every datagram sent, in send order,
	// with the sender's lock held, before it is queued. It may change dg
	// (ECN marking, corruption: dg.Buf is the network's copy) and returns
	// false to drop it (counted in Network.Dropped). It must not call the
	// network.
	Deliver func(dg *link.Datagram) bool
}

// Network connects the links attached to it. Its methods may be called
// from any goroutine.
type Network struct {
	cfg Config

	mu      sync.Mutex // guards links, the queues and the counters
	links   map[netip.AddrPort]*Link
	dropped uint64 // by Deliver
	noRoute uint64 // sent to an address nobody attached
}

// New returns an empty network.
func New(cfg Config) *Network {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.MTU <= 0 {
		cfg.MTU = DefaultMTU
	}
	return &Network{cfg: cfg, links: make(map[netip.AddrPort]*Link)}
}

// NewNetwork returns an empty network with the default Config.
func NewNetwork() *Network { return New(Config{}) }

// Attach creates a link receiving on addr. Attaching an address twice
// while the first link is open is a programmer error and panics; after
// Close the address is free again.
func (n *Network) Attach(addr netip.AddrPort) *Link {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.links[addr]; ok {
		panic(fmt.Sprintf("mem: %v attached twice", addr))
	}
	l := &Link{
		net:    n,
		addr:   addr,
		q:      make([]slot, n.cfg.QueueLen),
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	n.links[addr] = l
	return l
}

// Dropped returns how many datagrams Config.Deliver dropped and how many
// were sent to an address no open link had.
func (n *Network) Dropped() (byDeliver, noRoute uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dropped, n.noRoute
}

// slot is one queued datagram; buf keeps its capacity across uses.
type slot struct {
	buf      []byte
	src, dst netip.AddrPort
	ecn      uint8
	ipid     uint16
	dscp     uint8
	prio     uint8
	fl       uint32
}

// Link is one endpoint of a Network. Send and Recv may be called from
// different goroutines; Close from any.
type Link struct {
	net  *Network
	addr netip.AddrPort

	// Guarded by net.mu.
	q          []slot
	head, size int
	closed     bool
	stats      link.Stats

	notify chan struct{} // a datagram was queued (capacity 1)
	done   chan struct{} // closed by Close
	recvMu sync.Mutex    // serializes Recv
}

var (
	_ link.Link         = (*Link)(nil)
	_ link.StatsLink    = (*Link)(nil)
	_ link.SourcePorter = (*Link)(nil)
)

// SourcePort implements link.SourcePorter: a memory link sends from any
// port, so it returns want (the link's port for 0).
func (l *Link) SourcePort(want uint16) uint16 {
	if want == 0 {
		return l.addr.Port()
	}
	return want
}

// LocalAddr returns the address the link was attached with.
func (l *Link) LocalAddr() netip.AddrPort { return l.addr }

// Send copies each datagram into its destination's queue, in order. It
// allocates only while a queue slot grows to a larger datagram than it has
// held before. A full
// queue drops the datagram (counted by the receiver) without error, as a
// UDP socket would; so does an address nobody attached. It never blocks.
// Datagram.Src is set to the link's address, with Datagram.Src's port if
// not 0 (the link implements link.SourcePorter); DSCP, Priority and
// FlowLabel travel with the datagram.
func (l *Link) Send(dgs []link.Datagram) (int, error) {
	n := l.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if l.closed {
		return 0, link.ErrClosed
	}
	for i := range dgs {
		d := &dgs[i]
		if len(d.Buf) > n.cfg.MTU {
			l.stats.SendErrors++
			return i, fmt.Errorf("%w: %d bytes to %v", ErrTooBig, len(d.Buf), d.Dst)
		}
		l.stats.SentPackets++
		l.stats.SentBytes += uint64(len(d.Buf))
		dst := n.links[d.Dst]
		if dst == nil {
			n.noRoute++
			continue
		}
		if dst.size == len(dst.q) {
			dst.stats.RecvDropped++
			continue
		}
		s := &dst.q[(dst.head+dst.size)%len(dst.q)]
		s.buf = append(s.buf[:0], d.Buf...)
		s.src, s.dst, s.ecn, s.ipid = l.addr, d.Dst, d.ECN&3, d.IPID
		if p := d.Src.Port(); p != 0 {
			s.src = netip.AddrPortFrom(l.addr.Addr(), p)
		}
		s.dscp, s.prio, s.fl = d.DSCP, d.Priority, d.FlowLabel
		if n.cfg.Deliver != nil {
			view := link.Datagram{Buf: s.buf, Src: s.src, Dst: s.dst, ECN: s.ecn, IPID: s.ipid, IPIDKnown: true,
				DSCP: s.dscp, Priority: s.prio, FlowLabel: s.fl}
			if !n.cfg.Deliver(&view) {
				n.dropped++
				continue
			}
			s.buf, s.ecn, s.ipid = view.Buf, view.ECN&3, view.IPID
		}
		dst.size++
		select {
		case dst.notify <- struct{}{}:
		default:
		}
	}
	return len(dgs), nil
}

// Recv blocks until a datagram is queued, then moves as many as fit into
// dgs (each copied into dgs[i].Buf, resliced within its capacity; one too
// long for its buffer is dropped and counted). IPID is the one the datagram
// was sent with, reported as known. After Close it returns link.ErrClosed.
func (l *Link) Recv(dgs []link.Datagram) (int, error) {
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	if len(dgs) == 0 {
		return 0, nil
	}
	n := l.net
	for {
		n.mu.Lock()
		if l.closed {
			n.mu.Unlock()
			return 0, link.ErrClosed
		}
		k := 0
		for l.size > 0 && k < len(dgs) {
			s := &l.q[l.head]
			l.head = (l.head + 1) % len(l.q)
			l.size--
			d := &dgs[k]
			if cap(d.Buf) < len(s.buf) {
				l.stats.RecvDropped++
				continue
			}
			d.Buf = append(d.Buf[:0], s.buf...)
			d.Src, d.Dst, d.ECN, d.IPID, d.IPIDKnown = s.src, s.dst, s.ecn, s.ipid, true
			d.DSCP, d.Priority, d.FlowLabel = s.dscp, s.prio, s.fl
			l.stats.RecvPackets++
			l.stats.RecvBytes += uint64(len(s.buf))
			k++
		}
		n.mu.Unlock()
		if k > 0 {
			return k, nil
		}
		select {
		case <-l.notify:
		case <-l.done:
		}
	}
}

// Stats returns the link's counters.
func (l *Link) Stats() link.Stats {
	l.net.mu.Lock()
	defer l.net.mu.Unlock()
	return l.stats
}

// Close detaches the link; a blocked Recv returns link.ErrClosed. Closing
// twice returns link.ErrClosed.
func (l *Link) Close() error {
	n := l.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if l.closed {
		return link.ErrClosed
	}
	l.closed = true
	if n.links[l.addr] == l {
		delete(n.links, l.addr)
	}
	close(l.done)
	return nil
}
