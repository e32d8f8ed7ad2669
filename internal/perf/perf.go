// Package perf runs perftest-style RDMA benchmarks (ib_write_bw,
// ib_read_bw, ib_send_bw, ib_atomic_bw and the _lat variants) between two
// goroce devices, and formats their results as perftest prints them. The
// goroce CLI's perf subcommand is a thin layer over it.
package perf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// Op is the operation a test measures.
type Op string

// Operations, named as perftest's tools are (ib_<op>_bw / ib_<op>_lat).
const (
	OpWrite  Op = "write"
	OpRead   Op = "read"
	OpSend   Op = "send"
	OpAtomic Op = "atomic"
)

// Config describes one test. The zero values follow perftest's defaults.
type Config struct {
	Op       Op
	Size     int           // -s: message size (default 65536; atomics: 8)
	Iters    int           // -n: iterations per QP (default 5000; 1000 for latency)
	Duration time.Duration // -D: run for a duration instead of Iters
	QPs      int           // -q: number of QPs (default 1)
	MTU      qp.MTU        // -m: path MTU (default 4096 on loopback)
	TxDepth  int           // -t: outstanding WRs per QP (default 128)
	Latency  bool          // --lat: one WR at a time, report latency
	// OpenLink opens the transport for a device at addr.
	OpenLink func(addr netip.AddrPort) (link.Link, error)
	// Addrs are the two devices' addresses (default 127.0.0.1:4791 and
	// 127.0.0.2:4791).
	Addrs [2]netip.AddrPort
	// Progress, if set, is called about every 100 ms with bytes so far.
	Progress func(done, total int64)
	// Configure, if set, adjusts the configuration of the device at addr
	// before it opens (goroce perf --pcap sets its Capture).
	Configure func(addr netip.AddrPort, c *roce.Config)
	// Opened, if set, is given each device once it is open. Its Stats
	// stay readable after Run has closed it.
	Opened func(addr netip.AddrPort, d *roce.Device)
}

