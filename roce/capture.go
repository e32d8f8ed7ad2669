package roce

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	capfile "github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/pcapng"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/rocev2"
)

// Capture defaults.
const (
	// DefaultCaptureQueueLen is the default CaptureConfig.QueueLen.
	DefaultCaptureQueueLen = 1024
	// DefaultCaptureSnaplen is the default CaptureConfig.Snaplen: every
	// RoCEv2 frame whole.
	DefaultCaptureSnaplen = 65535
)

// CaptureConfig configures the capture of a device's own traffic
// (Config.Capture): every packet the device sends and every packet it
// receives is written as pcapng, one Ethernet frame per packet, the way it
// was on the wire as far as the device knows it:
//
//   - Ethernet with synthesized, locally administered MACs (02:00 and the
//     IPv4 address or the IPv6 address's last four bytes): a UDP or raw IP
//     binding does not know the real ones;
//   - IPv4 (DF, TTL 64) or IPv6 with the addresses, the ECN codepoint the
//     packet was sent or received with (the DSCP bits are not the device's
//     and are written 0) and, on IPv4, the identification: sent packets
//     carry the one the device sealed them with (ID 0, or the one the
//     link planned: link.IPIDPlanner; a GSO segment carries its index),
//     received ones the one that verified the ICRC — the link's report or
//     guess, or the one recovered with rocev2.RecoverIPv4ID;
//   - UDP with the ports the packet used, checksum 0, as rxe sends;
//   - the transport packet as sealed, so the ICRC in the file verifies
//     over these headers (IBA Annex A17.4.1).
//
// Each frame has a nanosecond timestamp (the batch the link sent or
// received it in) and the pcapng epb_flags direction: outbound for sent,
// inbound for received packets. A received packet is captured whatever
// the device then does with it (dropped for a bad ICRC or an unknown QP
// included); a sent one once the link accepted it.
//
// The data path never waits for the writer: it copies each packet into a
// queue of QueueLen pre-allocated slots, which a goroutine owned by the
// device drains into W. When the queue is full the packet is not captured
// and Stats.CaptureDrops counts it, so
//
//	written + CaptureDrops == TxPackets - SendErrors + RxPackets
//
// (written: Stats.CapturePackets). If W returns an error the capture stops
// (what follows is counted as dropped) and Device.Close returns the error.
type CaptureConfig struct {
	// W receives the capture as a pcapng stream of its own: a section
	// header and one interface. The device buffers it and flushes it when
	// it has nothing queued and at Close; it never closes W. Close waits
	// for W to take what is queued, so W must not block forever.
	W io.Writer
	// File, used instead of W, is a pcapng stream shared with other
	// devices: the device adds its own interface to it (two devices of a
	// loopback test in one file, each frame on its device's interface).
	File *CaptureFile
	// Name is the interface's name in the file (if_name); the default is
	// "goroce " and the device's local address.
	Name string
	// Snaplen is the most bytes of each frame written (default 65535:
	// all of it); frames are cut to it, their original length kept.
	Snaplen int
	// QueueLen is the number of packets queued for the writer (default
	// 1024); it is rounded up to a power of two. Each slot holds the
	// largest packet the snap length keeps (at most 4 KiB MTU + headers).
	QueueLen int
}

// CaptureFile is a pcapng stream that devices write their captures to,
// each as an interface of its own (CaptureConfig.File). Its methods may
// be called from any goroutine.
type CaptureFile struct {
	mu  sync.Mutex // guards the fields below; held while writing a run of packets
	bw  *bufio.Writer
	pw  *pcapng.Writer // writes its blocks into bw
	err error
	// Per interface: the device's counters, and its packets in bw that
	// are counted (written or dropped) when bw is flushed.
	stats   []*Stats
	pending []uint64
}

