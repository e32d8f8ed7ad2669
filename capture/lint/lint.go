package lint

import (
	"fmt"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/flow"
	"github.com/goroce/goroce/rocev2"
)

// Finding is one rule broken by one packet.
type Finding struct {
	// Frame is the offending packet's frame.number, Time its time in
	// seconds from the first frame.
	Frame int     `json:"frame"`
	Time  float64 `json:"time_s"`
	// Rule is the rule's ID, Message says what is wrong with this packet,
	// Cite repeats the rule's citation.
	Rule    RuleID `json:"rule"`
	Message string `json:"message"`
	Cite    string `json:"cite"`
	// Severity repeats the rule's severity (error or warning).
	Severity Severity `json:"severity"`
	// Conn is the connection's ID in the flow analysis, 0 when unknown;
	// the Checker sets it in Finish (findings reported earlier have it 0
	// unless the caller fills it from Dir).
	Conn int `json:"conn,omitempty"`
	// Dir is the direction of the packet, nil when it was not analysed.
	Dir *flow.Dir `json:"-"`
	// Stream is the request stream the packet belongs to (its own
	// direction for a request, the other one for a response) and U its PSN
	// on that stream's line (flow.SeqPoint.U), for placing it on a
	// sequence graph; Stream is nil when unknown.
	Stream *flow.Dir `json:"-"`
	U      int64     `json:"-"`
}

// ringSize is the number of recent PSNs remembered per direction for the
// opcode sequence; it bounds memory and is far above rxe's 128 unacked PSNs.
const ringSize = 4096

// maxPendingMTU bounds the ONLY/LAST packets kept per direction until the
// path MTU is inferred.
const maxPendingMTU = 64

type opRec struct {
	ok    bool
	psn   bth.PSN
	op    bth.Opcode
	frame int
}

type readReq struct {
	ok     bool
	psn    bth.PSN
	length uint32
	frame  int
}

type pendMTU struct {
	at      where
	op      bth.Opcode
	payload int
}

// dirState is the linter's memory of one direction.
type dirState struct {
	class   bth.Transport
	classOK bool
	pkey    uint16
	pkeyOK  bool
	reqOps  [ringSize]opRec   // requests by PSN
	respOps [ringSize]opRec   // READ responses by PSN
	reads   [ringSize]readReq // READ requests by PSN
	write   struct {
		on     bool
		next   bth.PSN
		length uint32
		sum    int64
		frame  int
	}
	run struct { // the READ response in progress
		on     bool
		start  bth.PSN
		next   bth.PSN
		length uint32
		sum    int64
		count  int64
		first  int // payload of its FIRST, the MTU when the conn's is unknown
		frame  int // the request's frame
	}
	msnOK   bool
	msn     uint32
	pending []pendMTU
	// ahead holds a response that named a PSN past the requests seen: it
	// is a finding unless a later request shows the capture missed some.
	ahead []aheadResp

	// dscp is the DSCP of the direction's last packet other than a CNP
	// (CNP-DSCP), cnpReported whether its CNPs were reported already.
	dscp        uint8
	dscpOK      bool
	cnpReported bool
	// port is the UDP source port of the direction's first packet, at
	// where it came, manyPorts whether another port followed
	// (ECMP-SHARED-TUPLE).
	port      uint16
	portAt    where
	portOK    bool
	manyPorts bool
}

// prioUse is the tagged non-CNP traffic on one 802.1Q priority
// (PFC-PRIORITY).
type prioUse struct {
	at      where
	packets int64
}

type aheadResp struct {
	psn  bth.PSN
	at   where
	hi   bth.PSN
	what string
}

// Checker checks packets against the transport rules. Feed it every packet
// after flow.Analyzer.Add has placed it (Check), then call Finish. It
// holds a fixed amount of state per direction. Findings go to the emit
// function given to New, in the order they are found: mostly frame order,
// but a check that waits for later evidence (the path MTU, a response
// ahead of the requests) reports when it is decided.
type Checker struct {
	dirs  map[*flow.Dir]*dirState
	emit  func(Finding)
	count map[RuleID]int64
	// prio is the tagged traffic per PCP, pauses the capture's pause
	// frames (SetPauses).
	prio   [8]prioUse
	pauses *flow.PauseStats
}

