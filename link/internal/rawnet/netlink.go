//go:build linux

package rawnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Netlink is a minimal rtnetlink client: one NETLINK_ROUTE socket, one
// request at a time (a mutex serializes callers). It is opened in the
// network namespace of the calling thread and stays there.
type Netlink struct {
	mu  sync.Mutex
	fd  int
	seq uint32
	buf []byte
}

// Iface describes a network interface.
type Iface struct {
	Name      string
	Index     int
	MAC       [6]byte
	MTU       int
	Up        bool
	RxQueues  int    // IFLA_NUM_RX_QUEUES (1 when the kernel does not say)
	XDPProgID uint32 // the attached XDP program, 0 if none
}

// OpenNetlink opens a NETLINK_ROUTE socket.
func OpenNetlink() (*Netlink, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("rawnet: netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rawnet: netlink bind: %w", err)
	}
	// Replies to RTM_GET* requests are small; dumps of a few addresses
	// fit in one 64 KiB read.
	return &Netlink{fd: fd, buf: make([]byte, 64<<10)}, nil
}

// Close closes the socket.
func (n *Netlink) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fd < 0 {
		return nil
	}
	err := unix.Close(n.fd)
	n.fd = -1
	return err
}

// request sends one message (header filled here) and calls fn for every
// reply message until the kernel says done (dump) or acknowledges. An
// NLMSG_ERROR with a non-zero code is returned as its errno.
func (n *Netlink) request(typ uint16, flags uint16, body []byte, fn func(typ uint16, b []byte)) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fd < 0 {
		return errors.New("rawnet: netlink closed")
	}
	n.seq++
	seq := n.seq
	msg := make([]byte, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	copy(msg[unix.SizeofNlMsghdr:], body)
	if err := unix.Sendto(n.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	for {
		k, _, err := unix.Recvfrom(n.fd, n.buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		b := n.buf[:k]
		for len(b) >= unix.SizeofNlMsghdr {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			if l < unix.SizeofNlMsghdr || l > len(b) {
				return errors.New("rawnet: malformed netlink reply")
			}
			t := binary.NativeEndian.Uint16(b[4:])
			s := binary.NativeEndian.Uint32(b[8:])
			payload := b[unix.SizeofNlMsghdr:l]
			b = b[nlAlign(l):]
			if s != seq {
				continue
			}
			switch t {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(payload) < 4 {
					return errors.New("rawnet: short netlink error")
				}
				if code := int32(binary.NativeEndian.Uint32(payload)); code != 0 {
					return syscall.Errno(-code)
				}
				return nil // the ACK
			default:
				fn(t, payload)
			}
		}
	}
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

// attrs calls fn for each rtattr in b.
func attrs(b []byte, fn func(typ uint16, v []byte)) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		if l < 4 || l > len(b) {
			return
		}
		fn(binary.NativeEndian.Uint16(b[2:])&^unix.NLA_F_NESTED, b[4:l])
		b = b[min(nlAlign(l), len(b)):]
	}
}

func putAttr(b []byte, typ uint16, v []byte) []byte {
	l := 4 + len(v)
	var h [4]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(l))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(b, h[:]...)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// Interface returns the interface called name.
func (n *Netlink) Interface(name string) (Iface, error) {
	body := make([]byte, unix.SizeofIfInfomsg)
	body = putAttr(body, unix.IFLA_IFNAME, append([]byte(name), 0))
	var ifc Iface
	found := false
	err := n.request(unix.RTM_GETLINK, 0, body, func(t uint16, b []byte) {
		if t != unix.RTM_NEWLINK || len(b) < unix.SizeofIfInfomsg {
			return
		}
		found = true
		ifc.Index = int(int32(binary.NativeEndian.Uint32(b[4:])))
		ifc.Up = binary.NativeEndian.Uint32(b[8:])&unix.IFF_UP != 0
		ifc.RxQueues = 1
		attrs(b[unix.SizeofIfInfomsg:], func(typ uint16, v []byte) {
			switch typ {
			case unix.IFLA_IFNAME:
				for i, c := range v {
					if c == 0 {
						v = v[:i]
						break
					}
				}
				ifc.Name = string(v)
			case unix.IFLA_ADDRESS:
				copy(ifc.MAC[:], v)
			case unix.IFLA_MTU:
				if len(v) >= 4 {
					ifc.MTU = int(binary.NativeEndian.Uint32(v))
				}
			case unix.IFLA_NUM_RX_QUEUES:
				if len(v) >= 4 {
					ifc.RxQueues = int(binary.NativeEndian.Uint32(v))
				}
			case unix.IFLA_XDP:
				attrs(v, func(typ uint16, v []byte) {
					if typ == unix.IFLA_XDP_PROG_ID && len(v) >= 4 {
						ifc.XDPProgID = binary.NativeEndian.Uint32(v)
					}
				})
			}
		})
	})
	if err != nil {
		return Iface{}, fmt.Errorf("rawnet: interface %q: %w", name, err)
	}
	if !found {
		return Iface{}, fmt.Errorf("rawnet: interface %q: %w", name, unix.ENODEV)
	}
	return ifc, nil
}

// LocalAddr reports whether a is configured on some interface of the
// namespace (the kernel then treats packets to it as its own), and on which.
func (n *Netlink) LocalAddr(a netip.Addr) (bool, int, error) {
	a = a.Unmap()
	fam := uint8(unix.AF_INET)
	if a.Is6() {
		fam = unix.AF_INET6
	}
	body := make([]byte, unix.SizeofIfAddrmsg)
	body[0] = fam
	found, idx := false, 0
	err := n.request(unix.RTM_GETADDR, unix.NLM_F_DUMP, body, func(t uint16, b []byte) {
		if t != unix.RTM_NEWADDR || len(b) < unix.SizeofIfAddrmsg || b[0] != fam {
			return
		}
		ifindex := int(binary.NativeEndian.Uint32(b[4:]))
		attrs(b[unix.SizeofIfAddrmsg:], func(typ uint16, v []byte) {
			if typ != unix.IFA_LOCAL && typ != unix.IFA_ADDRESS {
				return
			}
			if x, ok := netip.AddrFromSlice(v); ok && x.Unmap() == a {
				found, idx = true, ifindex
			}
		})
	})
	return found, idx, err
}

// NextHop returns the address whose MAC frames to dst carry: the gateway of
// the route to dst, or dst itself when it is on-link or when the kernel
// has no route (a link whose address the kernel does not own may have no
// route at all; it then treats every peer as on-link).
func (n *Netlink) NextHop(dst netip.Addr) netip.Addr {
	dst = dst.Unmap()
	body := make([]byte, unix.SizeofRtMsg)
	alen := 4
	if dst.Is6() {
		body[0] = unix.AF_INET6
		alen = 16
	} else {
		body[0] = unix.AF_INET
	}
	body[1] = byte(alen * 8)
	body = putAttr(body, unix.RTA_DST, dst.AsSlice())
	gw := netip.Addr{}
	err := n.request(unix.RTM_GETROUTE, 0, body, func(t uint16, b []byte) {
		if t != unix.RTM_NEWROUTE || len(b) < unix.SizeofRtMsg {
			return
		}
		attrs(b[unix.SizeofRtMsg:], func(typ uint16, v []byte) {
			if typ == unix.RTA_GATEWAY {
				if x, ok := netip.AddrFromSlice(v); ok {
					gw = x.Unmap()
				}
			}
		})
	})
	if err != nil || !gw.IsValid() {
		return dst
	}
	return gw
}

// Neighbor returns the MAC of ip in the kernel's neighbour table of
// interface ifindex, if the entry is usable (reachable, stale, delay,
// probe, permanent or noarp).
func (n *Netlink) Neighbor(ifindex int, ip netip.Addr) ([6]byte, bool) {
	ip = ip.Unmap()
	body := make([]byte, unix.SizeofNdMsg)
	if ip.Is6() {
		body[0] = unix.AF_INET6
	} else {
		body[0] = unix.AF_INET
	}
	binary.NativeEndian.PutUint32(body[4:], uint32(ifindex))
	body = putAttr(body, unix.NDA_DST, ip.AsSlice())
	var mac [6]byte
	ok := false
	const usable = unix.NUD_REACHABLE | unix.NUD_STALE | unix.NUD_DELAY | unix.NUD_PROBE | unix.NUD_PERMANENT | unix.NUD_NOARP
	err := n.request(unix.RTM_GETNEIGH, 0, body, func(t uint16, b []byte) {
		if t != unix.RTM_NEWNEIGH || len(b) < unix.SizeofNdMsg {
			return
		}
		state := binary.NativeEndian.Uint16(b[8:])
		if state&usable == 0 {
			return
		}
		attrs(b[unix.SizeofNdMsg:], func(typ uint16, v []byte) {
			if typ == unix.NDA_LLADDR && len(v) == 6 {
				copy(mac[:], v)
				ok = true
			}
		})
	})
	if err != nil {
		return mac, false
	}
	return mac, ok
}