// NewCaptureFile writes a pcapng section header to w and returns the
// file devices add their interfaces to. Writes to w are buffered: call
// Flush after the last device using it is closed.
func NewCaptureFile(w io.Writer) (*CaptureFile, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil capture writer", ErrInvalidArg)
	}
	f := &CaptureFile{bw: bufio.NewWriterSize(w, 256<<10)}
	pw, err := pcapng.NewWriter(f.bw, pcapng.Section{Application: "goroce"})
	if err != nil {
		return nil, err
	}
	f.pw = pw
	return f, nil
}

// Flush writes what is buffered to the underlying writer.
func (f *CaptureFile) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushLocked()
}

func (f *CaptureFile) flushLocked() error {
	if f.err == nil {
		f.err = f.bw.Flush()
	}
	for i, n := range f.pending {
		if f.err == nil {
			f.stats[i].CapturePackets.Add(n)
		} else {
			f.stats[i].CaptureDrops.Add(n)
		}
		f.pending[i] = 0
	}
	return f.err
}

// addInterface writes an interface description block and returns its ID;
// st counts its packets.
func (f *CaptureFile) addInterface(name string, snaplen int, st *Stats) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	id, err := f.pw.AddInterface(pcapng.Interface{Name: name, LinkType: capfile.LinkEthernet, SnapLen: snaplen})
	if err != nil {
		f.err = err
		return 0, err
	}
	f.stats = append(f.stats, st)
	f.pending = append(f.pending, 0)
	return uint32(id), nil
}

// capSlot is one queued packet: a copy of the transport packet (BTH to
// ICRC, cut to the snap length) and what the outer headers need.
type capSlot struct {
	buf      []byte // capacity: the slot size; [:n] is the packet's copy
	n        int
	orig     int // the transport packet's length
	ts       int64
	src, dst netip.AddrPort
	ipid     uint16
	ecn      uint8
	out      bool
}

// capture is a device's capture: a single-producer, single-consumer ring
// of slots between the data path (the producer, always under the engine
// lock) and the writer goroutine (the consumer). head and tail count
// slots taken and slots filled; the slot at tail is the producer's until
// it advances tail, the one at head the consumer's until it advances head.
type capture struct {
	file    *CaptureFile
	ownFile bool // the device made file from CaptureConfig.W
	iface   uint32
	snaplen int
	log     *slog.Logger
	stats   *Stats

	// pmu serialises the producers: the receive goroutine (commitRx)
	// and the shards' senders (sent). The writer never takes it.
	pmu    sync.Mutex
	slots  []capSlot
	stage  capSlot // a received packet while the device processes it; the receive goroutine's
	mask   uint64
	head   atomic.Uint64
	tail   atomic.Uint64
	failed atomic.Bool // the writer failed: the producer drops

	kick chan struct{} // capacity 1: the producer filled a slot
	stop chan struct{} // closed by close: drain and return
	done chan struct{} // closed by the writer when it returns
	err  error         // the writer's error, read after done
}

