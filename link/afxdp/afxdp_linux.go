//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/internal/ebpf"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/internal/rawnet"
)

// Link is a RoCEv2 transport over an AF_XDP socket fed by its own XDP
// program. See the package documentation.
type Link struct {
	cfg   Config
	log   *slog.Logger
	local netip.AddrPort
	info  Info

	nl    *rawnet.Netlink
	res   *rawnet.Resolver
	guard *rawnet.Guard

	fd   int // the XDP socket; owned by f once f is set
	f    *os.File
	rc   syscall.RawConn
	umem []byte
	fs   uint64 // frame size
	fill ring
	comp ring
	rxr  ring
	txr  ring
	xsks *ebpf.Map     // the XSKMAP the program redirects through
	prog *ebpf.Program // the XDP program
	xdp  *ebpf.Link    // its attachment to the interface

	closed atomic.Bool

	sentPkts, sentBytes, sendErrs atomic.Uint64
	recvPkts, recvBytes           atomic.Uint64
	drops                         rawnet.DropCounters

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

// ErrTooBig is matched by Send errors for a frame above the link's limit
// (Info.MaxFrame).
var ErrTooBig = errors.New("afxdp: frame larger than the link's frame limit")

// ErrStalled is matched by Send errors when the kernel consumed no
// transmit descriptor for a second.
var ErrStalled = errors.New("afxdp: transmit ring stalled")

// Open creates the XDP socket and its UMEM and rings, loads and attaches
// the XDP program, and binds the socket to cfg.Interface queue
// cfg.QueueID. It needs CAP_NET_RAW, CAP_BPF and CAP_NET_ADMIN and a
// kernel with AF_XDP (errors match link.ErrNotSupported otherwise). Every
// socket is opened here, in the network namespace of the calling thread.
func Open(cfg Config) (_ *Link, err error) {
	cfg = cfg.withDefaults()
	if cfg.Interface == "" || !cfg.Addr.Addr().IsValid() || cfg.Addr.Addr().IsUnspecified() {
		return nil, errors.New("afxdp: Config.Interface and a specific Config.Addr are required")
	}
	if cfg.FrameSize != 2048 && cfg.FrameSize != 4096 {
		return nil, fmt.Errorf("afxdp: FrameSize %d: must be 2048 or 4096", cfg.FrameSize)
	}
	if cfg.RingSize&(cfg.RingSize-1) != 0 || cfg.Frames < 2*cfg.BatchSize || cfg.Mode > ModeNative || cfg.QueueID < 0 {
		return nil, errors.New("afxdp: RingSize must be a power of two, Frames at least twice BatchSize, Mode and QueueID valid")
	}
	l := &Link{cfg: cfg, log: cfg.Logger, local: cfg.Addr, fd: -1, fs: uint64(cfg.FrameSize)}
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
	if ifc.XDPProgID != 0 {
		return nil, fmt.Errorf("afxdp: interface %s already has an XDP program (id %d)", ifc.Name, ifc.XDPProgID)
	}
	l.info = Info{Interface: ifc.Name, Ifindex: ifc.Index, MAC: ifc.MAC, MTU: ifc.MTU, QueueID: cfg.QueueID}
	owned, _, err := l.nl.LocalAddr(cfg.Addr.Addr())
	if err != nil {
		return nil, fmt.Errorf("afxdp: list addresses: %w", err)
	}
	l.info.Owned = owned
	if owned && !cfg.NoGuard {
		if l.guard, err = rawnet.OpenGuard(cfg.Addr); err != nil {
			return nil, fmt.Errorf("afxdp: %w", err)
		}
		l.info.Guarded = l.guard != nil
	}
	if err := l.setupSocket(); err != nil {
		return nil, err
	}
	if err := l.setupProgram(ifc); err != nil {
		return nil, err
	}
	if err := l.bind(ifc); err != nil {
		return nil, err
	}
	if err := setSocket(l.xsks, cfg.QueueID, l.fd); err != nil {
		return nil, err
	}
	if after, err := l.nl.Interface(cfg.Interface); err == nil {
		l.info.ProgID = after.XDPProgID
	}
	l.f = os.NewFile(uintptr(l.fd), "afxdp")
	if l.rc, err = l.f.SyscallConn(); err != nil {
		return nil, err
	}
	if l.res, err = rawnet.NewResolver(rawnet.ResolverConfig{
		Netlink: l.nl, Iface: ifc, Local: cfg.Addr.Addr(), Owned: owned,
		Timeout: cfg.ResolveTimeout, Logger: cfg.Logger,
	}); err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	l.initTx()
	l.initRx()
	l.log.Debug("afxdp link open", "interface", ifc.Name, "queue", cfg.QueueID, "addr", l.local,
		"mode", l.info.Mode, "zerocopy", l.info.ZeroCopy, "multibuffer", l.info.MultiBuffer,
		"max_frame", l.info.MaxFrame, "owned", owned, "refused", l.info.Refused)
	return l, nil
}

func (l *Link) refuse(what string, err error) {
	l.info.Refused = append(l.info.Refused, what+": "+err.Error())
	l.log.Info("afxdp: kernel refused", "what", what, "err", err)
}

// setupSocket creates the socket, registers the UMEM, sizes and maps the
// four rings and hands the receive half of the UMEM to the fill ring.
func (l *Link) setupSocket() error {
	cfg := &l.cfg
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return rawnet.SocketError("afxdp: AF_XDP socket", err)
	}
	l.fd = fd
	if err := unix.SetNonblock(fd, true); err != nil {
		return err
	}
	size := cfg.Frames * cfg.FrameSize
	// Anonymous memory, populated now: the kernel pins it at registration.
	if l.umem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("afxdp: mmap UMEM (%d bytes): %w", size, err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&l.umem[0]))), Len: uint64(size), Size: uint32(cfg.FrameSize)}
	if err := setsockoptPtr(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return rawnet.SocketError("afxdp: XDP_UMEM_REG", err)
	}
	rs := cfg.RingSize
	for _, o := range []struct {
		opt  int
		name string
	}{{unix.XDP_UMEM_FILL_RING, "XDP_UMEM_FILL_RING"}, {unix.XDP_UMEM_COMPLETION_RING, "XDP_UMEM_COMPLETION_RING"},
		{unix.XDP_RX_RING, "XDP_RX_RING"}, {unix.XDP_TX_RING, "XDP_TX_RING"}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o.opt, rs); err != nil {
			return fmt.Errorf("afxdp: %s %d: %w", o.name, rs, err)
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockoptPtr(fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return fmt.Errorf("afxdp: XDP_MMAP_OFFSETS: %w", err)
	}
	dsz := unsafe.Sizeof(unix.XDPDesc{})
	if l.fill, err = mapRing(fd, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, uint32(rs), 8); err != nil {
		return err
	}
	if l.comp, err = mapRing(fd, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, uint32(rs), 8); err != nil {
		return err
	}
	if l.rxr, err = mapRing(fd, off.Rx, unix.XDP_PGOFF_RX_RING, uint32(rs), dsz); err != nil {
		return err
	}
	if l.txr, err = mapRing(fd, off.Tx, unix.XDP_PGOFF_TX_RING, uint32(rs), dsz); err != nil {
		return err
	}
	// Copy mode sends at most 32 frames per sendto by default; a larger
	// budget (Linux 6.17) saves system calls.
	if err := unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, cfg.BatchSize); err != nil {
		l.refuse("XDP_MAX_TX_SKB_BUDGET", err)
	}
	// The first half of the UMEM receives, the second half sends. The
	// fill ring can hold every receive frame, so returning frames never
	// waits.
	nrx := min(cfg.Frames/2, rs)
	for i := 0; i < nrx; i++ {
		*l.fill.addr(l.fill.cachedProd) = uint64(i) * l.fs
		l.fill.cachedProd++
	}
	l.fill.submit()
	return nil
}

