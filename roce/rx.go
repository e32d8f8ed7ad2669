package roce

import (
	"errors"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// The receive path (rxe_recv.c's role): one goroutine per device reads
// batches from the link (recvLoop), parses each datagram's headers once
// and dispatches the batch by DestQP to the shards in arrival order
// (rxBatch.process), and runs the intake for each packet under its
// shard's engine lock: the QP exists, the source is its peer, the ICRC
// verifies (shard.receive, verifyICRC); then the QP's transport engine,
// or UD delivery with the IP header for the GRH area (handleUD). Replies
// leave with the shards' transmit passes after the batch (tx.go).

// rxBuf is one received datagram as the intake sees it: its bytes and
// what the link reported of its IP header (ttl 0: not reported; known:
// the IPv4 ID is the one it carried, not a guess).
type rxBuf struct {
	buf   []byte
	n     int
	src   netip.AddrPort
	dst   netip.AddrPort
	ecn   uint8
	dscp  uint8
	ttl   uint8 // 0: the link does not report it
	ipid  uint16
	known bool
}

// maxFrame is the largest RoCE UDP payload: MTU 4096 plus headers and ICRC.
const maxFrame = 4096 + 128

// countRx counts a received datagram once the device is done with it, so
// that whoever sees RxPackets reach n also sees the counts and effects of
// those n (a drop's counter, a completion).
func (d *Device) countRx(dg *link.Datagram) {
	d.stats.RxPackets.Add(1)
	d.stats.RxECN[dg.ECN&3].Add(1)
}

// recvLoop reads datagrams from the link and processes them at once under
// the engine locks — intake, the QP, and whatever the QP then has to send
// — so a packet crosses no goroutine boundary between the socket and the
// reply. Under a flood the socket buffer is the bounded queue: the kernel
// drops what the loop cannot take.
func (d *Device) recvLoop() {
	defer d.wg.Done()
	batch := d.cfg.Batch
	dgs := make([]link.Datagram, batch)
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, maxFrame)
	}
	// reset readies dgs[:n] for the next receive.
	reset := func(n int) {
		for i := range dgs[:n] {
			dgs[i] = link.Datagram{Buf: bufs[i]}
		}
	}
	rx := d.newRxBatch(batch)
	// fail reports whether a receive error ends the loop (the device or
	// the link is closed); others are logged and the loop goes on.
	fail := func(err error) bool {
		if errors.Is(err, link.ErrClosed) {
			return true
		}
		select {
		case <-d.done:
			return true
		default:
		}
		d.log.Warn("link receive failed", "err", err)
		time.Sleep(time.Millisecond)
		return false
	}
	// A pumping link runs the loop itself and saves an empty read per
	// wake-up (link.Pumper); its datagrams are lent as RecvLend's.
	reset(batch)
	if p, ok := d.link.(link.Pumper); ok {
		for {
			err := p.Pump(dgs, func(n int) bool {
				more := rx.process(dgs[:n])
				reset(n) // a pump changes only the datagrams it hands over
				return more
			})
			if err == nil || fail(err) {
				return
			}
		}
	}
	// A lending link saves the copy into bufs: its datagrams are valid
	// until the next receive, and each is done with before that.
	recv := d.link.Recv
	if l, ok := d.link.(link.Lender); ok {
		recv = l.RecvLend
	}
	for {
		n, err := recv(dgs)
		if err != nil {
			if fail(err) {
				return
			}
			continue
		}
		more := rx.process(dgs[:n])
		reset(batch) // a link may have changed slots it did not return
		if !more {
			return
		}
	}
}

// testHookIntake, set by tests only, runs on the receive goroutine between
// a batch's intake and its transmit pass, with no engine lock held: where
// a program that polled a completion of the batch may already run.
var testHookIntake atomic.Pointer[func(*Device)]

// rxBatch is the receive goroutine's state for processing batches.
type rxBatch struct {
	d *Device
	// shardOf[i] is datagram i's shard (noShard: no transport header);
	// touched[k] marks the shards to service after the batch.
	shardOf []int16
	touched []bool
	rb      rxBuf
	// pkts[i] holds datagram i's transport headers as views into its
	// buffer, errs[i] the error of their parse; both are valid only while
	// the batch is processed.
	pkts []wire.Packet
	errs []error
}

func (d *Device) newRxBatch(batch int) *rxBatch {
	return &rxBatch{d: d, shardOf: make([]int16, batch), touched: make([]bool, len(d.shards)),
		pkts: make([]wire.Packet, batch), errs: make([]error, batch)}
}

