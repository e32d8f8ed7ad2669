package testutil

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// MarkSwitch is a real-time model of one switch egress port for loopback
// socket tests of DCQCN (doc/dcqcn.md §1.1, §5.3): senders reach one receiver
// through a FIFO served at a fixed rate, which CE-marks packets by the
// queue they find, as an ECN switch does. Each sender i has a port of two
// proxy addresses, like a UDPProxy per sender sharing one egress queue:
//
//	sender i ──► In[i] ══ FIFO at Rate, CE marking ══► (from Out[i]) ──► receiver
//	sender i ◄── (from In[i]) ◄──────────── Out[i] ◄── receiver
//
// so sender i's QP is connected to In[i]'s IP and the receiver's QP for
// flow i to Out[i]'s. Packets are re-sealed for their new addresses
// (Reseal); CE marking does not touch the ICRC, which masks the TOS byte.
// The reverse direction (ACKs, CNPs) is forwarded at once.
//
// The FIFO is exact in virtual time: a packet of s bytes (UDP payload plus
// 28 bytes of IPv4 and UDP header) arriving at a — the kernel's receive
// timestamp, so a relay goroutine that runs late does not bunch arrivals
// up — departs at max(a, previous departure) + s·8/Rate, and the queue it
// finds is the unfinished work then, in bytes. The forwarding goroutine
// releases packets when their departure time has passed, on a Go timer, so
// the receiver sees them in bursts of up to ~1 ms (doc/dcqcn.md §7.4), but the
// queue and marking follow the virtual schedule exactly.
//
// The switch reads and writes the IP ECN bits through IP_RECVTOS and IP_TOS
// control messages (IPv4 only): it marks only ECN-capable packets (RFC
// 3168 §5: ECT(0) or ECT(1) becomes CE; Not-ECT is never marked) and passes
// every other packet's bits through. MarkSwitch is safe for concurrent use.
type MarkSwitch struct {
	cfg   MarkSwitchConfig
	in    []*net.UDPConn
	out   []*net.UDPConn
	wake  chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup
	bytes float64 // seconds per byte at Rate

	mu     sync.Mutex // guards the fields below
	rng    *rand.Rand
	fifo   []swPacket
	last   time.Time // departure of the last packet queued
	lastAt time.Time // the latest arrival
	log    []SwitchEvent
	closed bool
}

// MarkSwitchConfig configures a MarkSwitch.
type MarkSwitchConfig struct {
	// Receiver is the receiver's address.
	Receiver netip.AddrPort
	// Ports holds one port per sender.
	Ports []SwitchPort
	// Rate is the egress capacity in bits per second of IP datagrams.
	Rate float64
	// Mark decides whether an ECN-capable packet that finds queue bytes
	// ahead of it is marked CE, given u uniform in [0, 1) (cc.RED.Mark has
	// this signature). Nil marks above Threshold.
	Mark func(queue int, u float64) bool
	// Threshold is the step-marking threshold in bytes when Mark is nil.
	Threshold int
	// Buffer bounds the queue in bytes: an arrival that would exceed it is
	// dropped (tail drop). 0 means 16 MiB.
	Buffer int
	// Seed seeds the marking draws.
	Seed uint64
	// Reseal rewrites a forwarded packet's ICRC; required. It is called
	// from several goroutines at once.
	Reseal ResealFunc
}

// SwitchPort is a sender's pair of proxy addresses. Fronts given port 0
// all take one free port, the same for every front, so that a device,
// which sends every QP's packets to one UDP port, reaches all of them.
type SwitchPort struct {
	Sender netip.AddrPort // the sender
	In     netip.AddrPort // where the sender sends; stands for the receiver
	Out    netip.AddrPort // the sender's address as the receiver sees it
}

// SwitchEvent records one packet arriving at the egress queue.
type SwitchEvent struct {
	At     time.Time // arrival
	Depart time.Time // virtual departure (zero if dropped)
	Port   int
	Size   int // bytes on the wire (UDP payload + 28)
	Queue  int // bytes queued ahead of it on arrival
	ECN    uint8
	Marked bool // CE set by the switch
	Drop   bool
}

