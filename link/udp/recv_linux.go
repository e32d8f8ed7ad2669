//go:build linux

package udp

import (
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

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
	// arenaMsgs is how many leading messages hold layoutArena's layout
	// (the other layouts reset it).
	arena     []byte
	mapping   *mapping // nil when arena is Go memory
	pred      int
	predSegs  int
	lowCalls  int
	lowMax    int
	slotsPer  int
	slotLen   []int
	arenaMsgs int
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
	ecn, dscp    uint8
	ttl          uint8
}

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

// recvDirect receives straight into the caller's buffers.
func (l *Link) recvDirect(dgs []link.Datagram) (int, error) {
	for {
		if err := l.recvCall(l.layoutDirect(dgs)); err != nil {
			return 0, err
		}
		if k := l.collectDirect(dgs); k > 0 {
			return k, nil
		}
	}
}

// layoutDirect prepares recvmmsg messages that read into the caller's
// buffers, one each, and returns how many.
func (l *Link) layoutDirect(dgs []link.Datagram) int {
	r := &l.rx
	r.arenaMsgs = 0
	n := min(len(dgs), l.batch)
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
	return n
}

// collectDirect fills dgs from the messages of the last recvmmsg, read by
// a layoutDirect layout, dropping truncated ones, and returns the count.
func (l *Link) collectDirect(dgs []link.Datagram) int {
	r := &l.rx
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
		d.Src, d.Dst, d.ECN, d.DSCP, d.IPID, d.IPIDKnown = md.src, md.dst, md.ecn, md.dscp, 0, false
		d.TTL = md.ttl
		bytes += uint64(mh.Len)
		k++
	}
	if k > 0 {
		l.recvPkts.Add(uint64(k))
		l.recvBytes.Add(bytes)
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
		if retry, err := l.recvResult(); !retry {
			return err
		}
	}
}

// recvResult classifies the last recvmmsg: done (nil) when it read
// something, retry when it read nothing or only reported an ICMP error
// queued on the socket (not about any datagram), else the error.
func (l *Link) recvResult() (retry bool, err error) {
	r := &l.rx
	switch r.errno {
	case 0:
		return r.res == 0, nil
	case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH, unix.EHOSTDOWN, unix.ENETDOWN:
		return true, nil
	}
	return false, fmt.Errorf("udp: receive on %s: %w", l.local, r.errno)
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
			l.emptyReads.Add(1)
			return false
		}
		r.res, r.errno = int(res), e
		if e != 0 {
			r.res = 0
		}
		return true
	}
}