// process handles one received batch and reports whether the device is
// still open. Each run of one shard's datagrams is processed under that
// shard's lock, then every shard the batch touched transmits what they
// caused; other shards' verbs and timers run meanwhile.
func (x *rxBatch) process(dgs []link.Datagram) bool {
	const noShard = -1
	d, shardOf, touched := x.d, x.shardOf, x.touched
	n := len(dgs)
	d.rxMu.Lock()
	if d.closed.Load() {
		// Close may have closed the link since it returned the batch: a
		// lending link's buffers are gone with it (link/udp unmaps its GRO
		// arena), so they must not be read.
		d.rxMu.Unlock()
		return false
	}
	// Each datagram's transport headers are parsed here, once, and the
	// views handed down (receive, the QP). A datagram with a BTH and room
	// for an ICRC goes to its DestQP's shard even if the rest failed to
	// parse: the intake counts that failure after its own checks, on the
	// QP (as rxe's rxe_rcv checks the QP before the headers behind it).
	for i := 0; i < n; i++ {
		shardOf[i] = noShard
		p := &x.pkts[i]
		x.errs[i] = p.Parse(dgs[i].Buf)
		if p.BTH != nil && len(dgs[i].Buf) >= bth.Size+bth.ICRCSize {
			shardOf[i] = int16(uint32(p.BTH.DestQP()) % uint32(len(d.shards)))
		}
	}
	// The datagrams are processed in arrival order, as rxe does, a run
	// of one shard's under one hold of its lock: a QP's ACK that came
	// before a DREQ to QP1 is processed before the CM sees the DREQ.
	// Replies go out after the whole batch (service).
	now := time.Now()
	sent := d.stats.TxPackets.Load() // what the batch sends (afterBatch's bulk; other senders blur it a little)
	for i := 0; i < n; {
		k := shardOf[i]
		if k == noShard {
			dg := &dgs[i]
			d.stats.BadHdr.Add(1)
			d.countRx(dg)
			if d.cap != nil {
				x.rb = rxBuf{buf: dg.Buf, n: len(dg.Buf), src: dg.Src, dst: dg.Dst, ecn: dg.ECN & 3, ipid: dg.IPID}
				d.cap.commitRx(d.cap.reserveRx(&x.rb, d.local, now), x.rb.ipid)
			}
			i++
			continue
		}
		s := d.shards[k]
		s.lock()
		if d.closed.Load() {
			s.unlock()
			break
		}
		for ; i < n && shardOf[i] == k; i++ {
			dg := &dgs[i]
			x.rb = rxBuf{buf: dg.Buf, n: len(dg.Buf), src: dg.Src, dst: dg.Dst, ecn: dg.ECN & 3, dscp: dg.DSCP & 0x3f, ttl: dg.TTL, ipid: dg.IPID, known: dg.IPIDKnown}
			cs := d.cap.reserveRx(&x.rb, d.local, now)
			s.receive(&x.rb, &x.pkts[i], x.errs[i], now)
			d.countRx(dg)
			d.cap.commitRx(cs, x.rb.ipid)
		}
		s.unlockRx()
		touched[k] = true
	}
	if h := testHookIntake.Load(); h != nil {
		(*h)(d)
	}
	for k, s := range d.shards {
		if !touched[k] {
			continue
		}
		touched[k] = false
		s.lock()
		s.service(time.Now())
		s.unlockRx()
	}
	pushed := d.pushed.Load() // a CQ the device made took a completion (cqHook)
	if pushed {
		d.pushed.Store(false)
	}
	d.rxMu.Unlock()
	d.afterBatch(pushed, d.stats.TxPackets.Load()-sent >= handOffMin)
	return !d.closed.Load()
}

// receive runs the device's intake for one datagram (rxe_rcv): the QP
// exists, the source is the QP's peer (check_addr), the ICRC verifies, the
// headers parsed (p, parsed by the batch with error perr; its BTH is set);
// then the QP's own checks. Every drop is counted. The caller holds the
// engine lock of the shard of the packet's DestQP.
//
// A CNP (doc/dcqcn.md §7.2) goes to the QP's reaction point after the same
// checks; a CE-marked request or data packet first runs the QP's
// notification point, which may queue a CNP to the peer (§7.3).
func (s *shard) receive(b *rxBuf, p *wire.Packet, perr error, now time.Time) {
	d := s.d
	data := b.buf[:b.n]
	h := p.BTH
	q := s.lastRx // a stream's packets go to one QP: no map lookup for them
	if q == nil || q.q.QPN() != h.DestQP() {
		if q = s.qps[h.DestQP()]; q != nil {
			s.lastRx = q
		}
	}
	if q == nil {
		d.stats.DroppedNoQP.Add(1)
		if h.Opcode() == bth.CNP {
			d.stats.CNPsNoQP.Add(1)
		}
		return
	}
	if !q.acceptsFrom(b.src) {
		d.stats.BadAddr.Add(1)
		return
	}
	if !d.verifyICRC(b, data, now) {
		d.stats.BadICRC.Add(1)
		q.q.Counters().Add(qp.CounterBadICRC, 1)
		return
	}
	if perr != nil {
		d.stats.BadHdr.Add(1)
		q.q.Counters().Add(qp.CounterBadHdr, 1)
		return
	}
	op := p.Opcode()
	if op == bth.CNP {
		d.onCNP(q, now)
		return
	}
	if b.ecn == link.CE {
		s.notify(q, now, b.ecn, op)
	}
	if q.ud {
		s.handleUD(q, b, p, now)
	} else {
		q.q.HandlePacket(now, p)
	}
	s.activate(q)
}

