//go:build linux

package udp

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

// allocArena allocates the GRO arena: one overflow buffer of groBufSize
// per message of a batch.
func (l *Link) allocArena() {
	b := l.batch
	// Anonymous memory: untouched pages cost nothing, the GC never
	// scans it, and Close returns it at once.
	a, err := unix.Mmap(-1, 0, b*groBufSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		a = make([]byte, b*groBufSize)
	} else {
		// Unmapped by Close, or when a link nobody closed is collected.
		l.rx.mapping = &mapping{b: a}
		runtime.AddCleanup(l, (*mapping).unmap, l.rx.mapping)
	}
	l.rx.arena = a
}

// mapping is anonymous memory to unmap once.
type mapping struct {
	mu sync.Mutex
	b  []byte
}

func (m *mapping) unmap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b != nil {
		unix.Munmap(m.b)
		m.b = nil
	}
}

// layoutArena prepares recvmmsg messages that each read into their own
// arena slot, enough of them for about n datagrams at the predicted
// segments per buffer, and returns how many. The layout is the same every
// call, so only what the kernel wrote since (the name, control and flag
// fields of the messages the last call returned) is reset, and messages
// are laid out in full only the first time (a receive loop calls this once
// per wake-up, mostly for one datagram; preparing 64 messages each time
// showed as 2.5 % of the 2-byte WRITE ping-pong's profile).
func (l *Link) layoutArena(n int) int {
	r := &l.rx
	msgs := min(l.batch, max(1, n/max(r.predSegs, 1)))
	r.slotsPer = 0
	// Messages [0, arenaMsgs) hold the arena layout; the last recvmmsg
	// may have written into [0, res) of them (one more on an error).
	for m := 0; m < min(max(r.res, 1), r.arenaMsgs); m++ {
		h := &r.msgs[m].Hdr
		h.Namelen = sockaddrSize
		h.SetControllen(rxOOBSize)
		h.Flags = 0
		r.msgs[m].Len = 0
	}
	for m := r.arenaMsgs; m < msgs; m++ {
		v := &r.iov[m]
		v.Base = &r.arena[m*groBufSize]
		v.SetLen(groBufSize)
		l.prepRx(m, v)
	}
	r.arenaMsgs = max(r.arenaMsgs, msgs)
	return msgs
}

// collectArena queues every message of the last recvmmsg, read by a
// layoutArena layout, in pend.
func (l *Link) collectArena() {
	r := &l.rx
	r.pend, r.pcur, r.poff = r.pend[:0], 0, 0
	var seen groSeen
	for m := 0; m < r.res; m++ {
		md := rxMeta{}
		total, seg, _, ok := l.message(m, &md, &seen)
		if !ok {
			continue
		}
		md.base, md.n, md.seg = m*groBufSize, total, seg
		r.pend = append(r.pend, md)
	}
	l.predict(seen)
}

// lendPending points dgs at pending segments in the arena and returns how
// many.
func (l *Link) lendPending(dgs []link.Datagram) int {
	r := &l.rx
	k := 0
	var bytes uint64
	for r.pcur < len(r.pend) && k < len(dgs) {
		md := &r.pend[r.pcur]
		if r.poff >= md.n && md.n > 0 {
			r.pcur++
			r.poff = 0
			continue
		}
		end := min(r.poff+md.seg, md.n)
		id := uint16(0)
		if md.seg > 0 {
			id = l.idHint(md.seg0 + r.poff/md.seg)
		}
		d := &dgs[k]
		d.Buf = r.arena[md.base+r.poff : md.base+end : md.base+end]
		d.Src, d.Dst, d.ECN, d.DSCP, d.IPID, d.IPIDKnown = md.src, md.dst, md.ecn, md.dscp, id, false
		d.TTL = md.ttl
		bytes += uint64(end - r.poff)
		k++
		if md.n == 0 { // an empty datagram
			r.pcur++
			continue
		}
		r.poff = end
	}
	if r.pcur >= len(r.pend) {
		r.pend, r.pcur, r.poff = r.pend[:0], 0, 0
	}
	if k > 0 {
		l.recvPkts.Add(uint64(k))
		l.recvBytes.Add(bytes)
	}
	return k
}