type swPacket struct {
	buf    []byte
	port   int
	ecn    uint8
	depart time.Time
}

const swOverhead = 28 // IPv4 and UDP headers

// NewMarkSwitch starts a switch. Close stops it and joins its goroutines.
func NewMarkSwitch(cfg MarkSwitchConfig) (*MarkSwitch, error) {
	if cfg.Reseal == nil || !(cfg.Rate > 0) || len(cfg.Ports) == 0 {
		return nil, errors.New("testutil: MarkSwitch needs Reseal, a positive Rate and ports")
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = 16 << 20
	}
	s := &MarkSwitch{cfg: cfg, wake: make(chan struct{}, 1), done: make(chan struct{}),
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), bytes: 8 / cfg.Rate}
	listen := func(a netip.AddrPort) (*net.UDPConn, error) {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(a))
		if err != nil {
			return nil, err
		}
		c.SetReadBuffer(16 << 20)
		c.SetWriteBuffer(16 << 20)
		rc, err := c.SyscallConn()
		if err == nil {
			cerr := rc.Control(func(fd uintptr) {
				err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_RECVTOS, 1)
				if err == nil {
					err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
				}
			})
			if cerr != nil {
				err = cerr
			}
		}
		if err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	// Fronts given port 0 all take the free port the first of them gets:
	// a device sends every QP's packets to one UDP port.
	s.cfg.Ports = append([]SwitchPort(nil), cfg.Ports...)
	var shared uint16
	bind := func(a netip.AddrPort) (*net.UDPConn, netip.AddrPort, error) {
		if a.Port() == 0 && shared != 0 {
			a = netip.AddrPortFrom(a.Addr(), shared)
		}
		c, err := listen(a)
		if err != nil {
			return nil, a, err
		}
		got := c.LocalAddr().(*net.UDPAddr).AddrPort()
		got = netip.AddrPortFrom(got.Addr().Unmap(), got.Port())
		if a.Port() == 0 {
			shared = got.Port()
		}
		return c, got, nil
	}
	for i := range s.cfg.Ports {
		p := &s.cfg.Ports[i]
		in, addr, err := bind(p.In)
		if err != nil {
			s.closeConns()
			return nil, err
		}
		s.in, p.In = append(s.in, in), addr
		out, addr, err := bind(p.Out)
		if err != nil {
			s.closeConns()
			return nil, err
		}
		s.out, p.Out = append(s.out, out), addr
	}
	for i := range cfg.Ports {
		s.wg.Add(2)
		go s.forward(i)
		go s.reverse(i)
	}
	s.wg.Add(1)
	go s.egress()
	return s, nil
}

func (s *MarkSwitch) closeConns() {
	for _, c := range append(s.in, s.out...) {
		c.Close()
	}
}

// Close stops the switch.
func (s *MarkSwitch) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.done)
	s.closeConns()
	s.wg.Wait()
	return nil
}

// Ports returns the ports with the addresses the switch bound (fronts
// given port 0 share one free port).
func (s *MarkSwitch) Ports() []SwitchPort { return append([]SwitchPort(nil), s.cfg.Ports...) }

// Log returns a copy of the arrivals recorded so far, in arrival order.
func (s *MarkSwitch) Log() []SwitchEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SwitchEvent(nil), s.log...)
}

// readECN reads one datagram, the ECN bits it arrived with and when the
// kernel received it (SO_TIMESTAMPNS, wall clock; time.Now() if missing),
// so that a relay goroutine that runs late does not bunch arrivals up.
func readECN(c *net.UDPConn, buf, oob []byte) (int, netip.AddrPort, uint8, time.Time, error) {
	n, oobn, _, src, err := c.ReadMsgUDPAddrPort(buf, oob)
	if err != nil {
		return 0, src, 0, time.Time{}, err
	}
	var ecn uint8
	var at time.Time
	msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
	for _, m := range msgs {
		switch {
		case m.Header.Level == syscall.IPPROTO_IP && m.Header.Type == syscall.IP_TOS && len(m.Data) >= 1:
			ecn = m.Data[0] & 3
		case m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_TIMESTAMPNS &&
			len(m.Data) >= int(unsafe.Sizeof(syscall.Timespec{})):
			ts := (*syscall.Timespec)(unsafe.Pointer(&m.Data[0]))
			at = time.Unix(ts.Unix())
		}
	}
	if at.IsZero() {
		at = time.Now()
	}
	return n, src, ecn, at, nil
}

