//go:build linux

package fabric

import (
	"fmt"
	"net"
	"net/netip"
	"time"
)

// probeAll checks that every host reaches a host of every other leaf,
// from 16 source ports each (so that, with several hosts per leaf, every
// spine carries some with high probability), and that hosts of one leaf
// reach each other. Besides proving the routes, it resolves every
// neighbour, so that ARP does not count in measurements and the first
// burst of a run does not wait in a neighbour queue.
func (f *Fabric) probeAll() error {
	for _, a := range f.Hosts {
		for l := range f.Leaves {
			for _, b := range f.LeafHosts(l) {
				if b.Index == a.Index {
					continue
				}
				n := 1
				if b.Leaf != a.Leaf {
					n = 16
				}
				if err := f.Probe(a, b, n); err != nil {
					return fmt.Errorf("fabric: %s (%v) cannot reach %s (%v): %w", a.Name, a.Addr, b.Name, b.Addr, err)
				}
				if b.Leaf != a.Leaf {
					break // one host of each other leaf
				}
			}
		}
	}
	return nil
}

// Probe sends one UDP datagram from each of n source ports of host from
// to an echo socket on host to, and waits for every echo (each datagram is
// retried up to 5 times, 500 ms apart).
func (f *Fabric) Probe(from, to Host, n int) error {
	return ProbeNS(from.NS, to.NS, to.Addr, n)
}

// ProbeNS is Probe between any two namespaces: from namespace from to
// address to, which is in namespace toNS.
func ProbeNS(from, toNS string, to netip.Addr, n int) error {
	var srv *net.UDPConn
	if err := InNetns(toNS, func() (err error) {
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, 0)))
		return err
	}); err != nil {
		return err
	}
	dst := srv.LocalAddr().(*net.UDPAddr).AddrPort()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 64)
		for {
			k, src, err := srv.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(b[:k], src)
		}
	}()
	defer func() { srv.Close(); <-done }()
	var cs []*net.UDPConn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	if err := InNetns(from, func() error {
		for range n {
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
			if err != nil {
				return err
			}
			cs = append(cs, c)
		}
		return nil
	}); err != nil {
		return err
	}
	b := make([]byte, 64)
	for _, c := range cs {
		var err error
		for try := 0; try < 5; try++ {
			c.Write([]byte("goroce fabric probe"))
			c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err = c.Read(b); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("no echo from %v to %v: %w", c.LocalAddr(), dst, err)
		}
	}
	return nil
}
