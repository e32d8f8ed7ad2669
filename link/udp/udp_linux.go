//go:build linux

package udp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

const (
	// maxSegs bounds the segments of one super-packet: UDP_MAX_SEGMENTS is
	// 64 before Linux 6.9 and 128 after.
	maxSegs = 64
	// maxGSO4 and maxGSO6 bound the payload of one super-packet: 65535 −
	// IPv4 20 − UDP 8, and 65535 − UDP 8 (the IPv6 payload length counts
	// the UDP header only). Measured on 6.18 loopback: one byte more is
	// EMSGSIZE.
	maxGSO4 = 65507
	maxGSO6 = 65527
	// scatterMin is the smallest predicted gso_size for which Recv lets
	// the kernel scatter coalesced buffers into the caller's buffers.
	scatterMin = 2048
	// groBufSize is the receive buffer of one recvmmsg message with GRO: a
	// coalesced skb never exceeds 64 KiB.
	groBufSize = 64 << 10
	// sockaddrSize holds a sockaddr_in6 (and so a sockaddr_in).
	sockaddrSize = unix.SizeofSockaddrInet6
	// txOOBSize: UDP_SEGMENT (u16) + IP_TOS/IPV6_TCLASS (int) + PKTINFO
	// (in6_pktinfo, 20 bytes), each rounded up by CMSG_SPACE.
	txOOBSize = 96
	// rxOOBSize: UDP_GRO (int) + TOS/TCLASS (int) + PKTINFO, with room.
	rxOOBSize = 128
)

// Link is a RoCEv2 transport over one kernel UDP socket. See the package
// documentation for its behaviour and buffer ownership.
type Link struct {
	log   *slog.Logger
	conn  *net.UDPConn
	rc    syscall.RawConn
	local netip.AddrPort
	v6    bool
	wild  bool // bound to the unspecified address
	batch int
	tos   uint8
	ecn   uint8 // ECN bits of the socket's TOS
	csum  Checksum
	maxB  int // payload limit of one super-packet
	gro   bool

	closed atomic.Bool
	gso    atomic.Bool

	// Counters.
	sentPkts, sentBytes, sendErrs       atomic.Uint64
	recvPkts, recvBytes, recvDrops      atomic.Uint64
	gsoSent, gsoRefused, groRecv, trunc atomic.Uint64
	groCopied                           atomic.Uint64
	zeroTx                              atomic.Bool

	info Info // what Open obtained (immutable afterwards)

	sendMu sync.Mutex
	tx     txState

	recvMu sync.Mutex
	rx     rxState
}

// txState is owned by the goroutine holding sendMu.
type txState struct {
	msgs  []unix.Mmsghdr
	iov   []unix.Iovec
	names [][sockaddrSize]byte
	oob   []byte
	segs  []int // datagrams per message
	bytes []int // payload bytes per message
	// zoneName/zoneIdx cache the last IPv6 zone resolved on send.
	zoneName string
	zoneIdx  uint32
	// The sendmmsg call: input base, n; output res, errno.
	base, n int
	res     int
	errno   syscall.Errno
	fn      func(fd uintptr) bool
	// The checksum toggle: input csumZero, output csumErr.
	csumZero bool
	csumErr  error
	csumFn   func(fd uintptr)
}

// rxState is owned by the goroutine holding recvMu.
type rxState struct {
	msgs  []unix.Mmsghdr
	iov   []unix.Iovec
	names [][sockaddrSize]byte
	oob   []byte
	// GRO. Each recvmmsg message gets a run of the caller's buffers (cut
	// at the predicted gso_size, or whole) and then an overflow buffer of
	// groBufSize in arena. pred/predSegs predict the next coalesced
	// buffers from the last ones (pred 0: expect single datagrams);
	// slotsPer and slotLen describe the layout of the last call.
	arena    []byte
	mapping  *mapping // nil when arena is Go memory
	pred     int
	predSegs int
	lowCalls int
	lowMax   int
	slotsPer int
	slotLen  []int
	// pend holds data that did not land in the caller's buffers, in
	// order; pcur/poff is the next segment to copy out.
	pend       []rxMeta
	pcur, poff int
	// The recvmmsg call.
	n     int
	res   int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// rxMeta describes one received message, or the part of it left in the
// arena: base is its arena offset, n its length, seg its segment size.
type rxMeta struct {
	base, n, seg int
	seg0         int // index in its coalesced buffer of the first segment left
	src, dst     netip.AddrPort
	ecn          uint8
}

var (
	_ link.Link        = (*Link)(nil)
	_ link.StatsLink   = (*Link)(nil)
	_ link.IPIDPlanner = (*Link)(nil)
	_ link.Lender      = (*Link)(nil)
)

// ErrAddress is matched (errors.Is) by Send errors about a destination the
// link cannot reach: invalid, or of the other IP family.
var ErrAddress = errors.New("udp: bad destination address")

// Open binds a UDP socket to cfg.Addr and configures it (see Config and the
// package documentation). Binding an address in use fails with an error that
// names the address and matches syscall.EADDRINUSE. Options the kernel
// refuses are listed in Info().Refused rather than failing Open.
func Open(cfg Config) (*Link, error) {
	cfg = cfg.withDefaults()
	ap := netip.AddrPortFrom(cfg.Addr.Addr().Unmap(), cfg.Addr.Port())
	v6 := ap.Addr().Is6()
	network := "udp4"
	if v6 {
		network = "udp6"
	}
	if cfg.Checksum > ChecksumFull {
		return nil, fmt.Errorf("udp: invalid checksum mode %d", cfg.Checksum)
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		return nil, fmt.Errorf("udp: %w", err) // "listen udp4 1.2.3.4:4791: bind: address already in use"
	}
	conn := pc.(*net.UDPConn)
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("udp: %w", err)
	}
	l := &Link{
		log:   cfg.Logger,
		conn:  conn,
		rc:    rc,
		local: conn.LocalAddr().(*net.UDPAddr).AddrPort(),
		v6:    v6,
		wild:  ap.Addr().IsUnspecified(),
		batch: cfg.BatchSize,
		tos:   cfg.TOS,
		ecn:   cfg.TOS & 3,
		csum:  cfg.Checksum,
		maxB:  maxGSO4,
	}
	l.local = netip.AddrPortFrom(l.local.Addr().Unmap(), l.local.Port())
	if v6 {
		l.maxB = maxGSO6
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) { cerr = l.setup(int(fd), cfg) }); err != nil {
		cerr = err
	}
	if cerr != nil {
		conn.Close()
		return nil, fmt.Errorf("udp: configure %s: %w", l.local, cerr)
	}
	l.alloc()
	l.log.Debug("udp link open", "addr", l.local, "gso", l.gso.Load(), "gro", l.gro,
		"sndbuf", l.info.SndBuf, "rcvbuf", l.info.RcvBuf, "forced", l.info.BufForced,
		"checksum", l.csum, "refused", l.info.Refused)
	return l, nil
}

