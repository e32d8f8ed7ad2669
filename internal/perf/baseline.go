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

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
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
// sender and receiver run in two goroutines of this process. Cancelling ctx
// stops it with ctx's error.
func Baseline(ctx context.Context, cfg BaselineConfig) (BaselineResult, error) {
	cfg = cfg.withDefaults()
	var res BaselineResult
	res.Size = cfg.Size
	if !cfg.NoBlast {
		b, err := blast(ctx, cfg, &res.Sender, &res.Receiver)
		if err != nil {
			return res, err
		}
		res.Sent, res.Received, res.Window = b.Sent, b.Received, b.Window
		res.Gbps, res.Mpps, res.Loss = b.Gbps, b.Mpps, b.Loss
		if cfg.Plain {
			pc := cfg
			pc.Sender.DisableGSO, pc.Sender.DisableGRO = true, true
			pc.Receiver.DisableGSO, pc.Receiver.DisableGRO = true, true
			if res.Plain, err = blast(ctx, pc, nil, nil); err != nil {
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

// blast runs one blast; txInfo and rxInfo, if not nil, receive the links'
// Info after it.
func blast(ctx context.Context, cfg BaselineConfig, txInfo, rxInfo *udp.Info) (Blast, error) {
	var res Blast
	tx, rx, err := openPair(cfg)
	if err != nil {
		return res, err
	}
	defer tx.Close()
	defer rx.Close()

	var (
		wg          sync.WaitGroup
		got, gotB   atomic.Uint64
		first, last atomic.Int64 // UnixNano of the first / last Recv
		rxErr       error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		dgs := make([]link.Datagram, max(64, cfg.Receiver.BatchSize))
		bufs := make([]byte, len(dgs)*cfg.Size)
		for {
			for i := range dgs {
				dgs[i].Buf = bufs[i*cfg.Size : (i+1)*cfg.Size]
			}
			n, err := rx.Recv(dgs)
			if err != nil {
				if !errors.Is(err, link.ErrClosed) {
					rxErr = err
				}
				return
			}
			now := time.Now().UnixNano()
			first.CompareAndSwap(0, now)
			last.Store(now)
			var b uint64
			for _, d := range dgs[:n] {
				b += uint64(len(d.Buf))
			}
			got.Add(uint64(n))
			gotB.Add(b)
		}
	}()

	dgs := make([]link.Datagram, cfg.Batch)
	buf := make([]byte, cfg.Size)
	for i := range buf {
		buf[i] = byte(i)
	}
	for i := range dgs {
		dgs[i] = link.Datagram{Buf: buf, Dst: rx.LocalAddr(), ECN: cfg.Sender.TOS & 3}
	}
	tx.PlanIPID(dgs)
	var sent uint64
	var sendErr error
	end := time.Now().Add(cfg.Duration)
	for i := 0; ; i++ {
		if i&15 == 0 && (time.Now().After(end) || ctx.Err() != nil) {
			break
		}
		n, err := tx.Send(dgs)
		sent += uint64(n)
		if err != nil {
			sendErr = err
			break
		}
	}
	// Let the receiver drain: stop when nothing arrived for 100 ms.
	for prev := uint64(1<<64 - 1); ctx.Err() == nil; {
		time.Sleep(100 * time.Millisecond)
		cur := got.Load()
		if cur == prev {
			break
		}
		prev = cur
	}
	rx.Close()
	wg.Wait()
	if sendErr != nil {
		return res, fmt.Errorf("udp: baseline blast: %w", sendErr)
	}
	if rxErr != nil {
		return res, fmt.Errorf("udp: baseline blast: %w", rxErr)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.Sent, res.Received = sent, got.Load()
	res.Window = time.Duration(last.Load() - first.Load())
	if s := res.Window.Seconds(); s > 0 {
		res.Gbps = float64(gotB.Load()) * 8 / s / 1e9
		res.Mpps = float64(res.Received) / s / 1e6
	}
	if sent > 0 {
		res.Loss = 1 - float64(res.Received)/float64(sent)
	}
	if txInfo != nil {
		*txInfo, *rxInfo = tx.Info(), rx.Info()
	}
	return res, nil
}

func pingPong(ctx context.Context, cfg BaselineConfig, res *BaselineResult) error {
	pinger, ponger, err := openPair(cfg)
	if err != nil {
		return err
	}
	var (
		wg       sync.WaitGroup
		pongErr  error
		progress atomic.Uint64
		stop     = make(chan struct{})
	)
	closeAll := sync.OnceFunc(func() { pinger.Close(); ponger.Close() })
	defer closeAll()
	wg.Add(2)
	go func() { // ponger: echo every datagram to its source
		defer wg.Done()
		dgs := []link.Datagram{{Buf: make([]byte, 65536)}}
		for {
			dgs[0].Buf = dgs[0].Buf[:cap(dgs[0].Buf)]
			n, err := ponger.Recv(dgs)
			if err == nil && n == 1 {
				dgs[0].Dst, dgs[0].IPID = dgs[0].Src, 0
				_, err = ponger.Send(dgs)
			}
			if err != nil {
				if !errors.Is(err, link.ErrClosed) {
					pongErr = err
				}
				return
			}
		}
	}()
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

	out := []link.Datagram{{Buf: make([]byte, cfg.PingSize), Dst: ponger.LocalAddr()}}
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
