//go:build linux

package afpacket

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/internal/rawnet"
)

// rxState is the receive ring; owned by the goroutine holding recvMu.
//
// The ring is shared with the kernel. Ownership of a TPACKET_V3 block (or
// a TPACKET_V2 slot) passes through its status word only: the reader
// loads it atomically (TP_STATUS_USER: the kernel has finished writing,
// and the atomic load orders the reads of the data after it) and hands the
// block back with an atomic store of TP_STATUS_KERNEL after its last read.
// Packet headers inside an owned block are ordinary memory, read with
// bounds checks against the block: a bad offset stops the block rather
// than reading past it.
type rxState struct {
	ring []byte
	v3   bool

	// TPACKET_V3: blocks of bs bytes; blk is the current block, open says
	// it is owned and being read, pkt/num count its packets, off is the
	// offset of the next one.
	bs, nb        int
	blk           int
	open          bool
	pkt, num, off int

	// TPACKET_V2: slots of slot bytes; cur is the next one.
	slot, nslots, cur int

	frame   rawnet.Frame
	readyFn func(uintptr) bool // the poller callback, made once
}

const (
	tpStatusUser      = unix.TP_STATUS_USER
	tpStatusKernel    = unix.TP_STATUS_KERNEL
	tpStatusVLANValid = unix.TP_STATUS_VLAN_VALID
	tpacket3HdrLen    = unix.SizeofTpacket3Hdr
	tpacket2HdrLen    = unix.SizeofTpacket2Hdr
	blockStatusOff    = 8 // tpacket_block_desc: version, offset_to_priv, then hdr.bh1.block_status
	// The sockaddr_ll the kernel writes after each frame header
	// (TPACKET_ALIGN of the header size); sll_pkttype is its byte 10.
	sll3Off, sll2Off = 48, 32
	sllPktType       = 10
	// tp_vlan_tci of tpacket3_hdr (hv1, after rxhash) and tpacket2_hdr.
	tp3VLANTCIOff, tp2VLANTCIOff = 32, 24
)

// status returns the 32-bit status word at b[off:] as an atomic cell.
func status(b []byte, off int) *uint32 {
	_ = b[off+3]
	return (*uint32)(unsafe.Pointer(&b[off]))
}

// setupRing sets the TPACKET version, requests the ring and maps it.
func (l *Link) setupRing() error {
	cfg := &l.cfg
	fd := l.fd
	page := os.Getpagesize()
	r := &l.rx
	var size int
	if cfg.Ring == RingV3 {
		if cfg.BlockSize%page != 0 {
			return fmt.Errorf("afpacket: BlockSize %d is not a multiple of the page size %d", cfg.BlockSize, page)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
			return rawnet.SocketError("afpacket: PACKET_VERSION TPACKET_V3", err)
		}
		const frame = 2048 // only for the kernel's consistency checks: V3 packs packets
		tov := int(cfg.RetireTimeout.Milliseconds())
		if tov < 1 {
			tov = 1
		}
		req := unix.TpacketReq3{
			Block_size: uint32(cfg.BlockSize), Block_nr: uint32(cfg.Blocks),
			Frame_size: frame, Frame_nr: uint32(cfg.BlockSize / frame * cfg.Blocks),
			Retire_blk_tov: uint32(tov),
		}
		if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return rawnet.SocketError("afpacket: PACKET_RX_RING (TPACKET_V3)", err)
		}
		r.v3, r.bs, r.nb = true, cfg.BlockSize, cfg.Blocks
		size = cfg.BlockSize * cfg.Blocks
	} else {
		slot := cfg.FrameSlot
		if slot <= 0 {
			// A frame of the MTU after the kernel's header and sockaddr_ll
			// (TPACKET2_HDRLEN rounded up, plus alignment: 80 bytes).
			slot = max(2048, (l.info.MTU+rawnet.EthLen+80+15)&^15)
		}
		if slot%16 != 0 || slot < 2048 {
			return fmt.Errorf("afpacket: FrameSlot %d must be a multiple of 16 and at least 2048", slot)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
			return rawnet.SocketError("afpacket: PACKET_VERSION TPACKET_V2", err)
		}
		// The smallest block that is a whole number of slots and pages.
		block := slot
		for block%page != 0 {
			block += slot
		}
		per := block / slot
		nb := (cfg.Frames + per - 1) / per
		req := unix.TpacketReq{Block_size: uint32(block), Block_nr: uint32(nb), Frame_size: uint32(slot), Frame_nr: uint32(nb * per)}
		if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return rawnet.SocketError("afpacket: PACKET_RX_RING (TPACKET_V2)", err)
		}
		r.slot, r.nslots = slot, nb*per
		size = block * nb
	}
	ring, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("afpacket: mmap ring (%d bytes): %w", size, err)
	}
	r.ring = ring
	l.info.RingBytes = size
	return nil
}

func (r *rxState) unmap() {
	if r.ring != nil {
		unix.Munmap(r.ring)
		r.ring = nil
	}
}

// Recv blocks until at least one RoCEv2 datagram for the link's address
// arrives and copies datagrams into dgs (see link.Link). Frames that are
// not ours are counted in Drops and skipped. It returns link.ErrClosed
// after Close. Concurrent Recv calls are serialized.
func (l *Link) Recv(dgs []link.Datagram) (int, error) {
	if len(dgs) == 0 {
		return 0, nil
	}
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	for {
		if l.closed.Load() || l.rx.ring == nil {
			return 0, link.ErrClosed
		}
		var n int
		if l.rx.v3 {
			n = l.drainV3(dgs)
		} else {
			n = l.drainV2(dgs)
		}
		if n > 0 {
			return n, nil
		}
		// Poll the ring for a while (Config.BusyPoll), then wait in the
		// poller: the kernel signals the socket when it hands a block (V3)
		// or a slot (V2) over.
		if rawnet.Spin(l.cfg.BusyPoll, l.rx.readyFn) {
			continue
		}
		err := l.rc.Read(l.rx.readyFn)
		if err != nil {
			return 0, l.ioErr("wait for the ring", err)
		}
	}
}