// setup sets the socket options. Only a failure to read back the buffer
// sizes is an error; refusals are recorded.
func (l *Link) setup(fd int, cfg Config) error {
	refuse := func(name string, err error) {
		l.info.Refused = append(l.info.Refused, name+": "+err.Error())
		l.log.Warn("udp: kernel refused socket option", "option", name, "err", err)
	}
	set := func(level, opt, v int, name string) bool {
		if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
			refuse(name, err)
			return false
		}
		return true
	}
	// Buffers: force when allowed (CAP_NET_ADMIN), else ask.
	forced := true
	if cfg.SndBuf > 0 {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, cfg.SndBuf) != nil {
			forced = false
			set(unix.SOL_SOCKET, unix.SO_SNDBUF, cfg.SndBuf, "SO_SNDBUF")
		}
	}
	if cfg.RcvBuf > 0 {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, cfg.RcvBuf) != nil {
			forced = false
			set(unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.RcvBuf, "SO_RCVBUF")
		}
	}
	var err error
	if l.info.SndBuf, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF); err != nil {
		return err
	}
	if l.info.RcvBuf, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err != nil {
		return err
	}
	l.info.BufForced = forced && cfg.SndBuf > 0 && cfg.RcvBuf > 0
	if 2*cfg.RcvBuf > l.info.RcvBuf || 2*cfg.SndBuf > l.info.SndBuf {
		l.log.Info("udp: socket buffers capped", "sndbuf", l.info.SndBuf, "rcvbuf", l.info.RcvBuf,
			"hint", "raise net.core.rmem_max/wmem_max or run with CAP_NET_ADMIN")
	}

	// DF, ECN reporting, TOS, destination reporting, checksums.
	noCheck := "SO_NO_CHECK"
	if l.v6 {
		set(unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER")
		set(unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 1, "IPV6_DONTFRAG")
		set(unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS")
		set(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(l.tos), "IPV6_TCLASS")
		set(unix.SOL_UDP, unix.UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX")
		if l.wild {
			set(unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO")
		}
		noCheck = "UDP_NO_CHECK6_TX"
	} else {
		set(unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO, "IP_MTU_DISCOVER")
		set(unix.IPPROTO_IP, unix.IP_RECVTOS, 1, "IP_RECVTOS")
		set(unix.IPPROTO_IP, unix.IP_TOS, int(l.tos), "IP_TOS")
		if l.wild {
			set(unix.IPPROTO_IP, unix.IP_PKTINFO, 1, "IP_PKTINFO")
		}
	}
	if l.csum != ChecksumFull {
		if err := l.setNoCheck(fd, true); err != nil {
			refuse(noCheck, err)
			l.csum = ChecksumFull
		} else {
			l.zeroTx.Store(true)
		}
	}
	l.info.Checksum = l.csum

	// GSO: UDP_SEGMENT 0 is a no-op that fails where GSO is unknown.
	if !cfg.DisableGSO && l.csum != ChecksumZero {
		if set(unix.SOL_UDP, unix.UDP_SEGMENT, 0, "UDP_SEGMENT") {
			l.gso.Store(true)
		}
	}
	if !cfg.DisableGRO {
		l.gro = set(unix.SOL_UDP, unix.UDP_GRO, 1, "UDP_GRO")
	}
	return nil
}

func (l *Link) setNoCheck(fd int, zero bool) error {
	v := 0
	if zero {
		v = 1
	}
	if l.v6 {
		return unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_NO_CHECK6_TX, v)
	}
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, v)
}

// alloc preallocates the system-call arrays.
func (l *Link) alloc() {
	b := l.batch
	niov := b
	if l.gso.Load() {
		niov = b * maxSegs
	}
	l.tx = txState{
		msgs:  make([]unix.Mmsghdr, b),
		iov:   make([]unix.Iovec, niov),
		names: make([][sockaddrSize]byte, b),
		oob:   make([]byte, b*txOOBSize),
		segs:  make([]int, b),
		bytes: make([]int, b),
	}
	l.tx.fn = l.sendmmsg
	l.tx.csumFn = func(fd uintptr) { l.tx.csumErr = l.setNoCheck(int(fd), l.tx.csumZero) }
	l.rx = rxState{
		msgs:  make([]unix.Mmsghdr, b),
		iov:   make([]unix.Iovec, b),
		names: make([][sockaddrSize]byte, b),
		oob:   make([]byte, b*rxOOBSize),
	}
	if l.gro {
		l.rx.iov = make([]unix.Iovec, b*(maxSegs+1))
		l.rx.slotLen = make([]int, b)
		l.rx.pend = make([]rxMeta, 0, b)
	}
	if l.gro {
		// Anonymous memory: untouched pages cost nothing, the GC never
		// scans it, and Close returns it at once.
		a, err := unix.Mmap(-1, 0, b*groBufSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			a = make([]byte, b*groBufSize)
		} else {
			// Unmapped by Close, or when a link nobody closed is collected.
			l.rx.mapping = &mapping{b: a}
			runtime.AddCleanup(l, (*mapping).unmap, l.rx.mapping)
		}
		l.rx.arena = a
	}
	l.rx.fn = l.recvmmsg
}

// mapping is anonymous memory to unmap once.
type mapping struct {
	mu sync.Mutex
	b  []byte
}

func (m *mapping) unmap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b != nil {
		unix.Munmap(m.b)
		m.b = nil
	}
}

