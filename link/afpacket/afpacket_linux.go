//go:build linux

package afpacket

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/internal/rawnet"
)

// Link is a RoCEv2 transport over an AF_PACKET socket with a memory-mapped
// receive ring. See the package documentation.
type Link struct {
	cfg   Config
	log   *slog.Logger
	local netip.AddrPort
	info  Info

	nl    *rawnet.Netlink
	res   *rawnet.Resolver
	guard *rawnet.Guard

	fd int
	f  *os.File
	rc syscall.RawConn

	closed atomic.Bool

	sentPkts, sentBytes, sendErrs atomic.Uint64
	recvPkts, recvBytes           atomic.Uint64
	drops                         rawnet.DropCounters
	statsMu                       sync.Mutex
	ringFull, freezes             uint64 // accumulated PACKET_STATISTICS, under statsMu

	sendMu sync.Mutex
	tx     txState

	recvMu sync.Mutex
	rx     rxState
}

var (
	_ link.Link         = (*Link)(nil)
	_ link.StatsLink    = (*Link)(nil)
	_ link.SourcePorter = (*Link)(nil)
)

// ErrPortInUse is matched by Open errors when another socket (a kernel rxe
// device, a link/udp link, another program) owns the UDP port on the
// link's address and the guard socket cannot be bound.
var ErrPortInUse = rawnet.ErrPortInUse

// ErrUnresolved is matched by Send errors when the next hop of a
// destination answered neither the kernel's neighbour table nor the link's
// own ARP requests / neighbour solicitations within ResolveTimeout. The
// destination is then not retried for another ResolveTimeout.
var ErrUnresolved = rawnet.ErrUnresolved

// ErrTooBig is matched by Send errors for a frame above the interface MTU.
var ErrTooBig = errors.New("afpacket: frame larger than the interface MTU")

// Open opens the link on cfg.Interface for cfg.Addr: it needs CAP_NET_RAW
// (errors match link.ErrNotSupported otherwise). Every socket is opened
// here, in the network namespace of the calling thread.
func Open(cfg Config) (_ *Link, err error) {
	cfg = cfg.withDefaults()
	if cfg.Interface == "" || !cfg.Addr.Addr().IsValid() || cfg.Addr.Addr().IsUnspecified() {
		return nil, errors.New("afpacket: Config.Interface and a specific Config.Addr are required")
	}
	if cfg.Ring > RingV3 || cfg.Guard > GuardOff || cfg.VLANID > 4094 {
		return nil, errors.New("afpacket: invalid Ring, Guard or VLANID")
	}
	l := &Link{cfg: cfg, log: cfg.Logger, local: cfg.Addr, fd: -1}
	defer func() {
		if err != nil {
			l.teardown()
		}
	}()
	if l.nl, err = rawnet.OpenNetlink(); err != nil {
		return nil, err
	}
	ifc, err := l.nl.Interface(cfg.Interface)
	if err != nil {
		return nil, err
	}
	l.info = Info{Interface: ifc.Name, Ifindex: ifc.Index, MAC: ifc.MAC, MTU: ifc.MTU, Ring: cfg.Ring}
	if !ifc.Up {
		l.log.Warn("afpacket: interface is down", "interface", ifc.Name)
	}
	owned, _, err := l.nl.LocalAddr(cfg.Addr.Addr())
	if err != nil {
		return nil, fmt.Errorf("afpacket: list addresses: %w", err)
	}
	l.info.Owned = owned
	if owned && cfg.Guard == GuardAuto {
		if l.guard, err = rawnet.OpenGuard(cfg.Addr); err != nil {
			return nil, fmt.Errorf("afpacket: %w", err)
		}
		l.info.Guarded = l.guard != nil
	}
	if err := l.openSocket(ifc); err != nil {
		return nil, err
	}
	if l.res, err = rawnet.NewResolver(rawnet.ResolverConfig{
		Netlink: l.nl, Iface: ifc, Local: cfg.Addr.Addr(), Owned: owned,
		Timeout: cfg.ResolveTimeout, Logger: cfg.Logger,
	}); err != nil {
		return nil, fmt.Errorf("afpacket: %w", err)
	}
	l.allocTx()
	l.rx.readyFn = func(uintptr) bool { return l.closed.Load() || l.rx.ready() }
	l.log.Debug("afpacket link open", "interface", ifc.Name, "addr", l.local, "ring", cfg.Ring,
		"ring_bytes", l.info.RingBytes, "bypass", l.info.QdiscBypass, "owned", owned, "guarded", l.info.Guarded,
		"refused", l.info.Refused)
	return l, nil
}