// handleUD hands a UD QP its packet with the IP header it came in, for the
// GRH area of the receive buffer (qp.IPInfo). What a UDP socket does not
// report is synthesized as the sender most likely set it: the TOS is the
// DSCP and ECN fields the link reports (link/udp: IP_RECVTOS), the TTL the
// one it reports (IP_RECVTTL), else 64 (Linux's and rdma_cm's default hop
// limit); the IPv4 ID is the one the ICRC verified (known, guessed or
// recovered, see verifyICRC). With link/udp the GRH area then equals the
// header rxe would copy (rxe_resp.c), as the pyverbs-ud grh interop cell
// checks against a capture.
//
// Datagrams to QP1 (GSI) come here too once Listen or Dial made it: QP1 is
// a UD QP like the others, whose completions the CM goroutine reads
// (cm.go).
func (s *shard) handleUD(q *QP, b *rxBuf, p *wire.Packet, now time.Time) {
	dst := b.dst
	if !dst.IsValid() {
		dst = s.d.local
	}
	ttl := b.ttl
	if ttl == 0 {
		ttl = 64
	}
	s.rxIP = qp.IPInfo{Src: b.src.Addr(), Dst: dst.Addr(), TOS: b.dscp<<2 | b.ecn, TTL: ttl, ID: b.ipid}
	q.q.HandlePacketIP(now, p, &s.rxIP)
}

// verifyICRC checks the ICRC over the headers the datagram arrived with. A
// UDP socket does not report the IPv4 ID: the ID the link guessed (0 for a
// datagram that came alone, as Linux peers send it; k for segment k of a
// GRO buffer, as a GSO super-packet's segments carry) is checked first;
// for other IDs (rxe's come from a per-destination counter) the ID is
// recovered from the CRC itself (rocev2.RecoverIPv4ID, which by linearity
// works from any guess) and, under ICRCIDWindow, accepted only inside the
// window of the peer's counter (idTracker). Where the link sees the ID
// (b.known: the raw bindings, link/mem) it is checked exactly, never
// recovered.
func (d *Device) verifyICRC(b *rxBuf, data []byte, now time.Time) bool {
	var ph [rocev2.PseudoHeaderLen]byte
	dst := b.dst
	if !dst.IsValid() {
		dst = d.local
	}
	ip, udp := rocev2.PseudoHeaders(&ph, b.src, dst, b.ipid, len(data))
	body := data[:len(data)-bth.ICRCSize]
	want := rocev2.ReadICRC(data[len(data)-bth.ICRCSize:])
	got := rocev2.ComputeICRC(ip, udp, body)
	if got == want {
		return true
	}
	mode := d.cfg.ICRCIDRecovery
	if b.known || len(ip) != rocev2.IPv4HeaderLen || mode == ICRCIDOff {
		return false
	}
	x, ok := rocev2.RecoverIPv4ID(got, want, len(data))
	if !ok {
		return false
	}
	if mode == ICRCIDWindow {
		// got was computed with the guess, so x is the guess XOR the ID.
		d.idsMu.Lock()
		ok, reseed := d.ids.accept(b.src.Addr(), b.ipid^x, now)
		d.idsMu.Unlock()
		if reseed {
			d.stats.ICRCIDReseeds.Add(1)
		}
		if !ok {
			d.stats.ICRCIDOutOfWindow.Add(1)
			return false
		}
	}
	b.ipid ^= x // the ID the ICRC covers: the self-capture writes it
	d.stats.ICRCIDFixups.Add(1)
	return true
}

// afterBatch runs on the receive goroutine after each batch, outside the
// engine locks: it counts the batch for RxSeq, wakes WaitRx's waiters and,
// when the batch may have readied somebody, yields the processor
// (runtime.Gosched) before the loop reads its socket again. The readied
// goroutine then runs at once instead of after the loop's next read, and
// the idle processor the scheduler wakes for the loop is awake when the
// next datagram comes (doc/latency.md §2).
//
// The rule (doc/latency.md §7): yield when the batch pushed a completion
// to a CQ the device made (pushed, set by cqHook), when it sent handOffMin
// datagrams or more itself (bulk: READ responses, whose peer in this
// process gets a processor only once this loop parks), or while a
// goroutine is counted in the device's Waiters (blocked in a Wait on such
// a CQ or in WaitRx, of this device or of one that shares the count).
// Otherwise not: a yield that readies nobody only moves the next turn of
// a ping-pong to the other CPU, which may have halted. With an OnBatch
// function it never yields: the program's work ran inline and there is
// nobody to hand the processor to (§6).
func (d *Device) afterBatch(pushed, bulk bool) {
	d.stats.RxBatches.Add(1)
	d.rx.processed()
	if fn := d.onBatch.Load(); fn != nil {
		d.inBatch.Store(true)
		(*fn)()
		d.inBatch.Store(false)
		d.sendDeferred()
		return
	}
	if pushed || bulk || d.waiters.n.Load() > 0 {
		d.stats.RxYields.Add(1)
		runtime.Gosched()
	}
}