// LocalAddr returns the bound address (IPv4 addresses unmapped).
func (l *Link) LocalAddr() netip.AddrPort { return l.local }

// Stats returns the link's counters. RecvDropped counts datagrams longer
// than the receive buffer given to Recv.
func (l *Link) Stats() link.Stats {
	return link.Stats{
		SentPackets: l.sentPkts.Load(),
		SentBytes:   l.sentBytes.Load(),
		RecvPackets: l.recvPkts.Load(),
		RecvBytes:   l.recvBytes.Load(),
		RecvDropped: l.recvDrops.Load(),
		SendErrors:  l.sendErrs.Load(),
	}
}

// Info reports the socket's configuration and GSO/GRO counters.
func (l *Link) Info() Info {
	in := l.info
	in.Refused = append([]string(nil), l.info.Refused...)
	in.GSO = l.gso.Load()
	in.GRO = l.gro
	in.ZeroChecksumTx = l.zeroTx.Load()
	in.GSORefused = l.gsoRefused.Load()
	in.GSOSent = l.gsoSent.Load()
	in.GROReceived = l.groRecv.Load()
	in.GROCopied = l.groCopied.Load()
	in.Truncated = l.trunc.Load()
	return in
}

// Close closes the socket. A Send or Recv blocked in the kernel returns
// link.ErrClosed; Close waits until they have left the link's buffers.
// Closing twice returns link.ErrClosed.
func (l *Link) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return link.ErrClosed
	}
	err := l.conn.Close()
	l.recvMu.Lock()
	if l.rx.mapping != nil {
		l.rx.mapping.unmap()
	}
	l.rx.arena = nil
	l.recvMu.Unlock()
	// Wait for an in-flight Send to leave tx (it returns ErrClosed).
	l.sendMu.Lock()
	l.sendMu.Unlock() //nolint:staticcheck // empty critical section on purpose
	return err
}

// ioErr maps an error of the RawConn to link.ErrClosed when the link is
// closed.
func (l *Link) ioErr(op string, err error) error {
	if l.closed.Load() || errors.Is(err, net.ErrClosed) {
		return link.ErrClosed
	}
	return fmt.Errorf("udp: %s: %w", op, err)
}

// ---------------------------------------------------------------- send

// runLen returns how many datagrams from dgs[0] one super-packet carries:
// equal lengths (the last may be shorter, never empty), one destination,
// one ECN value, one source (when the link honours Src), within the
// segment and byte limits. With strict, an IPv4 datagram joins only if its
// IPID equals its place in the run (see link.IPIDPlanner).
func (l *Link) runLen(dgs []link.Datagram, strict bool) int {
	first := &dgs[0]
	seg := len(first.Buf)
	if seg == 0 {
		return 1
	}
	total, k := seg, 1
	for k < len(dgs) && k < maxSegs {
		d := &dgs[k]
		n := len(d.Buf)
		if n == 0 || n > seg || total+n > l.maxB || d.Dst != first.Dst || d.ECN != first.ECN ||
			(l.wild && d.Src.Addr() != first.Src.Addr()) ||
			(strict && !l.v6 && d.IPID != uint16(k)) {
			break
		}
		total += n
		k++
		if n < seg {
			break
		}
	}
	return k
}

// PlanIPID sets dgs[i].IPID to the IPv4 identification datagram i will
// carry if dgs is next passed unchanged to Send: its index in its GSO run,
// 0 when sent alone, and 0 on IPv6 links (link.IPIDPlanner). If the kernel
// refuses GSO before that Send (Info.GSORefused), the planned datagrams
// after each run's first go out alone with ID 0.
func (l *Link) PlanIPID(dgs []link.Datagram) {
	gso := !l.v6 && l.gso.Load()
	for i := 0; i < len(dgs); {
		k := 1
		if gso {
			k = l.runLen(dgs[i:], false)
		}
		for j := 0; j < k; j++ {
			dgs[i+j].IPID = uint16(j)
		}
		i += k
	}
}

// Send transmits dgs in order, coalescing runs into GSO super-packets, and
// returns how many it handed to the kernel. It blocks (in the netpoller)
// while the socket buffer is full. Errors: link.ErrClosed, ErrAddress for a
// destination of the wrong family, or the kernel's (EMSGSIZE above the path
// MTU, ENETUNREACH, EPERM from a firewall, …) wrapped with the destination.
func (l *Link) Send(dgs []link.Datagram) (int, error) {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	if l.closed.Load() {
		return 0, link.ErrClosed
	}
	sent := 0
	for sent < len(dgs) {
		nmsg, ndg, anyGSO, berr := l.buildTx(dgs[sent:])
		if nmsg > 0 {
			k, refused, err := l.flushTx(nmsg, anyGSO)
			sent += k
			l.sentPkts.Add(uint64(k))
			if err != nil {
				l.sendErrs.Add(1)
				return sent, err
			}
			if refused || k < ndg {
				continue // rebuild from the first unsent datagram
			}
		}
		if berr != nil {
			l.sendErrs.Add(1)
			return sent, berr
		}
	}
	return sent, nil
}