// openSocket creates the packet socket (protocol 0, so that nothing is
// queued before the filter and ring exist), attaches the filter, sets up
// and maps the receive ring, and binds it to the interface.
func (l *Link) openSocket(ifc rawnet.Iface) error {
	cfg := &l.cfg
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return rawnet.SocketError("afpacket: AF_PACKET socket", err)
	}
	l.fd = fd
	refuse := func(name string, err error) {
		l.info.Refused = append(l.info.Refused, name+": "+err.Error())
		l.log.Warn("afpacket: kernel refused socket option", "option", name, "err", err)
	}
	if !cfg.NoFilter {
		if err := rawnet.AttachFilter(fd, rawnet.RoCEFilter(cfg.Addr.Addr(), cfg.Addr.Port(), cfg.vlanFilter())); err != nil {
			return fmt.Errorf("afpacket: %w", err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		refuse("PACKET_IGNORE_OUTGOING", err)
	}
	if !cfg.NoQdiscBypass {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			refuse("PACKET_QDISC_BYPASS", err)
		} else {
			l.info.QdiscBypass = true
		}
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, cfg.SndBuf) != nil {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, cfg.SndBuf); err != nil {
			refuse("SO_SNDBUF", err)
		}
	}
	if err := l.setupRing(); err != nil {
		return err
	}
	proto := uint16(rawnet.EthTypeIPv4)
	if cfg.Addr.Addr().Is6() {
		proto = rawnet.EthTypeIPv6
	}
	if cfg.Tag {
		// A socket bound to one EtherType gets a tagged frame after the
		// kernel has cleared its stripped tag (no VLAN device took it);
		// taps (ETH_P_ALL) get it before, with the tag in the ring's
		// tp_vlan_tci and in the filter's ancillary loads.
		proto = unix.ETH_P_ALL
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: rawnet.Htons(proto), Ifindex: ifc.Index}); err != nil {
		return rawnet.SocketError("afpacket: bind to "+ifc.Name, err)
	}
	l.f = os.NewFile(uintptr(fd), "afpacket")
	l.fd = -1 // owned by l.f now
	if l.rc, err = l.f.SyscallConn(); err != nil {
		return err
	}
	return nil
}

// LocalAddr returns the link's address and port.
func (l *Link) LocalAddr() netip.AddrPort { return l.local }

// SourcePort implements link.SourcePorter: a raw link writes each frame's
// UDP source port itself, so every port is usable; it returns want (the
// link's port for 0).
func (l *Link) SourcePort(want uint16) uint16 {
	if want == 0 {
		return l.local.Port()
	}
	return want
}

// MAC returns the interface's hardware address, which the frames carry
// as source (a device derives its node GUID from it, as rxe does).
func (l *Link) MAC() [6]byte { return l.info.MAC }

// Info reports what Open found and obtained.
func (l *Link) Info() Info {
	in := l.info
	in.Refused = append([]string(nil), l.info.Refused...)
	return in
}

// Stats returns the link's counters. RecvDropped counts every frame that
// reached the link and was not delivered (Drops has the reasons), plus
// the frames the kernel dropped on a full ring.
func (l *Link) Stats() link.Stats {
	return link.Stats{
		SentPackets: l.sentPkts.Load(),
		SentBytes:   l.sentBytes.Load(),
		RecvPackets: l.recvPkts.Load(),
		RecvBytes:   l.recvBytes.Load(),
		RecvDropped: l.Drops().total(),
		SendErrors:  l.sendErrs.Load(),
	}
}

// Drops returns the receive drops by reason. Reading the ring counters
// (PACKET_STATISTICS) resets them in the kernel; the link accumulates.
func (l *Link) Drops() Drops {
	l.statsMu.Lock()
	if l.rc != nil {
		// Control fails (and does nothing) once the socket is closed.
		l.rc.Control(func(fd uintptr) {
			var st unix.TpacketStatsV3
			sz := uint32(unix.SizeofTpacketStatsV3)
			if l.cfg.Ring == RingV2 {
				sz = unix.SizeofTpacketStats
			}
			_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_PACKET, unix.PACKET_STATISTICS,
				uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&sz)), 0)
			if e == 0 {
				l.ringFull += uint64(st.Drops)
				if l.cfg.Ring == RingV3 {
					l.freezes += uint64(st.Freeze_q_cnt)
				}
			}
		})
	}
	d := Drops{RingFull: l.ringFull, Freezes: l.freezes}
	l.statsMu.Unlock()
	c := &l.drops
	d.Truncated = c[rawnet.DropTruncated].Load()
	d.VLAN = c[rawnet.DropVLAN].Load()
	d.NotIP = c[rawnet.DropNotIP].Load()
	d.IPOptions = c[rawnet.DropIPOptions].Load()
	d.Fragment = c[rawnet.DropFragment].Load()
	d.NotUDP = c[rawnet.DropNotUDP].Load()
	d.OtherAddr = c[rawnet.DropOtherAddr].Load()
	d.NotRoCE = c[rawnet.DropNotRoCE].Load()
	d.TooBig = c[rawnet.DropTooBig].Load()
	return d
}

// Close stops the link: a blocked Recv or Send returns link.ErrClosed,
// the ring is unmapped once they have left it, and every socket and the
// resolver's goroutine are gone when Close returns. Closing twice returns
// link.ErrClosed.
func (l *Link) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return link.ErrClosed
	}
	l.Drops() // read the ring counters one last time while the socket exists
	return l.teardown()
}

func (l *Link) teardown() error {
	l.closed.Store(true)
	var err error
	if l.f != nil {
		err = l.f.Close() // wakes a Recv waiting in the poller
	} else if l.fd >= 0 {
		err = unix.Close(l.fd)
		l.fd = -1
	}
	l.recvMu.Lock()
	l.rx.unmap()
	l.recvMu.Unlock()
	l.sendMu.Lock()
	l.sendMu.Unlock() //nolint:staticcheck // waits for an in-flight Send
	if l.res != nil {
		l.res.Close()
	}
	l.guard.Close()
	if l.nl != nil {
		l.nl.Close()
	}
	return err
}

func (l *Link) ioErr(op string, err error) error {
	if l.closed.Load() || errors.Is(err, os.ErrClosed) {
		return link.ErrClosed
	}
	return fmt.Errorf("afpacket: %s: %w", op, err)
}
