//go:build linux

package afxdp

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/internal/rawnet"
)

// maxParts bounds the descriptors of one received packet (a 9 KiB jumbo
// frame in 2 KiB frames needs 5).
const maxParts = 8

// txState is owned by the goroutine holding sendMu.
type txState struct {
	free   []uint64 // UMEM frames of the send half not in flight
	tmpls  *rawnet.Templates
	queued int // descriptors written since the last kick
}

// rxState is owned by the goroutine holding recvMu.
type rxState struct {
	parts   [maxParts]unix.XDPDesc
	frame   rawnet.Frame
	readyFn func(uintptr) bool
	kickFn  func(uintptr) bool
}

func (l *Link) initTx() {
	nrx := min(l.cfg.Frames/2, l.cfg.RingSize)
	ntx := min(l.cfg.Frames-nrx, l.cfg.RingSize) // the completion ring holds every frame in flight
	l.tx.free = make([]uint64, 0, ntx)
	for i := 0; i < ntx; i++ {
		l.tx.free = append(l.tx.free, uint64(nrx+i)*l.fs)
	}
	l.tx.tmpls = rawnet.NewTemplates(l.res, l.info.MAC, l.local, l.cfg.TOS, l.cfg.TTL)
	if l.cfg.Tag {
		l.tx.tmpls.SetTag(l.cfg.VLANID)
	}
}

