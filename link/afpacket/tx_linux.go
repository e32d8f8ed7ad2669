//go:build linux

package afpacket

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/internal/rawnet"
)

// txState is owned by the goroutine holding sendMu.
type txState struct {
	msgs []unix.Mmsghdr
	iov  []unix.Iovec
	hdrs []byte // BatchSize × MaxHdrLen header slots

	tmpls   *rawnet.Templates
	maxSize int // largest frame: MTU + Ethernet header

	// The sendmmsg call: input base / n, output res / errno.
	base  int
	n     int
	res   int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

func (l *Link) allocTx() {
	b := l.cfg.BatchSize
	l.tx = txState{
		msgs:    make([]unix.Mmsghdr, b),
		iov:     make([]unix.Iovec, 2*b),
		hdrs:    make([]byte, b*rawnet.MaxHdrLen),
		tmpls:   rawnet.NewTemplates(l.res, l.info.MAC, l.local, l.cfg.TOS, l.cfg.TTL),
		maxSize: l.info.MTU + rawnet.EthLen,
	}
	if l.cfg.Tag {
		l.tx.tmpls.SetTag(l.cfg.VLANID)
		l.tx.maxSize += rawnet.VLANLen
	}
	for i := range l.tx.msgs {
		l.tx.msgs[i].Hdr.Iov = &l.tx.iov[2*i]
		l.tx.msgs[i].Hdr.SetIovlen(2)
	}
	l.tx.fn = l.sendmmsg
}

// Send builds an Ethernet frame around each datagram (the headers from a
// per-destination template; the payload is not copied: sendmmsg gathers
// header and payload) and sends them in batches of BatchSize with
// sendmmsg, straight to the driver with PACKET_QDISC_BYPASS. The UDP source
// port is dgs[i].Src's port (the link's port if zero), the destination
// port dgs[i].Dst's (4791 if zero); the IPv4 ID is dgs[i].IPID and the ECN
// bits dgs[i].ECN. It returns how many datagrams it sent; the error says
// why the next one was not (an unresolved next hop, a frame above the
// MTU, a socket error). dgs[i].Buf is only read during the call.
func (l *Link) Send(dgs []link.Datagram) (int, error) {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	if l.closed.Load() {
		return 0, link.ErrClosed
	}
	t := &l.tx
	sent := 0
	for sent < len(dgs) {
		k := 0
		var berr error
		for k < len(t.msgs) && sent+k < len(dgs) {
			dg := &dgs[sent+k]
			tp, err := t.tmpls.Lookup(dg.Dst)
			if err != nil {
				berr = fmt.Errorf("afpacket: send to %v: %w", dg.Dst, err)
				break
			}
			if tp.Len()+len(dg.Buf) > t.maxSize {
				berr = fmt.Errorf("%w: %d-byte frame, MTU %d", ErrTooBig, tp.Len()+len(dg.Buf), l.info.MTU)
				break
			}
			h := t.hdrs[k*rawnet.MaxHdrLen : (k+1)*rawnet.MaxHdrLen]
			hl := tp.Write(h, dg)
			iov := t.iov[2*k : 2*k+2]
			iov[0].Base = &h[0]
			iov[0].SetLen(hl)
			iov[1].SetLen(len(dg.Buf))
			if len(dg.Buf) > 0 {
				iov[1].Base = &dg.Buf[0]
			} else {
				iov[1].Base = nil
			}
			k++
		}
		if k > 0 {
			n, err := l.flush(k)
			for i := 0; i < n; i++ {
				l.sentBytes.Add(uint64(len(dgs[sent+i].Buf)))
			}
			l.sentPkts.Add(uint64(n))
			sent += n
			if err != nil {
				l.sendErrs.Add(1)
				l.clearIov(k)
				return sent, err
			}
		}
		l.clearIov(k)
		if berr != nil {
			l.sendErrs.Add(1)
			return sent, berr
		}
	}
	return sent, nil
}

// clearIov drops the references to the caller's buffers.
func (l *Link) clearIov(k int) {
	for i := 0; i < k; i++ {
		l.tx.iov[2*i+1].Base = nil
	}
}

// flush sends the first k prepared messages, retrying partial sends.
func (l *Link) flush(k int) (int, error) {
	t := &l.tx
	done := 0
	for done < k {
		t.base, t.n = done, k-done
		t.res, t.errno = 0, 0
		err := l.rc.Write(t.fn)
		if err != nil {
			return done, l.ioErr("sendmmsg", err)
		}
		if t.errno != 0 {
			if t.errno == unix.ENOBUFS {
				// The driver's queue was full (qdisc bypass drops rather
				// than queue): the frame is lost, as on a congested wire;
				// reliability is the transport's job.
				done++
				continue
			}
			return done, l.ioErr("sendmmsg", t.errno)
		}
		done += t.res
	}
	return done, nil
}

// sendmmsg is the RawConn callback of flush (a method value made once, so
// that a send does not allocate a closure).
func (l *Link) sendmmsg(fd uintptr) bool {
	t := &l.tx
	for {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&t.msgs[t.base])), uintptr(t.n), 0, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		t.res, t.errno = int(r), e
		return true
	}
}
