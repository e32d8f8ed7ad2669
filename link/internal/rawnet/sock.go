//go:build linux

package rawnet

import (
	"errors"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

// Htons converts a 16-bit value to network byte order (for the protocol
// argument of AF_PACKET sockets).
func Htons(v uint16) uint16 { return v<<8 | v>>8 }

// NotSupportedError is a missing privilege or kernel feature. It matches
// link.ErrNotSupported and unwraps to the system error.
type NotSupportedError struct {
	What string // what was attempted, e.g. "AF_XDP socket"
	Need string // what is missing, e.g. "CAP_NET_RAW"
	Err  error
}

func (e *NotSupportedError) Error() string {
	return fmt.Sprintf("%s: %s: %v (needs %s)", link.ErrNotSupported, e.What, e.Err, e.Need)
}

// Is matches link.ErrNotSupported.
func (e *NotSupportedError) Is(target error) bool { return target == link.ErrNotSupported }

// Unwrap returns the system error.
func (e *NotSupportedError) Unwrap() error { return e.Err }

// SocketError maps a socket(2)/bind(2)/setsockopt(2) failure: missing
// privileges and missing kernel support become NotSupportedError.
func SocketError(what string, err error) error {
	var need string
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		need = "CAP_NET_RAW (run as root or grant the capability)"
	case errors.Is(err, unix.EAFNOSUPPORT), errors.Is(err, unix.EPROTONOSUPPORT), errors.Is(err, unix.ENOPROTOOPT):
		need = "kernel support (" + what + " unavailable in this kernel)"
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
	return &NotSupportedError{What: what, Need: need, Err: err}
}

// Classic BPF opcodes used by the filters of this module.
const (
	bpfLdB   = unix.BPF_LD | unix.BPF_B | unix.BPF_ABS
	bpfLdH   = unix.BPF_LD | unix.BPF_H | unix.BPF_ABS
	bpfLdW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJsetK = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRetK  = unix.BPF_RET | unix.BPF_K
)

// AttachFilter attaches a classic BPF program to fd (SO_ATTACH_FILTER).
func AttachFilter(fd int, prog []unix.SockFilter) error {
	p := unix.SockFprog{Len: uint16(len(prog)), Filter: unsafe.SliceData(prog)}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &p); err != nil {
		return fmt.Errorf("rawnet: SO_ATTACH_FILTER: %w", err)
	}
	return nil
}