// writeECN sends pkt to dst with the given ECN bits (an IP_TOS control
// message; the DSCP is 0).
func writeECN(c *net.UDPConn, pkt []byte, dst netip.AddrPort, ecn uint8) {
	var oob [64]byte
	n := syscall.CmsgSpace(4)
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = syscall.IPPROTO_IP, syscall.IP_TOS
	h.SetLen(syscall.CmsgLen(4))
	binary.NativeEndian.PutUint32(oob[syscall.CmsgLen(0):], uint32(ecn))
	c.WriteMsgUDPAddrPort(pkt, oob[:n], dst)
}

// forward takes sender i's packets into the egress queue.
func (s *MarkSwitch) forward(i int) {
	defer s.wg.Done()
	p := s.cfg.Ports[i]
	buf, oob := make([]byte, 9000), make([]byte, 128)
	for {
		n, src, ecn, now, err := readECN(s.in[i], buf, oob)
		if err != nil {
			return
		}
		pkt := append([]byte(nil), buf[:n]...)
		s.cfg.Reseal(pkt, src, p.In, p.Out, s.cfg.Receiver)
		size := n + swOverhead
		s.mu.Lock()
		wasEmpty := len(s.fifo) == 0
		if now.Before(s.lastAt) {
			now = s.lastAt // the arrivals of two ports may interleave
		}
		s.lastAt = now
		var q int
		if s.last.After(now) {
			q = int(s.last.Sub(now).Seconds() / s.bytes)
		}
		ev := SwitchEvent{At: now, Port: i, Size: size, Queue: q, ECN: ecn}
		if q+size > s.cfg.Buffer {
			ev.Drop = true
		} else {
			if ecn != 0 && s.mark(q) {
				ecn, ev.Marked = 3, true
			}
			start := now
			if s.last.After(start) {
				start = s.last
			}
			s.last = start.Add(time.Duration(float64(size) * s.bytes * 1e9))
			ev.Depart = s.last
			s.fifo = append(s.fifo, swPacket{buf: pkt, port: i, ecn: ecn, depart: s.last})
		}
		s.log = append(s.log, ev)
		s.mu.Unlock()
		if wasEmpty {
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}
}

func (s *MarkSwitch) mark(q int) bool {
	u := s.rng.Float64()
	if s.cfg.Mark != nil {
		return s.cfg.Mark(q, u)
	}
	return q > s.cfg.Threshold
}

// reverse forwards the receiver's packets for flow i back to sender i.
func (s *MarkSwitch) reverse(i int) {
	defer s.wg.Done()
	p := s.cfg.Ports[i]
	buf, oob := make([]byte, 9000), make([]byte, 128)
	for {
		n, src, ecn, _, err := readECN(s.out[i], buf, oob)
		if err != nil {
			return
		}
		s.cfg.Reseal(buf[:n], src, p.Out, p.In, p.Sender)
		writeECN(s.in[i], buf[:n], p.Sender, ecn)
	}
}

// egress sends the packets whose departure time has passed.
func (s *MarkSwitch) egress() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []swPacket
	for {
		s.mu.Lock()
		now := time.Now()
		k := 0
		for k < len(s.fifo) && !s.fifo[k].depart.After(now) {
			k++
		}
		due = append(due[:0], s.fifo[:k]...)
		s.fifo = append(s.fifo[:0], s.fifo[k:]...)
		var next time.Time
		if len(s.fifo) > 0 {
			next = s.fifo[0].depart
		}
		s.mu.Unlock()
		for _, p := range due {
			writeECN(s.out[p.port], p.buf, s.cfg.Receiver, p.ecn)
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(0, time.Until(next))
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
		select {
		case <-s.done:
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}
