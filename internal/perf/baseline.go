package perf

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/rocev2"
)

// BaselineConfig configures Baseline. Zero fields take the defaults shown.
type BaselineConfig struct {
	// Sender and Receiver configure the two links (batching, GSO, GRO,
	// buffers, checksum). Zero addresses mean 127.0.0.1:0 and 127.0.0.2:0.
	Sender, Receiver udp.Config
	// Size is the UDP payload of each blast datagram (default 4096+44: a
	// RoCE RDMA WRITE Middle packet with BTH and ICRC at MTU 4096 is 4112).
	Size int
	// Batch is the number of datagrams per Send in the blast (default 256,
	// so GSO runs are not cut short by the end of a call).
	Batch int
	// Duration is the length of the blast (default 2 s).
	Duration time.Duration
	// PingSize is the UDP payload of each ping (default 64); Pings the
	// number of round trips measured after PingWarmup unmeasured ones
	// (defaults 20000 and 2000).
	PingSize, Pings, PingWarmup int
	// NoBlast and NoPing skip a phase.
	NoBlast, NoPing bool
	// Plain also runs the blast with GSO and GRO off on both links: plain
	// sendmmsg / recvmmsg of Batch datagrams, the ceiling of a path that
	// sends one datagram per message (result in BaselineResult.Plain).
	Plain bool
	// Floor also runs the RoCE floor blast (result in BaselineResult.Floor):
	// the blast with the same links, batching, GSO, GRO, Size and Duration,
	// plus only the work any RoCEv2 stack must do on top of UDP. The sender
	// takes each datagram's bytes from a rotating 8 MiB region (as a RoCE
	// sender reads its payload from a memory region, not one hot buffer),
	// writes a 12-byte BTH at its start and puts the ICRC (over the
	// pseudo-headers of the IPv4 ID the link plans) in its last 4 bytes;
	// the receiver verifies every ICRC as roce's Device does (recovering an
	// IPv4 ID the link guessed wrong) and copies the payload between BTH
	// and ICRC into a rotating 8 MiB region (placement into the MR).
	// Floor needs Size >= 16 and is not run with a Peer.
	Floor bool
	// Peer, if valid, is a ReceiveBlast or Pong of another process (or
	// host): the blast and the pings go to it and no local receiver is
	// opened, so the blast reports Sent only (the receiver measures the
	// rest) and Plain is not run. Sender is the local link then.
	Peer netip.AddrPort
	// CPUClock and MachineClock read the process's and the machine's CPU
	// time for Blast.CPU (nil: ProcessCPU, MachineCPU).
	CPUClock     CPUClock
	MachineClock MachineClock
}

// Blast is what one blast measured.
type Blast struct {
	// Sent and Received count datagrams; Window runs from the first
	// datagram received to the last.
	Sent, Received uint64
	Window         time.Duration
	// Gbps and Mpps are what was received: UDP payload bits per second
	// (10^9) and datagrams per second (10^6) over Window. Loss is
	// 1 − Received/Sent (receiver overrun: the blast is unthrottled).
	Gbps, Mpps, Loss float64
	// CPU is what the blast cost this process, sender and receiver: CPU
	// time and wall time from the first send until the receiver caught up
	// (nothing arrived for 2 ms), for the UDP payload bytes received by
	// then. Zero with a Peer, or where the CPU time could not be read.
	CPU CPUUse
	// BadICRC counts the datagrams of a floor blast whose ICRC did not
	// verify, not even with a recovered IPv4 ID, and ICRCIDFixups those
	// verified with a recovered ID (the link's guess was wrong). Zero in
	// the other blasts.
	BadICRC, ICRCIDFixups uint64
}

// BaselineResult is the raw UDP ceiling measured by Baseline.
type BaselineResult struct {
	// Size is the blast datagram size. Sent and Received count datagrams;
	// Window runs from the first datagram received to the last.
	Size           int
	Sent, Received uint64
	Window         time.Duration
	// Gbps and Mpps are what was received: UDP payload bits per second
	// (10^9) and datagrams per second (10^6) over Window. Loss is
	// 1 − Received/Sent (receiver overrun: the blast is unthrottled).
	Gbps, Mpps, Loss float64
	// Latency is the one-way latency (RTT/2) of the ping-pong.
	Latency Latency
	// Sender and Receiver are the blast links' Info after the blast.
	Sender, Receiver udp.Info
	// Plain is the blast with GSO and GRO off (BaselineConfig.Plain).
	Plain Blast
	// Floor is the RoCE floor blast (BaselineConfig.Floor).
	Floor Blast
	// CPU is what the blast cost (Blast.CPU).
	CPU CPUUse
}

