//go:build linux

package live

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/pcapng"
)

// Handle is a live capture on one interface. Next, Stats and Close are
// called from one goroutine (the reader); Stop from any.
type Handle struct {
	name     string
	snap     int
	fd, efd  int
	wait     int // poll timeout in ms
	loopback bool
	buf      []byte // vlanTagLen bytes of room, then the frame
	oob      []byte
	msg      unix.Msghdr
	iov      unix.Iovec
	sa       unix.RawSockaddrLinklayer
	pfd      [2]unix.PollFd
	stats    Stats
	stopped  atomic.Bool
	closed   bool
	// efdMu orders Stop's write to efd against Close's closing of it, so a
	// late Stop never writes into a descriptor number reused since.
	efdMu sync.Mutex
}

// Open opens a capture on the interface named iface (an Ethernet
// interface, or the loopback). The interface is looked up, and the
// socket created, in the calling thread's network namespace. It needs
// CAP_NET_RAW (ErrNotSupported without it).
func Open(iface string, cfg Config) (*Handle, error) {
	if iface == "" {
		return nil, fmt.Errorf("live: no interface given: %w", ErrNoInterface)
	}
	if cfg.SnapLen <= 0 {
		cfg.SnapLen = DefaultSnapLen
	}
	cfg.SnapLen = min(cfg.SnapLen, DefaultSnapLen)
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("live: interface %q: %w", iface, ErrNoInterface)
	}
	// Protocol 0: the socket receives nothing before bind, so no frame
	// gets in before the filter is attached.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%w: AF_PACKET socket: %v (needs CAP_NET_RAW: run as root or grant the capability)", ErrNotSupported, err)
		}
		return nil, fmt.Errorf("%w: AF_PACKET socket: %v", ErrNotSupported, err)
	}
	h := &Handle{name: iface, snap: cfg.SnapLen, fd: fd, efd: -1, wait: int(max(cfg.Wait.Milliseconds(), 1))}
	if err := h.setup(cfg, ifi); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (h *Handle) setup(cfg Config, ifi *net.Interface) error {
	raw, err := bpf.Assemble(Filter(uint32(cfg.SnapLen)))
	if err != nil {
		return fmt.Errorf("live: filter: %w", err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: unsafe.SliceData(prog)}
	if err := unix.SetsockoptSockFprog(h.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp); err != nil {
		return fmt.Errorf("live: SO_ATTACH_FILTER: %w", err)
	}
	if err := unix.SetsockoptInt(h.fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		return fmt.Errorf("live: PACKET_AUXDATA: %w", err)
	}
	// 64-bit timestamps; kernels before 5.1 know only the old option,
	// whose layout is the same on 64-bit systems (parsed by length).
	if unix.SetsockoptInt(h.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS_NEW, 1) != nil {
		if err := unix.SetsockoptInt(h.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return fmt.Errorf("live: SO_TIMESTAMPNS: %w", err)
		}
	}
	if unix.SetsockoptInt(h.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, cfg.Buffer) != nil {
		_ = unix.SetsockoptInt(h.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.Buffer) // best effort
	}
	sll := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}
	if err := unix.Bind(h.fd, sll); err != nil {
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) {
			return fmt.Errorf("live: interface %q: %w", ifi.Name, ErrNoInterface)
		}
		return fmt.Errorf("live: bind to %q: %w", ifi.Name, err)
	}
	sa, err := unix.Getsockname(h.fd)
	if err != nil {
		return fmt.Errorf("live: getsockname: %w", err)
	}
	ll, ok := sa.(*unix.SockaddrLinklayer)
	switch {
	case !ok:
		return fmt.Errorf("live: getsockname: not a link-layer address")
	case ll.Hatype == unix.ARPHRD_ETHER:
	case ll.Hatype == unix.ARPHRD_LOOPBACK:
		h.loopback = true
	default:
		return fmt.Errorf("%w: %q has ARPHRD type %d", ErrLinkType, ifi.Name, ll.Hatype)
	}
	if !cfg.NoPromisc {
		mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(h.fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return fmt.Errorf("live: promiscuous mode on %q: %w", ifi.Name, err)
		}
	}
	h.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("live: eventfd: %w", err)
	}
	h.buf = make([]byte, vlanTagLen+cfg.SnapLen)
	h.oob = make([]byte, unix.CmsgSpace(sizeofAuxdata)+unix.CmsgSpace(16)+64)
	h.iov.Base = &h.buf[vlanTagLen]
	h.iov.SetLen(cfg.SnapLen)
	h.msg.Name = (*byte)(unsafe.Pointer(&h.sa))
	h.msg.Iov = &h.iov
	h.msg.SetIovlen(1)
	h.msg.Control = &h.oob[0]
	h.pfd = [2]unix.PollFd{{Fd: int32(h.fd), Events: unix.POLLIN}, {Fd: int32(h.efd), Events: unix.POLLIN}}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// sizeofAuxdata is sizeof(struct tpacket_auxdata) (linux/if_packet.h).
const sizeofAuxdata = 20

