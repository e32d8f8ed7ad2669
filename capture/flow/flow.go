package flow

import (
	"encoding/json"
	"math"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/capture"
)

// Defaults of Config.
const (
	DefaultMaxDirections = 2048
	// maxListed bounds every per-direction event list (gaps, episodes,
	// NAKs, RNR NAKs, ICRC failures); the totals stay exact.
	maxListed = 100
	// maxMissing bounds the open gap ranges tracked per direction; the
	// oldest range is given up as a gap when it overflows.
	maxMissing = 1024
	// maxPending bounds the READ and ATOMIC requests awaiting a response.
	maxPending = 1024
	// latencySamples bounds the latencies kept for percentiles.
	latencySamples = 2048
	// maxPorts bounds the distinct UDP source ports listed.
	maxPorts = 16
	// DefaultPointBudget is the number of sequence-graph points kept over
	// all directions when Config.Points is on.
	DefaultPointBudget = 1 << 17
)

// responseGapReaction is how soon after a response a resend must come to
// be put down to that response rather than to the retransmit timer: a
// requester reacts to a response at once, while rxe's shortest useful
// ACK timeout is about 1 ms (timeout 8; rdma-core's tests use 14, 67 ms).
const responseGapReaction = 250 * time.Microsecond

// maxRewind bounds how far before a NAK's PSN a resend may start and still
// be put down to that NAK.
const maxRewind = 4096

// Config configures an Analyzer. The zero value is usable.
type Config struct {
	// MaxDirections caps the directions analysed (DefaultMaxDirections
	// when 0); packets of further directions are only counted.
	MaxDirections int
	// Points keeps sequence-graph samples (Dir.Seq) for the report, within
	// PointBudget points over all directions.
	Points bool
	// PointBudget is the total number of samples kept when Points is set;
	// 0 means DefaultPointBudget.
	PointBudget int
}

// dirKey identifies a direction: source and destination address and the
// destination QPN, plus for UD the DETH source QP (+1, so 0 means none).
type dirKey struct {
	src, dst netip.Addr
	dqp      bth.QPN
	sqp      uint32
}

// Analyzer reconstructs connections from a stream of packets. Feed it
// every packet of a Scanner with Add, then call Result once. It is used
// from one goroutine.
type Analyzer struct {
	cfg    Config
	dirs   map[dirKey]*Dir
	order  []*Dir
	conns  []*Conn
	byPair map[[2]netip.Addr][]*Dir // unpaired RC/UC directions by (src, dst)
	// pairs holds the host pairs (lower address first) with their
	// 5-tuples, pairOrder them in the order of their first packet.
	pairs     map[[2]netip.Addr]*HostPair
	pairOrder []*HostPair
	overflow  int64
	pointCap  int
}

// NewAnalyzer returns an Analyzer.
func NewAnalyzer(cfg Config) *Analyzer {
	if cfg.MaxDirections <= 0 {
		cfg.MaxDirections = DefaultMaxDirections
	}
	if cfg.PointBudget <= 0 {
		cfg.PointBudget = DefaultPointBudget
	}
	return &Analyzer{cfg: cfg, dirs: map[dirKey]*Dir{}, byPair: map[[2]netip.Addr][]*Dir{},
		pairs: map[[2]netip.Addr]*HostPair{}}
}

// Conn is a connection: one or two directions between two QPs.
type Conn struct {
	// ID numbers connections in the order of their first packet, from 1.
	ID int `json:"id"`
	// Transport is RC, UC or UD (from the opcodes), "CNP" for CNPs alone,
	// "mixed" when the directions disagree, "unknown" without a known
	// opcode.
	Transport string `json:"transport"`
	// PathMTU is the path MTU inferred from FIRST/MIDDLE payload sizes in
	// either direction, 0 when none was seen.
	PathMTU int `json:"path_mtu,omitempty"`
	// PairedBy says how the two directions were matched: "udp-port" (the
	// same UDP source port both ways, as rxe sends), "deth" (UD source QP),
	// "psn" (a response in the request window), "only-candidate"; empty
	// for a connection seen in one direction only.
	PairedBy string `json:"paired_by,omitempty"`
	// Dirs are the directions, the first one seen first.
	Dirs []*Dir `json:"directions"`

	dead bool
}

// MTU returns the inferred path MTU, 0 when unknown.
func (c *Conn) MTU() int { return c.PathMTU }

// Dir is one direction of a connection with its statistics.
type Dir struct {
	Src netip.Addr `json:"src"`
	Dst netip.Addr `json:"dst"`
	// DestQP is the BTH destination QPN of the direction's packets.
	DestQP uint32 `json:"dest_qp"`
	// SrcQP is the DETH source QP of a UD direction.
	SrcQP *uint32 `json:"src_qp,omitempty"`
	// SrcPorts lists the UDP source ports seen (at most 16).
	SrcPorts []uint16 `json:"udp_src_ports"`
	// FirstFrame and LastFrame are the frame numbers of the first and last
	// packet; Start and End their times in seconds.
	FirstFrame int     `json:"first_frame"`
	LastFrame  int     `json:"last_frame"`
	Start      float64 `json:"start_s"`
	End        float64 `json:"end_s"`
	// Packets, Bytes (on the wire) and PayloadBytes (without pad) of every
	// packet, retransmissions included.
	Packets      int64 `json:"packets"`
	Bytes        int64 `json:"bytes"`
	PayloadBytes int64 `json:"payload_bytes"`
	// Opcodes counts packets and bytes per opcode.
	Opcodes []OpcodeStat `json:"opcodes"`
	// ECN counts the IP ECN codepoints.
	ECN ECNStats `json:"ecn"`
	// CNPs counts congestion notifications sent in this direction (by the
	// notification point, to the QP that caused the congestion).
	CNPs int64 `json:"cnps"`
	// ICRC counts verdicts.
	ICRC ICRCStats `json:"icrc"`
	// Malformed counts packets with decoding problems.
	Malformed int64 `json:"malformed,omitempty"`
	// Requests describes the requests sent in this direction (RC/UC).
	Requests *RequestStats `json:"requests,omitempty"`
	// Responses describes the responses sent in this direction to the
	// other side's requests (RC).
	Responses *ResponseStats `json:"responses,omitempty"`
	// Reads and Atomics pair this direction's READ and ATOMIC requests with
	// the other direction's responses.
	Reads   *OpStats `json:"reads,omitempty"`
	Atomics *OpStats `json:"atomics,omitempty"`
	// Goodput sums, over time, the payload of packets carrying data for the
	// first time (new request PSNs, new READ response PSNs); Throughput
	// sums every byte on the wire.
	Goodput    Series `json:"goodput"`
	Throughput Series `json:"throughput"`
	// GoodputBps is the mean goodput in bit/s between the first and last
	// packet.
	GoodputBps float64 `json:"goodput_bps"`

	// Seq holds sequence-graph samples when Config.Points is set.
	Seq *SeqData `json:"-"`

	conn    *Conn
	partner *Dir
	key     dirKey
	ops     [256]OpcodeStat
	req     reqTrack
	resp    respTrack
	reads   pendingOps
	atomics pendingOps
	start   time.Duration
	end     time.Duration
	class   bth.Transport
	classOK bool
}