// buildTx fills the message arrays from dgs until they are full. It stops
// before a datagram whose destination is unusable and returns that error.
func (l *Link) buildTx(dgs []link.Datagram) (nmsg, ndg int, anyGSO bool, err error) {
	t := &l.tx
	gso := l.gso.Load()
	iov := 0
	for ndg < len(dgs) && nmsg < len(t.msgs) {
		d0 := &dgs[ndg]
		m := nmsg
		nameLen, err := l.putName(&t.names[m], d0.Dst)
		if err != nil {
			return nmsg, ndg, anyGSO, err
		}
		k := 1
		if gso {
			k = l.runLen(dgs[ndg:], true)
		}
		bytes := 0
		for j := 0; j < k; j++ {
			b := dgs[ndg+j].Buf
			v := &t.iov[iov+j]
			v.Base = nil
			if len(b) > 0 {
				v.Base = &b[0]
			}
			v.SetLen(len(b))
			bytes += len(b)
		}
		h := &t.msgs[m].Hdr
		h.Name = &t.names[m][0]
		h.Namelen = nameLen
		h.Iov = &t.iov[iov]
		h.SetIovlen(k)
		h.Flags = 0
		oob := t.oob[m*txOOBSize : (m+1)*txOOBSize]
		c := 0
		if k > 1 {
			c += putCmsg(oob[c:], unix.SOL_UDP, unix.UDP_SEGMENT, 2, uint32(len(d0.Buf)))
			anyGSO = true
		}
		if e := d0.ECN & 3; e != l.ecn {
			tos := uint32(l.tos&^3 | e)
			if l.v6 {
				c += putCmsg(oob[c:], unix.IPPROTO_IPV6, unix.IPV6_TCLASS, 4, tos)
			} else {
				c += putCmsg(oob[c:], unix.IPPROTO_IP, unix.IP_TOS, 4, tos)
			}
		}
		if l.wild {
			if a := d0.Src.Addr().Unmap(); a.IsValid() && !a.IsUnspecified() {
				c += l.putPktinfo(oob[c:], a)
			}
		}
		h.Control = nil
		if c > 0 {
			h.Control = &oob[0]
		}
		h.SetControllen(c)
		t.segs[m], t.bytes[m] = k, bytes
		nmsg++
		ndg += k
		iov += k
	}
	return nmsg, ndg, anyGSO, nil
}

// flushTx sends messages [0, nmsg). It returns the datagrams sent, whether
// the kernel refused a super-packet (GSO is then off and the caller
// rebuilds), or the error that stopped it.
func (l *Link) flushTx(nmsg int, anyGSO bool) (sent int, refused bool, err error) {
	t := &l.tx
	if l.csum == ChecksumAuto && anyGSO == l.zeroTx.Load() {
		// Linux segments only checksummed super-packets (udp_send_skb).
		t.csumZero = !anyGSO
		if cerr := l.rc.Control(t.csumFn); cerr != nil {
			return 0, false, l.ioErr("send", cerr)
		}
		if t.csumErr == nil {
			l.zeroTx.Store(t.csumZero)
		}
	}
	for i := 0; i < nmsg; {
		t.base, t.n = i, nmsg-i
		if werr := l.rc.Write(t.fn); werr != nil {
			return sent, false, l.ioErr("send", werr)
		}
		if t.errno == 0 && t.res > 0 {
			var bytes, gsos uint64
			for m := i; m < i+t.res; m++ {
				sent += t.segs[m]
				bytes += uint64(t.bytes[m])
				if t.segs[m] > 1 {
					gsos++
				}
			}
			l.sentBytes.Add(bytes)
			l.gsoSent.Add(gsos)
			i += t.res
			continue
		}
		errno := t.errno
		if errno == 0 {
			errno = unix.EIO // sendmmsg sent nothing and said nothing
		}
		if t.segs[i] > 1 && (errno == unix.EIO || errno == unix.EINVAL) {
			l.gso.Store(false)
			l.gsoRefused.Add(1)
			l.log.Warn("udp: kernel refused GSO; sending one datagram per packet", "addr", l.local, "err", errno)
			return sent, true, nil
		}
		return sent, false, fmt.Errorf("udp: send %d bytes to %s: %w", t.bytes[i]/t.segs[i], l.msgDst(i), errno)
	}
	return sent, false, nil
}

// sendmmsg is the RawConn.Write callback; it reports "not ready" only on
// EAGAIN so the netpoller waits for room.
func (l *Link) sendmmsg(fd uintptr) bool {
	t := &l.tx
	for {
		var r uintptr
		var e syscall.Errno
		if t.n == 1 {
			// One message: sendmsg is lighter than sendmmsg (latency).
			h := &t.msgs[t.base]
			r, _, e = unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&h.Hdr)), 0)
			if e == 0 {
				r = 1
			}
		} else {
			r, _, e = unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&t.msgs[t.base])), uintptr(t.n), 0, 0, 0)
		}
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		t.res, t.errno = int(r), e
		if e != 0 {
			t.res = 0
		}
		return true
	}
}

func (l *Link) msgDst(m int) netip.AddrPort {
	return parseName(&l.tx.names[m])
}