// New returns a Checker that passes each finding to emit.
func New(emit func(Finding)) *Checker {
	return &Checker{dirs: map[*flow.Dir]*dirState{}, emit: emit, count: map[RuleID]int64{}}
}

// Counts returns the number of findings per rule so far.
func (l *Checker) Counts() map[RuleID]int64 { return l.count }

// Total returns the number of findings so far.
func (l *Checker) Total() int64 {
	var n int64
	for _, v := range l.count {
		n += v
	}
	return n
}

func (l *Checker) report(p *flow.Packet, d *flow.Dir, id RuleID, format string, a ...any) {
	l.reportAt(place(p, d), id, format, a...)
}

// where is the position of an offending packet.
type where struct {
	frame  int
	t      float64
	dir    *flow.Dir
	stream *flow.Dir
	u      int64
}

// place locates p for a finding: frame, time, direction, and its place on
// the sequence graph of its request stream.
func place(p *flow.Packet, d *flow.Dir) where {
	w := where{frame: p.Frame, t: p.Time.Seconds(), dir: d}
	if d == nil || p.BTH == nil {
		return w
	}
	s := d
	if p.Responder() {
		s = d.Partner()
	} else if !p.Requester() {
		return w
	}
	if s != nil {
		if u, ok := s.RequestU(p.PSN()); ok {
			w.stream, w.u = s, u
		}
	}
	return w
}

func (l *Checker) reportAt(w where, id RuleID, format string, a ...any) {
	l.count[id]++
	f := Finding{Frame: w.frame, Time: w.t, Rule: id, Message: fmt.Sprintf(format, a...), Dir: w.dir, Stream: w.stream, U: w.u}
	if r := ruleByID(id); r != nil {
		f.Cite, f.Severity = r.Cite, r.Severity
	}
	if l.emit != nil {
		l.emit(f)
	}
}

func (l *Checker) state(d *flow.Dir) *dirState {
	if d == nil {
		return nil
	}
	s := l.dirs[d]
	if s == nil {
		s = &dirState{}
		l.dirs[d] = s
	}
	return s
}

// Check checks one packet; d is its direction from the Analyzer (nil when
// the Analyzer did not place it, then only per-packet rules run).
func (l *Checker) Check(p *flow.Packet, d *flow.Dir) {
	if p.DstPort != rocev2.UDPPort {
		l.report(p, d, RuleUDPPort, "UDP destination port %d, not 4791 (source port %d)", p.DstPort, p.SrcPort)
	}
	if p.ICRC == capture.ICRCBad {
		l.report(p, d, RuleICRC, "ICRC mismatch (%s)", icrcDetail(p))
	}
	h := p.BTH
	if h == nil {
		return
	}
	if v := h.TVer(); v != 0 {
		l.report(p, d, RuleTVer, "BTH TVer %d, not 0", v)
	}
	if p.Problems&flow.ProblemUnknownOp != 0 {
		l.report(p, d, RuleOpcode, "opcode 0x%02x is reserved or unknown", uint8(p.Opcode))
		return
	}
	l.checkReserved(p, d)
	l.checkPad(p, d)
	s := l.state(d)
	if s == nil {
		return
	}
	l.checkPKey(p, d, s)
	l.checkFabric(p, d, s)
	if !p.CNP() {
		t := p.Opcode.Transport()
		if !s.classOK {
			s.class, s.classOK = t, true
		} else if t != s.class {
			l.report(p, d, RuleOpcode, "%s opcode on a QP that carried %s opcodes", p.Opcode, s.class)
		}
	}
	l.flushMTU(d, s)
	switch {
	case p.Requester():
		l.checkRequest(p, d, s)
	case p.Responder():
		l.checkResponse(p, d, s)
	}
}

func icrcDetail(p *flow.Packet) string {
	t := p.Transport
	if len(t) < 4 {
		return "no ICRC"
	}
	return fmt.Sprintf("wire %02x%02x%02x%02x", t[len(t)-4], t[len(t)-3], t[len(t)-2], t[len(t)-1])
}

