//go:build linux

package incast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// Defaults of a Config.
const (
	DefaultDuration = 3 * time.Second
	DefaultSize     = 64 << 10
	DefaultDepth    = 8
)

// Config describes an incast.
type Config struct {
	Fabric   *fabric.Fabric
	Senders  []fabric.Host
	Receiver fabric.Host
	// QPs is the number of QPs (connections) per sender; default 1.
	QPs int
	// Duration is how long the senders post; default 3 s.
	Duration time.Duration
	// Size is the WRITE size in bytes; default 64 KiB.
	Size int
	// Depth is the number of WRITEs outstanding per QP; default 8.
	Depth int
	// DCQCN turns congestion control on: the receiver's notification
	// point answers CE marks with CNPs and the senders' reaction points cut
	// their rates (roce.CCConfig's defaults). Off, both are disabled, as
	// on rxe.
	DCQCN bool
	// RP and NP set the reaction and notification points' parameters
	// (nil: Profile(line), line being the fabric's host rate or, if the
	// host links are unlimited, its link rate; and cc.ProfileP's NP,
	// N = 50 µs).
	RP *cc.Config
	NP *cc.NPConfig
	// Port is the UDP port of the devices; 0 means 4791.
	Port uint16
	// Sample, if set, records a Sample every Sample during the run.
	Sample time.Duration
}

// Sample is a look at the incast during the run: each sender's rate as
// its reaction points have it (the sum over its QPs' DCQCN rates; 0 with
// DCQCN off), and the fabric's CE marks and tbf drops so far.
type Sample struct {
	T            time.Duration `json:"t_ns"`
	Rates        []cc.Bitrate  `json:"rates_bps"`
	Marks, Drops uint64
	CNPs         uint64 `json:"cnps"` // the senders' CNPs so far
}

// Result is what an incast measured.
type Result struct {
	Seconds float64 `json:"seconds"`
	// Gbps is each sender's goodput (completed WRITE bytes), TotalGbps
	// their sum.
	Gbps      []float64 `json:"gbps"`
	TotalGbps float64   `json:"total_gbps"`
	// CNPsSent counts the receiver's CNPs; CNPsReceived the senders'.
	CNPsSent     uint64 `json:"cnps_sent"`
	CNPsReceived uint64 `json:"cnps_received"`
	// RateCuts counts the senders' rate decreases (cc.Stats.Decreases);
	// MinRate is the lowest rate a sender's reaction point was seen at
	// (sampled every 10 ms; 0 with DCQCN off or no cut).
	RateCuts uint64     `json:"rate_cuts"`
	MinRate  cc.Bitrate `json:"min_rate_bps"`
	// Retransmitted counts requester packets sent again (Go-Back-N);
	// GoBackN the retries started (rxe's completer_retry_err); SeqNAKs
	// the NAK sequence errors the senders received.
	Retransmitted uint64 `json:"retransmitted"`
	GoBackN       uint64 `json:"go_back_n"`
	SeqNAKs       uint64 `json:"seq_naks"`
	// Marks and Drops are the fabric's CE marks and tbf drops during the
	// run, over all switch egresses; Fabric holds every counter.
	Marks  uint64        `json:"marks"`
	Drops  uint64        `json:"drops"`
	Fabric *fabric.Stats `json:"fabric"`
	// Samples are the Config.Sample looks.
	Samples []Sample `json:"samples,omitempty"`
}

type flow struct {
	sender   int
	dev      *roce.Device
	q        *roce.QP
	cq       *cq.CQ
	src, dst *mr.Region
	bytes    uint64
	err      error
}