// RoCEFilter returns a classic BPF program for an AF_PACKET socket that
// accepts Ethernet frames to the interface's MAC (PACKET_HOST) carrying UDP
// to local:port over IPv4 (not fragmented, no options) or IPv6 (no
// extension headers), untagged (neither an in-frame nor a stripped VLAN
// tag) or, when vlan ≥ 0, with a stripped tag of VLAN ID vlan (the frame
// may then be PACKET_OTHERHOST: the kernel marks so a tagged frame no VLAN
// device takes), and drops everything else in the kernel. It checks no length
// field: the receiver's classifier does. Accepted frames are passed whole
// (snap 256 KiB).
func RoCEFilter(local netip.Addr, port uint16, vlan int) []unix.SockFilter {
	const (
		accept = 0x40000
		// SKF_AD_OFF + SKF_AD_VLAN_TAG_PRESENT (linux/filter.h): the
		// ancillary "vlan_avail" load, true for a stripped VLAN tag.
		vlanAvail = 0xfffff000 + 48
		// SKF_AD_OFF + SKF_AD_VLAN_TAG: the stripped tag's TCI.
		vlanTag = 0xfffff000 + 44
		// SKF_AD_OFF + SKF_AD_PKTTYPE: the sockaddr_ll packet type.
		pktType = 0xfffff000 + 4
	)
	ld := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	// jne: continue on equal, jump to drop otherwise; drop offsets are
	// fixed up below.
	var p []unix.SockFilter
	var drops []int
	jne := func(k uint32) {
		drops = append(drops, len(p))
		p = append(p, unix.SockFilter{Code: bpfJeqK, K: k})
	}
	if vlan < 0 {
		p = append(p, ld(bpfLdW, vlanAvail))
		jne(0)
		// Only frames to the interface's own MAC: a VLAN-tagged frame for a
		// VLAN without a device arrives untagged but as PACKET_OTHERHOST.
		p = append(p, ld(bpfLdW, pktType))
		jne(unix.PACKET_HOST)
	} else {
		// Untagged or our VLAN; the receiver checks the packet type.
		p = append(p, ld(bpfLdW, vlanAvail))
		p = append(p, unix.SockFilter{Code: bpfJeqK, K: 0, Jt: 3}) // untagged: skip the VID check
		p = append(p, ld(bpfLdW, vlanTag))
		p = append(p, unix.SockFilter{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: 0x0fff})
		jne(uint32(vlan))
	}
	if local.Is4() {
		a := local.As4()
		p = append(p, ld(bpfLdH, 12))
		jne(EthTypeIPv4)
		p = append(p, ld(bpfLdB, EthLen))
		jne(0x45)
		p = append(p, ld(bpfLdB, EthLen+9))
		jne(ProtoUDP)
		p = append(p, ld(bpfLdH, EthLen+6))
		drops = append(drops, len(p))
		p = append(p, unix.SockFilter{Code: bpfJsetK, K: 0x3fff}) // jset → drop, else continue
		p = append(p, ld(bpfLdW, EthLen+16))
		jne(uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]))
		p = append(p, ld(bpfLdH, EthLen+IPv4Len+2))
		jne(uint32(port))
	} else {
		a := local.As16()
		p = append(p, ld(bpfLdH, 12))
		jne(EthTypeIPv6)
		p = append(p, ld(bpfLdB, EthLen+6))
		jne(ProtoUDP)
		for i := 0; i < 16; i += 4 {
			p = append(p, ld(bpfLdW, uint32(EthLen+24+i)))
			jne(uint32(a[i])<<24 | uint32(a[i+1])<<16 | uint32(a[i+2])<<8 | uint32(a[i+3]))
		}
		p = append(p, ld(bpfLdH, EthLen+IPv6Len+2))
		jne(uint32(port))
	}
	p = append(p, unix.SockFilter{Code: bpfRetK, K: accept})
	drop := len(p)
	p = append(p, unix.SockFilter{Code: bpfRetK, K: 0})
	for _, i := range drops {
		off := uint8(drop - i - 1)
		if p[i].Code == bpfJsetK {
			p[i].Jt, p[i].Jf = off, 0
		} else {
			p[i].Jt, p[i].Jf = 0, off
		}
	}
	return p
}

// Guard is a UDP socket bound to the link's address and port whose filter
// drops every datagram. While it exists the kernel, which also receives
// the RoCE frames a raw link reads when the address is configured on an
// interface, finds a socket for them and drops them silently, instead of
// answering each one with an ICMP port unreachable. It also keeps any
// other program from binding the port (the raw link owns it).
type Guard struct{ fd int }

// ErrPortInUse is returned when another socket owns the UDP port on the
// address (a kernel rxe device, a link/udp link, another program).
var ErrPortInUse = errors.New("rawnet: UDP port already in use on the address")

// OpenGuard binds the guard socket to a. It returns (nil, nil) when a is
// not a local address of the namespace (EADDRNOTAVAIL): the kernel then
// drops the frames itself, as not addressed to it.
func OpenGuard(a netip.AddrPort) (*Guard, error) {
	fam := unix.AF_INET
	if a.Addr().Is6() {
		fam = unix.AF_INET6
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("rawnet: guard socket: %w", err)
	}
	if err := AttachFilter(fd, []unix.SockFilter{{Code: bpfRetK, K: 0}}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// The smallest receive buffer: nothing is ever queued anyway.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 0)
	var sa unix.Sockaddr
	if fam == unix.AF_INET {
		sa = &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().As4()}
	} else {
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
		sa = &unix.SockaddrInet6{Port: int(a.Port()), Addr: a.Addr().As16()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.EADDRNOTAVAIL):
			return nil, nil
		case errors.Is(err, unix.EADDRINUSE):
			return nil, fmt.Errorf("%w: %v", ErrPortInUse, a)
		}
		return nil, fmt.Errorf("rawnet: guard bind %v: %w", a, err)
	}
	return &Guard{fd: fd}, nil
}

// Close closes the guard socket (nil-safe).
func (g *Guard) Close() error {
	if g == nil || g.fd < 0 {
		return nil
	}
	err := unix.Close(g.fd)
	g.fd = -1
	return err
}