// putName writes ap as a sockaddr for this socket's family.
func (l *Link) putName(b *[sockaddrSize]byte, ap netip.AddrPort) (uint32, error) {
	a := ap.Addr()
	if !l.v6 {
		a = a.Unmap()
		if !a.Is4() {
			return 0, fmt.Errorf("%w: %v on IPv4 link %s", ErrAddress, ap, l.local)
		}
		putU16(b[0:], unix.AF_INET)
		b[2], b[3] = byte(ap.Port()>>8), byte(ap.Port())
		a4 := a.As4()
		copy(b[4:8], a4[:])
		clear(b[8:16])
		return unix.SizeofSockaddrInet4, nil
	}
	if !a.Is6() || a.Is4In6() {
		return 0, fmt.Errorf("%w: %v on IPv6 link %s", ErrAddress, ap, l.local)
	}
	putU16(b[0:], unix.AF_INET6)
	b[2], b[3] = byte(ap.Port()>>8), byte(ap.Port())
	clear(b[4:8])
	a16 := a.As16()
	copy(b[8:24], a16[:])
	putU32(b[24:], l.zoneIndex(a.Zone()))
	return unix.SizeofSockaddrInet6, nil
}

// zoneIndex resolves an IPv6 zone to an interface index, caching the last.
func (l *Link) zoneIndex(z string) uint32 {
	if z == "" {
		return 0
	}
	t := &l.tx
	if z == t.zoneName {
		return t.zoneIdx
	}
	var idx uint32
	if ifi, err := net.InterfaceByName(z); err == nil {
		idx = uint32(ifi.Index)
	} else {
		for i := 0; i < len(z); i++ {
			if z[i] < '0' || z[i] > '9' {
				idx = 0
				break
			}
			idx = idx*10 + uint32(z[i]-'0')
		}
	}
	t.zoneName, t.zoneIdx = z, idx
	return idx
}

// putPktinfo writes an IP_PKTINFO / IPV6_PKTINFO control message choosing
// the source address a.
func (l *Link) putPktinfo(b []byte, a netip.Addr) int {
	if l.v6 {
		if !a.Is6() {
			return 0
		}
		n := putCmsg(b, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, unix.SizeofInet6Pktinfo, 0)
		d := b[unix.CmsgLen(0):]
		a16 := a.As16()
		copy(d[0:16], a16[:])
		putU32(d[16:], 0)
		return n
	}
	if !a.Is4() {
		return 0
	}
	n := putCmsg(b, unix.IPPROTO_IP, unix.IP_PKTINFO, unix.SizeofInet4Pktinfo, 0)
	d := b[unix.CmsgLen(0):]
	putU32(d[0:], 0) // ifindex
	a4 := a.As4()
	copy(d[4:8], a4[:]) // ipi_spec_dst: the source address
	clear(d[8:12])
	return n
}

// ---------------------------------------------------------------- receive

// Recv blocks (in the netpoller) until at least one datagram arrives and
// fills dgs from index 0, returning the count. With GRO, segments of a
// coalesced buffer that do not fit in dgs are kept for the next call.
// After Close it returns link.ErrClosed.
func (l *Link) Recv(dgs []link.Datagram) (int, error) {
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	if l.closed.Load() {
		return 0, link.ErrClosed
	}
	if len(dgs) == 0 {
		return 0, nil
	}
	if l.gro {
		return l.recvGRO(dgs)
	}
	return l.recvDirect(dgs)
}

// RecvLend is Recv (link.Lender), except that with GRO the datagrams are
// not copied into dgs[i].Buf: each recvmmsg message lands whole in the
// link's arena and dgs[i].Buf is pointed at its segments there (capacity
// limited to the segment), valid until the next Recv or RecvLend call. That
// saves the copy Recv makes whenever a buffer's gso_size differs from the
// last one (a RoCE WRITE alternates 4128-byte FIRST and 4112-byte MIDDLE
// runs) and the kernel's per-segment iovecs. Without GRO it is Recv.
func (l *Link) RecvLend(dgs []link.Datagram) (int, error) {
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	if l.closed.Load() {
		return 0, link.ErrClosed
	}
	if len(dgs) == 0 {
		return 0, nil
	}
	if !l.gro {
		return l.recvDirect(dgs)
	}
	for {
		if k := l.lendPending(dgs); k > 0 {
			return k, nil
		}
		m := l.layoutArena(len(dgs))
		if err := l.recvCall(m); err != nil {
			return 0, err
		}
		l.collectArena()
	}
}

// layoutArena prepares recvmmsg messages that each read into their own
// arena slot, enough of them for about n datagrams at the predicted
// segments per buffer, and returns how many.
func (l *Link) layoutArena(n int) int {
	r := &l.rx
	msgs := min(l.batch, max(1, n/max(r.predSegs, 1)))
	r.slotsPer = 0
	for m := 0; m < msgs; m++ {
		v := &r.iov[m]
		v.Base = &r.arena[m*groBufSize]
		v.SetLen(groBufSize)
		r.slotLen[m] = 0
		l.prepRx(m, v)
	}
	return msgs
}

// collectArena queues every message of the last recvmmsg, read by a
// layoutArena layout, in pend.
func (l *Link) collectArena() {
	r := &l.rx
	r.pend, r.pcur, r.poff = r.pend[:0], 0, 0
	var seen groSeen
	for m := 0; m < r.res; m++ {
		md := rxMeta{}
		total, seg, _, ok := l.message(m, &md, &seen)
		if !ok {
			continue
		}
		md.base, md.n, md.seg = m*groBufSize, total, seg
		r.pend = append(r.pend, md)
	}
	l.predict(seen)
}

