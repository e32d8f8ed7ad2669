//go:build linux

package fabric

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Capture records the RoCEv2 packets crossing one interface (both
// directions) through an AF_PACKET socket opened in its namespace; at most
// Limit of them are kept.
type Capture struct {
	fd    int
	stop  atomic.Bool
	wg    sync.WaitGroup
	mu    sync.Mutex
	pkts  []Packet
	limit int
	// Drops is the number of packets the socket dropped (set by Stop).
	Drops uint32
}

// StartCapture starts recording on dev in namespace ns, keeping up to
// limit packets. Stop ends it.
func StartCapture(ns, dev string, limit int) (*Capture, error) {
	c := &Capture{fd: -1, limit: limit}
	err := InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ALL))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		c.fd = fd
		// Room for the bursts a loaded machine lets pile up before the
		// reader runs; Drops reports what still overflowed.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 256<<20); err != nil {
			return err
		}
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		if c.fd >= 0 {
			unix.Close(c.fd)
		}
		return nil, fmt.Errorf("capture on %s in %s: %w", dev, ns, err)
	}
	c.wg.Add(1)
	go c.loop()
	return c, nil
}

func (c *Capture) loop() {
	defer c.wg.Done()
	b := make([]byte, 256) // headers only: MSG_TRUNC cuts the rest
	for !c.stop.Load() {
		n, _, err := unix.Recvfrom(c.fd, b, 0)
		if err != nil || n <= 0 {
			continue
		}
		p, ok := ParseFrame(b[:min(n, len(b))])
		if !ok {
			continue
		}
		c.mu.Lock()
		if len(c.pkts) < c.limit {
			c.pkts = append(c.pkts, p)
		}
		c.mu.Unlock()
	}
}

// drops returns the packets the socket dropped so far (PACKET_STATISTICS;
// reading resets the kernel's count, so call it once, after Stop).
func (c *Capture) drops() uint32 {
	st, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0
	}
	return st.Drops
}

// Stop ends the capture, waits for its goroutine and returns the packets.
func (c *Capture) Stop() []Packet {
	time.Sleep(100 * time.Millisecond) // the last packets reach the socket
	c.stop.Store(true)
	c.wg.Wait()
	c.Drops = c.drops()
	unix.Close(c.fd)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pkts
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// SpineCapture records the RoCEv2 packets on the links of one leaf to
// the spines (both directions), one capture per spine, so that other
// traffic crossing the fabric (perftest's TCP exchange) does not count.
type SpineCapture struct{ caps []*Capture }

// CaptureSpines starts a SpineCapture at leaf l, keeping up to limit
// packets per spine.
func (f *Fabric) CaptureSpines(l, limit int) (*SpineCapture, error) {
	s := &SpineCapture{}
	for k := range f.Spines {
		u := f.Uplink(l, k)
		c, err := StartCapture(u.A.NS, u.A.Dev, limit)
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.caps = append(s.caps, c)
	}
	return s, nil
}

// Stop ends the captures and returns the packets of each spine, and the
// packets the sockets dropped in all.
func (s *SpineCapture) Stop() ([][]Packet, uint32) {
	var out [][]Packet
	var drops uint32
	for _, c := range s.caps {
		out = append(out, c.Stop())
		drops += c.Drops
	}
	return out, drops
}
