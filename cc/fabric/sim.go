package fabric

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/goroce/goroce/cc"
)

// ps is simulated time in picoseconds since the start of the run.
type ps int64

func toPs(d time.Duration) ps { return ps(d) * 1000 }

func (t ps) duration() time.Duration { return time.Duration(t / 1000) }

// epoch is the time.Time the controllers see for the start of a run.
var epoch = time.Unix(1_700_000_000, 0)

func wall(t ps) time.Time { return epoch.Add(time.Duration(t / 1000)) }

func fromWall(t time.Time) ps { return toPs(t.Sub(epoch)) }

// serialisation returns the time to send bytes at r, rounded up to a
// picosecond.
func serialisation(bytes int, r cc.Bitrate) ps {
	return ps(math.Ceil(float64(bytes) * 8e12 / float64(r)))
}

// maxViolations bounds the messages kept in Result.Violations.
const maxViolations = 20

// flowState is one sender host and its flow, plus the receiver's NP for
// it.
type flowState struct {
	rp  *cc.DCQCN
	np  *cc.NP
	cfg Flow

	nicSer      ps
	delay       ps
	active      bool
	rate        float64 // RC in bytes per picosecond
	tokens      float64 // pacer bucket, bytes
	refilled    ps      // time tokens were last brought up to date
	nicFree     ps      // end of the packet on the wire
	txGen       uint32
	ccGen       uint32
	ccArmed     bool
	ccAt        ps
	paused      bool
	pausedAt    ps
	pauseSent   bool // switch side: PAUSE sent for this ingress port
	ingress     int  // switch side: this port's bytes in the buffer
	lastCNPWall time.Time
	cnpSeen     bool

	res FlowResult
}

// sim is one run's state; it lives for the duration of Run.
type sim struct {
	cfg   Config
	rng   *rand.Rand
	red   cc.RED
	h     eventHeap
	seq   uint64
	now   ps
	end   ps
	pkt   int
	flows []flowState

	// Bottleneck egress port.
	q         fifo
	qBytes    int // bytes waiting, not counting the packet on the wire
	portBusy  bool
	bottleSer ps
	delay     ps
	cnpDelay  ps
	burst     float64

	// Queue accounting.
	qChanged    ps
	winFrom     ps
	winTo       ps
	hist        []int64 // time (ps) at each 64-B queue level inside the window
	qmaxWin     int
	qPeak       int
	settle      int
	lastAbove   ps
	everAbove   bool
	sampleQ     int
	sampleEvery ps
	bin         ps

	res *Result
}

// Run simulates cfg and returns its measurements. It fails only for an
// invalid Config, with an error wrapping ErrInvalidConfig (or
// cc.ErrInvalidConfig for the controller parts).
func Run(cfg Config) (*Result, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	red, err := cc.NewRED(c.RED)
	if err != nil {
		return nil, err
	}
	s := &sim{
		cfg:         c,
		rng:         rand.New(rand.NewPCG(c.Seed, 0x9e3779b97f4a7c15)),
		red:         red,
		end:         toPs(c.Duration),
		pkt:         c.PacketSize,
		bottleSer:   serialisation(c.PacketSize, c.Bottleneck),
		delay:       toPs(c.Delay),
		cnpDelay:    toPs(c.CNPDelay),
		burst:       float64(c.PacerBurst),
		winFrom:     toPs(c.Window[0]),
		winTo:       toPs(c.Window[1]),
		settle:      c.SettleLevel,
		sampleEvery: toPs(c.Sample),
		bin:         toPs(c.Bin),
	}
	nbins := int((s.end + s.bin - 1) / s.bin)
	s.res = &Result{Config: c}
	s.flows = make([]flowState, len(c.Flows))
	for i, f := range c.Flows {
		rp, err := cc.New(c.RP)
		if err != nil {
			return nil, err
		}
		np, err := cc.NewNP(c.NP)
		if err != nil {
			return nil, err
		}
		fs := &s.flows[i]
		*fs = flowState{
			rp:     rp,
			np:     np,
			cfg:    f,
			nicSer: serialisation(c.PacketSize, c.RP.LineRate),
			delay:  toPs(f.Delay),
			rate:   float64(rp.Rate()) / 8e12,
		}
		fs.res.Delivered = make([]int64, nbins)
		fs.res.CNPs = make([]int32, nbins)
		fs.res.MinCNPGap = -1
		s.schedule(toPs(f.Start), evStart, i, 0, false)
		if f.Stop != 0 {
			s.schedule(toPs(f.Stop), evStop, i, 0, false)
		}
	}
	s.res.Series.Rate = make([][]cc.Bitrate, len(c.Flows))
	s.schedule(0, evSample, 0, 0, false)
	s.loop()
	s.finish()
	return s.res, nil
}

func (s *sim) schedule(at ps, kind evKind, flow int, gen uint32, ce bool) {
	s.seq++
	s.h.push(event{at: at, seq: s.seq, kind: kind, flow: int32(flow), gen: gen, ce: ce})
}

