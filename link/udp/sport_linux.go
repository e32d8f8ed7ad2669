//go:build linux

package udp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

// sendSock is a send-only socket bound to one UDP source port (or the
// receive socket, for the link's own port). Its fields are set before it
// is published in the pool and then only read, except zeroTx, which the
// goroutine holding sendMu switches (ChecksumAuto).
type sendSock struct {
	conn   *net.UDPConn // nil for the receive socket
	rc     syscall.RawConn
	port   uint16
	zeroTx *atomic.Bool
	zero   atomic.Bool // zeroTx points here for pool sockets
}

// portPool holds the send sockets of SourcePort. Its map is written with
// both poolMu and sendMu held and read with either.
type portPool struct {
	mu     sync.Mutex // poolMu: serializes SourcePort; taken before sendMu
	max    int        // the bound on socks (≤ 0: none)
	socks  []*sendSock
	byPort map[uint16]*sendSock // every port SourcePort was asked for, shared ones included
	shared atomic.Uint64
	main   sendSock // the receive socket
}

// SourcePort implements link.SourcePorter: it returns the UDP source port
// datagrams whose Src port is want will carry. The first time a port is
// asked for, it opens a send socket bound to the link's address and that
// port (see Config.MaxSourcePorts); if the bound is reached or the bind
// fails (the port is in use), the port shares an open socket, picked as
// want modulo their number, or the receive socket if none is open, and
// Stats().SourcePortShared counts it. The link's own port, 0, and any port
// after Close map to the receive socket's port. It may be called from any
// goroutine; it never fails.
func (l *Link) SourcePort(want uint16) uint16 {
	p := &l.pool
	if want == 0 || want == l.local.Port() {
		return l.local.Port()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.closed.Load() {
		return l.local.Port()
	}
	if s, ok := p.byPort[want]; ok {
		return s.port
	}
	var s *sendSock
	if len(p.socks) < p.max {
		var err error
		if s, err = l.openSendSock(want); err != nil {
			l.log.Debug("udp: source port unavailable; sharing", "port", want, "err", err)
			s = nil
		}
	}
	fresh := s != nil
	if !fresh {
		p.shared.Add(1)
		s = &p.main
		if n := len(p.socks); n > 0 {
			s = p.socks[int(want)%n]
		}
	}
	l.sendMu.Lock()
	if fresh {
		p.socks = append(p.socks, s)
	}
	p.byPort[want] = s
	l.sendMu.Unlock()
	return s.port
}

// SourcePorts returns the number of send sockets open besides the
// receive socket: the file descriptors SourcePort costs.
func (l *Link) SourcePorts() int {
	l.pool.mu.Lock()
	defer l.pool.mu.Unlock()
	return len(l.pool.socks)
}

// sockFor returns the socket datagrams from port go out of; the caller
// holds sendMu. Ports SourcePort was not asked for use the receive socket.
func (l *Link) sockFor(port uint16) *sendSock {
	if port != 0 && port != l.local.Port() {
		if s, ok := l.pool.byPort[port]; ok {
			return s
		}
	}
	return &l.pool.main
}

// sockRun returns how many datagrams from dgs[0] go out of the same
// socket, and points the transmit state at it; the caller holds sendMu.
// A GSO run never crosses sockets because buildTx sees only this run.
func (l *Link) sockRun(dgs []link.Datagram) int {
	p := dgs[0].Src.Port()
	k := 1
	for k < len(dgs) && dgs[k].Src.Port() == p {
		k++
	}
	s := l.sockFor(p)
	l.tx.rc, l.tx.zeroTx = s.rc, s.zeroTx
	return k
}

// dropAll is a classic BPF program that accepts no packet: send sockets
// never read, so nothing may queue in them.
var dropAll = [1]unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}