// lendPending points dgs at pending segments in the arena and returns how
// many.
func (l *Link) lendPending(dgs []link.Datagram) int {
	r := &l.rx
	k := 0
	var bytes uint64
	for r.pcur < len(r.pend) && k < len(dgs) {
		md := &r.pend[r.pcur]
		if r.poff >= md.n && md.n > 0 {
			r.pcur++
			r.poff = 0
			continue
		}
		end := min(r.poff+md.seg, md.n)
		id := uint16(0)
		if md.seg > 0 {
			id = l.idHint(md.seg0 + r.poff/md.seg)
		}
		d := &dgs[k]
		d.Buf = r.arena[md.base+r.poff : md.base+end : md.base+end]
		d.Src, d.Dst, d.ECN, d.IPID, d.IPIDKnown = md.src, md.dst, md.ecn, id, false
		bytes += uint64(end - r.poff)
		k++
		if md.n == 0 { // an empty datagram
			r.pcur++
			continue
		}
		r.poff = end
	}
	if r.pcur >= len(r.pend) {
		r.pend, r.pcur, r.poff = r.pend[:0], 0, 0
	}
	if k > 0 {
		l.recvPkts.Add(uint64(k))
		l.recvBytes.Add(bytes)
	}
	return k
}

// recvDirect receives straight into the caller's buffers.
func (l *Link) recvDirect(dgs []link.Datagram) (int, error) {
	r := &l.rx
	n := min(len(dgs), l.batch)
	for {
		for i := 0; i < n; i++ {
			b := dgs[i].Buf[:cap(dgs[i].Buf)]
			v := &r.iov[i]
			v.Base = nil
			if len(b) > 0 {
				v.Base = &b[0]
			}
			v.SetLen(len(b))
			l.prepRx(i, v)
		}
		if err := l.recvCall(n); err != nil {
			return 0, err
		}
		k := 0
		var bytes uint64
		for m := 0; m < r.res; m++ {
			mh := &r.msgs[m]
			if mh.Hdr.Flags&unix.MSG_TRUNC != 0 {
				l.trunc.Add(1)
				l.recvDrops.Add(1)
				continue
			}
			d := &dgs[k]
			if k != m {
				// A truncated datagram left slot k free: move this one
				// down (buffers stay at their index, as the caller put them).
				if cap(d.Buf) < int(mh.Len) {
					l.trunc.Add(1)
					l.recvDrops.Add(1)
					continue
				}
				copy(d.Buf[:mh.Len], dgs[m].Buf[:mh.Len])
			}
			var md rxMeta
			l.parseRx(m, &md)
			d.Buf = d.Buf[:mh.Len]
			d.Src, d.Dst, d.ECN, d.IPID, d.IPIDKnown = md.src, md.dst, md.ecn, 0, false
			bytes += uint64(mh.Len)
			k++
		}
		if k > 0 {
			l.recvPkts.Add(uint64(k))
			l.recvBytes.Add(bytes)
			return k, nil
		}
	}
}

// recvGRO receives with UDP_GRO on. Coalesced buffers are scattered by the
// kernel straight into the caller's buffers when their gso_size and
// segment count are as predicted; what does not fit (more segments than
// slots, a different gso_size, anything after such a message, to keep the
// order) is gathered in the arena and copied out, now or by the next calls.
func (l *Link) recvGRO(dgs []link.Datagram) (int, error) {
	for {
		if k := l.deliverPending(dgs); k > 0 {
			return k, nil
		}
		m := l.layoutGRO(dgs)
		if err := l.recvCall(m); err != nil {
			return 0, err
		}
		if k := l.scatterGRO(dgs); k > 0 {
			return k, nil
		}
	}
}

// layoutGRO prepares the recvmmsg messages and returns how many. Three
// layouts, chosen by the prediction:
//
//   - singles (pred 0): message m reads into the caller's buffer m, whole,
//     then into arena slot m;
//   - scatter (pred >= scatterMin): message m reads into per caller
//     buffers cut at pred, so a coalesced buffer of up to per segments
//     splits itself, then into arena slot m;
//   - arena (small segments): message m reads into arena slot m only.
//
// Scattering saves the copy out of the arena but costs the kernel one
// iovec per segment and the caller's slots bound the batch: measured on
// loopback (BenchmarkRecvDrain) it is ~25 % cheaper per 4140-byte datagram
// and ~30 % dearer per 1068-byte one, hence scatterMin.
func (l *Link) layoutGRO(dgs []link.Datagram) int {
	r := &l.rx
	n := min(len(dgs), len(r.iov)-l.batch)
	per := 1
	switch {
	case r.pred == 0:
	case r.pred < scatterMin || r.predSegs < 2:
		per = 0
	default:
		per = min(r.predSegs, maxSegs, n)
		for i := 0; i < n/per*per; i++ {
			if cap(dgs[i].Buf) < r.pred {
				per = 0 // a buffer too small for a segment
				break
			}
		}
	}
	msgs := l.batch
	if per > 0 {
		msgs = min(n/per, l.batch)
	}
	r.slotsPer = per
	iv := 0
	for m := 0; m < msgs; m++ {
		first := iv
		r.slotLen[m] = 0
		for j := 0; j < per; j++ {
			b := dgs[m*per+j].Buf
			ln := cap(b)
			if per > 1 {
				ln = r.pred
			}
			v := &r.iov[iv]
			v.Base = nil
			if ln > 0 {
				v.Base = &b[:1][0]
			}
			v.SetLen(ln)
			r.slotLen[m] = ln
			iv++
		}
		v := &r.iov[iv]
		v.Base = &r.arena[m*groBufSize]
		v.SetLen(groBufSize)
		iv++
		l.prepRx(m, &r.iov[first])
		r.msgs[m].Hdr.SetIovlen(per + 1)
	}
	return msgs
}

