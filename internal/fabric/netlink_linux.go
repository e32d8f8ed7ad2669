//go:build linux

package fabric

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// A minimal rtnetlink client: link and qdisc dumps for the counters, and
// the one request tc cannot make for us, a cls_bpf filter given a
// program's file descriptor (tc only takes programs from object files or
// bpffs pins). The socket belongs to the namespace of the thread that
// opens it, so open it inside InNetns.

// Constants of linux/pkt_sched.h, linux/pkt_cls.h and linux/gen_stats.h
// that x/sys/unix lacks.
const (
	tcHClsact        = 0xFFFFFFF1 // TC_H_CLSACT (= TC_H_INGRESS)
	tcHMinEgress     = 0xFFF3     // TC_H_MIN_EGRESS
	tcHRoot          = 0xFFFFFFFF // TC_H_ROOT
	tcaBPFFD         = 6          // TCA_BPF_FD
	tcaBPFName       = 7          // TCA_BPF_NAME
	tcaBPFFlags      = 8          // TCA_BPF_FLAGS
	tcaBPFActDirect  = 1          // TCA_BPF_FLAG_ACT_DIRECT
	tcaStats2        = 7          // TCA_STATS2
	tcaStatsQueue    = 3          // TCA_STATS_QUEUE: struct gnet_stats_queue
	tcaStatsBasic    = 1          // TCA_STATS_BASIC: struct gnet_stats_basic
	iflaStats64      = 23         // IFLA_STATS64: struct rtnl_link_stats64
	sizeofTCMsg      = 20         // struct tcmsg
	sizeofIfInfoMsg  = 16         // struct ifinfomsg
	markerFilterPrio = 1
)

type nlConn struct {
	fd  int
	seq uint32
}

func nlOpen() (*nlConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("fabric: netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fabric: netlink bind: %w", err)
	}
	return &nlConn{fd: fd}, nil
}

func (c *nlConn) close() { unix.Close(c.fd) }

// attr encodes one netlink attribute, padded to 4 bytes.
func attr(typ uint16, data []byte) []byte {
	n := unix.SizeofRtAttr + len(data)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(n))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[unix.SizeofRtAttr:], data)
	return b
}

func u32b(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// do sends one request and returns the payloads of the replies: every
// message of a dump (NLM_F_DUMP), or none for an acknowledged request.
func (c *nlConn) do(typ, flags uint16, body []byte) ([][]byte, error) {
	c.seq++
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	msg = append(msg, body...)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(msg[8:], c.seq)
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out [][]byte
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != c.seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, errors.New("netlink: short error message")
				}
				if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
					return nil, unix.Errno(-e)
				}
				return out, nil // the ACK
			default:
				out = append(out, append([]byte(nil), m.Data...))
			}
		}
		if flags&unix.NLM_F_DUMP == 0 && flags&unix.NLM_F_ACK == 0 {
			return out, nil
		}
	}
}

// attrs parses the attributes in b.
func attrs(b []byte) map[uint16][]byte {
	m := map[uint16][]byte{}
	for len(b) >= unix.SizeofRtAttr {
		n := int(binary.NativeEndian.Uint16(b[0:]))
		typ := binary.NativeEndian.Uint16(b[2:]) &^ unix.NLA_F_NESTED
		if n < unix.SizeofRtAttr || n > len(b) {
			break
		}
		m[typ] = b[unix.SizeofRtAttr:n]
		b = b[min((n+3)&^3, len(b)):]
	}
	return m
}

// devCounters are an interface's counters.
type devCounters struct {
	index                                  int32
	rxPackets, txPackets, rxBytes, txBytes uint64
	txDropped                              uint64
}