// setupProgram creates the XSKMAP, loads the program and attaches it in
// the configured mode.
func (l *Link) setupProgram(ifc rawnet.Iface) error {
	cfg := &l.cfg
	var err error
	if l.xsks, err = createXSKMap(max(ifc.RxQueues, cfg.QueueID+1, 1)); err != nil {
		return err
	}
	prog, err := program(l.xsks.FD(), cfg.Addr.Addr(), cfg.Addr.Port(), cfg.vlanFilter())
	if err != nil {
		return fmt.Errorf("afxdp: %w", err)
	}
	frags := !cfg.NoMultiBuffer
	if l.prog, err = loadProgram(prog, frags); err != nil && frags {
		// Kernels before 5.18 know no BPF_F_XDP_HAS_FRAGS.
		l.refuse("BPF_F_XDP_HAS_FRAGS", err)
		frags, cfg.NoMultiBuffer = false, true
		l.prog, err = loadProgram(prog, false)
	}
	if err != nil {
		return err
	}
	try := func(m Mode) error {
		flags := uint32(unix.XDP_FLAGS_SKB_MODE)
		if m == ModeNative {
			flags = unix.XDP_FLAGS_DRV_MODE
		}
		x, err := l.prog.Attach(ifc.Index, ebpf.AttachXDP, flags)
		if err != nil {
			return err
		}
		l.xdp, l.info.Mode = x, m
		return nil
	}
	switch cfg.Mode {
	case ModeGeneric:
		err = try(ModeGeneric)
	case ModeNative:
		err = try(ModeNative)
	default:
		if err = try(ModeNative); err != nil {
			l.refuse("XDP native (driver) mode", err)
			err = try(ModeGeneric)
		}
	}
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) && cfg.Mode != ModeNative {
			return bpfError("attach XDP program (BPF_LINK_CREATE)", err)
		}
		return fmt.Errorf("afxdp: attach XDP program to %s in %v mode: %w", ifc.Name, cfg.Mode, err)
	}
	return nil
}

