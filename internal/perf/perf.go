// Package perf runs perftest-style RDMA benchmarks (ib_write_bw,
// ib_read_bw, ib_send_bw, ib_atomic_bw and the _lat variants) between two
// goroce devices, and formats their results as perftest prints them.
// Baseline measures the raw link/udp ceiling they are compared with. The
// goroce CLI's perf subcommand is a thin layer over it.
package perf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/roce/metrics"
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
	// PostList is the number of WRs per post call (perftest's
	// --post_list; default 1): a list goes out through one
	// roce.QP.PostSendBatch.
	PostList int
	// TrafficClass is --tclass: the IPv4 TOS / IPv6 traffic class (DSCP <<
	// 2 | ECN) of every QP's packets (roce.ConnectOptions.TrafficClass).
	TrafficClass uint8
	// OpenLink opens the transport for a device at addr.
	OpenLink func(addr netip.AddrPort) (link.Link, error)
	// Addrs are the two devices' addresses (default 127.0.0.1:4791 and
	// 127.0.0.2:4791).
	Addrs [2]netip.AddrPort
	// Progress, if set, is called about every 100 ms with bytes so far and
	// the total (0 for a timed run, whose total is not known).
	Progress func(done, total int64)
	// Configure, if set, adjusts the configuration of the device at addr
	// before it opens (goroce perf --pcap sets its Capture).
	Configure func(addr netip.AddrPort, c *roce.Config)
	// Connect, if set, adjusts the connect options of QP i on both
	// devices before it connects (the multipath test forces a source
	// port with it).
	Connect func(i int, o *roce.ConnectOptions)
	// Opened, if set, is given each device once it is open. Its Stats
	// stay readable after Run has closed it.
	Opened func(addr netip.AddrPort, d *roce.Device)
	// Metrics, if set, exports both devices while the test runs
	// (goroce perf --metrics); they are removed when it ends.
	Metrics *metrics.Exporter
	// Stats, if set, receives both devices' counters at the end, as
	// `rdma statistic show` lines (metrics.Exporter.WriteStatistic), even
	// when the test fails.
	Stats io.Writer
	// Impair, if set, impairs the first device's link both ways as
	// configured (the requester's side; the second device is the peer)
	// and fills Result.Impair.
	Impair *impair.Config
	// Wait says how the requester waits for its completions: the zero
	// WaitAuto busy-polls its send CQ (as perftest) on machines with
	// PollCPUs CPUs or more and runs inline (WaitInline) on smaller ones.
	Wait WaitMode
	// Verify fills the source buffers with a seeded pattern and checks at
	// the end that every QP's target slot holds its source's data
	// (Result.Verified); an error if not.
	Verify bool
	// CPUClock and MachineClock read the process's and the machine's CPU
	// time for Result.CPUSeconds and Result.MachineBusy (nil: ProcessCPU,
	// MachineCPU).
	CPUClock     CPUClock
	MachineClock MachineClock

	// waiters is what Run's two devices count their waiting goroutines
	// in (roce.Config.Waiters): each waits for the other's work, so each
	// receive goroutine yields while the other's program waits, as it did
	// when the count was process-wide.
	waiters *roce.Waiters
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
	// Verified says that Config.Verify checked the data.
	Verified bool `json:"verified,omitempty"`
	// CPUSeconds is the process's CPU time (user + system) over the
	// measured Seconds, CPUSysSeconds its system part; 0 where it was not
	// read. A loopback run has both devices in this process, so it is
	// both ends' cost; against a peer it is this side's.
	CPUSeconds    float64 `json:"cpu_seconds,omitempty"`
	CPUSysSeconds float64 `json:"cpu_sys_seconds,omitempty"`
	// MachineBusy is the share of the whole machine's CPU time, every
	// process's, that was busy over Seconds (CPUUse.MachineBusy).
	MachineBusy float64 `json:"machine_busy,omitempty"`
	// Impair is what the peer did about an impaired path (--impair).
	Impair *PeerReport `json:"impair,omitempty"`
}