func (s *sim) loop() {
	for len(s.h) > 0 {
		e := s.h.pop()
		if e.at > s.end {
			break
		}
		s.now = e.at
		s.res.Events++
		f := int(e.flow)
		switch e.kind {
		case evStart:
			fs := &s.flows[f]
			fs.active = true
			fs.tokens, fs.refilled = s.burst, s.now
			s.trySend(f)
		case evStop:
			s.flows[f].active = false
			s.flows[f].txGen++
		case evTx:
			if e.gen == s.flows[f].txGen {
				s.trySend(f)
			}
		case evArrive:
			s.arrive(f)
		case evPortDone:
			s.portBusy = false
			if s.q.size > 0 {
				s.startTx()
			}
		case evRecv:
			s.receive(f, e.ce)
		case evCNP:
			fs := &s.flows[f]
			s.refill(fs)
			fs.rp.OnCNP(wall(s.now))
			s.afterCC(f, true)
		case evCCTimer:
			fs := &s.flows[f]
			if e.gen == fs.ccGen {
				fs.ccArmed = false
				s.refill(fs)
				fs.rp.OnTimeout(wall(s.now))
				s.afterCC(f, true)
			}
		case evPause:
			fs := &s.flows[f]
			if !fs.paused {
				fs.paused, fs.pausedAt = true, s.now
				fs.txGen++
			}
		case evResume:
			fs := &s.flows[f]
			if fs.paused {
				fs.paused = false
				fs.res.PauseTime += (s.now - fs.pausedAt).duration()
				s.trySend(f)
			}
		case evSample:
			s.sample()
		}
	}
}

// refill brings the pacer's bucket up to now at the current rate.
func (s *sim) refill(fs *flowState) {
	if dt := s.now - fs.refilled; dt > 0 {
		fs.tokens = min(s.burst, fs.tokens+fs.rate*float64(dt))
		fs.refilled = s.now
	}
}

// nextTx returns when fs may start its next packet: the NIC is free and
// the bucket holds a packet.
func (s *sim) nextTx(fs *flowState) ps {
	at := max(s.now, fs.nicFree)
	if need := float64(s.pkt) - fs.tokens; need > 0 {
		at = max(at, s.now+ps(math.Ceil(need/fs.rate)))
	}
	return at
}

func (s *sim) scheduleTx(f int) {
	fs := &s.flows[f]
	fs.txGen++
	s.schedule(s.nextTx(fs), evTx, f, fs.txGen, false)
}

// trySend starts the flow's next packet if the NIC is free and the pacer
// allows it, and schedules the next attempt.
func (s *sim) trySend(f int) {
	fs := &s.flows[f]
	if !fs.active || fs.paused {
		return
	}
	s.refill(fs)
	if s.nextTx(fs) > s.now {
		s.scheduleTx(f)
		return
	}
	fs.tokens -= float64(s.pkt)
	fs.nicFree = s.now + fs.nicSer
	fs.res.Sent += uint64(s.pkt)
	s.schedule(fs.nicFree+fs.delay, evArrive, f, 0, false)
	fs.rp.OnPacketSent(wall(s.now), s.pkt)
	s.afterCC(f, false)
	s.scheduleTx(f)
}

// afterCC picks up a controller's new rate and deadline after any call,
// and checks the reaction-point invariants (doc/dcqcn.md §5.3 "all").
func (s *sim) afterCC(f int, resched bool) {
	fs := &s.flows[f]
	rc, rt := fs.rp.Rate(), fs.rp.TargetRate()
	if r := float64(rc) / 8e12; r != fs.rate {
		fs.rate = r
		if resched && fs.active && !fs.paused {
			s.scheduleTx(f)
		}
	}
	if lo := s.cfg.RP.MinRate; rc < lo || rc > rt || rt > s.cfg.RP.LineRate {
		s.violation("flow %d at %v: MinRate %v ≤ RC %v ≤ RT %v ≤ line %v violated",
			f, s.now.duration(), lo, rc, rt, s.cfg.RP.LineRate)
	}
	dl, ok := fs.rp.Deadline()
	if !ok {
		if fs.ccArmed {
			fs.ccArmed = false
			fs.ccGen++
		}
		return
	}
	at := max(fromWall(dl), s.now)
	if !fs.ccArmed || at != fs.ccAt {
		fs.ccGen++
		fs.ccArmed, fs.ccAt = true, at
		s.schedule(at, evCCTimer, f, fs.ccGen, false)
	}
}

func (s *sim) violation(format string, args ...any) {
	s.res.ViolationCount++
	if len(s.res.Violations) < maxViolations {
		s.res.Violations = append(s.res.Violations, fmt.Sprintf(format, args...))
	}
}

// arrive enqueues a packet at the bottleneck port, or drops it when the
// buffer is full, and applies PFC on its ingress port.
func (s *sim) arrive(f int) {
	fs := &s.flows[f]
	occupied := s.qBytes
	if s.portBusy {
		occupied += s.pkt
	}
	if occupied+s.pkt > s.cfg.Buffer {
		fs.res.Dropped++
		s.res.Drops++
		return
	}
	s.q.push(int32(f))
	s.setQueue(s.qBytes + s.pkt)
	fs.ingress += s.pkt
	if p := s.cfg.PFC; p.Enabled && !fs.pauseSent && fs.ingress > p.XOff {
		fs.pauseSent = true
		s.res.Pauses++
		s.schedule(s.now+fs.delay, evPause, f, 0, false)
	}
	if !s.portBusy {
		s.startTx()
	}
}