// bind binds the socket, trying zero copy (native mode only) and
// multi-buffer first and falling back.
func (l *Link) bind(ifc rawnet.Iface) error {
	cfg := &l.cfg
	zc := l.info.Mode == ModeNative && !cfg.NoZeroCopy
	sg := !cfg.NoMultiBuffer
	for {
		flags := uint16(unix.XDP_USE_NEED_WAKEUP)
		if zc {
			flags |= unix.XDP_ZEROCOPY
		} else {
			flags |= unix.XDP_COPY
		}
		if sg {
			flags |= unix.XDP_USE_SG
		}
		sa := &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(ifc.Index), QueueID: uint32(cfg.QueueID)}
		var err error
		for try := 0; try < 40; try++ {
			// A queue whose previous socket just closed is busy for a
			// moment (the kernel releases it asynchronously).
			if err = unix.Bind(l.fd, sa); !errors.Is(err, unix.EBUSY) {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		switch {
		case err == nil:
			l.info.ZeroCopy, l.info.MultiBuffer = zc, sg
			l.info.MaxFrame = ifc.MTU + rawnet.EthLen
			if cfg.Tag {
				l.info.MaxFrame += rawnet.VLANLen
			}
			if !sg {
				// One frame per packet; in copy mode the kernel writes a
				// received frame after XDP_PACKET_HEADROOM bytes.
				l.info.MaxFrame = min(l.info.MaxFrame, cfg.FrameSize-xdpPacketHeadroom)
			}
			return nil
		case zc:
			l.refuse("XDP_ZEROCOPY", err)
			zc = false
		case sg && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)):
			l.refuse("XDP_USE_SG", err)
			sg = false
		default:
			return rawnet.SocketError(fmt.Sprintf("afxdp: bind %s queue %d", ifc.Name, cfg.QueueID), err)
		}
	}
}

// xdpPacketHeadroom is XDP_PACKET_HEADROOM: the kernel's headroom in front
// of a frame it copies into the UMEM.
const xdpPacketHeadroom = 256

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

// Info reports what Open obtained.
func (l *Link) Info() Info {
	in := l.info
	in.Refused = append([]string(nil), l.info.Refused...)
	return in
}

// Stats returns the link's counters; RecvDropped is Drops' total.
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

// Drops returns the receive drops by reason, with the kernel's
// XDP_STATISTICS.
func (l *Link) Drops() Drops {
	c := &l.drops
	d := Drops{
		Truncated: c[rawnet.DropTruncated].Load(), VLAN: c[rawnet.DropVLAN].Load(), NotIP: c[rawnet.DropNotIP].Load(),
		IPOptions: c[rawnet.DropIPOptions].Load(), Fragment: c[rawnet.DropFragment].Load(), NotUDP: c[rawnet.DropNotUDP].Load(),
		OtherAddr: c[rawnet.DropOtherAddr].Load(), NotRoCE: c[rawnet.DropNotRoCE].Load(), TooBig: c[rawnet.DropTooBig].Load(),
	}
	if l.rc != nil {
		l.rc.Control(func(fd uintptr) {
			var st unix.XDPStatistics
			if getsockoptPtr(int(fd), unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st)) == nil {
				d.RxDropped, d.RxRingFull, d.FillRingEmpty = st.Rx_dropped, st.Rx_ring_full, st.Rx_fill_ring_empty_descs
				d.RxInvalid, d.TxInvalid = st.Rx_invalid_descs, st.Tx_invalid_descs
			}
		})
	}
	return d
}

// Close detaches the XDP program (closing its BPF link removes it from the
// interface), closes the socket and unmaps the rings and the UMEM once a
// blocked Send or Recv has returned link.ErrClosed. Closing twice returns
// link.ErrClosed.
func (l *Link) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return link.ErrClosed
	}
	return l.teardown()
}

func (l *Link) teardown() error {
	l.closed.Store(true)
	// The program first: no frame is redirected to a closing socket.
	if l.xdp != nil {
		l.xdp.Close()
	}
	if l.prog != nil {
		l.prog.Close()
	}
	if l.xsks != nil {
		l.xsks.Close()
	}
	// Send never blocks for long: wait for it, then close the socket
	// (which wakes a Recv waiting in the poller) and wait for Recv.
	l.sendMu.Lock()
	var err error
	if l.f != nil {
		err = l.f.Close()
	} else if l.fd >= 0 {
		err = unix.Close(l.fd)
	}
	l.fd = -1
	l.recvMu.Lock()
	for _, r := range []*ring{&l.fill, &l.comp, &l.rxr, &l.txr} {
		r.unmap()
	}
	if l.umem != nil {
		unix.Munmap(l.umem)
		l.umem = nil
	}
	l.recvMu.Unlock()
	l.sendMu.Unlock()
	if l.res != nil {
		l.res.Close()
	}
	l.guard.Close()
	if l.nl != nil {
		l.nl.Close()
	}
	return err
}