// Conn returns the direction's connection.
func (d *Dir) Conn() *Conn { return d.conn }

// Partner returns the opposite direction, nil while unpaired.
func (d *Dir) Partner() *Dir { return d.partner }

// HighestRequestPSN returns the highest PSN the direction's requests
// consumed so far (a READ counts every PSN of its response; while the
// MTU is unknown, the most it could take), and false before any request.
func (d *Dir) HighestRequestPSN() (bth.PSN, bool) {
	if !d.req.started {
		return 0, false
	}
	return d.req.w.psnAt(d.req.w.u + d.req.slack), true
}

// RequestU places a PSN of this direction's request stream on the
// stream's unwrapped line (0 = the first request PSN seen; SeqPoint.U), as
// of now; false before any request.
func (d *Dir) RequestU(p bth.PSN) (int64, bool) {
	if !d.req.started {
		return 0, false
	}
	return d.req.w.at(p), true
}

// FirstRequestPSN returns the first request PSN seen, and false before
// any request.
func (d *Dir) FirstRequestPSN() (bth.PSN, bool) { return d.req.firstRaw, d.req.started }

// OpcodeStat counts one opcode.
type OpcodeStat struct {
	Opcode  uint8  `json:"opcode"`
	Name    string `json:"name"`
	Packets int64  `json:"packets"`
	Bytes   int64  `json:"bytes"`
}

// ECNStats counts ECN codepoints (RFC 3168).
type ECNStats struct {
	NotECT int64 `json:"not_ect"`
	ECT0   int64 `json:"ect0"`
	ECT1   int64 `json:"ect1"`
	CE     int64 `json:"ce"`
}

// ICRCStats counts ICRC verdicts; BadFrames lists the first failures.
type ICRCStats struct {
	Good      int64 `json:"good"`
	Bad       int64 `json:"bad"`
	Unchecked int64 `json:"unchecked"`
	BadFrames []int `json:"bad_frames,omitempty"`
}

// PSNRange is an inclusive range of PSNs.
type PSNRange struct {
	First uint32 `json:"first"`
	Last  uint32 `json:"last"`
}

// RequestStats describes a requester's PSN stream.
type RequestStats struct {
	Packets int64 `json:"packets"`
	// Messages counts LAST/ONLY packets sent for the first time.
	Messages int64 `json:"messages"`
	// PSNFirst is the first PSN seen, PSNLast the highest consumed, PSNs
	// the distance between them plus one.
	PSNFirst uint32 `json:"psn_first"`
	PSNLast  uint32 `json:"psn_last"`
	PSNs     int64  `json:"psns"`
	// GapPSNs counts PSNs skipped and never seen (lost before the capture
	// point and never retransmitted past it); Gaps lists the first ranges.
	GapPSNs int64      `json:"gap_psns"`
	Gaps    []PSNRange `json:"gaps,omitempty"`
	// Filled counts packets that filled a gap (their first copy was lost
	// before the capture point).
	Filled int64 `json:"gap_fills"`
	// Retransmissions counts packets whose PSN was seen before.
	Retransmissions int64 `json:"retransmissions"`
	// GoBackN counts rewinds (a request at or behind the previous one);
	// Episodes lists the first ones.
	GoBackN  int64     `json:"go_back_n"`
	Episodes []Episode `json:"episodes,omitempty"`
}

// Episode is one Go-Back-N rewind.
type Episode struct {
	Frame int     `json:"frame"`
	Time  float64 `json:"time_s"`
	// From is the highest PSN sent before the rewind, To the PSN resent.
	From uint32 `json:"from_psn"`
	To   uint32 `json:"to_psn"`
	// Packets counts the packets resent before new data went out again.
	Packets int64 `json:"packets"`
	// Trigger is "nak-seq" or "rnr" when the other side's NAK named the
	// resent PSN; "response-gap" when, since the previous request, a
	// response arrived for the resent PSN or a later one, at most 250 µs
	// before the resend (an ACK past an unanswered READ or ATOMIC: its
	// response was lost, rxe_comp.c check_psn); "timeout" after more than
	// 250 µs of silence (the retransmit timer); "other" for a resend that
	// nothing in the capture explains.
	Trigger string `json:"trigger"`
	// TriggerFrame is the NAK's or response's frame; Delay the time from
	// it, or for a timeout from the previous request, to the rewind, in µs.
	TriggerFrame int     `json:"trigger_frame,omitempty"`
	Delay        float64 `json:"delay_us"`
}