func (l *Checker) checkReserved(p *flow.Packet, d *flow.Dir) {
	h := p.BTH
	if v := h.Resv7(); v != 0 {
		l.report(p, d, RuleReserved, "BTH Resv7 = 0x%02x, not 0", v)
	}
	if v := h.Resv6(); v != 0 {
		l.report(p, d, RuleReserved, "BTH Resv6 = 0x%02x, not 0", v)
	}
	if p.DETH != nil && p.DETH.Reserved() != 0 {
		l.report(p, d, RuleReserved, "DETH reserved byte = 0x%02x, not 0", p.DETH.Reserved())
	}
	if p.CNP() && len(p.Transport) >= bth.Size+bth.CNPPadSize {
		for _, b := range p.Transport[bth.Size : bth.Size+bth.CNPPadSize] {
			if b != 0 {
				l.report(p, d, RuleReserved, "CNP reserved bytes not 0")
				break
			}
		}
	}
}

func (l *Checker) checkPad(p *flow.Packet, d *flow.Dir) {
	pad := p.BTH.PadCount()
	op := p.Opcode
	switch {
	case p.Problems&flow.ProblemPad != 0:
		l.report(p, d, RulePad, "pad count %d exceeds the %d bytes after the headers", pad, max(p.PayloadLen, 0))
	case p.Problems&flow.ProblemTooShort != 0:
		l.report(p, d, RulePad, "UDP payload of %d bytes cannot hold the %s headers and an ICRC", p.TransportLen, op)
	case p.TransportLen%4 != 0:
		l.report(p, d, RulePad, "UDP payload of %d bytes is not a multiple of 4: pad count %d does not align the %d-byte payload", p.TransportLen, pad, p.PayloadLen)
	case pad != 0 && !op.HasPayload():
		l.report(p, d, RulePad, "pad count %d on %s, which carries no payload", pad, op)
	case pad != 0 && (op.IsFirst() || op.IsMiddle()):
		l.report(p, d, RulePad, "pad count %d on %s, which carries a full MTU", pad, op)
	}
}

func (l *Checker) checkPKey(p *flow.Packet, d *flow.Dir, s *dirState) {
	k := p.BTH.PKey()
	if k&0x7fff == 0 {
		l.report(p, d, RulePKey, "invalid P_Key 0x%04x (partition 0)", k)
		return
	}
	if !s.pkeyOK {
		s.pkey, s.pkeyOK = k, true
		if e := d.Partner(); e != nil {
			if ps := l.dirs[e]; ps != nil && ps.pkeyOK && ps.pkey&0x7fff != k&0x7fff {
				l.report(p, d, RulePKey, "P_Key 0x%04x, but the other direction uses 0x%04x", k, ps.pkey)
			}
		}
		return
	}
	if k&0x7fff != s.pkey&0x7fff {
		l.report(p, d, RulePKey, "P_Key 0x%04x, but this QP's packets carry 0x%04x", k, s.pkey)
	}
}

// family is the message family of an opcode for the sequence rule.
func family(op bth.Opcode) bth.HeaderMask {
	return op.Mask() & (bth.MaskSend | bth.MaskWrite | bth.MaskRead | bth.MaskAtomic | bth.MaskFlush | bth.MaskAtomicWrite)
}

// open reports an opcode that leaves a message open (FIRST or MIDDLE).
func open(op bth.Opcode) bool { return op.IsFirst() || op.IsMiddle() }