// scatterGRO turns the messages of the last recvmmsg into datagrams: in
// place where the layout matched, else into pend. It returns how many
// datagrams it put in dgs and updates the prediction. Buffers never move
// between slots: the caller may track them by index.
func (l *Link) scatterGRO(dgs []link.Datagram) int {
	r := &l.rx
	r.pend, r.pcur, r.poff = r.pend[:0], 0, 0
	k, spill := 0, false
	var bytes uint64
	var seen groSeen
	for m := 0; m < r.res; m++ {
		md := rxMeta{}
		total, seg, nseg, ok := l.message(m, &md, &seen)
		if !ok {
			continue
		}
		s0, slots, sl := m*r.slotsPer, r.slotsPer, r.slotLen[m]
		in := min(nseg, slots)
		if !spill && (seg == sl || (nseg == 1 && total <= sl)) && fitsDown(dgs, k, s0, in, seg, total) {
			for j := 0; j < in; j++ {
				d := &dgs[k]
				n := min(seg, total-j*seg)
				if s := s0 + j; s != k {
					// An earlier message left slots unused: move down
					// (k < s, so this never overwrites unread data).
					copy(d.Buf[:n], dgs[s].Buf[:n])
					l.groCopied.Add(1)
				}
				d.Buf = d.Buf[:n]
				d.Src, d.Dst, d.ECN, d.IPID, d.IPIDKnown = md.src, md.dst, md.ecn, l.idHint(j), false
				bytes += uint64(n)
				k++
			}
			if nseg > in { // the rest is in the overflow buffer, segment-aligned
				md.base, md.n, md.seg, md.seg0 = m*groBufSize, total-in*seg, seg, in
				r.pend = append(r.pend, md)
				spill = true
			}
			continue
		}
		// Gather the whole message in its overflow buffer: move what
		// overflowed up, then copy in what landed in the slots.
		a := r.arena[m*groBufSize : (m+1)*groBufSize]
		inSlots := min(total, slots*sl)
		if rest := total - inSlots; rest > 0 && inSlots > 0 {
			copy(a[inSlots:total], a[:rest])
		}
		for j, off := 0, 0; off < inSlots; j++ {
			n := min(sl, inSlots-off)
			copy(a[off:off+n], dgs[s0+j].Buf[:n])
			off += n
		}
		md.base, md.n, md.seg = m*groBufSize, total, seg
		r.pend = append(r.pend, md)
		spill = true
	}
	l.predict(seen)
	if k > 0 {
		l.recvPkts.Add(uint64(k))
		l.recvBytes.Add(bytes)
	}
	return k
}

// groSeen is what the messages of one recvmmsg showed of GRO, for predict.
type groSeen struct {
	coalesced bool // some message was a coalesced buffer
	lastSeg   int  // the gso_size of the last coalesced one
	mostSegs  int  // the most segments in one message
}

// message reads message m of the last recvmmsg: its metadata into md, its
// length, its segment size (the whole length unless GRO coalesced it) and
// segment count, noted in g. It reports false for a truncated message,
// counted as a drop.
func (l *Link) message(m int, md *rxMeta, g *groSeen) (total, seg, nseg int, ok bool) {
	mh := &l.rx.msgs[m]
	if mh.Hdr.Flags&unix.MSG_TRUNC != 0 {
		l.trunc.Add(1)
		l.recvDrops.Add(1)
		return 0, 0, 0, false
	}
	l.parseRx(m, md)
	total, seg = int(mh.Len), md.seg
	if seg <= 0 || seg >= total {
		seg = total
	} else {
		g.coalesced, g.lastSeg = true, seg
		l.groRecv.Add(1)
	}
	nseg = 1
	if seg > 0 {
		nseg = (total + seg - 1) / seg
	}
	g.mostSegs = max(g.mostSegs, nseg)
	return total, seg, nseg, true
}

// predict updates the layout prediction after a recvmmsg whose messages
// showed g. Predicting too many segments per buffer only costs batching
// (fewer, larger messages per call); too few costs copies. So the
// prediction rises at once and falls only after lowWindow calls that all
// stayed below it, to the largest they saw.
func (l *Link) predict(g groSeen) {
	const lowWindow = 32
	r := &l.rx
	if g.coalesced {
		r.pred = g.lastSeg
	}
	mostSegs := g.mostSegs
	if mostSegs >= r.predSegs {
		r.predSegs, r.lowCalls, r.lowMax = mostSegs, 0, 0
		return
	}
	r.lowMax = max(r.lowMax, mostSegs)
	if r.lowCalls++; r.lowCalls >= lowWindow {
		r.predSegs, r.lowCalls, r.lowMax = max(r.lowMax, 1), 0, 0
		if r.predSegs == 1 {
			r.pred = 0
		}
	}
}

// fitsDown says whether the in segments (of seg bytes, total in all) that
// landed in slots s0.. can be delivered at k..: in place, or moved down into
// buffers large enough.
func fitsDown(dgs []link.Datagram, k, s0, in, seg, total int) bool {
	if k == s0 {
		return true
	}
	for j := 0; j < in; j++ {
		if cap(dgs[k+j].Buf) < min(seg, total-j*seg) {
			return false
		}
	}
	return true
}

// idHint is the IPv4 ID segment j of a coalesced buffer most likely
// carried: a buffer that is one GSO super-packet (loopback passes them
// whole) or that GRO merged from one (IPv4 GRO merges only IDs that
// increment by one, or that are all the same) holds IDs 0, 1, 2, … from a
// Linux sender (link.IPIDPlanner). It is a hint (IPIDKnown stays false):
// the device tries it first and recovers any other ID from the ICRC. IPv6
// has no ID: 0.
func (l *Link) idHint(j int) uint16 {
	if l.v6 {
		return 0
	}
	return uint16(j)
}