// CPUUse is what the measured part of the run cost: CPUSeconds over
// Seconds for Bytes.
func (r Result) CPUUse() CPUUse {
	return CPUUse{
		CPU: CPUTime{
			User:   time.Duration((r.CPUSeconds - r.CPUSysSeconds) * 1e9),
			System: time.Duration(r.CPUSysSeconds * 1e9),
		},
		Wall:        time.Duration(r.Seconds * 1e9),
		Bytes:       r.Bytes,
		MachineBusy: r.MachineBusy,
	}
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
	if c.PostList == 0 || c.Latency {
		c.PostList = 1
	}
	if c.PostList < 0 || c.PostList > c.TxDepth {
		return fmt.Errorf("perf: post list %d not in [1, tx depth %d]", c.PostList, c.TxDepth)
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

// PollSpin is how long a test busy-polls an empty CQ before it parks,
// when it polls (WaitMode, cq.CQ.SetSpin): longer than any round trip of a
// latency test, so that a ping-pong never sleeps, yet bounded, so that a
// stalled peer costs a core only that long per wait.
const PollSpin = 5 * time.Millisecond

// rxDepth is the number of receives kept posted on each QP of a SEND
// test: perftest's ib_send_bw default (512), or more than the sender's
// depth, so the receiver's reposting lags no RNR NAKs.
func rxDepth(cfg *Config) int { return max(512, cfg.TxDepth+8) }

// open opens a device at addr, which sends to its peer's UDP port, with one
// endpoint whose buffer and QPs grant the peer access (remoteAccess of the
// test on the target, else none).
func open(cfg *Config, openLink func(netip.AddrPort) (link.Link, error), addr netip.AddrPort, peerPort uint16, bufSize int, access mr.AccessFlags) (*endpoint, error) {
	l, err := openLink(addr)
	if err != nil {
		return nil, err
	}
	dc := roce.Config{Link: l, DestPort: peerPort, Waiters: cfg.waiters}
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
	e := &endpoint{dev: dev}
	rx := rxDepth(cfg)
	if err := e.setup(endpointConfig{qps: cfg.QPs, cqDepth: cfg.QPs * (max(cfg.TxDepth, rx) + 16),
		sendWRs: cfg.TxDepth + 16, recvWRs: rx + 16, bufSize: bufSize, access: access}); err != nil {
		dev.Close()
		return nil, err
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
	// a is the requester only; b is the target of a's requests.
	openA := cfg.OpenLink
	var im *Impaired
	if cfg.Impair != nil {
		im = &Impaired{Config: *cfg.Impair}
		openA = im.Opener(cfg.OpenLink)
	}
	cfg.waiters = new(roce.Waiters)
	a, err := open(&cfg, openA, cfg.Addrs[0], cfg.Addrs[1].Port(), bufSize, 0)
	if err != nil {
		return Result{}, err
	}
	defer a.dev.Close()
	b, err := open(&cfg, cfg.OpenLink, cfg.Addrs[1], cfg.Addrs[0].Port(), bufSize, remoteAccess(cfg.Op))
	if err != nil {
		return Result{}, err
	}
	defer b.dev.Close()
	if cfg.Metrics != nil {
		cfg.Metrics.Add(a.dev)
		cfg.Metrics.Add(b.dev)
		defer cfg.Metrics.Remove(a.dev)
		defer cfg.Metrics.Remove(b.dev)
	}
	if cfg.Stats != nil {
		defer metrics.NewExporter(a.dev, b.dev).WriteStatistic(cfg.Stats)
	}
	for i := range a.qps {
		opts := roce.ConnectOptions{MTU: cfg.MTU, Timeout: roce.DefaultTimeout, Access: qpAccess(a.access),
			TrafficClass: cfg.TrafficClass}
		if cfg.Connect != nil {
			cfg.Connect(i, &opts)
		}
		if err := a.qps[i].Connect(b.qps[i].Info(), opts); err != nil {
			return Result{}, err
		}
		opts.Access = qpAccess(b.access)
		if err := b.qps[i].Connect(a.qps[i].Info(), opts); err != nil {
			return Result{}, err
		}
	}
	if cfg.Wait.polls(runtime.NumCPU()) {
		// Only the requester polls: in one process on few cores, a second
		// spinner (b's receive reposting) would take the processor the
		// devices' receive loops need.
		a.scq.SetSpin(PollSpin)
	}
	if cfg.Verify {
		fillPattern(a.mr, "a")
		fillPattern(b.mr, "b")
	}
	res, tl, err := drive(ctx, &cfg, a, b, slot)
	if im != nil {
		rep := NewPeerReport(a.dev, a.qps, im.Link, tl.stall)
		res.Impair = &rep
	}
	if err != nil {
		return res, err
	}
	if cfg.Verify {
		if err := verify(&cfg, a, b, slot); err != nil {
			return res, err
		}
		res.Verified = true
	}
	return res, nil
}

// fillPattern fills r with a pattern seeded by label.
func fillPattern(r *mr.Region, label string) {
	b := make([]byte, r.Len())
	var x uint64 = 0x9e3779b97f4a7c15
	for _, c := range label {
		x ^= uint64(c)
	}
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	r.WriteAt(b, r.IOVA())
}

// verify checks that each QP's target slot holds its source slot's data:
// b's for WRITE and SEND (a's data), a's for READ (b's data).
func verify(cfg *Config, a, b *endpoint, slot int) error {
	if cfg.Op == OpAtomic {
		return nil // the target is a counter, not a copy
	}
	src, dst := a, b
	if cfg.Op == OpRead {
		src, dst = b, a
	}
	sb, db := make([]byte, src.mr.Len()), make([]byte, dst.mr.Len())
	if err := src.mr.ReadAt(sb, src.mr.IOVA()); err != nil {
		return err
	}
	if err := dst.mr.ReadAt(db, dst.mr.IOVA()); err != nil {
		return err
	}
	for i := range a.qps {
		off := i * slot
		if !bytes.Equal(sb[off:off+cfg.Size], db[off:off+cfg.Size]) {
			return fmt.Errorf("perf: %s data of QP %d differ from the source (SHA-256 %x, want %x)", cfg.Op, i,
				sha256.Sum256(db[off:off+cfg.Size]), sha256.Sum256(sb[off:off+cfg.Size]))
		}
	}
	return nil
}

// drive runs the requester loop on a's QPs against b's buffer until the
// iterations (or the duration) are done; for SEND b's receive goroutine
// keeps its receive queues full meanwhile.
func drive(ctx context.Context, cfg *Config, a, b *endpoint, slot int) (Result, tally, error) {
	// SEND needs receives at b: keep each QP's receive queue full.
	if cfg.Op == OpSend {
		for i, q := range b.qps {
			for k := 0; k < rxDepth(cfg); k++ {
				if err := q.PostRecv(recvWR(b, i, slot, cfg.Size)); err != nil {
					return Result{}, tally{}, err
				}
			}
		}
		// b reposts on its receive goroutine after each batch it
		// received (run to completion, whatever the requester's wait
		// mode), as perftest's server polls its CQ and reposts in one
		// loop: the receive queues never lag behind the SENDs. A
		// goroutine of its own, woken by the CQ, ran only when a
		// processor was free, and on 2 CPUs fell hundreds of receives
		// behind: RNR NAKs and 320-448 retransmitted packets a run of 64-byte SENDs
		// (doc/limits.md §9).
		b.dev.OnBatch(newReposter(b, slot, cfg.Size).poll)
		defer b.dev.OnBatch(nil)
	}

	l := &loop{qps: a.qps, size: cfg.Size, depth: cfg.TxDepth, iters: cfg.Iters, dur: cfg.Duration,
		postList: cfg.PostList, times: cfg.Latency, progress: cfg.Progress,
		cpu: cfg.CPUClock, machine: cfg.MachineClock}
	l.next = func(wr *qp.SendWR, i int, seq uint64) {
		off := uint64(i * slot)
		a.request(wr, cfg.Op, false, i, seq, off, cfg.Size, b.mr.IOVA()+off, b.mr.RKey())
	}
	watch := watchStalls(ctx, 5*time.Second)
	defer watch.stop()
	l.wait = func(ctx context.Context, wcs []cq.Completion) (int, error) {
		return poll(ctx, watch, a.scq, wcs,
			func() error {
				return fmt.Errorf("perf: no completion for 5 s (posted %v, done %v; peer unreachable?)", l.posted, l.done)
			},
			func(wc cq.Completion) error {
				return fmt.Errorf("perf: work completion error %v (wr_id %d)", wc.Status, wc.WRID)
			})
	}
	var t tally
	var err error
	if cfg.Wait.inline(runtime.NumCPU()) {
		t, err = l.runInline(ctx, a.dev, a.scq, 5*time.Second,
			func(wc cq.Completion) error {
				return fmt.Errorf("perf: work completion error %v (wr_id %d)", wc.Status, wc.WRID)
			},
			func() error {
				return fmt.Errorf("perf: no completion for 5 s (posted %v, done %v; peer unreachable?)", l.posted, l.done)
			})
	} else {
		t, err = l.run(ctx)
	}
	if err != nil {
		return Result{}, t, err
	}
	res := t.result(cfg.Op, cfg.Size, len(a.qps), cfg.MTU.Bytes())
	src := a
	if cfg.Op == OpRead {
		src = b
	}
	for _, q := range src.qps {
		res.Retransmitted += q.Counters().Load(qp.CounterRetransmittedPkts) + q.Counters().Load(qp.CounterReplayedPkts)
	}
	if cfg.Latency && len(t.rtts) > 0 {
		// perftest's _lat tools report half the round trip for WRITE/SEND
		// ping-pong; a post→completion time is one round trip (request and
		// ACK or response), so halve it likewise.
		setLatency(&res, t.rtts, 2)
	}
	return res, t, nil
}

func recvWR(b *endpoint, i, slot, size int) *qp.RecvWR {
	return b.recvWR(i, uint64(i*slot), max(size, 1))
}

// reposter keeps a send test's receive queues full: each receive
// completion of b's QPs is replaced by a new receive, posted per QP as
// one list. One goroutine at a time uses it.
type reposter struct {
	b    *endpoint
	wcs  []cq.Completion
	rwrs [][]qp.RecvWR
	tmpl []qp.RecvWR // PostRecv copies WR and SGL: one per QP serves all its posts
}

func newReposter(b *endpoint, slot, size int) *reposter {
	rp := &reposter{b: b, wcs: make([]cq.Completion, 256), rwrs: make([][]qp.RecvWR, len(b.qps)),
		tmpl: make([]qp.RecvWR, len(b.qps))}
	for i := range rp.tmpl {
		rp.tmpl[i] = *recvWR(b, i, slot, size)
	}
	return rp
}

// poll reposts for every receive completion b's CQ holds (run to
// completion: OnBatch).
func (rp *reposter) poll() {
	for {
		n := rp.b.rcq.Poll(rp.wcs)
		if n == 0 {
			return
		}
		rp.repost(n)
	}
}

// repost reposts the receives of the n completions in rp.wcs.
func (rp *reposter) repost(n int) {
	for _, wc := range rp.wcs[:n] {
		if i := int(wc.WRID); wc.Status == cq.StatusSuccess && i < len(rp.b.qps) {
			rp.rwrs[i] = append(rp.rwrs[i], rp.tmpl[i])
		}
	}
	for i, l := range rp.rwrs {
		if len(l) > 0 {
			rp.b.qps[i].PostRecvBatch(l)
			rp.rwrs[i] = l[:0]
		}
	}
}