func (l *Link) initRx() {
	l.rx.readyFn = func(uintptr) bool { return l.closed.Load() || l.rxr.avail() > 0 }
	l.rx.kickFn = func(fd uintptr) bool {
		unix.Syscall6(unix.SYS_RECVFROM, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
		return true
	}
}

// ---------------------------------------------------------------- receive

// Recv blocks until at least one RoCEv2 datagram for the link's address
// arrives and copies datagrams into dgs (see link.Link). It returns
// link.ErrClosed after Close. Concurrent Recv calls are serialized.
func (l *Link) Recv(dgs []link.Datagram) (int, error) {
	if len(dgs) == 0 {
		return 0, nil
	}
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	for {
		if l.closed.Load() || l.umem == nil {
			return 0, link.ErrClosed
		}
		if n := l.drain(dgs); n > 0 {
			return n, nil
		}
		// Poll the RX ring for a while (Config.BusyPoll), then wait in the
		// poller.
		if rawnet.Spin(l.cfg.BusyPoll, l.rx.readyFn) {
			continue
		}
		if err := l.rc.Read(l.rx.readyFn); err != nil {
			if l.closed.Load() {
				return 0, link.ErrClosed
			}
			return 0, fmt.Errorf("afxdp: wait for the RX ring: %w", err)
		}
	}
}

// drain consumes whole packets from the RX ring into dgs and gives their
// frames back to the fill ring.
func (l *Link) drain(dgs []link.Datagram) int {
	r, fill := &l.rxr, &l.fill
	n := 0
	avail := r.avail()
	for avail > 0 && n < len(dgs) {
		// Gather one packet: descriptors up to one without XDP_PKT_CONTD.
		k := uint32(0)
		complete := false
		for k < avail {
			d := *r.xdesc(r.cachedCons + k)
			if k < maxParts {
				l.rx.parts[k] = d
			}
			k++
			if d.Options&unix.XDP_PKT_CONTD == 0 {
				complete = true
				break
			}
		}
		if !complete {
			// The kernel publishes a packet's descriptors together, so
			// this does not happen; wait for the rest if it does.
			break
		}
		if l.deliverParts(&dgs[n], k) {
			n++
		}
		for i := uint32(0); i < k; i++ {
			*fill.addr(fill.cachedProd) = r.xdesc(r.cachedCons+i).Addr &^ (l.fs - 1)
			fill.cachedProd++
		}
		r.cachedCons += k
		avail -= k
	}
	r.release()
	fill.submit()
	if fill.needWakeup() {
		l.rc.Read(l.rx.kickFn)
	}
	return n
}

// deliverParts classifies the packet of k descriptors in rx.parts and
// copies its UDP payload into dg, straight from the UMEM frames (the
// headers lie in the first one).
func (l *Link) deliverParts(dg *link.Datagram, k uint32) bool {
	f := &l.rx.frame
	d := rawnet.Deliver
	total := 0
	if k > maxParts {
		d = rawnet.DropTooBig
	} else {
		for _, p := range l.rx.parts[:k] {
			if p.Addr+uint64(p.Len) > uint64(len(l.umem)) {
				d = rawnet.DropTruncated // a descriptor outside the UMEM: never trust it
				break
			}
			total += int(p.Len)
		}
	}
	var off, n int
	if d == rawnet.Deliver {
		p := l.rx.parts[0]
		d, off, n = rawnet.ClassifyHead(l.umem[p.Addr:p.Addr+uint64(p.Len)], total, l.local.Addr(), l.local.Port(), f)
	}
	if d == rawnet.Deliver && f.Tagged && int(f.VLAN) != l.cfg.vlanFilter() {
		// The program redirects only our VLAN ID; this is a second check.
		d = rawnet.DropVLAN
	}
	if d == rawnet.Deliver && n > cap(dg.Buf) {
		d = rawnet.DropTooBig
	}
	if d != rawnet.Deliver {
		l.drops[d].Add(1)
		return false
	}
	dst := dg.Buf[:n]
	w, pos := 0, 0 // bytes written; frame offset of the current part
	for _, p := range l.rx.parts[:k] {
		seg := l.umem[p.Addr : p.Addr+uint64(p.Len)]
		if lo := off + w - pos; lo < len(seg) && w < n {
			w += copy(dst[w:], seg[lo:])
		}
		pos += len(seg)
	}
	dg.Buf = dst
	dg.Src, dg.Dst, dg.ECN, dg.DSCP, dg.Priority = f.Src, f.Dst, f.ECN, f.DSCP, f.Priority
	dg.IPID, dg.IPIDKnown = f.IPID, l.local.Addr().Is4()
	l.recvPkts.Add(1)
	l.recvBytes.Add(uint64(n))
	return true
}

// ---------------------------------------------------------------- send

// Send copies each datagram, behind Ethernet/IP/UDP headers from a
// per-destination template, into UMEM frames (two for a frame above one
// UMEM frame, with XDP_PKT_CONTD), posts them on the TX ring and wakes the
// kernel (in copy mode every sendto transmits a batch). The UDP source port
// is dgs[i].Src's port (the link's if zero), the destination port
// dgs[i].Dst's (4791 if zero), the IPv4 ID dgs[i].IPID, the ECN bits
// dgs[i].ECN, and with Config.Tag the 802.1Q PCP dgs[i].Priority. It
// returns how many datagrams it posted; the error says why the next one
// was not. dgs[i].Buf is only read during the call.
func (l *Link) Send(dgs []link.Datagram) (int, error) {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	if l.closed.Load() {
		return 0, link.ErrClosed
	}
	sent := 0
	var err error
	for i := range dgs {
		if err = l.post(&dgs[i]); err != nil {
			break
		}
		sent++
		l.sentBytes.Add(uint64(len(dgs[i].Buf)))
	}
	l.sentPkts.Add(uint64(sent))
	if kerr := l.flush(); kerr != nil && err == nil {
		err = kerr
	}
	if err != nil {
		l.sendErrs.Add(1)
	}
	return sent, err
}

// post writes one datagram into free frames and TX descriptors.
func (l *Link) post(dg *link.Datagram) error {
	tp, err := l.tx.tmpls.Lookup(dg.Dst)
	if err != nil {
		return fmt.Errorf("afxdp: send to %v: %w", dg.Dst, err)
	}
	total := tp.Len() + len(dg.Buf)
	if total > l.info.MaxFrame {
		return fmt.Errorf("%w: %d-byte frame, limit %d", ErrTooBig, total, l.info.MaxFrame)
	}
	fs := int(l.fs)
	nf := (total + fs - 1) / fs
	if err := l.reserve(nf); err != nil {
		return err
	}
	t, r := &l.tx, &l.txr
	off := 0 // payload bytes written
	for j := 0; j < nf; j++ {
		a := t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
		fr := l.umem[a : a+l.fs]
		w := 0
		if j == 0 {
			w = tp.Write(fr, dg)
		}
		c := copy(fr[w:], dg.Buf[off:])
		off += c
		w += c
		d := r.xdesc(r.cachedProd)
		d.Addr, d.Len, d.Options = a, uint32(w), 0
		if j < nf-1 {
			d.Options = unix.XDP_PKT_CONTD
		}
		r.cachedProd++
	}
	t.queued += nf
	if t.queued >= l.cfg.BatchSize {
		return l.flush()
	}
	return nil
}

// reserve makes sure nf free frames and nf TX ring entries are there,
// kicking the kernel and reclaiming completions as needed; it gives up
// after a second without progress.
func (l *Link) reserve(nf int) error {
	t, r := &l.tx, &l.txr
	if len(t.free) >= nf && r.free(uint32(nf)) >= uint32(nf) {
		return nil
	}
	var deadline time.Time
	for spin := 0; ; spin++ {
		if err := l.flush(); err != nil {
			return err
		}
		l.reclaim()
		if len(t.free) >= nf && r.free(uint32(nf)) >= uint32(nf) {
			return nil
		}
		switch {
		case spin < 16:
			runtime.Gosched()
		case deadline.IsZero():
			deadline = time.Now().Add(time.Second)
		case time.Now().After(deadline):
			return fmt.Errorf("%w: %d frames free, %d completions pending", ErrStalled, len(t.free), r.size-r.free(0))
		default:
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// reclaim moves completed TX frames back to the free list.
func (l *Link) reclaim() {
	c := &l.comp
	n := c.avail()
	for i := uint32(0); i < n; i++ {
		l.tx.free = append(l.tx.free, *c.addr(c.cachedCons)&^(l.fs-1))
		c.cachedCons++
	}
	if n > 0 {
		c.release()
	}
}

// flush publishes the queued descriptors and, if the kernel wants a
// wakeup (always in copy mode), calls sendto until it has consumed them.
func (l *Link) flush() error {
	t, r := &l.tx, &l.txr
	if t.queued == 0 && !r.pending() {
		return nil
	}
	r.submit()
	t.queued = 0
	for try := 0; r.pending(); try++ {
		if !r.needWakeup() {
			return nil // the driver polls the ring itself (zero copy)
		}
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(l.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0, unix.EAGAIN, unix.EBUSY:
			// EAGAIN: a batch went out and more remain, or the completion
			// ring is full; EBUSY: the driver dropped a frame (lost, as
			// on a congested wire).
		case unix.ENOBUFS, unix.ENOMEM:
			time.Sleep(20 * time.Microsecond)
		case unix.ENETDOWN, unix.ENXIO:
			return fmt.Errorf("afxdp: sendto: %w", e)
		default:
			return fmt.Errorf("afxdp: sendto: %w", e)
		}
		l.reclaim()
		if try > 1000 {
			if try%64 == 0 {
				runtime.Gosched()
			}
			if try > 100000 {
				return fmt.Errorf("%w: the kernel consumes no descriptor", ErrStalled)
			}
		}
	}
	l.reclaim()
	return nil
}