// Result is what a test measured.
type Result struct {
	Op        Op      `json:"op"`
	Size      int     `json:"size"`
	Iters     int     `json:"iters"`
	QPs       int     `json:"qps"`
	MTU       int     `json:"mtu"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	Gbps      float64 `json:"gbps"`
	Mpps      float64 `json:"mpps"`
	PeakGbps  float64 `json:"peak_gbps"`
	LatP50us  float64 `json:"lat_p50_us,omitempty"`
	LatP99us  float64 `json:"lat_p99_us,omitempty"`
	LatP999us float64 `json:"lat_p999_us,omitempty"`
	LatMinus  float64 `json:"lat_min_us,omitempty"`
	LatMaxus  float64 `json:"lat_max_us,omitempty"`
	LatAvgus  float64 `json:"lat_avg_us,omitempty"`
	// LatStdevus is the standard deviation of the latency samples.
	LatStdevus float64 `json:"lat_stdev_us,omitempty"`
	// Counters of the data source's QPs, summed, for diagnosis.
	Retransmitted uint64 `json:"retransmitted"`
	Errors        uint64 `json:"errors"`
}

func (c *Config) defaults() error {
	if c.Op == "" {
		c.Op = OpWrite
	}
	switch c.Op {
	case OpWrite, OpRead, OpSend, OpAtomic:
	default:
		return fmt.Errorf("perf: unknown operation %q (write, read, send or atomic)", c.Op)
	}
	if c.Op == OpAtomic {
		c.Size = 8
	}
	if c.Size == 0 {
		c.Size = 65536
		if c.Latency {
			c.Size = 2
		}
	}
	if c.Size < 0 || c.Size > qp.MaxMessageLen {
		return fmt.Errorf("perf: size %d out of range", c.Size)
	}
	if c.Iters == 0 {
		c.Iters = 5000
		if c.Latency {
			c.Iters = 1000
		}
	}
	if c.QPs == 0 {
		c.QPs = 1
	}
	if c.MTU == 0 {
		c.MTU = qp.MTU4096
	}
	if c.TxDepth == 0 {
		c.TxDepth = 128
		if c.Op == OpRead || c.Op == OpAtomic {
			c.TxDepth = 16 // max_rd_atomic
		}
	}
	if c.Latency {
		c.TxDepth = 1
	}
	if c.OpenLink == nil {
		return errors.New("perf: no link opener")
	}
	if !c.Addrs[0].IsValid() {
		c.Addrs[0] = netip.MustParseAddrPort("127.0.0.1:4791")
	}
	if !c.Addrs[1].IsValid() {
		c.Addrs[1] = netip.MustParseAddrPort("127.0.0.2:4791")
	}
	if c.Iters < 0 || c.QPs < 0 || c.QPs > 4096 || c.TxDepth < 0 {
		return errors.New("perf: negative or too large counts")
	}
	return nil
}

// endpoint is one device with its QPs and buffers.
type endpoint struct {
	dev *roce.Device
	pd  *mr.PD
	scq *cq.CQ
	rcq *cq.CQ
	qps []*roce.QP
	buf []byte
	mr  *mr.Region
}

func open(ctx context.Context, cfg *Config, addr netip.AddrPort, bufSize int) (*endpoint, error) {
	l, err := cfg.OpenLink(addr)
	if err != nil {
		return nil, err
	}
	dc := roce.Config{Link: l}
	if cfg.Configure != nil {
		cfg.Configure(addr, &dc)
	}
	dev, err := roce.Open(dc)
	if err != nil {
		l.Close()
		return nil, err
	}
	if cfg.Opened != nil {
		cfg.Opened(addr, dev)
	}
	e := &endpoint{dev: dev, pd: dev.AllocPD(), buf: make([]byte, bufSize)}
	depth := cfg.QPs * (cfg.TxDepth + 16)
	if e.scq, err = dev.CreateCQ(depth); err != nil {
		dev.Close()
		return nil, err
	}
	if e.rcq, err = dev.CreateCQ(depth); err != nil {
		dev.Close()
		return nil, err
	}
	acc := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic
	if e.mr, err = dev.RegisterMR(e.pd, e.buf, acc); err != nil {
		dev.Close()
		return nil, err
	}
	for i := 0; i < cfg.QPs; i++ {
		q, err := dev.CreateQP(roce.QPConfig{PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq,
			MaxSendWR: cfg.TxDepth + 16, MaxRecvWR: cfg.TxDepth + 16})
		if err != nil {
			dev.Close()
			return nil, err
		}
		e.qps = append(e.qps, q)
	}
	return e, nil
}

// Run runs one loopback test between two in-process devices.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.defaults(); err != nil {
		return Result{}, err
	}
	// Each QP works on its own slice of the buffers.
	slot := max(cfg.Size, 8)
	bufSize := slot * cfg.QPs
	a, err := open(ctx, &cfg, cfg.Addrs[0], bufSize)
	if err != nil {
		return Result{}, err
	}
	defer a.dev.Close()
	b, err := open(ctx, &cfg, cfg.Addrs[1], bufSize)
	if err != nil {
		return Result{}, err
	}
	defer b.dev.Close()
	opts := roce.ConnectOptions{MTU: cfg.MTU, Timeout: 14}
	for i := range a.qps {
		if err := a.qps[i].Connect(b.qps[i].Info(), opts); err != nil {
			return Result{}, err
		}
		if err := b.qps[i].Connect(a.qps[i].Info(), opts); err != nil {
			return Result{}, err
		}
	}
	return drive(ctx, &cfg, a, b, slot)
}

// drive posts work on a's QPs and collects completions until the
// iterations (or the duration) are done.
func drive(ctx context.Context, cfg *Config, a, b *endpoint, slot int) (Result, error) {
	nq := len(a.qps)
	posted := make([]int, nq)
	done := make([]int, nq)
	var lats []time.Duration
	postedAt := make([][]time.Time, nq)
	for i := range postedAt {
		postedAt[i] = make([]time.Time, cfg.TxDepth+1)
	}
	// SEND needs receives at b: keep each QP's receive queue full.
	var recvWG sync.WaitGroup
	stopRecv := make(chan struct{})
	if cfg.Op == OpSend {
		for i, q := range b.qps {
			for k := 0; k < cfg.TxDepth+8; k++ {
				if err := q.PostRecv(recvWR(b, i, slot, cfg.Size)); err != nil {
					return Result{}, err
				}
			}
		}
		recvWG.Add(1)
		go func() {
			defer recvWG.Done()
			wcs := make([]cq.Completion, 64)
			for {
				select {
				case <-stopRecv:
					return
				default:
				}
				c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				n, _ := b.rcq.Wait(c, wcs)
				cancel()
				for _, wc := range wcs[:n] {
					if wc.Status != cq.StatusSuccess {
						continue
					}
					i := int(wc.WRID)
					if i < len(b.qps) {
						b.qps[i].PostRecv(recvWR(b, i, slot, cfg.Size))
					}
				}
			}
		}()
	}
	defer func() { close(stopRecv); recvWG.Wait() }()

	iters := cfg.Iters
	if cfg.Duration > 0 {
		iters = 1 << 62
	}
	post := func(i int) error {
		wr := sendWR(cfg, a, b, i, slot, uint64(posted[i]))
		if cfg.Latency {
			postedAt[i][0] = time.Now()
		}
		if err := a.qps[i].PostSend(&wr); err != nil {
			return err
		}
		posted[i]++
		return nil
	}
	start := time.Now()
	deadline := time.Time{}
	if cfg.Duration > 0 {
		deadline = start.Add(cfg.Duration)
	}
	for i := range a.qps {
		for posted[i] < iters && posted[i]-done[i] < cfg.TxDepth {
			if err := post(i); err != nil {
				return Result{}, err
			}
		}
	}
	var res Result
	wcs := make([]cq.Completion, 256)
	total := int64(iters) * int64(cfg.Size) * int64(nq)
	var doneBytes int64
	lastProgress := start
	// Peak bandwidth over 10 ms windows (perftest's BW peak is per-burst).
	winStart, winBytes, peak := start, int64(0), 0.0
	var errCount uint64
	for {
		all := true
		for i := range done {
			if done[i] < posted[i] || posted[i] < iters && (deadline.IsZero() || time.Now().Before(deadline)) {
				all = false
				break
			}
		}
		if all {
			break
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := a.scq.Wait(c, wcs)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return Result{}, ctx.Err()
			}
			return Result{}, fmt.Errorf("perf: no completion for 5 s (posted %v, done %v; peer unreachable?)", posted, done)
		}
		now := time.Now()
		for _, wc := range wcs[:n] {
			if wc.Status != cq.StatusSuccess {
				errCount++
				return Result{}, fmt.Errorf("perf: work completion error %v (wr_id %d)", wc.Status, wc.WRID)
			}
			i := int(wc.WRID >> 40)
			done[i]++
			doneBytes += int64(cfg.Size)
			winBytes += int64(cfg.Size)
			if cfg.Latency {
				lats = append(lats, now.Sub(postedAt[i][0]))
			}
			if posted[i] < iters && (deadline.IsZero() || now.Before(deadline)) {
				if err := post(i); err != nil {
					return Result{}, err
				}
			}
		}
		if w := now.Sub(winStart); w >= 10*time.Millisecond {
			peak = max(peak, float64(winBytes*8)/w.Seconds())
			winStart, winBytes = now, 0
		}
		if cfg.Progress != nil && now.Sub(lastProgress) >= 100*time.Millisecond {
			cfg.Progress(doneBytes, total)
			lastProgress = now
		}
	}
	el := time.Since(start)
	msgs := 0
	for _, d := range done {
		msgs += d
	}
	res = Result{
		Op: cfg.Op, Size: cfg.Size, Iters: msgs / nq, QPs: nq, MTU: cfg.MTU.Bytes(),
		Bytes: doneBytes, Seconds: el.Seconds(),
		Gbps: float64(doneBytes*8) / el.Seconds() / 1e9, Mpps: float64(msgs) / el.Seconds() / 1e6,
		Errors: errCount,
	}
	res.PeakGbps = max(peak/1e9, res.Gbps)
	src := a
	if cfg.Op == OpRead {
		src = b
	}
	for _, q := range src.qps {
		res.Retransmitted += q.Counters().RetransmittedPkts.Load() + q.Counters().ReplayedPkts.Load()
	}
	if cfg.Latency && len(lats) > 0 {
		slices.Sort(lats)
		// perftest's _lat tools report half the round trip for WRITE/SEND
		// ping-pong; a post→completion time is one round trip (request and
		// ACK or response), so halve it likewise.
		q := func(p float64) float64 {
			i := min(len(lats)-1, int(p*float64(len(lats))))
			return float64(lats[i]) / 2 / 1e3
		}
		res.LatP50us, res.LatP99us, res.LatP999us = q(0.50), q(0.99), q(0.999)
		res.LatMinus, res.LatMaxus = float64(lats[0])/2/1e3, float64(lats[len(lats)-1])/2/1e3
		var sum, sq float64
		for _, l := range lats {
			sum += float64(l) / 2 / 1e3
		}
		res.LatAvgus = sum / float64(len(lats))
		for _, l := range lats {
			d := float64(l)/2/1e3 - res.LatAvgus
			sq += d * d
		}
		res.LatStdevus = math.Sqrt(sq / float64(len(lats)))
	}
	return res, nil
}

func recvWR(b *endpoint, i, slot, size int) *qp.RecvWR {
	return &qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{{Addr: b.mr.IOVA() + uint64(i*slot), Length: uint32(max(size, 1)), LKey: b.mr.LKey()}}}
}

func sendWR(cfg *Config, a, b *endpoint, i, slot int, seq uint64) qp.SendWR {
	off := uint64(i * slot)
	wr := qp.SendWR{WRID: uint64(i)<<40 | seq, Flags: qp.SendSignaled,
		SGL:        []qp.SGE{{Addr: a.mr.IOVA() + off, Length: uint32(cfg.Size), LKey: a.mr.LKey()}},
		RemoteAddr: b.mr.IOVA() + off, RKey: b.mr.RKey()}
	switch cfg.Op {
	case OpWrite:
		wr.Opcode = qp.WRRDMAWrite
	case OpRead:
		wr.Opcode = qp.WRRDMARead
	case OpSend:
		wr.Opcode = qp.WRSend
		wr.RemoteAddr, wr.RKey = 0, 0
	case OpAtomic:
		wr.Opcode = qp.WRAtomicFetchAdd
		wr.CompareAdd = 1
	}
	return wr
}