// Next reads the next frame into f; f.Data is valid until the following
// call. It returns ErrTimeout when no frame arrived within Config.Wait,
// and io.EOF once Stop was called.
func (h *Handle) Next(f *capture.Frame) error {
	for {
		if h.stopped.Load() || h.closed {
			return io.EOF
		}
		h.msg.Namelen = unix.SizeofSockaddrLinklayer
		h.msg.SetControllen(len(h.oob))
		n, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(h.fd), uintptr(unsafe.Pointer(&h.msg)), unix.MSG_TRUNC)
		switch errno {
		case 0:
		case unix.EAGAIN, unix.EINTR:
			if errno == unix.EINTR {
				continue
			}
			got, err := unix.Poll(h.pfd[:], h.wait)
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case err != nil:
				return fmt.Errorf("live: poll: %w", err)
			case got == 0:
				return ErrTimeout
			case h.pfd[1].Revents != 0:
				return io.EOF
			}
			continue
		default:
			return fmt.Errorf("live: recvmsg: %w", errno)
		}
		// libpcap drops the loopback's outgoing copies: each frame on lo
		// is seen twice, going out and coming in.
		if h.loopback && h.sa.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		h.frame(f, int(n))
		return nil
	}
}

// frame fills f from the message just received, whose datagram length
// (MSG_TRUNC: the frame's length before the snap) is n.
func (h *Handle) frame(f *capture.Frame, n int) {
	snap := len(h.buf) - vlanTagLen
	capLen, origLen := min(n, snap), n
	var (
		ts                time.Time
		vlan              bool
		tci, tpid, status uint32
	)
	oob := h.oob[:min(int(h.msg.Controllen), len(h.oob))]
	for len(oob) > 0 {
		hdr, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			break
		}
		oob = rest
		switch {
		case hdr.Level == unix.SOL_SOCKET && (hdr.Type == unix.SO_TIMESTAMPNS_NEW || hdr.Type == unix.SO_TIMESTAMPNS):
			switch len(data) {
			case 16:
				ts = time.Unix(int64(binary.NativeEndian.Uint64(data)), int64(binary.NativeEndian.Uint64(data[8:])))
			case 8:
				ts = time.Unix(int64(int32(binary.NativeEndian.Uint32(data))), int64(int32(binary.NativeEndian.Uint32(data[4:]))))
			}
		case hdr.Level == unix.SOL_PACKET && hdr.Type == unix.PACKET_AUXDATA && len(data) >= sizeofAuxdata:
			// struct tpacket_auxdata: status, len, snaplen, mac, net,
			// vlan_tci, vlan_tpid.
			status = binary.NativeEndian.Uint32(data)
			origLen = int(binary.NativeEndian.Uint32(data[4:]))
			capLen = min(int(binary.NativeEndian.Uint32(data[8:])), capLen)
			tci = uint32(binary.NativeEndian.Uint16(data[16:]))
			tpid = uint32(binary.NativeEndian.Uint16(data[18:]))
			vlan = status&unix.TP_STATUS_VLAN_VALID != 0 || tci != 0
		}
	}
	capLen = max(capLen, 0) // a length field out of int range on 32-bit
	if ts.IsZero() {
		ts = time.Now()
	}
	data := h.buf[vlanTagLen : vlanTagLen+capLen]
	if vlan && capLen >= 12 {
		// Put the stripped tag back after the MAC addresses (libpcap's
		// pcap_read_packet), TPID 0x8100 unless the kernel names another.
		if status&unix.TP_STATUS_VLAN_TPID_VALID == 0 || tpid == 0 {
			tpid = etherTypeVLAN
		}
		copy(h.buf[:12], h.buf[vlanTagLen:vlanTagLen+12])
		binary.BigEndian.PutUint16(h.buf[12:], uint16(tpid))
		binary.BigEndian.PutUint16(h.buf[14:], uint16(tci))
		data = h.buf[:vlanTagLen+capLen]
		origLen += vlanTagLen
	}
	h.stats.Captured++
	f.Number = int(h.stats.Captured)
	f.Time = ts
	f.LinkType = capture.LinkEthernet
	f.Data = data
	f.OrigLen = max(origLen, len(data))
}

// Interface returns the pcapng description of the capture's interface:
// its name, Ethernet, the snap length, the kernel filter (FilterExpr),
// for a pcapng.Writer that records the capture.
func (h *Handle) Interface() pcapng.Interface { return pcapngInterface(h.name, h.snap) }

// Stop makes Next return io.EOF: at once if it is blocked waiting, else
// at its next call. It may be called from any goroutine, more than once.
func (h *Handle) Stop() {
	if h.stopped.Swap(true) {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	h.efdMu.Lock()
	defer h.efdMu.Unlock()
	if h.efd >= 0 {
		_, _ = unix.Write(h.efd, one[:])
	}
}

// Stats returns the counters so far. The kernel's counters are read (and
// reset, which Stats accumulates) with PACKET_STATISTICS.
func (h *Handle) Stats() (Stats, error) {
	if h.closed {
		return h.stats, nil
	}
	st, err := unix.GetsockoptTpacketStats(h.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return h.stats, fmt.Errorf("live: PACKET_STATISTICS: %w", err)
	}
	// tp_packets counts the dropped frames too (packet_getsockopt).
	h.stats.Received += uint64(st.Packets)
	h.stats.Dropped += uint64(st.Drops)
	return h.stats, nil
}

// Close closes the socket, which also leaves promiscuous mode. Call it
// after the last Next; the counters stay readable through Stats.
func (h *Handle) Close() error {
	if h.closed {
		return nil
	}
	_, _ = h.Stats() // on error the counters so far are kept
	h.closed = true
	err := unix.Close(h.fd)
	h.efdMu.Lock()
	if h.efd >= 0 {
		err = errors.Join(err, unix.Close(h.efd))
		h.efd = -1
	}
	h.efdMu.Unlock()
	return err
}
