//go:build linux

package udp

import (
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

// recvGRO receives with UDP_GRO on. Coalesced buffers are scattered by the
// kernel straight into the caller's buffers when their gso_size and
// segment count are as predicted; what does not fit (more segments than
// slots, a different gso_size, anything after such a message, to keep the
// order) is gathered in the arena and copied out, now or by the next calls.
func (l *Link) recvGRO(dgs []link.Datagram) (int, error) {
	for {
		if k := l.deliverPending(dgs); k > 0 {
			return k, nil
		}
		m := l.layoutGRO(dgs)
		if err := l.recvCall(m); err != nil {
			return 0, err
		}
		if k := l.scatterGRO(dgs); k > 0 {
			return k, nil
		}
	}
}

// layoutGRO prepares the recvmmsg messages and returns how many. Three
// layouts, chosen by the prediction:
//
//   - singles (pred 0): message m reads into the caller's buffer m, whole,
//     then into arena slot m;
//   - scatter (pred >= scatterMin): message m reads into per caller
//     buffers cut at pred, so a coalesced buffer of up to per segments
//     splits itself, then into arena slot m;
//   - arena (small segments): message m reads into arena slot m only.
//
// Scattering saves the copy out of the arena but costs the kernel one
// iovec per segment and the caller's slots bound the batch: measured on
// loopback (BenchmarkRecvDrain) it is ~25 % cheaper per 4140-byte datagram
// and ~30 % dearer per 1068-byte one, hence scatterMin.
func (l *Link) layoutGRO(dgs []link.Datagram) int {
	r := &l.rx
	r.arenaMsgs = 0
	n := min(len(dgs), len(r.iov)-l.batch)
	per := 1
	switch {
	case r.pred == 0:
	case r.pred < scatterMin || r.predSegs < 2:
		per = 0
	default:
		per = min(r.predSegs, maxSegs, n)
		for i := 0; i < n/per*per; i++ {
			if cap(dgs[i].Buf) < r.pred {
				per = 0 // a buffer too small for a segment
				break
			}
		}
	}
	msgs := l.batch
	if per > 0 {
		msgs = min(n/per, l.batch)
	}
	r.slotsPer = per
	iv := 0
	for m := 0; m < msgs; m++ {
		first := iv
		r.slotLen[m] = 0
		for j := 0; j < per; j++ {
			b := dgs[m*per+j].Buf
			ln := cap(b)
			if per > 1 {
				ln = r.pred
			}
			v := &r.iov[iv]
			v.Base = nil
			if ln > 0 {
				v.Base = &b[:1][0]
			}
			v.SetLen(ln)
			r.slotLen[m] = ln
			iv++
		}
		v := &r.iov[iv]
		v.Base = &r.arena[m*groBufSize]
		v.SetLen(groBufSize)
		iv++
		l.prepRx(m, &r.iov[first])
		r.msgs[m].Hdr.SetIovlen(per + 1)
	}
	return msgs
}

// scatterGRO turns the messages of the last recvmmsg into datagrams: in
// place where the layout matched, else into pend. It returns how many
// datagrams it put in dgs and updates the prediction. Buffers never move
// between slots: the caller may track them by index.
func (l *Link) scatterGRO(dgs []link.Datagram) int {
	r := &l.rx
	r.pend, r.pcur, r.poff = r.pend[:0], 0, 0
	k, spill := 0, false
	var bytes uint64
	var seen groSeen
	for m := 0; m < r.res; m++ {
		md := rxMeta{}
		total, seg, nseg, ok := l.message(m, &md, &seen)
		if !ok {
			continue
		}
		s0, slots, sl := m*r.slotsPer, r.slotsPer, r.slotLen[m]
		in := min(nseg, slots)
		if !spill && (seg == sl || (nseg == 1 && total <= sl)) && fitsDown(dgs, k, s0, in, seg, total) {
			for j := 0; j < in; j++ {
				d := &dgs[k]
				n := min(seg, total-j*seg)
				if s := s0 + j; s != k {
					// An earlier message left slots unused: move down
					// (k < s, so this never overwrites unread data).
					copy(d.Buf[:n], dgs[s].Buf[:n])
					l.groCopied.Add(1)
				}
				d.Buf = d.Buf[:n]
				d.Src, d.Dst, d.ECN, d.DSCP, d.IPID, d.IPIDKnown = md.src, md.dst, md.ecn, md.dscp, l.idHint(j), false
				d.TTL = md.ttl
				bytes += uint64(n)
				k++
			}
			if nseg > in { // the rest is in the overflow buffer, segment-aligned
				md.base, md.n, md.seg, md.seg0 = m*groBufSize, total-in*seg, seg, in
				r.pend = append(r.pend, md)
				spill = true
			}
			continue
		}
		// Gather the whole message in its overflow buffer: move what
		// overflowed up, then copy in what landed in the slots.
		a := r.arena[m*groBufSize : (m+1)*groBufSize]
		inSlots := min(total, slots*sl)
		if rest := total - inSlots; rest > 0 && inSlots > 0 {
			copy(a[inSlots:total], a[:rest])
		}
		for j, off := 0, 0; off < inSlots; j++ {
			n := min(sl, inSlots-off)
			copy(a[off:off+n], dgs[s0+j].Buf[:n])
			off += n
		}
		md.base, md.n, md.seg = m*groBufSize, total, seg
		r.pend = append(r.pend, md)
		spill = true
	}
	l.predict(seen)
	if k > 0 {
		l.recvPkts.Add(uint64(k))
		l.recvBytes.Add(bytes)
	}
	return k
}

// groSeen is what the messages of one recvmmsg showed of GRO, for predict.
type groSeen struct {
	coalesced bool // some message was a coalesced buffer
	lastSeg   int  // the gso_size of the last coalesced one
	mostSegs  int  // the most segments in one message
}

// message reads message m of the last recvmmsg: its metadata into md, its
// length, its segment size (the whole length unless GRO coalesced it) and
// segment count, noted in g. It reports false for a truncated message,
// counted as a drop.
func (l *Link) message(m int, md *rxMeta, g *groSeen) (total, seg, nseg int, ok bool) {
	mh := &l.rx.msgs[m]
	if mh.Hdr.Flags&unix.MSG_TRUNC != 0 {
		l.trunc.Add(1)
		l.recvDrops.Add(1)
		return 0, 0, 0, false
	}
	l.parseRx(m, md)
	total, seg = int(mh.Len), md.seg
	if seg <= 0 || seg >= total {
		seg = total
	} else {
		g.coalesced, g.lastSeg = true, seg
		l.groRecv.Add(1)
	}
	nseg = 1
	if seg > 0 {
		nseg = (total + seg - 1) / seg
	}
	g.mostSegs = max(g.mostSegs, nseg)
	return total, seg, nseg, true
}

// predict updates the layout prediction after a recvmmsg whose messages
// showed g. Predicting too many segments per buffer only costs batching
// (fewer, larger messages per call); too few costs copies. So the
// prediction rises at once and falls only after lowWindow calls that all
// stayed below it, to the largest they saw.
func (l *Link) predict(g groSeen) {
	const lowWindow = 32
	r := &l.rx
	if g.coalesced {
		r.pred = g.lastSeg
	}
	mostSegs := g.mostSegs
	if mostSegs >= r.predSegs {
		r.predSegs, r.lowCalls, r.lowMax = mostSegs, 0, 0
		return
	}
	r.lowMax = max(r.lowMax, mostSegs)
	if r.lowCalls++; r.lowCalls >= lowWindow {
		r.predSegs, r.lowCalls, r.lowMax = max(r.lowMax, 1), 0, 0
		if r.predSegs == 1 {
			r.pred = 0
		}
	}
}

// fitsDown says whether the in segments (of seg bytes, total in all) that
// landed in slots s0.. can be delivered at k..: in place, or moved down into
// buffers large enough.
func fitsDown(dgs []link.Datagram, k, s0, in, seg, total int) bool {
	if k == s0 {
		return true
	}
	for j := 0; j < in; j++ {
		if cap(dgs[k+j].Buf) < min(seg, total-j*seg) {
			return false
		}
	}
	return true
}

// idHint is the IPv4 ID segment j of a coalesced buffer most likely
// carried: a buffer that is one GSO super-packet (loopback passes them
// whole) or that GRO merged from one (IPv4 GRO merges only IDs that
// increment by one, or that are all the same) holds IDs 0, 1, 2, … from a
// Linux sender (link.IPIDPlanner). It is a hint (IPIDKnown stays false):
// the device tries it first and recovers any other ID from the ICRC. IPv6
// has no ID: 0.
func (l *Link) idHint(j int) uint16 {
	if l.v6 {
		return 0
	}
	return uint16(j)
}

// deliverPending copies pending segments into dgs and returns how many.
func (l *Link) deliverPending(dgs []link.Datagram) int {
	r := &l.rx
	k := 0
	var bytes uint64
	for r.pcur < len(r.pend) && k < len(dgs) {
		md := &r.pend[r.pcur]
		if md.n == 0 { // an empty datagram
			d := &dgs[k]
			d.Buf = d.Buf[:0]
			d.Src, d.Dst, d.ECN, d.DSCP, d.IPID, d.IPIDKnown = md.src, md.dst, md.ecn, md.dscp, 0, false
			d.TTL = md.ttl
			k++
			r.pcur++
			continue
		}
		if r.poff >= md.n {
			r.pcur++
			r.poff = 0
			continue
		}
		end := min(r.poff+md.seg, md.n)
		p := r.arena[md.base+r.poff : md.base+end]
		id := l.idHint(md.seg0 + r.poff/md.seg)
		r.poff = end
		d := &dgs[k]
		if cap(d.Buf) < len(p) {
			l.trunc.Add(1)
			l.recvDrops.Add(1)
			continue
		}
		d.Buf = d.Buf[:len(p)]
		copy(d.Buf, p)
		d.Src, d.Dst, d.ECN, d.DSCP, d.IPID, d.IPIDKnown = md.src, md.dst, md.ecn, md.dscp, id, false
		d.TTL = md.ttl
		bytes += uint64(len(p))
		k++
	}
	if r.pcur >= len(r.pend) {
		r.pend, r.pcur, r.poff = r.pend[:0], 0, 0
	}
	if k > 0 {
		l.recvPkts.Add(uint64(k))
		l.recvBytes.Add(bytes)
		l.groCopied.Add(uint64(k))
	}
	return k
}