// newCapture sets up the capture of a device and starts its writer.
func newCapture(cfg *CaptureConfig, local netip.AddrPort, st *Stats, log *slog.Logger) (*capture, error) {
	if (cfg.W == nil) == (cfg.File == nil) {
		return nil, fmt.Errorf("%w: CaptureConfig needs one of W and File", ErrInvalidArg)
	}
	if cfg.QueueLen < 0 || cfg.QueueLen > 1<<20 || cfg.Snaplen < 0 {
		return nil, fmt.Errorf("%w: capture queue length or snap length out of range", ErrInvalidArg)
	}
	snap := cfg.Snaplen
	if snap == 0 || snap > DefaultCaptureSnaplen {
		snap = DefaultCaptureSnaplen
	}
	qlen := cfg.QueueLen
	if qlen == 0 {
		qlen = DefaultCaptureQueueLen
	}
	qlen = 1 << bits.Len(uint(qlen-1))
	name := cfg.Name
	if name == "" {
		name = "goroce " + local.String()
	}
	c := &capture{file: cfg.File, snaplen: snap, log: log, stats: st,
		slots: make([]capSlot, qlen), mask: uint64(qlen - 1),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if c.file == nil {
		f, err := NewCaptureFile(cfg.W)
		if err != nil {
			return nil, err
		}
		c.file, c.ownFile = f, true
	}
	id, err := c.file.addInterface(name, snap, st)
	if err != nil {
		return nil, err
	}
	c.iface = id
	size := min(snap, maxFrame)
	arena := make([]byte, (qlen+1)*size)
	for i := range c.slots {
		c.slots[i].buf = arena[i*size : (i+1)*size : (i+1)*size]
	}
	c.stage.buf = arena[qlen*size:]
	go c.writer()
	return c, nil
}

// reserve returns the slot at tail, or nil (the drop counted) when the
// queue is full or the writer failed. c may be nil. The caller holds pmu.
func (c *capture) reserve() *capSlot {
	if c == nil {
		return nil
	}
	t := c.tail.Load()
	if t-c.head.Load() > c.mask || c.failed.Load() {
		c.stats.CaptureDrops.Add(1)
		return nil
	}
	return &c.slots[t&c.mask]
}

// publish hands the slot reserve returned to the writer.
func (c *capture) publish() {
	c.tail.Add(1)
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// fill copies pkt and its metadata into s; tos is the TOS / traffic-class
// byte (DSCP and ECN; received packets: the ECN bits the link reports).
func (s *capSlot) fill(pkt []byte, src, dst netip.AddrPort, ipid uint16, tos uint8, out bool, ts int64) {
	s.n = copy(s.buf[:cap(s.buf)], pkt)
	s.orig = len(pkt)
	s.src, s.dst, s.ipid, s.ecn, s.out, s.ts = src, dst, ipid, tos, out, ts
}

// fillSent is fill for a datagram the device sent, two-part (a payload
// left in its region, link.Datagram) or not.
func (s *capSlot) fillSent(dg *link.Datagram, ts int64) {
	s.n, s.orig = dg.CopyTo(s.buf[:cap(s.buf)]), dg.Len()
	s.src, s.dst, s.ipid, s.ecn, s.out, s.ts = dg.Src, dg.Dst, dg.IPID, dg.DSCP<<2|dg.ECN&3, true, ts
}

// beginSend takes the producer lock for a send and returns the time to
// stamp its packets with: a shard's sender holds it from before the link's
// Send until sent has captured what the link accepted, so that a reply the
// receive goroutine captures meanwhile (an ACK of these packets) waits and
// lands after them in the file, as it came after them on the wire. The
// receive goroutine stamps its packets after recv returns, so the
// timestamps stay in order too. c may be nil.
func (c *capture) beginSend() int64 {
	if c == nil {
		return 0
	}
	c.pmu.Lock()
	return time.Now().UnixNano()
}

// endSend releases what beginSend took.
func (c *capture) endSend() {
	if c != nil {
		c.pmu.Unlock()
	}
}

// sent captures datagrams the link accepted, stamped ts; they were sealed
// with their IPID. c may be nil. The caller holds pmu (beginSend).
func (c *capture) sent(dgs []link.Datagram, ts int64) {
	if c == nil || len(dgs) == 0 {
		return
	}
	for i := range dgs {
		dg := &dgs[i]
		s := c.reserve()
		if s == nil {
			continue
		}
		s.fillSent(dg, ts)
		c.publish()
	}
}

// reserveRx copies a received datagram aside before the device processes
// it; commitRx queues it once the device has settled the IPv4 ID it
// verified the ICRC with. The copy waits outside the ring because
// processing may send (a CNP, flushTx), and what that sends may be
// captured meanwhile: it then precedes the packet that caused it in the
// file. c and the returned slot may be nil. Only the receive goroutine
// calls them.
func (c *capture) reserveRx(b *rxBuf, local netip.AddrPort, now time.Time) *capSlot {
	if c == nil {
		return nil
	}
	dst := b.dst
	if !dst.IsValid() {
		dst = local
	}
	c.stage.fill(b.buf[:b.n], b.src, dst, b.ipid, b.ecn, false, now.UnixNano())
	return &c.stage
}

// commitRx queues s (from reserveRx) with the IPv4 ID ipid by swapping it
// with the free slot at the ring's tail, buffers included: no copy.
func (c *capture) commitRx(s *capSlot, ipid uint16) {
	if s == nil {
		return
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	r := c.reserve()
	if r == nil {
		return
	}
	s.ipid = ipid
	*r, *s = *s, *r
	c.publish()
}

// close stops the writer after it has written what is queued, flushes the
// file and returns the writer's error. Producers have stopped.
func (c *capture) close() error {
	close(c.stop)
	<-c.done
	return c.err
}

// writer drains the queue into the file until close.
func (c *capture) writer() {
	defer close(c.done)
	frame := make([]byte, 128+maxFrame)
	for {
		h, t := c.head.Load(), c.tail.Load()
		if h == t {
			// Idle: push what is buffered out, then wait.
			c.flush()
			select {
			case <-c.kick:
				continue
			case <-c.stop:
				if c.tail.Load() != c.head.Load() {
					continue // filled before stop: write it first
				}
				c.flush()
				return
			}
		}
		c.file.mu.Lock()
		for ; h != t; h++ {
			s := &c.slots[h&c.mask]
			if c.err == nil {
				c.err = c.write(s, frame)
				if c.err != nil {
					c.failed.Store(true)
					c.log.Warn("capture write failed; capture stopped", "err", c.err)
				}
			}
			if c.err != nil {
				c.stats.CaptureDrops.Add(1)
			}
			c.head.Store(h + 1)
		}
		c.file.mu.Unlock()
	}
}

// flush flushes the file, recording the first error.
func (c *capture) flush() {
	c.file.mu.Lock()
	err := c.file.flushLocked()
	c.file.mu.Unlock()
	if err != nil && c.err == nil {
		c.err = err
		c.failed.Store(true)
		c.log.Warn("capture write failed; capture stopped", "err", err)
	}
}

// write writes slot s as an enhanced packet block, its frame built in
// frame; the caller holds the file's lock.
func (c *capture) write(s *capSlot, frame []byte) error {
	if c.file.err != nil {
		return c.file.err
	}
	e := rocev2.Encap{Ethernet: true, Src: s.src, Dst: s.dst, TOS: s.ecn, ID: s.ipid,
		SrcMAC: synthMAC(s.src.Addr()), DstMAC: synthMAC(s.dst.Addr())}
	hl, err := e.PutHeaders(frame, s.orig)
	if err != nil {
		return err
	}
	n := copy(frame[hl:], s.buf[:s.n])
	caplen := min(hl+n, c.snaplen)
	dir := pcapng.DirInbound
	if s.out {
		dir = pcapng.DirOutbound
	}
	// Flush explicitly, never inside Write, so that the packets a flush
	// writes are the ones counted pending. The block is built straight
	// into bw's free buffer.
	if c.file.bw.Available() < pcapng.PacketLen(caplen, dir) {
		if err := c.file.flushLocked(); err != nil {
			return err
		}
	}
	b, err := c.file.pw.AppendPacket(c.file.bw.AvailableBuffer(), pcapng.Packet{Interface: int(c.iface),
		Time: time.Unix(0, s.ts), Data: frame[:caplen], OrigLen: hl + s.orig, Dir: dir})
	if err != nil {
		return err
	}
	if _, err := c.file.bw.Write(b); err != nil {
		c.file.err = err
		return err
	}
	c.file.pending[c.iface]++
	return nil
}

// synthMAC makes a locally administered unicast MAC from an address:
// 02:00 and the IPv4 address (or the IPv6 address's last four bytes).
func synthMAC(a netip.Addr) [6]byte {
	m := [6]byte{0x02, 0x00}
	b := a.As16()
	copy(m[2:], b[12:])
	return m
}
