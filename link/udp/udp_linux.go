//go:build linux

package udp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

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
	// rxOOBSize: UDP_GRO (int) + TOS/TCLASS (int) + TTL/HOPLIMIT (int) +
	// PKTINFO, with room.
	rxOOBSize = 128
)

// Link is a RoCEv2 transport over one kernel UDP socket. See the package
// documentation for its behaviour and buffer ownership.
type Link struct {
	log    *slog.Logger
	netns  int // the network namespace Open ran in (an fd), for later send sockets; -1: unknown
	conn   *net.UDPConn
	rc     syscall.RawConn
	local  netip.AddrPort
	v6     bool
	wild   bool // bound to the unspecified address
	batch  int
	tos    uint8
	ecn    uint8 // ECN bits of the socket's TOS
	csum   Checksum
	maxB   int // payload limit of one super-packet
	gro    bool
	sndBuf int // Config.SndBuf, for the send sockets

	rcvMu     sync.Mutex // GrowRcvBuf
	rcvAsked  int        // the receive buffer asked for, under rcvMu
	rcvCapped bool       // GrowRcvBuf said the kernel capped it (said once), under rcvMu
	rcvBuf    atomic.Int64

	closed atomic.Bool
	gso    atomic.Bool
	spin   atomic.Int64 // busy-poll time of Pump in ns (SetBusyPoll)

	// Counters.
	sentPkts, sentBytes, sendErrs       atomic.Uint64
	recvPkts, recvBytes, recvDrops      atomic.Uint64
	gsoSent, gsoRefused, groRecv, trunc atomic.Uint64
	groCopied, emptyReads, polledReads  atomic.Uint64
	zeroTx                              atomic.Bool

	info Info // what Open obtained (immutable afterwards)

	sendMu sync.Mutex
	tx     txState

	recvMu sync.Mutex
	rx     rxState

	pool portPool // SourcePort's send sockets (sport_linux.go)
}

var (
	_ link.Link         = (*Link)(nil)
	_ link.StatsLink    = (*Link)(nil)
	_ link.IPIDPlanner  = (*Link)(nil)
	_ link.Lender       = (*Link)(nil)
	_ link.Pumper       = (*Link)(nil)
	_ link.SourcePorter = (*Link)(nil)
	_ link.Gatherer     = (*Link)(nil)
	_ link.RcvBufGrower = (*Link)(nil)
	_ link.BusyPoller   = (*Link)(nil)
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
		log:    cfg.Logger,
		netns:  openNetns(),
		conn:   conn,
		rc:     rc,
		local:  conn.LocalAddr().(*net.UDPAddr).AddrPort(),
		v6:     v6,
		wild:   ap.Addr().IsUnspecified(),
		batch:  cfg.BatchSize,
		tos:    cfg.TOS,
		ecn:    cfg.TOS & 3,
		csum:   cfg.Checksum,
		maxB:   maxGSO4,
		sndBuf: cfg.SndBuf,
	}
	l.SetBusyPoll(cfg.BusyPoll)
	l.pool.max = cfg.MaxSourcePorts
	if l.pool.max == 0 {
		l.pool.max = defaultMaxSourcePorts()
	}
	l.pool.byPort = make(map[uint16]*sendSock)
	l.pool.main = sendSock{rc: rc, port: conn.LocalAddr().(*net.UDPAddr).AddrPort().Port(), zeroTx: &l.zeroTx}
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
	l.rcvAsked = cfg.RcvBuf
	l.rcvBuf.Store(int64(l.info.RcvBuf))
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
		set(unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1, "IPV6_RECVHOPLIMIT")
		set(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(l.tos), "IPV6_TCLASS")
		set(unix.SOL_UDP, unix.UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX")
		set(unix.IPPROTO_IPV6, ipv6FlowinfoSend, 1, "IPV6_FLOWINFO_SEND")
		if l.wild {
			set(unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO")
		}
		noCheck = "UDP_NO_CHECK6_TX"
	} else {
		set(unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO, "IP_MTU_DISCOVER")
		set(unix.IPPROTO_IP, unix.IP_RECVTOS, 1, "IP_RECVTOS")
		set(unix.IPPROTO_IP, unix.IP_RECVTTL, 1, "IP_RECVTTL")
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
	niov := b * iovPerDgram
	if l.gso.Load() {
		niov *= maxSegs
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
		l.allocArena()
	}
	l.rx.fn = l.recvmmsg
}

// Gathers reports true: Send takes link.Datagram's two-part form and hands
// the kernel one iovec per part (sendmsg/sendmmsg gather the bytes as they
// copy them into the socket buffer), GSO super-packets included.
func (l *Link) Gathers() bool { return true }

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

		SourcePortShared: l.pool.shared.Load(),
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
	in.EmptyReads = l.emptyReads.Load()
	in.PolledReads = l.polledReads.Load()
	in.RcvBuf = int(l.rcvBuf.Load())
	return in
}

// GrowRcvBuf raises the socket's receive buffer to n bytes if it was
// asked for less (link.RcvBufGrower): forced with CAP_NET_ADMIN
// (SO_RCVBUFFORCE), else asked for and capped by the kernel at
// net.core.rmem_max (logged once). It returns the size getsockopt
// reports.
func (l *Link) GrowRcvBuf(n int) (int, error) {
	l.rcvMu.Lock()
	defer l.rcvMu.Unlock()
	if n <= l.rcvAsked {
		return int(l.rcvBuf.Load()), nil
	}
	var got int
	var err error
	cerr := l.rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) != nil {
			if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, n); err != nil {
				return
			}
		}
		got, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	})
	if cerr != nil {
		return int(l.rcvBuf.Load()), l.ioErr("grow receive buffer", cerr)
	}
	if err != nil {
		return int(l.rcvBuf.Load()), fmt.Errorf("udp: grow receive buffer: %w", err)
	}
	l.rcvAsked = n
	l.rcvBuf.Store(int64(got))
	if got < 2*n && !l.rcvCapped {
		l.rcvCapped = true
		l.log.Info("udp: receive buffer capped", "asked", n, "rcvbuf", got,
			"hint", "raise net.core.rmem_max or run with CAP_NET_ADMIN")
	}
	return got, nil
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
	// Wait for an in-flight Send to leave tx (it returns ErrClosed), then
	// close the send sockets.
	l.pool.mu.Lock()
	l.sendMu.Lock()
	err = errors.Join(err, l.closePool())
	if l.netns >= 0 {
		unix.Close(l.netns)
		l.netns = -1
	}
	l.sendMu.Unlock()
	l.pool.mu.Unlock()
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