// deliverPending copies pending segments into dgs and returns how many.
func (l *Link) deliverPending(dgs []link.Datagram) int {
	r := &l.rx
	k := 0
	var bytes uint64
	for r.pcur < len(r.pend) && k < len(dgs) {
		md := &r.pend[r.pcur]
		if md.n == 0 { // an empty datagram
			d := &dgs[k]
			d.Buf = d.Buf[:0]
			d.Src, d.Dst, d.ECN, d.IPID, d.IPIDKnown = md.src, md.dst, md.ecn, 0, false
			k++
			r.pcur++
			continue
		}
		if r.poff >= md.n {
			r.pcur++
			r.poff = 0
			continue
		}
		end := min(r.poff+md.seg, md.n)
		p := r.arena[md.base+r.poff : md.base+end]
		id := l.idHint(md.seg0 + r.poff/md.seg)
		r.poff = end
		d := &dgs[k]
		if cap(d.Buf) < len(p) {
			l.trunc.Add(1)
			l.recvDrops.Add(1)
			continue
		}
		d.Buf = d.Buf[:len(p)]
		copy(d.Buf, p)
		d.Src, d.Dst, d.ECN, d.IPID, d.IPIDKnown = md.src, md.dst, md.ecn, id, false
		bytes += uint64(len(p))
		k++
	}
	if r.pcur >= len(r.pend) {
		r.pend, r.pcur, r.poff = r.pend[:0], 0, 0
	}
	if k > 0 {
		l.recvPkts.Add(uint64(k))
		l.recvBytes.Add(bytes)
		l.groCopied.Add(uint64(k))
	}
	return k
}

func (l *Link) prepRx(i int, v *unix.Iovec) {
	r := &l.rx
	h := &r.msgs[i].Hdr
	h.Name = &r.names[i][0]
	h.Namelen = sockaddrSize
	h.Iov = v
	h.SetIovlen(1)
	h.Control = &r.oob[i*rxOOBSize]
	h.SetControllen(rxOOBSize)
	h.Flags = 0
	r.msgs[i].Len = 0
}

// recvCall runs recvmmsg on n prepared messages, waiting in the netpoller.
func (l *Link) recvCall(n int) error {
	r := &l.rx
	for {
		r.n = n
		if err := l.rc.Read(r.fn); err != nil {
			return l.ioErr("receive", err)
		}
		switch r.errno {
		case 0:
			if r.res > 0 {
				return nil
			}
		case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH, unix.EHOSTDOWN, unix.ENETDOWN:
			// ICMP errors queued on the socket: not about any datagram.
		default:
			return fmt.Errorf("udp: receive on %s: %w", l.local, r.errno)
		}
	}
}

// recvmmsg is the RawConn.Read callback.
func (l *Link) recvmmsg(fd uintptr) bool {
	r := &l.rx
	for {
		var res uintptr
		var e syscall.Errno
		if r.n == 1 {
			// One message: recvmsg is lighter than recvmmsg (latency).
			h := &r.msgs[0]
			res, _, e = unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&h.Hdr)), 0)
			if e == 0 {
				h.Len = uint32(res)
				res = 1
			}
		} else {
			res, _, e = unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(r.n), 0, 0, 0)
		}
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.res, r.errno = int(res), e
		if e != 0 {
			r.res = 0
		}
		return true
	}
}

// parseRx reads message m's source address and control messages.
func (l *Link) parseRx(m int, md *rxMeta) {
	r := &l.rx
	md.src = parseName(&r.names[m])
	md.dst = l.local
	h := &r.msgs[m].Hdr
	oob := r.oob[m*rxOOBSize : m*rxOOBSize+int(h.Controllen)]
	hdr := unix.CmsgLen(0)
	for len(oob) >= hdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		cl := int(c.Len)
		if cl < hdr || cl > len(oob) {
			return
		}
		data := oob[hdr:cl]
		switch {
		case c.Level == unix.SOL_UDP && c.Type == unix.UDP_GRO && len(data) >= 4:
			md.seg = int(getU32(data))
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_TOS && len(data) >= 1:
			md.ecn = data[0] & 3
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_TCLASS && len(data) >= 4:
			md.ecn = uint8(getU32(data)) & 3
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			md.dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(data[8:12])), l.local.Port())
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			md.dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(data[0:16])), l.local.Port())
		}
		sp := unix.CmsgSpace(cl - hdr)
		if sp >= len(oob) {
			return
		}
		oob = oob[sp:]
	}
}

// parseName decodes a sockaddr_in / sockaddr_in6.
func parseName(b *[sockaddrSize]byte) netip.AddrPort {
	port := uint16(b[2])<<8 | uint16(b[3])
	switch getU16(b[0:]) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case unix.AF_INET6:
		a := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := getU32(b[24:]); scope != 0 && a.IsLinkLocalUnicast() {
			a = a.WithZone(zoneName(scope))
		}
		return netip.AddrPortFrom(a, port)
	}
	return netip.AddrPort{}
}

func zoneName(idx uint32) string {
	if ifi, err := net.InterfaceByIndex(int(idx)); err == nil {
		return ifi.Name
	}
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + idx%10)
		idx /= 10
		if idx == 0 {
			break
		}
	}
	return string(b[i:])
}

// putCmsg writes a control message header and a native-endian value of
// size 1, 2 or 4 (larger payloads are written by the caller) and returns
// CMSG_SPACE(size).
func putCmsg(b []byte, level, typ int32, size int, v uint32) int {
	c := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	c.Level, c.Type = level, typ
	c.SetLen(unix.CmsgLen(size))
	d := b[unix.CmsgLen(0):]
	switch size {
	case 1:
		d[0] = byte(v)
	case 2:
		putU16(d, uint16(v))
	case 4:
		putU32(d, v)
	}
	sp := unix.CmsgSpace(size)
	clear(b[unix.CmsgLen(size):sp])
	return sp
}

func putU16(b []byte, v uint16) { binary.NativeEndian.PutUint16(b, v) }
func putU32(b []byte, v uint32) { binary.NativeEndian.PutUint32(b, v) }
func getU16(b []byte) uint16    { return binary.NativeEndian.Uint16(b) }
func getU32(b []byte) uint32    { return binary.NativeEndian.Uint32(b) }