// ready reports whether the next block or slot belongs to the reader.
func (r *rxState) ready() bool {
	if r.v3 {
		return r.open || atomic.LoadUint32(status(r.ring, r.blk*r.bs+blockStatusOff))&tpStatusUser != 0
	}
	return atomic.LoadUint32(status(r.ring, r.cur*r.slot))&tpStatusUser != 0
}

// drainV3 reads packets from the ring's ready blocks into dgs.
func (l *Link) drainV3(dgs []link.Datagram) int {
	r := &l.rx
	n := 0
	for n < len(dgs) {
		b := r.ring[r.blk*r.bs : (r.blk+1)*r.bs]
		if !r.open {
			if atomic.LoadUint32(status(b, blockStatusOff))&tpStatusUser == 0 {
				break
			}
			r.num = int(binary.NativeEndian.Uint32(b[12:]))
			r.off = int(binary.NativeEndian.Uint32(b[16:]))
			r.pkt, r.open = 0, true
		}
		if r.pkt >= r.num || r.off+tpacket3HdrLen > len(b) {
			atomic.StoreUint32(status(b, blockStatusOff), tpStatusKernel)
			r.open = false
			r.blk++
			if r.blk == r.nb {
				r.blk = 0
			}
			continue
		}
		h := b[r.off:]
		next := int(binary.NativeEndian.Uint32(h[0:]))
		snap := int(binary.NativeEndian.Uint32(h[12:]))
		plen := int(binary.NativeEndian.Uint32(h[16:]))
		st := binary.NativeEndian.Uint32(h[20:])
		mac := int(binary.NativeEndian.Uint16(h[24:]))
		start := r.off + mac
		r.pkt++
		if next <= 0 {
			r.pkt = r.num // the last packet of the block
		} else {
			r.off += next
		}
		if start+snap > len(b) || mac < tpacket3HdrLen {
			l.drops[rawnet.DropTruncated].Add(1)
			r.pkt = r.num // a corrupt block: hand it back
			continue
		}
		tci := uint16(binary.NativeEndian.Uint32(h[tp3VLANTCIOff:]))
		if l.deliver(&dgs[n], b[start:start+snap], st, tci, h[sll3Off+sllPktType], snap < plen) {
			n++
		}
	}
	return n
}

// drainV2 reads packets from the ring's ready slots into dgs.
func (l *Link) drainV2(dgs []link.Datagram) int {
	r := &l.rx
	n := 0
	for n < len(dgs) {
		s := r.ring[r.cur*r.slot : (r.cur+1)*r.slot]
		st := atomic.LoadUint32(status(s, 0))
		if st&tpStatusUser == 0 {
			break
		}
		plen := int(binary.NativeEndian.Uint32(s[4:]))
		snap := int(binary.NativeEndian.Uint32(s[8:]))
		mac := int(binary.NativeEndian.Uint16(s[12:]))
		if mac < tpacket2HdrLen || mac+snap > len(s) {
			l.drops[rawnet.DropTruncated].Add(1)
		} else if l.deliver(&dgs[n], s[mac:mac+snap], st, binary.NativeEndian.Uint16(s[tp2VLANTCIOff:]), s[sll2Off+sllPktType], snap < plen) {
			n++
		}
		atomic.StoreUint32(status(s, 0), tpStatusKernel)
		r.cur++
		if r.cur == r.nslots {
			r.cur = 0
		}
	}
	return n
}

// deliver classifies one frame and copies its UDP payload into dg. A
// frame whose 802.1Q tag the kernel stripped (TP_STATUS_VLAN_VALID, tag
// tci) is ours only with Config.Tag and its VLANID; the kernel marks it
// for another host when no VLAN device takes its VLAN ID.
func (l *Link) deliver(dg *link.Datagram, frame []byte, st uint32, tci uint16, pktType uint8, cut bool) bool {
	var d rawnet.Drop
	f := &l.rx.frame
	tagged := st&tpStatusVLANValid != 0
	ours := tagged && l.cfg.Tag && tci&0x0fff == l.cfg.VLANID
	switch {
	case cut:
		d = rawnet.DropTooBig
	case tagged && !ours:
		d = rawnet.DropVLAN
	case pktType != unix.PACKET_HOST && !(ours && pktType == unix.PACKET_OTHERHOST && tci&0x0fff != 0):
		// Another host's MAC, broadcast or multicast, or a frame tagged
		// for a VLAN without a device (the kernel strips the tag and
		// marks it PACKET_OTHERHOST).
		d = rawnet.DropOtherAddr
	default:
		d = rawnet.Classify(frame, l.local.Addr(), l.local.Port(), f)
	}
	if d == rawnet.Deliver && len(f.Payload) > cap(dg.Buf) {
		d = rawnet.DropTooBig
	}
	if d != rawnet.Deliver {
		l.drops[d].Add(1)
		return false
	}
	dg.Buf = dg.Buf[:copy(dg.Buf[:cap(dg.Buf)], f.Payload)]
	dg.Src, dg.Dst, dg.ECN, dg.DSCP, dg.Priority = f.Src, f.Dst, f.ECN, f.DSCP, f.Priority
	if tagged {
		dg.Priority = uint8(tci >> 13)
	}
	dg.IPID, dg.IPIDKnown = f.IPID, l.local.Addr().Is4()
	l.recvPkts.Add(1)
	l.recvBytes.Add(uint64(len(dg.Buf)))
	return true
}
