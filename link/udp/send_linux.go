//go:build linux

package udp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

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
	// The socket of the run being sent (sockRun): its RawConn and its
	// checksum state.
	rc     syscall.RawConn
	zeroTx *atomic.Bool
}

// runLen returns how many datagrams from dgs[0] one super-packet carries:
// equal lengths (the last may be shorter, never empty), one destination,
// one ECN value, DSCP and flow label, one source port (one socket), one
// source address (when the link honours it), within the
// segment and byte limits. With strict, an IPv4 datagram joins only if its
// IPID equals its place in the run (see link.IPIDPlanner).
func (l *Link) runLen(dgs []link.Datagram, strict bool) int {
	first := &dgs[0]
	seg := first.Len()
	if seg == 0 {
		return 1
	}
	total, k := seg, 1
	for k < len(dgs) && k < maxSegs {
		d := &dgs[k]
		n := d.Len()
		if n == 0 || n > seg || total+n > l.maxB || d.Dst != first.Dst || d.ECN != first.ECN ||
			d.DSCP != first.DSCP || d.FlowLabel != first.FlowLabel || d.Src.Port() != first.Src.Port() ||
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
		// One socket per source port (SourcePort): each run of datagrams
		// from one port is sent, GSO included, on its own socket.
		n, err := l.sendRun(dgs[sent : sent+l.sockRun(dgs[sent:])])
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// sendRun sends dgs, which leave from one socket (sockRun), until the
// message arrays are full or a datagram fails; the caller holds sendMu.
func (l *Link) sendRun(dgs []link.Datagram) (int, error) {
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
		if l.v6 && d0.FlowLabel != 0 { // sin6_flowinfo (IPV6_FLOWINFO_SEND)
			binary.BigEndian.PutUint32(t.names[m][4:8], d0.FlowLabel&0xFFFFF)
		}
		k := 1
		if gso {
			k = l.runLen(dgs[ndg:], true)
		}
		bytes, nv := 0, 0
		for j := 0; j < k; j++ {
			d := &dgs[ndg+j]
			nv += putIov(t.iov[iov+nv:], d)
			bytes += d.Len()
		}
		h := &t.msgs[m].Hdr
		h.Name = &t.names[m][0]
		h.Namelen = nameLen
		h.Iov = &t.iov[iov]
		h.SetIovlen(nv)
		h.Flags = 0
		oob := t.oob[m*txOOBSize : (m+1)*txOOBSize]
		c := 0
		if k > 1 {
			c += putCmsg(oob[c:], unix.SOL_UDP, unix.UDP_SEGMENT, 2, uint32(d0.Len()))
			anyGSO = true
		}
		tos := l.tos&^3 | d0.ECN&3
		if d0.DSCP != 0 {
			tos = d0.DSCP<<2 | d0.ECN&3
		}
		if tos != l.tos {
			if l.v6 {
				c += putCmsg(oob[c:], unix.IPPROTO_IPV6, unix.IPV6_TCLASS, 4, uint32(tos))
			} else {
				c += putCmsg(oob[c:], unix.IPPROTO_IP, unix.IP_TOS, 4, uint32(tos))
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
		iov += nv
	}
	return nmsg, ndg, anyGSO, nil
}

// iovPerDgram is the most iovecs one datagram takes: Buf's head, Payload,
// Buf's tail (link.Datagram's two-part form).
const iovPerDgram = 3

// putIov describes d's wire bytes in v (room for iovPerDgram entries) and
// returns how many entries it used: one for a plain datagram, three for a
// two-part one (the kernel gathers them; within a GSO super-packet the
// segments are cut by length, so a segment may span iovecs). Empty parts
// take no entry, and an empty datagram one empty entry.
func putIov(v []unix.Iovec, d *link.Datagram) int {
	if len(d.Payload) == 0 {
		setIov(&v[0], d.Buf)
		return 1
	}
	at := d.PayloadAt
	if at < 0 || at > len(d.Buf) {
		at = len(d.Buf) // as link.Datagram.CopyTo reads it
	}
	n := 0
	for _, b := range [iovPerDgram][]byte{d.Buf[:at], d.Payload, d.Buf[at:]} {
		if len(b) > 0 {
			setIov(&v[n], b)
			n++
		}
	}
	return n
}

func setIov(v *unix.Iovec, b []byte) {
	v.Base = nil
	if len(b) > 0 {
		v.Base = &b[0]
	}
	v.SetLen(len(b))
}

// flushTx sends messages [0, nmsg). It returns the datagrams sent, whether
// the kernel refused a super-packet (GSO is then off and the caller
// rebuilds), or the error that stopped it.
func (l *Link) flushTx(nmsg int, anyGSO bool) (sent int, refused bool, err error) {
	t := &l.tx
	if l.csum == ChecksumAuto && anyGSO == t.zeroTx.Load() {
		// Linux segments only checksummed super-packets (udp_send_skb).
		t.csumZero = !anyGSO
		if cerr := t.rc.Control(t.csumFn); cerr != nil {
			return 0, false, l.ioErr("send", cerr)
		}
		if t.csumErr == nil {
			t.zeroTx.Store(t.csumZero)
		}
	}
	for i := 0; i < nmsg; {
		t.base, t.n = i, nmsg-i
		if werr := t.rc.Write(t.fn); werr != nil {
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