func (l *Checker) checkRequest(p *flow.Packet, d *flow.Dir, s *dirState) {
	op := p.Opcode
	psn := p.PSN()
	rc := op.Transport() == bth.TransportRC
	ud := op.Transport() == bth.TransportUD
	mtu := d.Conn().MTU()

	if rc && (op.IsLast() || op.IsOnly()) && !p.BTH.AckReq() {
		l.report(p, d, RuleAckReq, "%s (end of message) without AckReq", op)
	}
	if !ud {
		l.checkSize(p, d, s, mtu)
	}
	// A request shows the capture had missed requests that earlier
	// responses acknowledged: those responses were fine.
	if e := d.Partner(); e != nil {
		if ps := l.dirs[e]; ps != nil && len(ps.ahead) > 0 {
			l.resolveAhead(ps, psn)
		}
	}
	if ud {
		return
	}

	// Opcode sequence, by PSN: the packet before this one in the PSN space
	// decides what may follow, so Go-Back-N resends replay the same checks.
	ok := true
	if prev := s.reqOps[(psn-1)&(ringSize-1)]; prev.ok && prev.psn == psn.Add(bth.PSNMask) {
		switch {
		case open(prev.op) && !(op.IsMiddle() || op.IsLast()):
			l.report(p, d, RuleOpSeq, "%s at PSN %d while %s (frame %d) left a message open: expected its MIDDLE or LAST", op, psn, prev.op, prev.frame)
			ok = false
		case open(prev.op) && family(prev.op) != family(op):
			l.report(p, d, RuleOpSeq, "%s at PSN %d interleaved into the %s message of frame %d", op, psn, prev.op, prev.frame)
			ok = false
		case !open(prev.op) && (op.IsMiddle() || op.IsLast()):
			l.report(p, d, RuleOpSeq, "%s at PSN %d without a FIRST: the previous PSN carried %s (frame %d)", op, psn, prev.op, prev.frame)
			ok = false
		}
	}
	span := int64(1)
	if op.Mask()&bth.MaskRead != 0 && p.RETH != nil {
		if mtu != 0 {
			span = flow.ReadSpan(p.RETH.DMALength(), mtu)
		}
		s.reads[psn&(ringSize-1)] = readReq{ok: true, psn: psn, length: p.RETH.DMALength(), frame: p.Frame}
	}
	if ok {
		for i := range min(span, ringSize) {
			q := psn.Add(uint32(i))
			s.reqOps[q&(ringSize-1)] = opRec{ok: true, psn: q, op: op, frame: p.Frame}
		}
	} else {
		s.reqOps[psn&(ringSize-1)] = opRec{}
	}

	// RETH length = sum of the WRITE's payloads, checked on messages seen
	// whole and in order.
	w := &s.write
	pl := p.PayloadLen
	switch {
	case op.Mask()&bth.MaskWrite == 0:
		w.on = false
	case op.IsOnly():
		w.on = false
		if p.RETH != nil && pl >= 0 && int64(pl) != int64(p.RETH.DMALength()) {
			l.report(p, d, RuleRETHLen, "%s carries %d bytes, its RETH DMA length is %d", op, pl, p.RETH.DMALength())
		}
	case op.IsFirst():
		w.on = p.RETH != nil && pl >= 0
		if w.on {
			w.next, w.length, w.sum, w.frame = psn.Next(), p.RETH.DMALength(), int64(pl), p.Frame
		}
	case !w.on || psn != w.next || pl < 0:
		w.on = false
	default:
		w.sum += int64(pl)
		w.next = psn.Next()
		if op.IsLast() {
			w.on = false
			if w.sum != int64(w.length) {
				l.report(p, d, RuleRETHLen, "RDMA WRITE of frame %d: RETH DMA length %d, but its packets carry %d bytes", w.frame, w.length, w.sum)
			}
		}
	}
}

// checkSize is the MTU rule for a packet with payload (RC/UC requests and
// READ responses).
func (l *Checker) checkSize(p *flow.Packet, d *flow.Dir, s *dirState, mtu int) {
	op := p.Opcode
	pl := p.PayloadLen
	if !op.HasPayload() || pl < 0 || p.Problems&flow.ProblemPad != 0 {
		return
	}
	if mtu == 0 {
		switch {
		case open(op) && !validPathMTU(pl):
			l.report(p, d, RuleMTU, "%s carries %d bytes, which is no path MTU (256, 512, 1024, 2048, 4096)", op, pl)
		case pl > 4096:
			l.report(p, d, RuleMTU, "%s carries %d bytes, more than the largest path MTU (4096)", op, pl)
		case !open(op) && (pl > 256 || op.IsLast()):
			if len(s.pending) == maxPendingMTU {
				s.pending = s.pending[1:]
			}
			s.pending = append(s.pending, pendMTU{at: place(p, d), op: op, payload: pl})
		}
		return
	}
	if msg := sizeError(op, pl, mtu); msg != "" {
		l.report(p, d, RuleMTU, "%s", msg)
	}
}

