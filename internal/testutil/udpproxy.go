package testutil

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// UDPProxy is a real-time impairing relay between two RoCEv2 endpoints on
// loopback, built on the same Link engine the virtual-time tests use. Each
// endpoint talks to a front address of the proxy instead of its peer:
//
//	A ──► FrontB ══ link AB ══► (from FrontA) ──► B
//	A ◄── (from FrontB) ◄══ link BA ══ FrontA ◄── B
//
// so A's QP is connected to FrontB's IP and B's to FrontA's. Because the
// ICRC covers the IP addresses and UDP ports, the proxy re-seals every
// packet it forwards for its new addresses (Reseal), like a NAT that knows
// RoCE; a packet whose ICRC was wrong on arrival stays wrong. Impairments,
// corruption included, apply after the re-seal.
type UDPProxy struct {
	frontA, frontB *net.UDPConn
	a, b           netip.AddrPort
	ab, ba         *Link
	mu             sync.Mutex // guards the links
	wake           chan struct{}
	done           chan struct{}
	wg             sync.WaitGroup
	reseal         ResealFunc
	fa, fb         netip.AddrPort // the fronts' bound addresses
}

// Fronts returns the addresses standing for A and for B, with the ports the
// proxy got.
func (p *UDPProxy) Fronts() (frontA, frontB netip.AddrPort) { return p.fa, p.fb }

func unmapPort(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// ResealFunc rewrites pkt's ICRC for a packet now going from src to dst,
// given the addresses it was sealed for. It reports whether the old ICRC
// was right; when it was not, the new one must be wrong too.
type ResealFunc func(pkt []byte, oldSrc, oldDst, newSrc, newDst netip.AddrPort) bool

// ProxyConfig configures a UDPProxy.
type ProxyConfig struct {
	A, B           netip.AddrPort // the two endpoints
	FrontA, FrontB netip.AddrPort // the proxy's addresses standing for A and B (port 0: a free one)
	Seed           uint64
	AB, BA         Impairment // per direction
	Reseal         ResealFunc // required
}

// NewUDPProxy starts a proxy. Close stops it and joins its goroutines.
func NewUDPProxy(cfg ProxyConfig) (*UDPProxy, error) {
	if cfg.Reseal == nil {
		return nil, errors.New("testutil: UDPProxy needs a Reseal function")
	}
	fa, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(cfg.FrontA))
	if err != nil {
		return nil, err
	}
	fb, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(cfg.FrontB))
	if err != nil {
		fa.Close()
		return nil, err
	}
	for _, c := range []*net.UDPConn{fa, fb} {
		c.SetReadBuffer(16 << 20)
		c.SetWriteBuffer(16 << 20)
	}
	p := &UDPProxy{
		frontA: fa, frontB: fb, a: cfg.A, b: cfg.B,
		ab: NewLink(SubSeed(cfg.Seed, "ab"), cfg.AB), ba: NewLink(SubSeed(cfg.Seed, "ba"), cfg.BA),
		wake: make(chan struct{}, 1), done: make(chan struct{}), reseal: cfg.Reseal,
	}
	frontA, frontB := fa.LocalAddr().(*net.UDPAddr).AddrPort(), fb.LocalAddr().(*net.UDPAddr).AddrPort()
	p.fa, p.fb = unmapPort(frontA), unmapPort(frontB)
	p.wg.Add(3)
	// A sends to FrontB; forward towards B from FrontA.
	go p.read(fb, p.ab, p.fb, p.fa, cfg.B)
	// B sends to FrontA; forward towards A from FrontB.
	go p.read(fa, p.ba, p.fa, p.fb, cfg.A)
	go p.deliver()
	return p, nil
}

// Stats returns the two links' statistics.
func (p *UDPProxy) Stats() (ab, ba LinkStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ab.Stats(), p.ba.Stats()
}

// Close stops the proxy.
func (p *UDPProxy) Close() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	close(p.done)
	p.frontA.Close()
	p.frontB.Close()
	p.wg.Wait()
	return nil
}

func (p *UDPProxy) read(c *net.UDPConn, l *Link, front, out, to netip.AddrPort) {
	defer p.wg.Done()
	buf := make([]byte, 9000)
	for {
		n, src, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		pkt := buf[:n]
		p.reseal(pkt, src, front, out, to)
		p.mu.Lock()
		l.Send(time.Now(), pkt)
		p.mu.Unlock()
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

func (p *UDPProxy) deliver() {
	defer p.wg.Done()
	var batch [][]byte
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		now := time.Now()
		batch = p.ab.Receive(now, batch[:0])
		nab := len(batch)
		batch = p.ba.Receive(now, batch)
		next, ok := p.ab.Deadline()
		if d, ok2 := p.ba.Deadline(); ok2 && (!ok || d.Before(next)) {
			next, ok = d, true
		}
		p.mu.Unlock()
		for i, pkt := range batch {
			if i < nab {
				p.frontA.WriteToUDPAddrPort(pkt, p.b)
			} else {
				p.frontB.WriteToUDPAddrPort(pkt, p.a)
			}
		}
		p.mu.Lock()
		for i, pkt := range batch {
			if i < nab {
				p.ab.Release(pkt)
			} else {
				p.ba.Release(pkt)
			}
		}
		p.mu.Unlock()
		wait := time.Hour
		if ok {
			wait = max(0, time.Until(next))
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-p.done:
				return
			case <-p.wake:
			case <-timer.C:
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		} else {
			select {
			case <-p.done:
				return
			default:
			}
		}
	}
}