// startTx dequeues the head packet onto the bottleneck link, deciding its
// ECN mark on the queue it leaves behind (doc/dcqcn.md §1.1).
func (s *sim) startTx() {
	f := int(s.q.pop())
	fs := &s.flows[f]
	s.setQueue(s.qBytes - s.pkt)
	fs.ingress -= s.pkt
	if p := s.cfg.PFC; p.Enabled && fs.pauseSent && fs.ingress <= p.XOn {
		fs.pauseSent = false
		s.schedule(s.now+fs.delay, evResume, f, 0, false)
	}
	ce := false
	switch p := s.red.Probability(s.qBytes); {
	case p >= 1:
		ce = true
	case p > 0:
		ce = s.rng.Float64() < p
	}
	if ce {
		fs.res.Marked++
	}
	s.portBusy = true
	done := s.now + s.bottleSer
	s.schedule(done, evPortDone, 0, 0, false)
	s.schedule(done+s.delay, evRecv, f, 0, ce)
}

// receive delivers a packet to the receiver and runs its flow's NP.
func (s *sim) receive(f int, ce bool) {
	fs := &s.flows[f]
	b := int(s.now / s.bin)
	if b >= len(fs.res.Delivered) {
		b = len(fs.res.Delivered) - 1
	}
	fs.res.Delivered[b] += int64(s.pkt)
	now := wall(s.now)
	if !fs.np.OnPacket(now, ce, true) {
		return
	}
	// doc/dcqcn.md §5.3 "all": no CNP without a CE packet in the preceding N,
	// and Δcnp ≥ N.
	if !ce {
		s.violation("flow %d at %v: CNP without a CE packet", f, s.now.duration())
	}
	if fs.cnpSeen {
		gap := now.Sub(fs.lastCNPWall)
		if fs.res.MinCNPGap < 0 || gap < fs.res.MinCNPGap {
			fs.res.MinCNPGap = gap
		}
		if gap < s.cfg.NP.Interval {
			s.violation("flow %d at %v: CNP %v after the previous one (N = %v)", f, s.now.duration(), gap, s.cfg.NP.Interval)
		}
	}
	fs.cnpSeen, fs.lastCNPWall = true, now
	fs.res.CNPs[b]++
	s.schedule(s.now+s.cnpDelay+s.delay+fs.delay, evCNP, f, 0, false)
}

// setQueue changes the queue length to q, first charging the time spent
// at the old length to the window's distribution.
func (s *sim) setQueue(q int) {
	if s.now > s.qChanged {
		from, to := max(s.qChanged, s.winFrom), min(s.now, s.winTo)
		if to > from {
			b := s.qBytes >> 6
			if b >= len(s.hist) {
				s.hist = append(s.hist, make([]int64, b+1-len(s.hist)+len(s.hist)/2)...)
			}
			s.hist[b] += int64(to - from)
			s.qmaxWin = max(s.qmaxWin, s.qBytes)
		}
		s.qChanged = s.now
	}
	if s.qBytes > s.settle && q <= s.settle {
		s.lastAbove = s.now
	}
	if q > s.settle {
		s.everAbove = true
	}
	s.qPeak = max(s.qPeak, q)
	s.sampleQ = max(s.sampleQ, q)
	s.qBytes = q
}

// sample records one point of the time series: each flow's RC and the
// largest queue since the previous point.
func (s *sim) sample() {
	r := &s.res.Series
	r.T = append(r.T, s.now.duration())
	for i := range s.flows {
		rate := s.flows[i].rp.Rate()
		if !s.flows[i].active {
			rate = 0
		}
		r.Rate[i] = append(r.Rate[i], rate)
	}
	r.Queue = append(r.Queue, s.sampleQ)
	s.sampleQ = s.qBytes
	if next := s.now + s.sampleEvery; next <= s.end {
		s.schedule(next, evSample, 0, 0, false)
	}
}

// finish closes the books at the end of the run.
func (s *sim) finish() {
	s.now = s.end
	s.setQueue(s.qBytes)
	if s.qBytes > s.settle {
		s.lastAbove = s.end
	}
	r := s.res
	r.QueueHist = s.hist
	r.QmaxWindow = s.qmaxWin
	r.Qpeak = s.qPeak
	if s.everAbove {
		r.LastAboveSettle = s.lastAbove.duration()
	} else {
		r.LastAboveSettle = -1
	}
	for i := range s.flows {
		fs := &s.flows[i]
		if fs.paused {
			fs.res.PauseTime += (s.end - fs.pausedAt).duration()
		}
		fs.res.RP = fs.rp.Stats()
		fs.res.NP = fs.np.Stats()
		r.Flows = append(r.Flows, fs.res)
	}
}