func sizeError(op bth.Opcode, pl, mtu int) string {
	switch {
	case open(op) && pl != mtu:
		return fmt.Sprintf("%s carries %d bytes, not the path MTU %d", op, pl, mtu)
	case op.IsLast() && (pl == 0 || pl > mtu):
		return fmt.Sprintf("%s carries %d bytes, not 1..%d (path MTU)", op, pl, mtu)
	case op.IsOnly() && pl > mtu:
		return fmt.Sprintf("%s carries %d bytes, more than the path MTU %d", op, pl, mtu)
	}
	return ""
}

func validPathMTU(n int) bool {
	switch n {
	case 256, 512, 1024, 2048, 4096:
		return true
	}
	return false
}

// flushMTU checks the packets that waited for the path MTU.
func (l *Checker) flushMTU(d *flow.Dir, s *dirState) {
	if len(s.pending) == 0 {
		return
	}
	mtu := d.Conn().MTU()
	if mtu == 0 {
		return
	}
	for _, q := range s.pending {
		if msg := sizeError(q.op, q.payload, mtu); msg != "" {
			l.reportAt(q.at, RuleMTU, "%s", msg)
		}
	}
	s.pending = s.pending[:0]
}

func (l *Checker) checkResponse(p *flow.Packet, d *flow.Dir, s *dirState) {
	op := p.Opcode
	psn := p.PSN()
	if a := p.AETH; a != nil {
		syn := a.Syndrome()
		switch {
		case syn.Reserved() != 0:
			l.report(p, d, RuleSyndrome, "AETH syndrome 0x%02x has the reserved bit 7 set", uint8(syn))
		case syn.Kind() == aeth.KindReserved:
			l.report(p, d, RuleSyndrome, "AETH syndrome 0x%02x is of the reserved type 10", uint8(syn))
		case syn.IsNAK() && syn.Value() > 3:
			l.report(p, d, RuleSyndrome, "AETH syndrome 0x%02x is a reserved NAK code (%d) on %s", uint8(syn), syn.Value(), op.Transport())
		case op != bth.RCAcknowledge && !syn.IsACK():
			l.report(p, d, RuleSyndrome, "%s with syndrome %s: READ responses and ATOMIC ACKs must carry an ACK", op, syn)
		}
		if s.msnOK && int32(uint32(a.MSN()-s.msn)<<8) < 0 {
			l.report(p, d, RuleMSN, "MSN %d after MSN %d", a.MSN(), s.msn)
		} else {
			s.msn, s.msnOK = a.MSN(), true
		}
	}
	e := d.Partner()
	var ps *dirState
	if e != nil {
		ps = l.dirs[e]
		if hi, ok := e.HighestRequestPSN(); ok && psn.After(hi) {
			what := "response"
			if op == bth.RCAcknowledge {
				what = "ACK"
				if p.AETH != nil && !p.AETH.Syndrome().IsACK() {
					what = "NAK"
				}
			}
			s.ahead = append(s.ahead, aheadResp{psn: psn, at: place(p, d), hi: hi, what: what})
			if len(s.ahead) > maxPendingMTU {
				l.flushAhead(s.ahead[:1])
				s.ahead = s.ahead[1:]
			}
		}
	}
	if op.Mask()&bth.MaskRead == 0 {
		return
	}
	l.checkSize(p, d, s, d.Conn().MTU())
	// READ responses: sequence by PSN, and the count against the request.
	var req readReq
	if ps != nil {
		if r := ps.reads[psn&(ringSize-1)]; r.ok && r.psn == psn {
			req = r
		}
	}
	ok := true
	if prev := s.respOps[(psn-1)&(ringSize-1)]; prev.ok && prev.psn == psn.Add(bth.PSNMask) && !req.ok {
		switch {
		case open(prev.op) && !(op.IsMiddle() || op.IsLast()):
			l.report(p, d, RuleOpSeq, "%s at PSN %d while %s (frame %d) left a READ response open", op, psn, prev.op, prev.frame)
			ok = false
		case !open(prev.op) && (op.IsMiddle() || op.IsLast()):
			l.report(p, d, RuleOpSeq, "%s at PSN %d without a FIRST: the previous PSN carried %s (frame %d)", op, psn, prev.op, prev.frame)
			ok = false
		}
	}
	if ok {
		s.respOps[psn&(ringSize-1)] = opRec{ok: true, psn: psn, op: op, frame: p.Frame}
	} else {
		s.respOps[psn&(ringSize-1)] = opRec{}
	}
	run := &s.run
	pl := p.PayloadLen
	if req.ok && (op.IsFirst() || op.IsOnly() || !run.on || psn != run.next) {
		// A response run starts at a READ request's PSN (a replay may start
		// with MIDDLE or LAST, rxe_resp.c read_reply).
		run.on, run.start, run.next, run.length, run.sum, run.count, run.first, run.frame = true, psn, psn, req.length, 0, 0, 0, req.frame
		if op.IsFirst() {
			run.first = pl
		}
	}
	if !run.on || psn != run.next || pl < 0 {
		run.on = false
		return
	}
	run.sum += int64(pl)
	run.count++
	run.next = psn.Next()
	if !(op.IsLast() || op.IsOnly()) {
		return
	}
	run.on = false
	mtu := d.Conn().MTU()
	if mtu == 0 {
		mtu = run.first
	}
	want := int64(1)
	if mtu > 0 {
		want = flow.ReadSpan(run.length, mtu)
	}
	if run.count != want || run.sum != int64(run.length) {
		l.report(p, d, RuleReadRespCount, "READ of %d bytes at PSN %d (frame %d) answered by %d packets with %d bytes; expected %d packets",
			run.length, run.start, run.frame, run.count, run.sum, want)
	}
}