// ResponseStats describes the responses a responder sent.
type ResponseStats struct {
	// ACKs counts ACKNOWLEDGE packets with an ACK syndrome; DupACKs those
	// that acknowledged nothing new.
	ACKs    int64 `json:"acks"`
	DupACKs int64 `json:"dup_acks"`
	// Coalescing: request PSNs acknowledged per ACK.
	Coalescing Coalescing `json:"coalescing"`
	// NAKSeq counts PSN sequence error NAKs, NAKOther the other NAK codes,
	// RNR the RNR NAKs; NAKs and RNRs list the first ones.
	NAKSeq   int64      `json:"nak_seq"`
	NAKOther int64      `json:"nak_other"`
	RNR      int64      `json:"rnr_naks"`
	NAKs     []NAKEvent `json:"naks,omitempty"`
	RNRs     []RNREvent `json:"rnrs,omitempty"`
	// ReservedSyndromes counts AETHs with a reserved syndrome.
	ReservedSyndromes int64 `json:"reserved_syndromes,omitempty"`
	// ReadResponses and AtomicACKs count those packets.
	ReadResponses int64 `json:"read_responses"`
	AtomicACKs    int64 `json:"atomic_acks"`
	// MSN follows the AETH message sequence numbers.
	MSN MSNStats `json:"msn"`
}

// Coalescing describes how many PSNs each ACK covered.
type Coalescing struct {
	// ACKs counts ACKs that acknowledged new PSNs, PSNs the PSNs they
	// covered; Mean is PSNs/ACKs and Max the most one ACK covered.
	ACKs int64   `json:"acks"`
	PSNs int64   `json:"psns"`
	Mean float64 `json:"mean"`
	Max  int64   `json:"max"`
	// Hist counts ACKs covering 1, 2–4, 5–16, 17–64, 65–256 and more PSNs.
	Hist [6]int64 `json:"hist"`
}

// CoalescingBuckets names the buckets of Coalescing.Hist. It is a table:
// callers must not modify it.
var CoalescingBuckets = [6]string{"1", "2-4", "5-16", "17-64", "65-256", ">256"}

// NAKEvent is one NAK.
type NAKEvent struct {
	Frame    int     `json:"frame"`
	Time     float64 `json:"time_s"`
	PSN      uint32  `json:"psn"`
	Syndrome string  `json:"syndrome"`
}

// RNREvent is one RNR NAK and the wait that followed it.
type RNREvent struct {
	Frame int     `json:"frame"`
	Time  float64 `json:"time_s"`
	PSN   uint32  `json:"psn"`
	// TimerCode is the AETH timer code and Timer its value (IBA 9.7.5.2.8,
	// Table 45) in µs.
	TimerCode uint8   `json:"timer_code"`
	Timer     float64 `json:"timer_us"`
	// Wait is the time until the requester resent the PSN, in µs, and
	// RetryFrame that packet; -1 and 0 when no retry was seen.
	Wait       float64 `json:"wait_us"`
	RetryFrame int     `json:"retry_frame,omitempty"`
}

// MSNStats follows the AETH MSN.
type MSNStats struct {
	Seen      int64  `json:"seen"`
	First     uint32 `json:"first"`
	Last      uint32 `json:"last"`
	Progress  uint32 `json:"progress"`
	Decreases int64  `json:"decreases"`
}

// OpStats pairs requests with their responses (READ, ATOMIC).
type OpStats struct {
	Requests   int64 `json:"requests"`
	Answered   int64 `json:"answered"`
	Unanswered int64 `json:"unanswered"`
	// Retried counts requests sent again before their answer.
	Retried int64 `json:"retried"`
	// Latency is from the request's first transmission to the end of its
	// response, in µs (percentiles over at most 2048 samples).
	Latency LatencyStats `json:"latency_us"`
	// Samples are latencies in µs for the report's distribution.
	Samples Sampler[float64] `json:"-"`
}