// links dumps the interfaces of the connection's namespace by name.
func (c *nlConn) links() (map[string]devCounters, error) {
	msgs, err := c.do(unix.RTM_GETLINK, unix.NLM_F_DUMP, make([]byte, sizeofIfInfoMsg))
	if err != nil {
		return nil, fmt.Errorf("fabric: link dump: %w", err)
	}
	out := map[string]devCounters{}
	for _, m := range msgs {
		if len(m) < sizeofIfInfoMsg {
			continue
		}
		a := attrs(m[sizeofIfInfoMsg:])
		name := a[unix.IFLA_IFNAME]
		if len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		d := devCounters{index: int32(binary.NativeEndian.Uint32(m[4:]))}
		if s := a[iflaStats64]; len(s) >= 8*7 {
			u := func(i int) uint64 { return binary.NativeEndian.Uint64(s[8*i:]) }
			// struct rtnl_link_stats64: rx_packets, tx_packets, rx_bytes,
			// tx_bytes, rx_errors, tx_errors, rx_dropped, tx_dropped, …
			d.rxPackets, d.txPackets, d.rxBytes, d.txBytes, d.txDropped = u(0), u(1), u(2), u(3), u(7)
		}
		out[string(name)] = d
	}
	return out, nil
}

// qdiscCounters are a root qdisc's counters.
type qdiscCounters struct {
	kind                       string
	bytes, packets             uint64
	drops, overlimits, backlog uint32
	qlen                       uint32
}

// rootQdiscs dumps the root qdiscs of the connection's namespace by
// interface index.
func (c *nlConn) rootQdiscs() (map[int32]qdiscCounters, error) {
	msgs, err := c.do(unix.RTM_GETQDISC, unix.NLM_F_DUMP, make([]byte, sizeofTCMsg))
	if err != nil {
		return nil, fmt.Errorf("fabric: qdisc dump: %w", err)
	}
	out := map[int32]qdiscCounters{}
	for _, m := range msgs {
		if len(m) < sizeofTCMsg {
			continue
		}
		// struct tcmsg: family, pad, pad, ifindex, handle, parent, info
		ifindex := int32(binary.NativeEndian.Uint32(m[4:]))
		if binary.NativeEndian.Uint32(m[12:]) != tcHRoot {
			continue
		}
		a := attrs(m[sizeofTCMsg:])
		kind := a[unix.TCA_KIND]
		if len(kind) > 0 && kind[len(kind)-1] == 0 {
			kind = kind[:len(kind)-1]
		}
		q := qdiscCounters{kind: string(kind)}
		st := attrs(a[tcaStats2])
		if b := st[tcaStatsBasic]; len(b) >= 12 {
			q.bytes, q.packets = binary.NativeEndian.Uint64(b), uint64(binary.NativeEndian.Uint32(b[8:]))
		}
		if s := st[tcaStatsQueue]; len(s) >= 20 {
			// struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits
			u := func(i int) uint32 { return binary.NativeEndian.Uint32(s[4*i:]) }
			q.qlen, q.backlog, q.drops, q.overlimits = u(0), u(1), u(2), u(4)
		}
		out[ifindex] = q
	}
	return out, nil
}

// addBPFFilter attaches the program progFD as a direct-action cls_bpf
// filter on the egress of interface ifindex, which has a clsact qdisc
// (what "tc filter add dev DEV egress bpf da …" does).
func (c *nlConn) addBPFFilter(ifindex int, progFD int, name string) error {
	tcm := make([]byte, sizeofTCMsg)
	tcm[0] = unix.AF_UNSPEC
	binary.NativeEndian.PutUint32(tcm[4:], uint32(ifindex))
	binary.NativeEndian.PutUint32(tcm[8:], 1) // handle
	binary.NativeEndian.PutUint32(tcm[12:], tcHClsact&0xFFFF0000|tcHMinEgress)
	// info: priority in the upper half, protocol ETH_P_ALL in network order
	binary.NativeEndian.PutUint32(tcm[16:], markerFilterPrio<<16|uint32(htons(unix.ETH_P_ALL)))
	opts := append(attr(tcaBPFFD, u32b(uint32(progFD))), attr(tcaBPFName, append([]byte(name), 0))...)
	opts = append(opts, attr(tcaBPFFlags, u32b(tcaBPFActDirect))...)
	body := append(tcm, attr(unix.TCA_KIND, []byte("bpf\x00"))...)
	body = append(body, attr(unix.TCA_OPTIONS, opts)...)
	if _, err := c.do(unix.RTM_NEWTFILTER, unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL, body); err != nil {
		return fmt.Errorf("fabric: attach %s: %w", name, err)
	}
	return nil
}