// Latency summarizes one-way latencies (half the round-trip time).
type Latency struct {
	Samples                  int
	Min, P50, P99, P999, Max time.Duration
}

// Baseline measures this machine's raw UDP ceiling through link/udp's
// code path, in-process, between two links: (a) a one-way unthrottled
// blast of Size-byte datagrams for Duration, with the configured batching,
// GSO and GRO, reporting what was received; (b) a ping-pong of PingSize-byte
// datagrams, reporting one-way latency percentiles. It is the figure RDMA
// throughput over link/udp is compared with (goroce perf --baseline). The
// sender and receiver run in two goroutines of this process, or, with
// cfg.Peer, the receiver is ReceiveBlast or Pong in another process.
// Cancelling ctx stops it with ctx's error.
func Baseline(ctx context.Context, cfg BaselineConfig) (BaselineResult, error) {
	cfg = cfg.withDefaults()
	var res BaselineResult
	res.Size = cfg.Size
	if !cfg.NoBlast {
		b, err := blast(ctx, cfg, &res.Sender, &res.Receiver, false)
		if err != nil {
			return res, err
		}
		res.Sent, res.Received, res.Window = b.Sent, b.Received, b.Window
		res.Gbps, res.Mpps, res.Loss, res.CPU = b.Gbps, b.Mpps, b.Loss, b.CPU
		if cfg.Plain && !cfg.Peer.IsValid() {
			pc := cfg
			pc.Sender.DisableGSO, pc.Sender.DisableGRO = true, true
			pc.Receiver.DisableGSO, pc.Receiver.DisableGRO = true, true
			if res.Plain, err = blast(ctx, pc, nil, nil, false); err != nil {
				return res, err
			}
		}
		if cfg.Floor && !cfg.Peer.IsValid() {
			if res.Floor, err = blast(ctx, cfg, nil, nil, true); err != nil {
				return res, err
			}
		}
	}
	if !cfg.NoPing {
		if err := pingPong(ctx, cfg, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (c BaselineConfig) withDefaults() BaselineConfig {
	if !c.Sender.Addr.IsValid() {
		c.Sender.Addr = netip.MustParseAddrPort("127.0.0.1:0")
	}
	if !c.Receiver.Addr.IsValid() {
		c.Receiver.Addr = netip.MustParseAddrPort("127.0.0.2:0")
	}
	if c.Size <= 0 {
		c.Size = 4096 + 44
	}
	if c.Batch <= 0 {
		c.Batch = 256
	}
	if c.Duration <= 0 {
		c.Duration = 2 * time.Second
	}
	if c.PingSize <= 0 {
		c.PingSize = 64
	}
	if c.Pings <= 0 {
		c.Pings = 20000
	}
	if c.PingWarmup <= 0 {
		c.PingWarmup = 2000
	}
	return c
}

// openPair opens the sender and receiver links.
func openPair(cfg BaselineConfig) (tx, rx *udp.Link, err error) {
	if tx, err = udp.Open(cfg.Sender); err != nil {
		return nil, nil, err
	}
	if rx, err = udp.Open(cfg.Receiver); err != nil {
		tx.Close()
		return nil, nil, err
	}
	return tx, rx, nil
}

// blastCount is what a blast receiver counted; safe for concurrent use.
type blastCount struct {
	got, gotB   atomic.Uint64
	first, last atomic.Int64 // UnixNano of the first / last Recv
	// bad and fixups are the floor receiver's BadICRC and ICRCIDFixups.
	bad, fixups atomic.Uint64
}

// recv receives Size-byte datagrams on rx and counts them until rx is
// closed (nil) or fails. take, if not nil, is called with each batch
// received after it was counted (the floor blast's receiver).
func (c *blastCount) recv(rx *udp.Link, size, batch int, take func([]link.Datagram)) error {
	dgs := make([]link.Datagram, max(64, batch))
	bufs := make([]byte, len(dgs)*size)
	for {
		for i := range dgs {
			dgs[i].Buf = bufs[i*size : (i+1)*size]
		}
		n, err := rx.Recv(dgs)
		if err != nil {
			if errors.Is(err, link.ErrClosed) {
				return nil
			}
			return err
		}
		now := time.Now().UnixNano()
		c.first.CompareAndSwap(0, now)
		c.last.Store(now)
		var b uint64
		for _, d := range dgs[:n] {
			b += uint64(len(d.Buf))
		}
		c.got.Add(uint64(n))
		c.gotB.Add(b)
		if take != nil {
			take(dgs[:n])
		}
	}
}

// drain waits until nothing arrived for idle (at least one poll of
// 100 ms) or ctx ends.
func (c *blastCount) drain(ctx context.Context, idle time.Duration) {
	for prev, quiet := uint64(1<<64-1), time.Duration(0); ctx.Err() == nil; {
		const tick = 50 * time.Millisecond
		time.Sleep(tick)
		cur := c.got.Load()
		if cur != prev {
			prev, quiet = cur, 0
			continue
		}
		if quiet += tick; quiet >= max(idle, 2*tick) {
			return
		}
	}
}

// settle waits until nothing arrived for quiet, polling every
// millisecond, but not longer than limit, or until ctx ends.
func (c *blastCount) settle(ctx context.Context, quiet, limit time.Duration) {
	end := time.Now().Add(limit)
	prev, since := c.got.Load(), time.Now()
	for ctx.Err() == nil && time.Now().Before(end) {
		time.Sleep(time.Millisecond)
		if cur := c.got.Load(); cur != prev {
			prev, since = cur, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
}

// result is the Blast of what was counted, sent datagrams having been
// sent (0: unknown, no Loss).
func (c *blastCount) result(sent uint64) Blast {
	res := Blast{Sent: sent, Received: c.got.Load()}
	res.Window = time.Duration(c.last.Load() - c.first.Load())
	if s := res.Window.Seconds(); s > 0 {
		res.Gbps = float64(c.gotB.Load()) * 8 / s / 1e9
		res.Mpps = float64(res.Received) / s / 1e6
	}
	if sent > 0 {
		res.Loss = 1 - float64(res.Received)/float64(sent)
	}
	res.BadICRC, res.ICRCIDFixups = c.bad.Load(), c.fixups.Load()
	return res
}

// ReceiveBlast is the receiving half of a blast whose sender is another
// process (BaselineConfig.Peer): it counts the size-byte datagrams that
// arrive on rx, from the first until none came for idle, or until ctx
// ends, and returns what it received (Sent is 0: the sender knows it).
// With nothing received, it returns when ctx ends. It closes rx.
func ReceiveBlast(ctx context.Context, rx *udp.Link, size, batch int, idle time.Duration) (Blast, error) {
	var c blastCount
	errc := make(chan error, 1)
	go func() { errc <- c.recv(rx, size, batch, nil) }()
	for c.got.Load() == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	c.drain(ctx, idle)
	rx.Close()
	if err := <-errc; err != nil {
		return Blast{}, fmt.Errorf("udp: baseline blast: %w", err)
	}
	return c.result(0), nil
}

// blast runs one blast, the floor blast if floor (BaselineConfig.Floor;
// not with a Peer); txInfo and rxInfo, if not nil, receive the links'
// Info after it (rxInfo only without a Peer).
func blast(ctx context.Context, cfg BaselineConfig, txInfo, rxInfo *udp.Info, floor bool) (Blast, error) {
	if floor && (cfg.Peer.IsValid() || cfg.Size < floorMinSize) {
		return Blast{}, fmt.Errorf("udp: floor blast: needs a local receiver and datagrams of %d bytes or more", floorMinSize)
	}
	if cfg.Peer.IsValid() {
		tx, err := udp.Open(cfg.Sender)
		if err != nil {
			return Blast{}, err
		}
		defer tx.Close()
		sent, err := sendBlast(ctx, cfg, tx, cfg.Peer, nil)
		if err != nil {
			return Blast{}, err
		}
		if txInfo != nil {
			*txInfo = tx.Info()
		}
		return Blast{Sent: sent}, nil
	}
	tx, rx, err := openPair(cfg)
	if err != nil {
		return Blast{}, err
	}
	defer tx.Close()
	defer rx.Close()

	var (
		wg    sync.WaitGroup
		c     blastCount
		rxErr error
	)
	wg.Add(1)
	// The floor's regions are made (and touched) before the blast starts.
	var (
		take func([]link.Datagram)
		prep func([]link.Datagram)
	)
	if floor {
		take, prep = newFloorSink(rx.LocalAddr(), &c).take, newFloorSource(tx).prep
	}
	go func() {
		defer wg.Done()
		rxErr = c.recv(rx, cfg.Size, cfg.Receiver.BatchSize, take)
	}()
	meter := startCPU(cfg.CPUClock, cfg.MachineClock)
	start := time.Now()
	sent, sendErr := sendBlast(ctx, cfg, tx, rx.LocalAddr(), prep)
	// The CPU window ends when the receiver has caught up, not after the
	// idle wait for stragglers, which would dilute the machine's busy
	// share (the process's CPU time would not change).
	c.settle(ctx, 2*time.Millisecond, 100*time.Millisecond)
	cpu := meter.stop()
	cpuWall, cpuBytes := time.Since(start), c.gotB.Load()
	// Let the receiver drain: stop when nothing arrived for 100 ms.
	c.drain(ctx, 100*time.Millisecond)
	rx.Close()
	wg.Wait()
	if sendErr != nil {
		return Blast{}, sendErr
	}
	if rxErr != nil {
		return Blast{}, fmt.Errorf("udp: baseline blast: %w", rxErr)
	}
	if err := ctx.Err(); err != nil {
		return Blast{}, err
	}
	if txInfo != nil {
		*txInfo, *rxInfo = tx.Info(), rx.Info()
	}
	res := c.result(sent)
	if cpu.ok && cpuBytes > 0 {
		res.CPU = CPUUse{CPU: cpu.cpu, Wall: cpuWall, Bytes: int64(cpuBytes), MachineBusy: cpu.machineBusy}
	}
	return res, nil
}

// sendBlast sends Size-byte datagrams to dst in Batch-long calls for
// Duration, unthrottled, and returns how many it sent. prep, if not nil,
// is called with the batch before each Send and sets its Bufs and IPIDs
// (the floor blast's sender); otherwise every datagram is the one hot
// buffer.
func sendBlast(ctx context.Context, cfg BaselineConfig, tx *udp.Link, dst netip.AddrPort, prep func([]link.Datagram)) (uint64, error) {
	dgs := make([]link.Datagram, cfg.Batch)
	buf := make([]byte, cfg.Size)
	for i := range buf {
		buf[i] = byte(i)
	}
	for i := range dgs {
		dgs[i] = link.Datagram{Buf: buf, Dst: dst, ECN: cfg.Sender.TOS & 3}
	}
	tx.PlanIPID(dgs)
	var sent uint64
	end := time.Now().Add(cfg.Duration)
	for i := 0; ; i++ {
		if i&15 == 0 && (time.Now().After(end) || ctx.Err() != nil) {
			return sent, nil
		}
		if prep != nil {
			prep(dgs)
		}
		n, err := tx.Send(dgs)
		sent += uint64(n)
		if err != nil {
			return sent, fmt.Errorf("udp: baseline blast: %w", err)
		}
	}
}

// floorRegion is the size of the floor blast's rotating regions, the
// sender's payload source and the receiver's MR: 8 MiB, more than the
// caches of a small machine hold, as a real transfer's memory regions.
const floorRegion = 8 << 20

// floorMinSize is the smallest floor datagram: a BTH and an ICRC.
const floorMinSize = bth.Size + bth.ICRCSize

// floorBTH is the BTH every floor datagram starts with: an RC RDMA WRITE
// Middle (opcode 7) to QP 0x11 with the default P_Key; fixed bytes, the
// ICRC masks the variant ones itself.
var floorBTH = [bth.Size]byte{0x07, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00}

// floorSource is the floor blast's sending side: it cuts datagrams from
// a rotating region, as a RoCE sender reads payload from a memory region,
// and seals them with a BTH and their ICRC.
type floorSource struct {
	tx     *udp.Link
	src    netip.AddrPort
	region []byte
	off    int
	ph     [rocev2.PseudoHeaderLen]byte
}

func newFloorSource(tx *udp.Link) *floorSource {
	f := &floorSource{tx: tx, src: tx.LocalAddr(), region: make([]byte, floorRegion)}
	for i := range f.region {
		f.region[i] = byte(i)
	}
	return f
}

// prep points each datagram of dgs at the region's next len-byte slice
// (len the datagrams' size, wrapping at the region's end), writes the BTH
// at its start, plans the IPv4 IDs the link will send them with
// (PlanIPID) and puts each one's ICRC, over the pseudo-headers of that ID,
// in its last 4 bytes.
func (f *floorSource) prep(dgs []link.Datagram) {
	for i := range dgs {
		size := len(dgs[i].Buf)
		if f.off+size > len(f.region) {
			f.off = 0
		}
		b := f.region[f.off : f.off+size : f.off+size]
		f.off += size
		copy(b, floorBTH[:])
		dgs[i].Buf = b
	}
	f.tx.PlanIPID(dgs)
	f.seal(dgs)
}

// seal puts each datagram's ICRC, for the IPv4 ID in its IPID, in its
// last 4 bytes.
func (f *floorSource) seal(dgs []link.Datagram) {
	for i := range dgs {
		b := dgs[i].Buf
		ip, udp := rocev2.PseudoHeaders(&f.ph, f.src, dgs[i].Dst, dgs[i].IPID, len(b))
		rocev2.PutICRC(b[len(b)-bth.ICRCSize:], rocev2.ComputeICRC(ip, udp, b[:len(b)-bth.ICRCSize]))
	}
}

// floorSink is the floor blast's receiving side: it verifies each
// datagram's ICRC as roce's Device does and places its payload into a
// rotating region, the MR.
type floorSink struct {
	local netip.AddrPort // the receiving link's: Dst where Recv did not report it
	c     *blastCount    // counts BadICRC and ICRCIDFixups
	mr    []byte
	off   int
	ph    [rocev2.PseudoHeaderLen]byte
}

func newFloorSink(local netip.AddrPort, c *blastCount) *floorSink {
	f := &floorSink{local: local, c: c, mr: make([]byte, floorRegion)}
	for i := 0; i < len(f.mr); i += 4096 {
		f.mr[i] = 1 // fault the pages in, as a registered MR's are
	}
	return f
}

// take verifies and places a batch of received datagrams, counting those
// that fail the ICRC (not placed) and those verified with a recovered ID.
func (f *floorSink) take(dgs []link.Datagram) {
	var bad, fixed uint64
	for i := range dgs {
		ok, fix := f.verify(&dgs[i])
		if !ok {
			bad++
			continue
		}
		if fix {
			fixed++
		}
		f.place(dgs[i].Buf)
	}
	if bad != 0 {
		f.c.bad.Add(bad)
	}
	if fixed != 0 {
		f.c.fixups.Add(fixed)
	}
}

// verify checks d's ICRC over the headers it arrived with, as roce's
// (*Device).verifyICRC does: with the IPv4 ID the link reports, or
// guessed; if that fails on IPv4 and the link does not know the ID, with
// the ID recovered from the CRC (rocev2.RecoverIPv4ID; roce's default
// ICRCIDWindow also checks it against the peer's counter, which a
// loopback blast with planned IDs does not need). ok says the ICRC
// verified, fixed that it took a recovered ID (then d.IPID is that ID).
func (f *floorSink) verify(d *link.Datagram) (ok, fixed bool) {
	b := d.Buf
	if len(b) < floorMinSize {
		return false, false
	}
	dst := d.Dst
	if !dst.IsValid() {
		dst = f.local
	}
	ip, udp := rocev2.PseudoHeaders(&f.ph, d.Src, dst, d.IPID, len(b))
	want := rocev2.ReadICRC(b[len(b)-bth.ICRCSize:])
	got := rocev2.ComputeICRC(ip, udp, b[:len(b)-bth.ICRCSize])
	if got == want {
		return true, false
	}
	if d.IPIDKnown || len(ip) != rocev2.IPv4HeaderLen {
		return false, false
	}
	x, ok := rocev2.RecoverIPv4ID(got, want, len(b))
	if !ok {
		return false, false
	}
	d.IPID ^= x // got was computed with the guess: x is the guess XOR the ID
	return true, true
}

// place copies b's payload, between the BTH and the ICRC, to the MR's
// next bytes, wrapping at its end.
func (f *floorSink) place(b []byte) {
	p := b[bth.Size : len(b)-bth.ICRCSize]
	if f.off+len(p) > len(f.mr) {
		f.off = 0
	}
	f.off += copy(f.mr[f.off:], p)
}

// Pong is the echoing half of a ping-pong whose pinger is another process
// (BaselineConfig.Peer): it sends every datagram that arrives on l back to
// its source until ctx ends (nil) or l fails. It closes l.
func Pong(ctx context.Context, l *udp.Link) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	defer l.Close()
	if err := pong(l); err != nil {
		return fmt.Errorf("udp: baseline ping-pong: %w", err)
	}
	return nil
}

// pong echoes every datagram on l to its source until l is closed (nil)
// or fails.
func pong(l *udp.Link) error {
	dgs := []link.Datagram{{Buf: make([]byte, 65536)}}
	for {
		dgs[0].Buf = dgs[0].Buf[:cap(dgs[0].Buf)]
		n, err := l.Recv(dgs)
		if err == nil && n == 1 {
			dgs[0].Dst, dgs[0].IPID = dgs[0].Src, 0
			_, err = l.Send(dgs)
		}
		if err != nil {
			if errors.Is(err, link.ErrClosed) {
				return nil
			}
			return err
		}
	}
}

func pingPong(ctx context.Context, cfg BaselineConfig, res *BaselineResult) error {
	var (
		pinger, ponger *udp.Link
		err            error
		dst            = cfg.Peer
	)
	if dst.IsValid() {
		pinger, err = udp.Open(cfg.Sender)
	} else {
		pinger, ponger, err = openPair(cfg)
	}
	if err != nil {
		return err
	}
	var (
		wg       sync.WaitGroup
		pongErr  error
		progress atomic.Uint64
		stop     = make(chan struct{})
	)
	closeAll := sync.OnceFunc(func() {
		pinger.Close()
		if ponger != nil {
			ponger.Close()
		}
	})
	defer closeAll()
	if ponger != nil {
		dst = ponger.LocalAddr()
		wg.Add(1)
		go func() { // ponger: echo every datagram to its source
			defer wg.Done()
			pongErr = pong(ponger)
		}()
	}
	wg.Add(1)
	go func() { // watchdog: ctx, or no round trip for a second (a lost ping)
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		prev := progress.Load()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				closeAll()
				return
			case <-t.C:
				cur := progress.Load()
				if cur == prev {
					closeAll()
					return
				}
				prev = cur
			}
		}
	}()

	out := []link.Datagram{{Buf: make([]byte, cfg.PingSize), Dst: dst}}
	in := []link.Datagram{{Buf: make([]byte, 65536)}}
	rtts := make([]time.Duration, 0, cfg.Pings)
	var perr error
	for i := 0; i < cfg.PingWarmup+cfg.Pings; i++ {
		t0 := time.Now()
		if _, perr = pinger.Send(out); perr != nil {
			break
		}
		in[0].Buf = in[0].Buf[:cap(in[0].Buf)]
		if _, perr = pinger.Recv(in); perr != nil {
			break
		}
		rtt := time.Since(t0)
		progress.Add(1)
		if i >= cfg.PingWarmup {
			rtts = append(rtts, rtt)
		}
	}
	close(stop)
	closeAll()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if perr != nil {
		if errors.Is(perr, link.ErrClosed) {
			return fmt.Errorf("udp: baseline ping-pong: no reply for 1 s after %d round trips", progress.Load())
		}
		return fmt.Errorf("udp: baseline ping-pong: %w", perr)
	}
	if pongErr != nil {
		return fmt.Errorf("udp: baseline ping-pong: %w", pongErr)
	}
	res.Latency = oneWay(rtts)
	return nil
}

// oneWay summarizes round-trip times as one-way latencies (RTT/2).
func oneWay(rtts []time.Duration) Latency {
	if len(rtts) == 0 {
		return Latency{}
	}
	slices.Sort(rtts)
	q := func(p float64) time.Duration {
		i := int(p*float64(len(rtts))+0.999999) - 1
		return rtts[min(max(i, 0), len(rtts)-1)] / 2
	}
	return Latency{
		Samples: len(rtts),
		Min:     rtts[0] / 2,
		P50:     q(0.50),
		P99:     q(0.99),
		P999:    q(0.999),
		Max:     rtts[len(rtts)-1] / 2,
	}
}