// LatencyStats summarises latencies in µs.
type LatencyStats struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`

	sum float64
}

// SeqPoint is one mark of a sequence graph: PSN U (unwrapped, relative to
// the request stream's first PSN) at time T; a request spans Span PSNs.
type SeqPoint struct {
	T     time.Duration
	U     int64
	Span  int32
	Frame int32
	Kind  SeqKind
}

// SeqKind says what a SeqPoint marks.
type SeqKind uint8

//go:generate stringer -type=SeqKind -trimprefix=Seq -output=seqkind_string.go

// Sequence-graph marks.
const (
	SeqNew      SeqKind = iota // a request with new PSNs
	SeqRetx                    // a request seen before
	SeqFill                    // a request filling a gap
	SeqACK                     // an ACK (cumulative, up to U)
	SeqReadResp                // a READ response or ATOMIC ACK
	SeqNAKSeq                  // a PSN sequence error NAK naming U
	SeqRNR                     // an RNR NAK naming U
	SeqNAKError                // another NAK
	SeqCE                      // a CE-marked request
	SeqCNP                     // a CNP (U unused)
)

// SeqData holds a direction's sequence-graph samples: its requests, the
// other side's responses placed in this direction's PSN space, and the
// CNPs this direction carried.
type SeqData struct {
	Requests  Sampler[SeqPoint] // SeqNew, SeqFill
	Retx      Sampler[SeqPoint] // SeqRetx
	Responses Sampler[SeqPoint] // SeqACK, SeqReadResp (sent by the partner)
	NAKs      Sampler[SeqPoint] // SeqNAKSeq, SeqRNR, SeqNAKError (sent by the partner)
	CE        Sampler[SeqPoint] // CE-marked requests, and CE-marked responses to them
	CNPs      Sampler[SeqPoint] // CNPs sent in this direction (U unused)
}

func (s *SeqData) all() []interface{ setMax(int) } {
	return []interface{ setMax(int) }{&s.Requests, &s.Retx, &s.Responses, &s.NAKs, &s.CE, &s.CNPs}
}

// setMax lowers the capacity to n, decimating what is kept.
func (s *Sampler[T]) setMax(n int) {
	n = max(n, 2)
	for len(s.Items) > n {
		k := 0
		for i := 0; i < len(s.Items); i += 2 {
			s.Items[k] = s.Items[i]
			k++
		}
		clear(s.Items[k:])
		s.Items = s.Items[:k]
		s.stride *= 2
	}
	s.max = n
}

// reqTrack follows a requester's PSN stream (RC/UC).
type reqTrack struct {
	started  bool
	firstRaw bth.PSN
	w        unwrapper // highest consumed PSN
	slack    int64     // extra PSNs the last READ may take (MTU unknown)
	req0     bool      // a request was seen before this one
	prevU    int64     // first PSN of the previous request packet
	prevT    time.Duration
	missing  []uRange
	lostGaps int64         // PSNs of gap ranges given up (list overflow)
	epOn     bool          // a Go-Back-N episode is in progress
	epT      time.Duration // when the latest one began
	epIdx    int           // its index in stats.Episodes, -1 when not listed
	stats    RequestStats
}

type uRange struct{ lo, hi int64 }

// respTrack follows a responder's answers (RC).
type respTrack struct {
	haveAck  bool
	lastAckU int64
	lastNAK  struct {
		ok    bool
		u     int64
		kind  string
		frame int
		t     time.Duration
	}
	lastResp struct { // the latest ACK, READ response or ATOMIC ACK
		ok    bool
		u     int64
		frame int
		t     time.Duration
	}
	rnrOpen  int   // index in stats.RNRs of an RNR awaiting its retry, -1 none
	rnrU     int64 // its PSN
	rnrT     time.Duration
	readW    unwrapper // READ response PSNs, for goodput
	msnOK    bool
	msnLast  uint32
	stats    ResponseStats
	enabled  bool
	readSeen bool
}

// pendingOp is a READ or ATOMIC request awaiting its response.
type pendingOp struct {
	u, end int64 // PSN range (unwrapped in the requester's space)
	t      time.Duration
	frame  int
	first  bool // a response started
}

type pendingOps struct {
	list  []pendingOp
	stats OpStats
	on    bool
}

// Directions returns the directions seen so far, in the order of their
// first packet: a live view for a periodic table (read their Live
// counters). The slice and the Dirs belong to the Analyzer: read them
// between two Adds, from the goroutine that calls Add, and do not keep
// the slice.
func (a *Analyzer) Directions() []*Dir { return a.order }

// LiveCounters are a direction's running counters, correct between two
// Adds, unlike the fields Result fills in at the end.
type LiveCounters struct {
	Packets, Bytes int64
	// CE counts ECN Congestion Experienced marks, CNPs congestion
	// notifications, ICRCBad ICRC mismatches, Malformed packets with
	// decoding problems.
	CE, CNPs, ICRCBad, Malformed int64
	// Retransmissions counts requests whose PSN was seen before, GapPSNs
	// the request PSNs skipped and not (yet) seen.
	Retransmissions, GapPSNs int64
	// NAKs counts NAKs but RNR NAKs, RNRNAKs those.
	NAKs, RNRNAKs int64
}

// Live returns d's running counters.
func (d *Dir) Live() LiveCounters {
	gaps := d.req.lostGaps
	for _, g := range d.req.missing {
		gaps += g.hi - g.lo + 1
	}
	return LiveCounters{
		Packets: d.Packets, Bytes: d.Bytes,
		CE: d.ECN.CE, CNPs: d.CNPs, ICRCBad: d.ICRC.Bad, Malformed: d.Malformed,
		Retransmissions: d.req.stats.Retransmissions, GapPSNs: gaps,
		NAKs: d.resp.stats.NAKSeq + d.resp.stats.NAKOther, RNRNAKs: d.resp.stats.RNR,
	}
}

// Add analyses one packet and returns its direction, or nil when the
// direction cap was reached or the packet has no BTH.
func (a *Analyzer) Add(p *Packet) *Dir {
	if p.BTH == nil {
		return nil
	}
	k := dirKey{src: p.Src, dst: p.Dst, dqp: p.BTH.DestQP()}
	if p.DETH != nil {
		k.sqp = p.DETH.SrcQP() + 1
	}
	d := a.dirs[k]
	if d == nil {
		if len(a.order) >= a.cfg.MaxDirections {
			a.overflow++
			return nil
		}
		d = a.newDir(k, p)
	}
	if d.partner == nil && k.sqp == 0 && p.Responder() {
		a.pairByResponse(d, p.PSN())
	}
	d.add(p)
	a.addTuple(p)
	return d
}

func (a *Analyzer) newDir(k dirKey, p *Packet) *Dir {
	d := &Dir{Src: k.src, Dst: k.dst, DestQP: uint32(k.dqp), key: k, FirstFrame: p.Frame, start: p.Time}
	d.resp.rnrOpen = -1
	if k.sqp != 0 {
		q := k.sqp - 1
		d.SrcQP = &q
	}
	c := &Conn{Dirs: []*Dir{d}}
	d.conn = c
	a.dirs[k] = d
	a.order = append(a.order, d)
	a.conns = append(a.conns, c)
	if a.cfg.Points {
		a.rebudget()
		d.Seq = newSeqData(a.pointCap)
	}
	// Pair at once when the evidence is in the key or the ports.
	if k.sqp != 0 {
		if e := a.dirs[dirKey{src: k.dst, dst: k.src, dqp: bth.QPN(k.sqp - 1), sqp: uint32(k.dqp) + 1}]; e != nil && e.partner == nil {
			a.pair(d, e, "deth")
		}
		return d
	}
	rev := a.byPair[[2]netip.Addr{k.dst, k.src}]
	for _, e := range rev {
		if e.partner == nil && p.SrcPort != 4791 && slices.Contains(e.SrcPorts, p.SrcPort) {
			a.pair(d, e, "udp-port")
			return d
		}
	}
	a.byPair[[2]netip.Addr{k.src, k.dst}] = append(a.byPair[[2]netip.Addr{k.src, k.dst}], d)
	return d
}

// rebudget shares the point budget among the directions: the capacity
// per sampler halves (decimating what is kept) each time the directions
// outgrow it, so it shrinks O(log directions) times.
func (a *Analyzer) rebudget() {
	target := max(64, a.cfg.PointBudget/(6*(len(a.order))))
	if a.pointCap == 0 {
		a.pointCap = target
		return
	}
	if target >= a.pointCap {
		return
	}
	for a.pointCap > target && a.pointCap/2 >= 64 {
		a.pointCap /= 2
	}
	for _, d := range a.order {
		if d.Seq != nil {
			for _, s := range d.Seq.all() {
				s.setMax(a.pointCap)
			}
		}
	}
}

func newSeqData(n int) *SeqData {
	return &SeqData{Requests: NewSampler[SeqPoint](n), Retx: NewSampler[SeqPoint](n), Responses: NewSampler[SeqPoint](n),
		NAKs: NewSampler[SeqPoint](n), CE: NewSampler[SeqPoint](n), CNPs: NewSampler[SeqPoint](n)}
}

// pair makes d and e the two directions of one connection.
func (a *Analyzer) pair(d, e *Dir, by string) {
	if d.partner != nil || e.partner != nil || d == e {
		return
	}
	d.partner, e.partner = e, d
	keep, drop := d.conn, e.conn
	if e.start < d.start || (e.start == d.start && e.FirstFrame < d.FirstFrame) {
		keep, drop = drop, keep
	}
	first, second := d, e
	if keep == e.conn {
		first, second = e, d
	}
	keep.Dirs = []*Dir{first, second}
	if keep.PathMTU == 0 {
		keep.PathMTU = drop.PathMTU
	}
	keep.PairedBy = by
	drop.dead = true
	d.conn, e.conn = keep, keep
	for _, x := range []*Dir{d, e} {
		pk := [2]netip.Addr{x.key.src, x.key.dst}
		l := a.byPair[pk]
		if i := slices.Index(l, x); i >= 0 {
			l = slices.Delete(l, i, i+1)
			if len(l) == 0 {
				delete(a.byPair, pk)
			} else {
				a.byPair[pk] = l
			}
		}
	}
}

// pairByResponse looks for the requester a response of d answers: an
// unpaired opposite direction whose request window holds the PSN.
func (a *Analyzer) pairByResponse(d *Dir, psn bth.PSN) {
	var found *Dir
	for _, e := range a.byPair[[2]netip.Addr{d.key.dst, d.key.src}] {
		if e.partner != nil || !e.req.started {
			continue
		}
		u := e.req.w.at(psn)
		if u >= -1 && u <= e.req.w.u+e.req.slack {
			if found != nil {
				return // ambiguous
			}
			found = e
		}
	}
	if found != nil {
		a.pair(d, found, "psn")
	}
}

// add updates d with p.
func (d *Dir) add(p *Packet) {
	d.Packets++
	d.Bytes += int64(p.WireLen)
	d.LastFrame = p.Frame
	if p.Time > d.end {
		d.end = p.Time
	}
	d.Throughput.Add(p.Time, float64(p.WireLen))
	if len(d.SrcPorts) < maxPorts && !slices.Contains(d.SrcPorts, p.SrcPort) {
		d.SrcPorts = append(d.SrcPorts, p.SrcPort)
	}
	switch p.ECN {
	case 0:
		d.ECN.NotECT++
	case 1:
		d.ECN.ECT1++
	case 2:
		d.ECN.ECT0++
	case 3:
		d.ECN.CE++
	}
	switch p.ICRC {
	case capture.ICRCGood:
		d.ICRC.Good++
	case capture.ICRCBad:
		d.ICRC.Bad++
		if len(d.ICRC.BadFrames) < maxListed {
			d.ICRC.BadFrames = append(d.ICRC.BadFrames, p.Frame)
		}
	default:
		d.ICRC.Unchecked++
	}
	if p.Problems&^ProblemHeadersCut != 0 {
		d.Malformed++
	}
	o := &d.ops[p.Opcode]
	o.Packets++
	o.Bytes += int64(p.WireLen)
	if p.PayloadLen > 0 {
		d.PayloadBytes += int64(p.PayloadLen)
	}
	if p.Info == nil {
		return
	}
	if !p.CNP() {
		t := p.Opcode.Transport()
		if !d.classOK {
			d.class, d.classOK = t, true
		}
	}
	c := d.conn
	if c.PathMTU == 0 && (p.Opcode.IsFirst() || p.Opcode.IsMiddle()) && validMTU(p.PayloadLen) {
		c.PathMTU = p.PayloadLen
	}
	switch {
	case p.CNP():
		d.CNPs++
		if d.Seq != nil {
			d.Seq.CNPs.Add(SeqPoint{T: p.Time, Frame: int32(p.Frame), Kind: SeqCNP})
		}
	case p.Requester():
		d.request(p)
	case p.Responder():
		d.response(p)
	}
}

// request handles a request packet of d.
func (d *Dir) request(p *Packet) {
	op := p.Opcode
	if op.Transport() == bth.TransportUD {
		if p.PayloadLen > 0 {
			d.Goodput.Add(p.Time, float64(p.PayloadLen))
		}
		return
	}
	r := &d.req
	psn := p.PSN()
	span, slack := int64(1), int64(0)
	isRead := op.Mask()&bth.MaskRead != 0
	if isRead && p.RETH != nil {
		n := p.RETH.DMALength()
		if mtu := d.conn.PathMTU; mtu != 0 {
			span = ReadSpan(n, mtu)
		} else {
			span = ReadSpan(n, 4096)
			slack = ReadSpan(n, 256) - span
		}
	}
	r.stats.Packets++
	kind := SeqNew
	var u int64
	if !r.started {
		r.started = true
		r.firstRaw = psn
		u = r.w.see(psn)
		r.stats.PSNFirst = uint32(psn)
		r.w.raise(u + span - 1)
		r.slack = slack
	} else {
		u = r.w.at(psn)
		next := r.w.u + 1
		switch {
		case u >= next:
			if u > next+r.slack {
				r.addGap(next+r.slack, u-1)
			}
			r.w.see(psn)
			r.w.raise(u + span - 1)
			r.slack = slack
		case r.fill(u):
			kind = SeqFill
			r.stats.Filled++
		default:
			kind = SeqRetx
			r.stats.Retransmissions++
		}
	}
	// Go-Back-N: a resend at or behind the previous request starts an
	// episode; it lasts until new PSNs go out again.
	if kind == SeqNew {
		r.epOn = false
	}
	if kind != SeqNew && r.req0 && (!r.epOn || u <= r.prevU) {
		r.stats.GoBackN++
		ep := Episode{Frame: p.Frame, Time: p.Time.Seconds(), From: uint32(r.w.psnAt(r.w.u)), To: uint32(psn), Trigger: "timeout",
			Delay: float64(p.Time-r.prevT) / float64(time.Microsecond)}
		if e := d.partner; e != nil {
			n, lr := &e.resp.lastNAK, &e.resp.lastResp
			switch {
			case n.ok && n.t >= r.epT && u <= n.u && n.u-u < maxRewind:
				// The NAK came since the previous episode began and names
				// the resent PSN or one after it (a requester may restart
				// the message that holds it).
				ep.Trigger, ep.TriggerFrame = n.kind, n.frame
				ep.Delay = float64(p.Time-n.t) / float64(time.Microsecond)
				n.ok = false
			case lr.ok && lr.t >= r.prevT && lr.u >= u && p.Time-lr.t <= responseGapReaction:
				ep.Trigger, ep.TriggerFrame = "response-gap", lr.frame
				ep.Delay = float64(p.Time-lr.t) / float64(time.Microsecond)
			case p.Time-r.prevT <= responseGapReaction:
				ep.Trigger = "other"
			}
		}
		r.epT = p.Time
		r.epOn, r.epIdx = true, -1
		if len(r.stats.Episodes) < maxListed {
			r.stats.Episodes = append(r.stats.Episodes, ep)
			r.epIdx = len(r.stats.Episodes) - 1
		}
	}
	if kind != SeqNew && r.epOn && r.epIdx >= 0 {
		r.stats.Episodes[r.epIdx].Packets++
	}

	r.req0 = true
	// An RNR NAK's wait ends when its PSN is sent again.
	if e := d.partner; e != nil && e.resp.rnrOpen >= 0 && e.resp.rnrU == u {
		ev := &e.resp.stats.RNRs[e.resp.rnrOpen]
		ev.Wait = float64(p.Time-e.resp.rnrT) / float64(time.Microsecond)
		ev.RetryFrame = p.Frame
		e.resp.rnrOpen = -1
	}
	if kind != SeqRetx {
		if p.PayloadLen > 0 {
			d.Goodput.Add(p.Time, float64(p.PayloadLen))
		}
		if op.Mask()&bth.MaskLast != 0 {
			r.stats.Messages++
		}
	}
	r.prevU, r.prevT = u, p.Time
	if d.Seq != nil {
		sp := SeqPoint{T: p.Time, U: u, Span: int32(min(span, math.MaxInt32)), Frame: int32(p.Frame), Kind: kind}
		if kind == SeqRetx {
			d.Seq.Retx.Add(sp)
		} else {
			d.Seq.Requests.Add(sp)
		}
		if p.ECN == 3 {
			sp.Kind = SeqCE
			d.Seq.CE.Add(sp)
		}
	}
	// READ and ATOMIC requests await their answers.
	switch {
	case isRead:
		d.reads.request(u, u+span-1+slack, p, kind == SeqNew || kind == SeqFill)
	case op.Mask()&bth.MaskAtomic != 0:
		d.atomics.request(u, u, p, kind == SeqNew || kind == SeqFill)
	}
}

// addGap records the PSNs [lo, hi] as skipped.
func (r *reqTrack) addGap(lo, hi int64) {
	if hi < lo {
		return
	}
	if len(r.missing) == maxMissing {
		g := r.missing[0]
		r.lostGaps += g.hi - g.lo + 1
		r.missing = slices.Delete(r.missing, 0, 1)
	}
	r.missing = append(r.missing, uRange{lo, hi})
}

// fill removes u from the skipped PSNs and reports whether it was one.
func (r *reqTrack) fill(u int64) bool {
	i := sort.Search(len(r.missing), func(i int) bool { return r.missing[i].hi >= u })
	if i == len(r.missing) || r.missing[i].lo > u {
		return false
	}
	g := r.missing[i]
	switch {
	case g.lo == u && g.hi == u:
		r.missing = slices.Delete(r.missing, i, i+1)
	case g.lo == u:
		r.missing[i].lo++
	case g.hi == u:
		r.missing[i].hi--
	default:
		if len(r.missing) == maxMissing {
			r.lostGaps += r.missing[0].hi - r.missing[0].lo + 1
			r.missing = slices.Delete(r.missing, 0, 1)
			i--
			if i < 0 {
				return true
			}
		}
		r.missing[i].hi = u - 1
		r.missing = slices.Insert(r.missing, i+1, uRange{u + 1, g.hi})
	}
	return true
}

// request registers a READ or ATOMIC request covering [u, end]. A fresh
// request bounds the ranges of earlier ones (a READ's range is a guess
// while the MTU is unknown); a resend inside a pending range is a retry.
func (o *pendingOps) request(u, end int64, p *Packet, fresh bool) {
	o.on = true
	if !fresh {
		for i := range o.list {
			if q := &o.list[i]; u >= q.u && u <= q.end {
				o.stats.Retried++
				return
			}
		}
		return // a resend of a request already answered
	}
	for i := range o.list {
		if q := &o.list[i]; q.u < u && q.end >= u {
			q.end = u - 1
		}
	}
	o.stats.Requests++
	if len(o.list) == maxPending {
		o.stats.Unanswered++
		o.list = slices.Delete(o.list, 0, 1)
	}
	o.list = append(o.list, pendingOp{u: u, end: end, t: p.Time, frame: p.Frame})
}

// answer completes the request whose range ends at u (READ LAST/ONLY,
// ATOMIC ACK) and reports whether one did.
func (o *pendingOps) answer(u int64, t time.Duration, exact bool) bool {
	for i := range o.list {
		q := &o.list[i]
		if u < q.u || u > q.end {
			continue
		}
		if exact && u != q.u {
			continue
		}
		lat := float64(t-q.t) / float64(time.Microsecond)
		o.stats.Answered++
		l := &o.stats.Latency
		if l.Count == 0 || lat < l.Min {
			l.Min = lat
		}
		if lat > l.Max {
			l.Max = lat
		}
		l.Count++
		l.sum += lat
		if o.stats.Samples.max == 0 {
			o.stats.Samples = NewSampler[float64](latencySamples)
		}
		o.stats.Samples.Add(lat)
		o.list = slices.Delete(o.list, i, i+1)
		return true
	}
	return false
}

// response handles a response packet of d (answers to the partner).
func (d *Dir) response(p *Packet) {
	rs := &d.resp
	rs.enabled = true
	e := d.partner
	psn := p.PSN()
	var (
		u      int64
		inPeer bool
	)
	if e != nil && e.req.started {
		u, inPeer = e.req.w.at(psn), true
	}
	op := p.Opcode
	if p.AETH != nil {
		rs.msn(p.AETH.MSN())
	}
	if p.ECN == 3 && inPeer && e.Seq != nil {
		e.Seq.CE.Add(SeqPoint{T: p.Time, U: u, Span: 1, Frame: int32(p.Frame), Kind: SeqCE})
	}
	switch {
	case op == bth.RCAcknowledge:
		if p.AETH == nil {
			return
		}
		syn := p.AETH.Syndrome()
		switch {
		case syn.IsACK():
			rs.stats.ACKs++
			if !inPeer {
				return
			}
			n := int64(0)
			switch {
			case rs.haveAck:
				n = u - rs.lastAckU
			case u >= 0:
				n = u + 1
			}
			rs.seen(u, p)
			if n > 0 {
				rs.coalesce(n)
				rs.lastAckU, rs.haveAck = u, true
			} else {
				rs.stats.DupACKs++
			}
			if e.Seq != nil {
				e.Seq.Responses.Add(SeqPoint{T: p.Time, U: u, Frame: int32(p.Frame), Kind: SeqACK})
			}
		case syn.IsRNR():
			rs.stats.RNR++
			ev := RNREvent{Frame: p.Frame, Time: p.Time.Seconds(), PSN: uint32(psn), TimerCode: syn.Timer(),
				Timer: float64(aeth.RNRDelay(syn.Timer())) / float64(time.Microsecond), Wait: -1}
			if len(rs.stats.RNRs) < maxListed {
				rs.stats.RNRs = append(rs.stats.RNRs, ev)
				if inPeer {
					rs.rnrOpen, rs.rnrU, rs.rnrT = len(rs.stats.RNRs)-1, u, p.Time
				}
			}
			rs.nak(inPeer, u, "rnr", p)
			if e != nil && e.Seq != nil && inPeer {
				e.Seq.NAKs.Add(SeqPoint{T: p.Time, U: u, Frame: int32(p.Frame), Kind: SeqRNR})
			}
		case syn.IsNAK():
			kind := SeqNAKError
			if syn == aeth.NAKPSNSequenceError {
				rs.stats.NAKSeq++
				kind = SeqNAKSeq
				rs.nak(inPeer, u, "nak-seq", p)
				// The NAK acknowledges every PSN before the one it names.
				if inPeer && (!rs.haveAck || u-1 > rs.lastAckU) {
					rs.lastAckU, rs.haveAck = u-1, true
				}
			} else {
				rs.stats.NAKOther++
			}
			if len(rs.stats.NAKs) < maxListed {
				rs.stats.NAKs = append(rs.stats.NAKs, NAKEvent{Frame: p.Frame, Time: p.Time.Seconds(), PSN: uint32(psn), Syndrome: syn.String()})
			}
			if e != nil && e.Seq != nil && inPeer {
				e.Seq.NAKs.Add(SeqPoint{T: p.Time, U: u, Frame: int32(p.Frame), Kind: kind})
			}
		default:
			rs.stats.ReservedSyndromes++
		}
	case op.Mask()&bth.MaskRead != 0:
		rs.stats.ReadResponses++
		ru := rs.readW.at(psn)
		if !rs.readW.ok || ru > rs.readW.u {
			if p.PayloadLen > 0 {
				d.Goodput.Add(p.Time, float64(p.PayloadLen))
			}
		}
		rs.readW.see(psn)
		if !inPeer {
			return
		}
		rs.seen(u, p)
		if op.IsLast() || op.IsOnly() {
			e.reads.answer(u, p.Time, false)
		}
		if !rs.haveAck || u > rs.lastAckU {
			rs.lastAckU, rs.haveAck = u, true
		}
		if e.Seq != nil {
			e.Seq.Responses.Add(SeqPoint{T: p.Time, U: u, Frame: int32(p.Frame), Kind: SeqReadResp})
		}
	case op == bth.RCAtomicAcknowledge:
		rs.stats.AtomicACKs++
		if !inPeer {
			return
		}
		rs.seen(u, p)
		e.atomics.answer(u, p.Time, true)
		if !rs.haveAck || u > rs.lastAckU {
			rs.lastAckU, rs.haveAck = u, true
		}
		if e.Seq != nil {
			e.Seq.Responses.Add(SeqPoint{T: p.Time, U: u, Frame: int32(p.Frame), Kind: SeqReadResp})
		}
	}
}

// seen remembers the latest positive response, for the Go-Back-N episode
// it may trigger.
func (rs *respTrack) seen(u int64, p *Packet) {
	r := &rs.lastResp
	r.ok, r.u, r.frame, r.t = true, u, p.Frame, p.Time
}

// nak remembers the latest NAK naming a PSN, for the Go-Back-N episode it
// triggers.
func (rs *respTrack) nak(inPeer bool, u int64, kind string, p *Packet) {
	if !inPeer {
		return
	}
	n := &rs.lastNAK
	n.ok, n.u, n.kind, n.frame, n.t = true, u, kind, p.Frame, p.Time
}

func (rs *respTrack) coalesce(n int64) {
	c := &rs.stats.Coalescing
	c.ACKs++
	c.PSNs += n
	c.Max = max(c.Max, n)
	switch {
	case n <= 1:
		c.Hist[0]++
	case n <= 4:
		c.Hist[1]++
	case n <= 16:
		c.Hist[2]++
	case n <= 64:
		c.Hist[3]++
	case n <= 256:
		c.Hist[4]++
	default:
		c.Hist[5]++
	}
}

func (rs *respTrack) msn(m uint32) {
	s := &rs.stats.MSN
	s.Seen++
	if !rs.msnOK {
		rs.msnOK = true
		s.First, s.Last = m, m
		rs.msnLast = m
		return
	}
	if signed24(bth.PSN(m), bth.PSN(rs.msnLast)) < 0 {
		s.Decreases++
	} else {
		rs.msnLast = m
	}
	s.Last = m
}

// Result finishes the analysis and returns the connections in the order
// of their first packet, with capture-level statistics. Call it once,
// after the last Add.
func (a *Analyzer) Result(cs CaptureStats) *Result {
	// Pair what is left when each side has exactly one candidate.
	for _, d := range a.order {
		if d.partner != nil || d.key.sqp != 0 {
			continue
		}
		cands := a.unpairedRev(d)
		if len(cands) == 1 && len(a.unpairedRev(cands[0])) == 1 {
			a.pair(d, cands[0], "only-candidate")
		}
	}
	res := &Result{Capture: cs, OverflowPackets: a.overflow}
	for _, c := range a.conns {
		if c.dead {
			continue
		}
		for _, d := range c.Dirs {
			d.finish()
		}
		c.Transport = transportOf(c)
		res.Connections = append(res.Connections, c)
	}
	sort.SliceStable(res.Connections, func(i, j int) bool {
		return res.Connections[i].Dirs[0].FirstFrame < res.Connections[j].Dirs[0].FirstFrame
	})
	for i, c := range res.Connections {
		c.ID = i + 1
	}
	res.HostPairs = a.hostPairs(res.Connections)
	return res
}

func (a *Analyzer) unpairedRev(d *Dir) []*Dir {
	var out []*Dir
	for _, e := range a.byPair[[2]netip.Addr{d.key.dst, d.key.src}] {
		if e.partner == nil {
			out = append(out, e)
		}
	}
	return out
}

func transportOf(c *Conn) string {
	var t bth.Transport
	ok, cnp := false, false
	for _, d := range c.Dirs {
		if !d.classOK {
			if d.CNPs > 0 {
				cnp = true
			}
			continue
		}
		if ok && d.class != t {
			return "mixed"
		}
		t, ok = d.class, true
	}
	switch {
	case ok:
		return t.String()
	case cnp:
		return "CNP"
	}
	return "unknown"
}

// finish computes the derived fields of d.
func (d *Dir) finish() {
	d.Start, d.End = d.start.Seconds(), d.end.Seconds()
	d.Opcodes = d.Opcodes[:0]
	for i := range d.ops {
		o := d.ops[i]
		if o.Packets == 0 {
			continue
		}
		o.Opcode = uint8(i)
		o.Name = bth.Opcode(i).String()
		d.Opcodes = append(d.Opcodes, o)
	}
	if r := &d.req; r.started {
		st := r.stats
		st.PSNLast = uint32(r.w.psnAt(r.w.u))
		st.PSNs = r.w.u + 1
		st.GapPSNs = r.lostGaps
		st.Gaps = nil
		for _, g := range r.missing {
			st.GapPSNs += g.hi - g.lo + 1
			if len(st.Gaps) < maxListed {
				st.Gaps = append(st.Gaps, PSNRange{uint32(r.w.psnAt(g.lo)), uint32(r.w.psnAt(g.hi))})
			}
		}
		d.Requests = &st
	}
	if d.resp.enabled {
		st := d.resp.stats
		if c := &st.Coalescing; c.ACKs > 0 {
			c.Mean = float64(c.PSNs) / float64(c.ACKs)
		}
		st.MSN.Progress = uint32(bth.PSN(st.MSN.Last).Sub(bth.PSN(st.MSN.First)))
		d.Responses = &st
	}
	d.Reads = d.reads.finish()
	d.Atomics = d.atomics.finish()
	if dur := d.end - d.start; dur > 0 {
		var sum float64
		for _, v := range d.Goodput.Bins {
			sum += v
		}
		d.GoodputBps = sum * 8 / dur.Seconds()
	}
}

func (o *pendingOps) finish() *OpStats {
	if !o.on {
		return nil
	}
	st := o.stats
	st.Unanswered += int64(len(o.list))
	l := &st.Latency
	if l.Count > 0 {
		l.Mean = l.sum / float64(l.Count)
		s := slices.Clone(st.Samples.Items)
		slices.Sort(s)
		pct := func(q float64) float64 { return s[min(len(s)-1, int(q*float64(len(s))))] }
		l.P50, l.P90, l.P99 = pct(0.50), pct(0.90), pct(0.99)
	}
	return &st
}

// Result is the outcome of a flow analysis.
type Result struct {
	// Capture describes the file.
	Capture CaptureStats `json:"capture"`
	// Connections lists the connections in the order of their first packet.
	Connections []*Conn `json:"connections"`
	// OverflowPackets counts packets of directions past Config.MaxDirections.
	OverflowPackets int64 `json:"overflow_packets,omitempty"`
	// HostPairs lists the pairs of addresses that exchanged RoCEv2
	// packets, with their 5-tuples (ECMP entropy), in the order of their
	// first packet.
	HostPairs []*HostPair `json:"host_pairs"`
}

// MarshalJSON writes a Series as its bin width in seconds and its sums.
func (s Series) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Bin  float64   `json:"bin_s"`
		Bins []float64 `json:"bytes"`
	}{s.Width.Seconds(), s.Bins})
}

// Analyze reads a whole capture from src and returns its flows. A read
// error ends the analysis: the Result covers the frames before it and
// names the error (Result.Capture.Error), and Analyze returns it too
// (capture.ErrCutShort or capture.ErrCorrupt for a damaged file). src
// stays the caller's to close.
func Analyze(src capture.Source, cfg Config) (*Result, error) {
	s := NewScanner(src)
	a := NewAnalyzer(cfg)
	for {
		p, ok := s.Next()
		if !ok {
			break
		}
		a.Add(p)
	}
	return a.Result(s.Stats()), s.Err()
}