// openSendSock opens a socket bound to the link's address and port, set
// up as the receive socket is for sending (buffers, DF, TOS, checksum,
// IPv6 flow labels), with a filter that drops every packet it would
// receive. SO_REUSEADDR and SO_REUSEPORT stay off: a port in use is an
// error, never a socket that steals another's traffic.
func (l *Link) openSendSock(port uint16) (*sendSock, error) {
	network := "udp4"
	if l.v6 {
		network = "udp6"
	}
	var serr error
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		if err := c.Control(func(fd uintptr) { serr = l.setupSend(int(fd)) }); err != nil {
			return err
		}
		return serr
	}}
	var pc net.PacketConn
	err := inNetns(l.netns, func() (err error) {
		pc, err = lc.ListenPacket(context.Background(), network, netip.AddrPortFrom(l.local.Addr(), port).String())
		return err
	})
	if err != nil {
		return nil, err
	}
	conn := pc.(*net.UDPConn)
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, err
	}
	s := &sendSock{conn: conn, rc: rc, port: port}
	s.zeroTx = &s.zero
	s.zero.Store(l.csum != ChecksumFull)
	return s, nil
}

// setupSend configures a send socket before bind. The options the
// receive socket obtained are assumed to be granted again; a refusal is an
// error, and the port is then shared.
func (l *Link) setupSend(fd int) error {
	f := unix.SockFprog{Len: 1, Filter: &dropAll[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &f); err != nil {
		return err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 0) // the minimum
	if l.sndBuf > 0 {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, l.sndBuf) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, l.sndBuf)
		}
	}
	type opt struct{ level, opt, v int }
	opts := []opt{
		{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO},
		{unix.IPPROTO_IP, unix.IP_TOS, int(l.tos)},
	}
	if l.v6 {
		opts = []opt{
			{unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO},
			{unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 1},
			{unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(l.tos)},
			{unix.IPPROTO_IPV6, ipv6FlowinfoSend, 1},
		}
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.v); err != nil {
			return err
		}
	}
	if l.csum != ChecksumFull {
		return l.setNoCheck(fd, true)
	}
	return nil
}

// closePool closes the send sockets; the caller holds poolMu and sendMu.
func (l *Link) closePool() error {
	var err error
	for _, s := range l.pool.socks {
		if e := s.conn.Close(); e != nil && err == nil {
			err = e
		}
	}
	l.pool.socks = nil
	clear(l.pool.byPort)
	return err
}

// defaultMaxSourcePorts returns DefaultMaxSourcePorts, or a quarter of the
// process's file-descriptor limit if that is lower.
func defaultMaxSourcePorts() int {
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) != nil || r.Cur == unix.RLIM_INFINITY {
		return DefaultMaxSourcePorts
	}
	return int(min(uint64(DefaultMaxSourcePorts), r.Cur/4))
}

// ipv6FlowinfoSend is IPV6_FLOWINFO_SEND (linux/in6.h), which x/sys/unix
// lacks: sendmsg takes the flow label from sin6_flowinfo.
const ipv6FlowinfoSend = 33

// openNetns returns an fd of the calling thread's network namespace, or -1
// if /proc does not say. Open records it: the send sockets SourcePort opens
// later must be made in the namespace the link's address lives in, which
// need not be the one of the goroutine that asks (a program that opened
// the link from a thread it had moved into a namespace).
func openNetns() int {
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// inNetns runs f in the network namespace ns (an fd from openNetns): at
// once when the calling thread is already in it (or ns is -1), else on a
// thread of its own that enters ns and is discarded afterwards (a locked
// goroutine that ends without unlocking takes its thread with it, so no
// other goroutine runs in the namespace). Only socket creation runs here,
// not the data path.
func inNetns(ns int, f func() error) error {
	if ns < 0 || sameNetns(ns) {
		return f()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("udp: entering the link's network namespace: %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// sameNetns reports whether the calling thread is in namespace ns. The
// answer can change only if the goroutine moves threads in between, and
// then merely costs the detour through a thread of its own.
func sameNetns(ns int) bool {
	var a, b unix.Stat_t
	if unix.Fstat(ns, &a) != nil || unix.Stat("/proc/thread-self/ns/net", &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}