// resolveAhead settles the responses that were ahead of the requests, now
// that a request with PSN psn came: one that psn passes shows that the
// capture missed requests, the others stay pending.
func (l *Checker) resolveAhead(s *dirState, psn bth.PSN) {
	k := 0
	for _, a := range s.ahead {
		if psn.After(a.psn) {
			continue // the requester had gone past it: the capture missed requests
		}
		if !psn.After(a.hi) {
			s.ahead[k] = a // not decided yet
			k++
			continue
		}
		// The requester's next PSN after the response is not past the
		// PSN the response named: it named a PSN not yet sent.
		l.flushAhead([]aheadResp{a})
	}
	s.ahead = s.ahead[:k]
}

func (l *Checker) flushAhead(as []aheadResp) {
	for _, a := range as {
		l.reportAt(a.at, RuleAckWindow, "%s for PSN %d, ahead of the highest request PSN sent (%d)", a.what, a.psn, a.hi)
	}
}

// Finish reports what waited for evidence that never came: responses
// ahead of every request seen. Then it runs the rules that need the whole
// capture: ECMP-SHARED-TUPLE and, after SetPauses, PFC-PRIORITY. It sets
// Conn in nothing (findings were emitted already); use
// Finding.Dir.Conn().ID after the Analyzer's Result for that.
func (l *Checker) Finish() {
	for _, s := range l.dirs {
		l.flushAhead(s.ahead)
		s.ahead = nil
	}
	l.finishSharedTuples()
	l.finishPFC()
}

// Lint runs the flow analysis and the linter over a whole capture read
// from src and returns the findings (all of them: for captures with very
// many findings use New and stream them) and the flows. A read error
// ends the capture: what came before it is linted, and the error is
// returned with the findings and the flows (and named in
// Result.Capture.Error), as flow.Analyze does. src stays the caller's to
// close.
func Lint(src capture.Source) ([]Finding, *flow.Result, error) {
	sc := flow.NewScanner(src)
	an := flow.NewAnalyzer(flow.Config{})
	var out []Finding
	l := New(func(f Finding) { out = append(out, f) })
	for {
		p, ok := sc.Next()
		if !ok {
			break
		}
		l.Check(p, an.Add(p))
	}
	st := sc.Stats()
	l.SetPauses(st.Pauses)
	l.Finish()
	res := an.Result(st)
	SetConns(out)
	return out, res, sc.Err()
}

// SetConns fills Finding.Conn from Finding.Dir; call it after the
// Analyzer's Result numbered the connections.
func SetConns(fs []Finding) {
	for i := range fs {
		if d := fs[i].Dir; d != nil && d.Conn() != nil {
			fs[i].Conn = d.Conn().ID
		}
	}
}