// Run runs the incast.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Fabric == nil || len(cfg.Senders) == 0 {
		return nil, errors.New("incast: no fabric or no senders")
	}
	if cfg.QPs == 0 {
		cfg.QPs = 1
	}
	if cfg.Duration == 0 {
		cfg.Duration = DefaultDuration
	}
	if cfg.Size == 0 {
		cfg.Size = DefaultSize
	}
	if cfg.Depth == 0 {
		cfg.Depth = DefaultDepth
	}
	if cfg.Port == 0 {
		cfg.Port = 4791
	}
	if cfg.QPs < 0 || cfg.QPs > 64 || cfg.Size <= 0 || cfg.Size > 16<<20 || cfg.Depth < 0 || cfg.Depth > 128 || cfg.Duration < 0 {
		return nil, fmt.Errorf("incast: bad config: %d QPs, %d-byte WRITEs, depth %d, %v", cfg.QPs, cfg.Size, cfg.Depth, cfg.Duration)
	}
	line := cc.Bitrate(max(cfg.Fabric.Config.HostRate, cfg.Fabric.Config.Rate))
	if line == 0 {
		line = 10 * cc.Gbps
	}
	ccfg := roce.CCConfig{DisableRP: true, DisableNP: true}
	if cfg.DCQCN {
		rp := Profile(line)
		if cfg.RP != nil {
			rp = *cfg.RP
		}
		ccfg = roce.CCConfig{RP: &rp, NP: cfg.NP}
	}

	var devs []*roce.Device
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	open := func(h fabric.Host) (*roce.Device, error) {
		var d *roce.Device
		err := fabric.InNetns(h.NS, func() error {
			l, err := udp.Open(udp.Config{Addr: netip.AddrPortFrom(h.Addr, cfg.Port)})
			if err != nil {
				return err
			}
			d, err = roce.Open(roce.Config{Link: l, DestPort: cfg.Port, CC: ccfg})
			if err != nil {
				l.Close()
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("incast: device on %s: %w", h.Name, err)
		}
		devs = append(devs, d)
		return d, nil
	}
	rx, err := open(cfg.Receiver)
	if err != nil {
		return nil, err
	}
	rpd := rx.AllocPD()
	rcq, err := rx.CreateCQ(1024)
	if err != nil {
		return nil, err
	}
	region := cfg.Size * cfg.Depth
	var flows []*flow
	opts := roce.ConnectOptions{MTU: qp.MTU4096}
	for i, h := range cfg.Senders {
		d, err := open(h)
		if err != nil {
			return nil, err
		}
		pd := d.AllocPD()
		for range cfg.QPs {
			f := &flow{sender: i, dev: d}
			if f.cq, err = d.CreateCQ(4 * cfg.Depth); err != nil {
				return nil, err
			}
			if f.q, err = d.CreateQP(roce.QPConfig{PD: pd, SendCQ: f.cq, RecvCQ: f.cq}); err != nil {
				return nil, err
			}
			rq, err := rx.CreateQP(roce.QPConfig{PD: rpd, SendCQ: rcq, RecvCQ: rcq})
			if err != nil {
				return nil, err
			}
			if err := f.q.Connect(rq.Info(), opts); err != nil {
				return nil, err
			}
			if err := rq.Connect(f.q.Info(), opts); err != nil {
				return nil, err
			}
			if f.src, err = d.RegisterMR(pd, make([]byte, region), mr.LocalWrite); err != nil {
				return nil, err
			}
			if f.dst, err = rx.RegisterMR(rpd, make([]byte, region), mr.LocalWrite|mr.RemoteWrite); err != nil {
				return nil, err
			}
			flows = append(flows, f)
		}
	}

	before, err := cfg.Fabric.Stats()
	if err != nil {
		return nil, err
	}
	minRate := cc.Bitrate(math.Inf(1))
	var samples []Sample
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	start := time.Now()
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		var next time.Duration
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			t := time.Since(start)
			rates := make([]cc.Bitrate, len(cfg.Senders))
			var cnps uint64
			for _, f := range flows {
				s := f.q.CC()
				if s.CNPsReceived > 0 && s.Rate > 0 {
					minRate = min(minRate, s.Rate)
				}
				rates[f.sender] += s.Rate
				cnps += s.CNPsReceived
			}
			if cfg.Sample > 0 && t >= next {
				next = t + cfg.Sample
				s := Sample{T: t, Rates: rates, CNPs: cnps}
				if now, err := cfg.Fabric.Stats(); err == nil {
					if d, err := now.Sub(before); err == nil {
						s.Marks, s.Drops = d.Marks()
					}
				}
				samples = append(samples, s)
			}
		}
	}()
	var wg sync.WaitGroup
	for _, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.bytes, f.err = stream(ctx, f, cfg.Size, cfg.Depth, cfg.Duration)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	sampler.Wait()
	time.Sleep(50 * time.Millisecond) // the last ACKs and CNPs land
	after, err := cfg.Fabric.Stats()
	if err != nil {
		return nil, err
	}
	r := &Result{Seconds: elapsed.Seconds(), Gbps: make([]float64, len(cfg.Senders)), Samples: samples}
	if r.Fabric, err = after.Sub(before); err != nil {
		return nil, err
	}
	r.Marks, r.Drops = r.Fabric.Marks()
	var errs []error
	for _, f := range flows {
		if f.err != nil {
			errs = append(errs, fmt.Errorf("%s QP %#x: %w", cfg.Senders[f.sender].Name, f.q.QPN(), f.err))
		}
		r.Gbps[f.sender] += float64(f.bytes) * 8 / elapsed.Seconds() / 1e9
		s := f.q.CC()
		r.CNPsReceived += s.CNPsReceived
		r.RateCuts += s.RP.Decreases
		c := f.q.Counters()
		r.Retransmitted += c.Load(qp.CounterRetransmittedPkts)
		r.GoBackN += c.Load(qp.CounterCompleterRetryErr)
		r.SeqNAKs += c.Load(qp.CounterRcvdSeqErr)
	}
	for _, g := range r.Gbps {
		r.TotalGbps += g
	}
	r.CNPsSent = rx.Stats().TxCNPs.Load()
	if !math.IsInf(float64(minRate), 1) {
		r.MinRate = minRate
	}
	return r, errors.Join(errs...)
}

// stream keeps depth WRITEs of size bytes outstanding on f's QP for d and
// returns the bytes completed.
func stream(ctx context.Context, f *flow, size, depth int, d time.Duration) (uint64, error) {
	posted, done := 0, 0
	wcs := make([]cq.Completion, 64)
	wr := qp.SendWR{Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: make([]qp.SGE, 1), RKey: f.dst.RKey()}
	end := time.Now().Add(d)
	for {
		for time.Now().Before(end) && posted-done < depth {
			off := uint64(posted%depth) * uint64(size)
			wr.WRID = uint64(posted)
			wr.SGL[0] = qp.SGE{Addr: f.src.IOVA() + off, Length: uint32(size), LKey: f.src.LKey()}
			wr.RemoteAddr = f.dst.IOVA() + off
			if err := f.q.PostSend(&wr); err != nil {
				return uint64(done * size), err
			}
			posted++
		}
		if done == posted {
			return uint64(done * size), nil
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		k, err := f.cq.Wait(wctx, wcs)
		cancel()
		if err != nil {
			return uint64(done * size), fmt.Errorf("%d of %d WRITEs done: %w", done, posted, err)
		}
		for _, wc := range wcs[:k] {
			if wc.Status != cq.StatusSuccess {
				return uint64(done * size), fmt.Errorf("WRITE %d: %v", wc.WRID, wc.Status)
			}
			done++
		}
	}
}
