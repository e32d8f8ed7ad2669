package qp_test

// Fuzz targets of doc/matrix.md §3, matrix E1: FuzzResponder feeds a live RC QP
// with registered regions a byte stream cut into packets; FuzzRequesterAck
// feeds a requester with outstanding WRs of every kind arbitrary ACK, NAK,
// READ response and ATOMIC ACK streams. Both check, besides "no panic"
// (no wire input may reach a panic):
//   - the QP never leaves ERR once there, and moves only along the rules;
//   - NextPacket terminates and every packet it returns parses and is
//     bounded by MaxPacketLen; the responder's output stays bounded;
//   - every WR completes at most once, in post order, flushes after the
//     first error, and once the QP is moved to ERR every WR has its CQE
//     (testutil.Oracle);
//   - memory without the right (or in another PD, or deregistered) never
//     changes.
//
// Input format: a stream of chunks, each starting with a control byte whose
// low bits select the kind (raw bytes, a packet built from fuzzed fields, a
// control action); missing bytes read as zero. The seeds are valid traffic
// plus the wire-reachable reproducers of §2.3.

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// fzReader reads the fuzz input; past the end it reads zeros.
type fzReader struct{ b []byte }

func (r *fzReader) more() bool { return len(r.b) > 0 }

func (r *fzReader) u8() uint8 {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *fzReader) u16() uint16 { return uint16(r.u8())<<8 | uint16(r.u8()) }

func (r *fzReader) u32() uint32 { return uint32(r.u16())<<16 | uint32(r.u16()) }

func (r *fzReader) u64() uint64 { return uint64(r.u32())<<32 | uint64(r.u32()) }

// bytes returns up to n bytes (fewer at the end of the input).
func (r *fzReader) bytes(n int) []byte {
	n = min(n, len(r.b))
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// fzEnc builds fuzz inputs for the seeds.
type fzEnc struct{ b []byte }

func (e *fzEnc) u8(v ...uint8) *fzEnc { e.b = append(e.b, v...); return e }
func (e *fzEnc) u16(v uint16) *fzEnc  { e.b = binary.BigEndian.AppendUint16(e.b, v); return e }
func (e *fzEnc) u32(v uint32) *fzEnc  { e.b = binary.BigEndian.AppendUint32(e.b, v); return e }

const (
	fzPeerQPN  = bth.QPN(0x11)
	fzQPN      = bth.QPN(0x22)
	fzFirstPSN = bth.PSN(0x100)
	// fzMaxSteps bounds the chunks of one input, so one exec stays short.
	fzMaxSteps = 256
	// fzOutputQueue mirrors the responder's reply queue bound (qp
	// outputQueueLen): the replies pending at any time.
	fzOutputQueue = 1024
)

// fzQP is a QP with its own table and CQs, moved to RTS towards a peer that
// exists only as a QPN.
type fzQP struct {
	t   *testing.T
	tbl *mr.Table
	pd  *mr.PD
	scq *cq.CQ
	rcq *cq.CQ
	q   *qp.QP
	mtu int
	buf []byte
	in  []byte
	pkt wire.Packet
	now time.Time
	typ qp.Type
}

// fzQKey is the Q_Key of FuzzResponder's UD QP.
const fzQKey = 0x1234567

// fzIP is the IP header FuzzResponder's UD QP gets with each packet.
var fzIP = qp.IPInfo{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), TTL: 64, ID: 7}

func newFzQP(t *testing.T, mtu qp.MTU, access mr.AccessFlags, maxDestRdAtomic uint8, sqPSN bth.PSN, retry uint8) *fzQP {
	return newFzTypedQP(t, qp.TypeRC, mtu, access, maxDestRdAtomic, sqPSN, retry)
}

// newFzTypedQP is newFzQP for a QP of type typ: UC and UD QPs take only
// their own transition attributes (UD: Q_Key fzQKey, port MTU mtu).
func newFzTypedQP(t *testing.T, typ qp.Type, mtu qp.MTU, access mr.AccessFlags, maxDestRdAtomic uint8, sqPSN bth.PSN, retry uint8) *fzQP {
	t.Helper()
	tbl, err := mr.NewTable(mr.TableConfig{Rand: rand.NewChaCha8([32]byte{1})})
	if err != nil {
		t.Fatal(err)
	}
	scq, _ := cq.New(cq.Config{Capacity: 1024})
	rcq, _ := cq.New(cq.Config{Capacity: 1024})
	pd := tbl.AllocPD()
	q, err := qp.New(qp.Config{QPN: fzQPN, Type: typ, MRs: tbl, PD: pd, SendCQ: scq, RecvCQ: rcq, MaxSendWR: 256, MaxRecvWR: 256,
		PortMTU: mtu})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	z := &fzQP{t: t, tbl: tbl, pd: pd, scq: scq, rcq: rcq, q: q, mtu: mtu.Bytes(),
		buf: make([]byte, qp.MaxPacketLen(qp.MTU4096)), in: make([]byte, 8192), now: testutil.Epoch(), typ: typ}
	switch typ {
	case qp.TypeUD:
		must(q.Modify(&qp.Attr{State: qp.StateInit, QKey: fzQKey}, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrQKey))
		must(q.Modify(&qp.Attr{State: qp.StateRTR}, qp.AttrState))
		must(q.Modify(&qp.Attr{State: qp.StateRTS, SQPSN: sqPSN}, qp.AttrState|qp.AttrSQPSN))
		return z
	case qp.TypeUC:
		must(q.Modify(&qp.Attr{State: qp.StateInit, AccessFlags: access},
			qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags))
		must(q.Modify(&qp.Attr{State: qp.StateRTR, PathMTU: mtu, DestQPN: fzPeerQPN, RQPSN: fzFirstPSN},
			qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN))
		must(q.Modify(&qp.Attr{State: qp.StateRTS, SQPSN: sqPSN}, qp.AttrState|qp.AttrSQPSN))
		return z
	}
	must(q.Modify(&qp.Attr{State: qp.StateInit, AccessFlags: access},
		qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags))
	must(q.Modify(&qp.Attr{State: qp.StateRTR, PathMTU: mtu, DestQPN: fzPeerQPN, RQPSN: fzFirstPSN,
		MaxDestRdAtomic: maxDestRdAtomic, MinRNRTimer: 12},
		qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer))
	must(q.Modify(&qp.Attr{State: qp.StateRTS, SQPSN: sqPSN, Timeout: 8, RetryCnt: retry, RNRRetry: retry, MaxRdAtomic: 4},
		qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic))
	return z
}

// reg registers buf at a fixed IOVA in pd (the QP's if nil).
func (z *fzQP) reg(buf []byte, iova uint64, acc mr.AccessFlags, pd *mr.PD) *mr.Region {
	if pd == nil {
		pd = z.pd
	}
	r, err := z.tbl.Register(pd, mr.RegisterConfig{Buf: buf, IOVA: iova, Access: acc})
	if err != nil {
		z.t.Fatal(err)
	}
	return r
}

// deliver parses b as the device would and hands it to the QP; it reports
// whether the packet reached the QP.
func (z *fzQP) deliver(b []byte) bool {
	if z.pkt.Parse(b) != nil {
		return false
	}
	z.q.HandlePacketIP(z.now, &z.pkt, &fzIP)
	return true
}

// build builds f with a payload of n bytes of fill into z.in. A payload on
// an opcode that takes none is dropped.
func (z *fzQP) build(f *wire.Fields, n int, fill byte) []byte {
	f.BTH.PKey, f.BTH.DestQP = 0xffff, fzQPN
	if !f.BTH.Opcode.HasPayload() {
		n = 0
	}
	m, pl, err := wire.BuildHeader(z.in, f, n)
	if err != nil {
		return nil
	}
	for i := range pl {
		pl[i] = fill + byte(i)
	}
	return z.in[:m]
}

// drain pulls packets until NextPacket has none, checking each; it returns
// how many came and calls fn on each parsed packet. A QP that keeps
// producing beyond limit is a failure: NextPacket must terminate.
func (z *fzQP) drain(limit int, fn func(p *wire.Packet)) int {
	var p wire.Packet
	for i := 0; ; i++ {
		n, ok := z.q.NextPacket(z.now, z.buf)
		if !ok {
			return i
		}
		if i >= limit {
			z.t.Fatalf("NextPacket produced more than %d packets in one drain", limit)
		}
		if n <= 0 || n > qp.MaxPacketLen(mtuOf(z.mtu)) {
			z.t.Fatalf("NextPacket returned length %d (MTU %d)", n, z.mtu)
		}
		if err := p.Parse(z.buf[:n]); err != nil {
			z.t.Fatalf("NextPacket built an unparsable packet: %v (% x)", err, z.buf[:min(n, 64)])
		}
		if p.BTH.DestQP() != fzPeerQPN || p.BTH.PKey() != 0xffff {
			z.t.Fatalf("packet to QPN %v P_Key %#x", p.BTH.DestQP(), p.BTH.PKey())
		}
		if len(p.Payload) > z.mtu {
			z.t.Fatalf("%v payload %d > MTU %d", p.Opcode(), len(p.Payload), z.mtu)
		}
		if fn != nil {
			fn(&p)
		}
	}
}

func mtuOf(n int) qp.MTU {
	m, _ := qp.MTUFromBytes(n)
	return m
}

// checkState fails if the QP left ERR or is in a state no packet can lead
// to, and returns the state.
func (z *fzQP) checkState(prev qp.State) qp.State {
	st := z.q.State()
	if prev == qp.StateErr && st != qp.StateErr {
		z.t.Fatalf("QP left ERR for %v", st)
	}
	if st != qp.StateRTS && st != qp.StateErr {
		z.t.Fatalf("QP in %v", st)
	}
	return st
}

// pollIntoTyped is pollInto for a QP of type typ. A UD receive that
// completes with LOC_LEN_ERR (no room for the GRH and the message) leaves
// the QP in its state and flushes nothing, so the oracle, which expects
// flushes after an error, records it as an ordinary completion.
func pollIntoTyped(t *testing.T, c *cq.CQ, o *testutil.Oracle, name string, typ qp.Type) int {
	if typ != qp.TypeUD {
		return pollInto(t, c, o, name)
	}
	var buf [64]cq.Completion
	total := 0
	for {
		n := c.Poll(buf[:])
		if n == 0 {
			return total
		}
		for _, w := range buf[:n] {
			if w.QPN != uint32(fzQPN) {
				t.Fatalf("completion with QPN %#x", w.QPN)
			}
			st := int(w.Status)
			if w.Status == cq.StatusLocLenErr {
				st = int(cq.StatusSuccess)
			}
			if w.Status == cq.StatusSuccess && (w.Flags&cq.FlagGRH == 0 || w.SrcQP != uint32(fzPeerQPN) || w.ByteLen < qp.GRHLen) {
				t.Fatalf("UD completion without GRH, SrcQP or GRH length: %+v", w)
			}
			o.Complete(name, w.WRID, st, w.ByteLen)
		}
		total += n
	}
}

// pollInto records the completions of c in o under queue name.
func pollInto(t *testing.T, c *cq.CQ, o *testutil.Oracle, name string) int {
	var buf [64]cq.Completion
	total := 0
	for {
		n := c.Poll(buf[:])
		if n == 0 {
			return total
		}
		for _, w := range buf[:n] {
			if w.QPN != uint32(fzQPN) {
				t.Fatalf("completion with QPN %#x", w.QPN)
			}
			o.Complete(name, w.WRID, int(w.Status), w.ByteLen)
		}
		total += n
	}
}

// Responder regions, at fixed IOVAs so inputs stay meaningful.
const (
	fzIOVAW    = 0x10000 // every remote right
	fzIOVAR    = 0x20000 // RemoteRead only
	fzIOVAP    = 0x30000 // LocalWrite only: no remote right
	fzIOVAO    = 0x40000 // every right, another PD
	fzIOVAD    = 0x50000 // deregistered
	fzIOVAV    = 0x60000 // receive buffers
	fzIOVATop  = ^uint64(0) - 4095
	fzRecvSlot = 4096
)

// fzRespOps are the opcodes near-valid packets use: every RC request, the
// unimplemented ones, responses, and a UC and a CNP for good measure.
var fzRespOps = []bth.Opcode{
	bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLast, bth.RCSendLastWithImmediate,
	bth.RCSendOnly, bth.RCSendOnlyWithImmediate, bth.RCRDMAWriteFirst, bth.RCRDMAWriteMiddle,
	bth.RCRDMAWriteLast, bth.RCRDMAWriteLastWithImmediate, bth.RCRDMAWriteOnly,
	bth.RCRDMAWriteOnlyWithImmediate, bth.RCRDMAReadRequest, bth.RCCompareSwap, bth.RCFetchAdd,
	bth.RCSendLastWithInvalidate, bth.RCSendOnlyWithInvalidate, bth.RCFlush, bth.RCAtomicWrite,
	bth.RCAcknowledge, bth.RCAtomicAcknowledge, bth.RCRDMAReadResponseFirst,
	bth.RCRDMAReadResponseMiddle, bth.RCRDMAReadResponseLast, bth.RCRDMAReadResponseOnly,
	bth.UCSendOnly, bth.CNP,
}

func fzRespOpIndex(op bth.Opcode) uint8 {
	for i, o := range fzRespOps {
		if o == op {
			return uint8(i)
		}
	}
	panic("opcode not in fzRespOps")
}

// Responder chunk kinds (control byte & 3).
const (
	fzRaw     = 0 // u16 length, bytes; bit 2: patch BTH to this QP; bit 3: PSN = guess
	fzNear    = 1 // a packet from fuzzed fields, then drain
	fzControl = 2 // bits 2–4: post receive variants, time, drain
	fzNearND  = 3 // as fzNear without draining afterwards
)

// Near-valid control bits.
const (
	fzAckReq  = 1 << 2
	fzFarPSN  = 1 << 3
	fzSE      = 1 << 4
	fzNatural = 1 << 5 // natural payload length for the opcode
	fzBadPad  = 1 << 6 // rewrite the pad count after building
	fzResv    = 1 << 7 // set FECN/BECN, MigReq and reserved bits
)

func FuzzResponder(f *testing.F) {
	for _, s := range fzResponderSeeds() {
		f.Add(s)
	}
	f.Fuzz(fzResponder)
}

func fzResponder(t *testing.T, data []byte) {
	r := &fzReader{b: data}
	cfg := r.u8()
	mtu := []qp.MTU{qp.MTU256, qp.MTU512, qp.MTU1024, qp.MTU4096}[cfg&3]
	access := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic
	if cfg&4 != 0 {
		access &^= mr.RemoteAtomic | mr.RemoteRead
	}
	maxDest := uint8(4)
	if cfg&8 != 0 {
		maxDest = 0
	}
	// Bits 4-5: the QP type (RC, UC, UD, RC), so UC and UD opcodes reach
	// a QP of their own transport.
	typ := []qp.Type{qp.TypeRC, qp.TypeUC, qp.TypeUD, qp.TypeRC}[cfg>>4&3]
	z := newFzTypedQP(t, typ, mtu, access, maxDest, 0x500, 7)

	// Regions. Those the peer may not change are kept and compared at the
	// end (P, R, O and D's buffer after its deregistration).
	w := z.reg(make([]byte, 8192), fzIOVAW, cAllRemote, nil)
	rMem := testutil.Pattern(1, 4096)
	rr := z.reg(rMem, fzIOVAR, mr.RemoteRead, nil)
	pMem := testutil.Pattern(2, 4096)
	pr := z.reg(pMem, fzIOVAP, mr.LocalWrite, nil)
	oMem := testutil.Pattern(3, 4096)
	or := z.reg(oMem, fzIOVAO, cAllRemote, z.tbl.AllocPD())
	dMem := make([]byte, 4096)
	dr := z.reg(dMem, fzIOVAD, cAllRemote, nil)
	if err := z.tbl.Deregister(dr); err != nil {
		t.Fatal(err)
	}
	testutil.FillPattern(dMem, 4) // the application's memory again
	dKeep := bytes.Clone(dMem)
	vr := z.reg(make([]byte, 4*fzRecvSlot), fzIOVAV, mr.LocalWrite, nil)
	top := z.reg(make([]byte, 4096), fzIOVATop, cAllRemote, nil)
	regions := []*mr.Region{w, rr, pr, or, dr, vr, top}
	keep := [][]byte{bytes.Clone(rMem), bytes.Clone(pMem), bytes.Clone(oMem)}

	o := testutil.NewOracle()
	var recvID uint64
	guess := fzFirstPSN // the responder's ePSN as far as the replies tell
	st := z.q.State()
	handled := uint64(0)
	needNAK, overflowAt := false, uint64(0)
	// Bound of one drain: every queued reply may be a READ of the largest
	// region at the smallest MTU.
	limit := fzOutputQueue*(8192/z.mtu+1) + 16

	// No amplification (matrix D3; doc/matrix.md §4 note 7): at most one ACK,
	// NAK or ATOMIC ACK per packet handed in; READ responses aside, which
	// a READ asked for. The AETH MSN and the PSN of plain ACKs never go
	// back.
	inSinceDrain, ctrl := 0, 0
	lastMSN, lastACK, seenACK := uint32(0), bth.PSN(0), false
	onOut := func(p *wire.Packet) {
		op := p.Opcode()
		if typ != qp.TypeRC {
			t.Fatalf("a %v responder sent %v: UC and UD never answer", typ, op)
		}
		if !op.IsResponse() {
			t.Fatalf("the responder sent a request %v", op)
		}
		if op.Mask()&bth.MaskRead == 0 {
			ctrl++
		}
		if p.AETH != nil {
			if msn := p.AETH.MSN(); int32((msn-lastMSN)<<8) < 0 {
				t.Fatalf("AETH MSN went back from %d to %d (%v)", lastMSN, msn, op)
			} else {
				lastMSN = msn
			}
		}
		switch {
		case op == bth.RCAcknowledge:
			syn := p.AETH.Syndrome()
			switch {
			case syn.IsACK():
				if seenACK && p.BTH.PSN().Before(lastACK) {
					t.Fatalf("ACK PSN went back from %v to %v", lastACK, p.BTH.PSN())
				}
				lastACK, seenACK = p.BTH.PSN(), true
				guess = p.BTH.PSN().Next()
			case syn == aeth.NAKPSNSequenceError:
				guess = p.BTH.PSN()
			case syn.IsNAK():
				needNAK = false
			}
		case op == bth.RCAtomicAcknowledge, op.IsLast(), op.IsOnly():
			guess = p.BTH.PSN().Next()
		}
	}
	drain := func() {
		z.drain(limit, onOut)
		if ctrl > inSinceDrain {
			t.Fatalf("%d control packets for %d packets in", ctrl, inSinceDrain)
		}
		ctrl, inSinceDrain = 0, 0
		st = z.checkState(st)
		if needNAK && z.q.Counters().Load(qp.CounterOutputOverflow) == overflowAt {
			t.Fatalf("QP moved to ERR without a NAK (class C/A errors NAK, §1.5)")
		}
		needNAK = false
	}
	afterInput := func() {
		prev := st
		st = z.checkState(st)
		// rxe's class J (a SEND with invalidate whose rkey cannot be
		// invalidated) moves to ERR with an ACK, not a NAK.
		// UC and UD never NAK (a bad receive SGL moves them to ERR silently).
		if prev != qp.StateErr && st == qp.StateErr && z.q.Counters().Load(qp.CounterRespInvalidateErr) == 0 &&
			typ == qp.TypeRC {
			needNAK, overflowAt = true, z.q.Counters().Load(qp.CounterOutputOverflow)
		}
		pollIntoTyped(t, z.rcq, o, "recv", typ)
		if z.scq.Len() != 0 {
			t.Fatalf("send completions on a QP that posted no send WR")
		}
	}

	for step := 0; r.more() && step < fzMaxSteps; step++ {
		ctl := r.u8()
		switch ctl & 3 {
		case fzRaw:
			n := int(r.u16()) % 4200
			b := append(z.in[:0], r.bytes(n)...)
			if ctl&4 != 0 && len(b) >= bth.Size {
				b[0] &= 0x1f // an RC opcode, or one of the QP's transport
				switch typ {
				case qp.TypeUC:
					b[0] |= 0x20
				case qp.TypeUD:
					b[0] = byte(bth.UDSendOnly) | b[0]&1
				}
				b[1] &= 0xf0 // TVer 0
				binary.BigEndian.PutUint16(b[2:], 0xffff)
				b[4], b[5], b[6], b[7] = 0, 0, 0, byte(fzQPN)
				if ctl&8 != 0 {
					b[9], b[10], b[11] = byte(guess>>16), byte(guess>>8), byte(guess)
				}
			}
			if z.deliver(b) {
				handled++
				inSinceDrain++
			}
			afterInput()
			drain()
		case fzNear, fzNearND:
			b := fzNearPacket(z, r, ctl, guess, regions)
			if typ != qp.TypeRC && len(b) >= bth.Size {
				// Nothing answers a UC or UD request: follow the sender's
				// PSN instead, so the next packet is in sequence.
				guess = bth.Header(b[:bth.Size]).PSN().Next()
			}
			if b != nil && z.deliver(b) {
				handled++
				inSinceDrain++
			}
			afterInput()
			if ctl&3 == fzNear {
				drain()
			}
		case fzControl:
			switch (ctl >> 2) & 7 {
			case 0, 1, 2, 3:
				recvID++
				slot := vr.IOVA() + (recvID%4)*fzRecvSlot
				var sgl []qp.SGE
				switch (ctl >> 2) & 3 {
				case 0:
					sgl = []qp.SGE{{Addr: slot, Length: fzRecvSlot, LKey: vr.LKey()}}
				case 1:
					sgl = []qp.SGE{{Addr: slot, Length: 64, LKey: mr.Key(r.u32())}}
				case 2:
					sgl = []qp.SGE{{Addr: slot, Length: 100, LKey: vr.LKey()}, {Addr: slot + 200, Length: 300, LKey: vr.LKey()}}
				}
				if err := z.q.PostRecv(&qp.RecvWR{WRID: recvID, SGL: sgl}); err == nil {
					o.Post("recv", recvID, true, testutil.AnyLen)
				}
				afterInput()
			case 4:
				z.now = z.now.Add(time.Duration(r.u8()) * 10 * time.Microsecond)
				if d, ok := z.q.Deadline(); ok && !z.now.Before(d) {
					z.q.OnTimeout(z.now)
				}
				afterInput()
			default:
				drain()
			}
		}
		if got := z.q.Counters().Load(qp.CounterRcvdPkts); got != handled {
			t.Fatalf("rcvd_pkts %d, packets handed to the QP %d", got, handled)
		}
	}
	drain()

	// Moved to ERR, every receive WR has exactly one CQE, in post order.
	if z.q.State() != qp.StateErr {
		if err := z.q.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState); err != nil {
			t.Fatal(err)
		}
	}
	z.drain(limit, nil)
	pollIntoTyped(t, z.rcq, o, "recv", typ)
	if err := o.Check(false); err != nil {
		t.Fatal(err)
	}
	if !o.Done() {
		t.Fatalf("receive WRs without a CQE after ERR: %d", o.Outstanding("recv"))
	}
	for i, m := range [][]byte{rMem, pMem, oMem} {
		if !bytes.Equal(m, keep[i]) {
			t.Fatalf("region %d without remote write access (or of another PD) changed at %d", i, testutil.FirstDiff(m, keep[i]))
		}
	}
	if !bytes.Equal(dMem, dKeep) {
		t.Fatalf("a deregistered buffer changed at %d", testutil.FirstDiff(dMem, dKeep))
	}
}

// fzNearPacket builds a packet from fuzzed fields: a known opcode, a PSN
// near the responder's, keys of the registered regions (or garbage), and
// addresses and lengths around their edges.
//
// Layout after the control byte: op, psn, key [u32 if garbage], va kind,
// va offset (u16) [u64 if raw], DMA length (u16), payload length (u16),
// fill, extra.
func fzNearPacket(z *fzQP, r *fzReader, ctl uint8, guess bth.PSN, regions []*mr.Region) []byte {
	var f wire.Fields
	op := fzTransportOp(z.typ, fzRespOps[int(r.u8())%len(fzRespOps)])
	f.BTH.Opcode = op
	d := int32(int8(r.u8()))
	if ctl&fzFarPSN != 0 {
		d *= 1 << 16
	}
	f.BTH.PSN = bth.PSN(uint32(int32(guess)+d) & bth.PSNMask)
	f.BTH.AckReq = ctl&fzAckReq != 0
	f.BTH.SolicitedEvent = ctl&fzSE != 0
	if ctl&fzResv != 0 {
		f.BTH.MigReq, f.BTH.FECN, f.BTH.BECN, f.BTH.Resv6, f.BTH.Resv7 = true, true, true, 0x3f, 0x7f
	}
	ks := int(r.u8())
	var key mr.Key
	reg := regions[0]
	if ks < len(regions) {
		reg = regions[ks]
		key = reg.RKey()
	} else if ks < 2*len(regions) {
		key = regions[ks-len(regions)].RKey() ^ mr.Key(1)<<(ks%32)
	} else {
		key = mr.Key(r.u32())
	}
	vk, off := r.u8(), uint64(r.u16())
	var va uint64
	switch vk % 6 {
	case 0:
		va = reg.IOVA() + off
	case 1:
		va = reg.IOVA() + reg.Len() - off
	case 2:
		va = reg.IOVA() - off
	case 3:
		va = 0xFFFFFFFFFFFFFFF8 + off
	case 4:
		va = off<<48 | off
	case 5:
		va = r.u64()
	}
	dl := r.u16()
	dlen := uint32(dl)
	if dl&0x8000 != 0 {
		dlen = 1<<31 + uint32(dl&0x7fff) - 0x4000
	}
	pl := int(r.u16()) % (z.mtu + 64)
	fill, extra := r.u8(), r.u8()
	if ctl&fzNatural != 0 {
		switch {
		case !op.HasPayload():
			pl = 0
		case op.IsFirst(), op.IsMiddle():
			pl = z.mtu
		case op.IsOnly():
			pl = int(min(dlen, uint32(z.mtu)))
			if op.Mask()&bth.MaskRETH == 0 {
				pl = pl % (z.mtu + 1)
			}
			if op == bth.RCAtomicWrite {
				pl = 8
			}
		case op.IsLast():
			pl = 1 + pl%z.mtu
		}
	}
	f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = va, uint32(key), dlen
	f.AtomicETH.VA, f.AtomicETH.RKey = va, uint32(key)
	f.AtomicETH.SwapData = uint64(extra) * 0x0101010101010101
	f.AtomicETH.CompareData = uint64(fill) * 0x0101010101010101
	f.ImmDt = uint32(extra) << 24
	f.IETH = uint32(key)
	f.AETH.Syndrome, f.AETH.MSN = aeth.Syndrome(extra), uint32(fill)
	f.AtomicAckETH = uint64(fill)
	f.FETH.Selectivity, f.FETH.PlacementType = extra&3, extra>>2&0xf
	f.DETH.QKey, f.DETH.SrcQP = fzQKey, uint32(fzPeerQPN)
	if extra&0x80 != 0 && fill&1 != 0 {
		f.DETH.QKey = uint32(fill) << 8 // a wrong Q_Key
	}
	b := z.build(&f, pl, fill)
	if b != nil && ctl&fzBadPad != 0 {
		bth.Header(b[:bth.Size]).SetPadCount(int(extra & 3))
	}
	return b
}

// fzTransportOp maps an RC opcode of fzRespOps to the same operation of
// a UC or UD QP's transport where one exists (UC: the SEND and WRITE
// opcodes; UD: SEND ONLY (WITH IMMEDIATE)); other opcodes stay, and are
// dropped as the wrong transport.
func fzTransportOp(typ qp.Type, op bth.Opcode) bth.Opcode {
	if op.Transport() != bth.TransportRC {
		return op
	}
	switch typ {
	case qp.TypeUC:
		if uc := bth.Opcode(0x20 | op&0x1f); op&0x1f <= 0x0b {
			return uc
		}
	case qp.TypeUD:
		switch op {
		case bth.RCSendOnly:
			return bth.UDSendOnly
		case bth.RCSendOnlyWithImmediate:
			return bth.UDSendOnlyWithImmediate
		}
	}
	return op
}

// fzResponderSeeds are valid conversations (every RC request the engine
// implements, at the expected PSNs, against the registered regions) and
// the reproducers of doc/rxe.md §9 that reach the wire.
func fzResponderSeeds() [][]byte {
	var seeds [][]byte
	near := func(e *fzEnc, ctl uint8, op bth.Opcode, dpsn int8, key uint8, vk uint8, off uint16, dlen, pl uint16) {
		e.u8(ctl, fzRespOpIndex(op), uint8(dpsn), key, vk).u16(off).u16(dlen).u16(pl).u8(0x41, 0x07)
	}
	recv := func(e *fzEnc) { e.u8(fzControl) }
	const ack = fzNear | fzAckReq

	// MTU 256 (cfg 0): a WRITE of three packets, a READ of the same bytes,
	// a SEND of two packets into a posted receive, WRITE with immediate,
	// both atomics, a READ replay and a duplicate WRITE.
	{
		e := &fzEnc{}
		e.u8(0)
		recv(e)
		recv(e)
		near(e, ack, bth.RCRDMAWriteFirst, 0, 0, 0, 0, 700, 256)
		near(e, ack, bth.RCRDMAWriteMiddle, 0, 0, 0, 0, 0, 256)
		near(e, ack, bth.RCRDMAWriteLast, 0, 0, 0, 0, 0, 188)
		near(e, ack, bth.RCRDMAReadRequest, 0, 0, 0, 0, 700, 0)
		near(e, ack, bth.RCSendFirst, 0, 0, 0, 0, 0, 256)
		near(e, ack, bth.RCSendLast, 0, 0, 0, 0, 0, 10)
		near(e, ack, bth.RCRDMAWriteOnlyWithImmediate, 0, 0, 0, 16, 16, 16)
		near(e, ack, bth.RCCompareSwap, 0, 0, 0, 64, 0, 0)
		near(e, ack, bth.RCFetchAdd, 0, 0, 0, 64, 0, 0)
		near(e, ack, bth.RCRDMAReadRequest, -8, 0, 0, 0, 700, 0) // replay
		near(e, ack, bth.RCRDMAWriteOnly, -2, 0, 0, 0, 8, 8)     // duplicate
		near(e, ack, bth.RCSendOnly, 5, 0, 0, 0, 0, 8)           // out of sequence
		seeds = append(seeds, e.b)
	}
	// MTU 1024 (cfg 2): READ of the read-only region, SEND with immediate,
	// zero-length READ and WRITE with a garbage key (matrix C9), the top region.
	{
		e := &fzEnc{}
		e.u8(2)
		recv(e)
		near(e, ack, bth.RCRDMAReadRequest, 0, 1, 0, 0, 4096, 0)
		near(e, ack, bth.RCSendOnlyWithImmediate, 0, 0, 0, 0, 0, 1000)
		e.u8(ack, fzRespOpIndex(bth.RCRDMAReadRequest), 0, 200).u32(0xdeadbeef).u8(0).u16(0).u16(0).u16(0).u8(0, 0)
		e.u8(ack, fzRespOpIndex(bth.RCRDMAWriteOnly), 0, 200).u32(0xdeadbeef).u8(0).u16(0).u16(0).u16(0).u8(0, 0)
		near(e, ack, bth.RCRDMAWriteOnly, 0, 6, 1, 8, 8, 8) // the last word below 2^64
		near(e, ack, bth.RCFetchAdd, 0, 6, 1, 8, 0, 0)
		seeds = append(seeds, e.b)
	}
	// Class C errors, one per seed (the QP is in ERR after each).
	for _, c := range []struct {
		op         bth.Opcode
		key, vk    uint8
		off        uint16
		dlen, pl   uint16
		cfg, recvs uint8
	}{
		{bth.RCRDMAWriteOnly, 1, 0, 0, 8, 8, 0, 0},                   // no RemoteWrite (matrix C1)
		{bth.RCRDMAWriteOnly, 2, 0, 0, 8, 8, 0, 0},                   // no remote right
		{bth.RCRDMAReadRequest, 3, 0, 0, 8, 0, 0, 0},                 // other PD (matrix C4)
		{bth.RCRDMAReadRequest, 4, 0, 0, 8, 0, 0, 0},                 // deregistered (matrix C5)
		{bth.RCRDMAWriteOnly, 0, 3, 0, 8, 8, 0, 0},                   // CVE-2026-98365
		{bth.RCRDMAReadRequest, 0, 1, 0, 1, 0, 0, 0},                 // one past the end (matrix C2)
		{bth.RCRDMAReadRequest, 0, 0, 0, 0x8000 | 0x4001, 0, 0, 0},   // 2^31 + 1 (matrix C3)
		{bth.RCCompareSwap, 0, 0, 4, 0, 0, 0, 0},                     // misaligned (matrix C7)
		{bth.RCAtomicWrite, 0, 0, 0, 0, 0, 0, 0},                     // upstream 1114c87
		{bth.RCSendOnly, 0, 0, 0, 0, 200, 0, 1},                      // fine at MTU 256…
		{bth.RCSendOnlyWithInvalidate, 0, 0, 0, 0, 8, 0, 1},          // rkey not invalidatable: class J
		{bth.RCRDMAReadRequest, 0, 0, 0, 8, 0, 8, 0},                 // max_dest_rd_atomic 0
		{bth.RCCompareSwap, 0, 0, 0, 0, 0, 4, 0},                     // QP without RemoteAtomic (matrix C6)
		{bth.RCRDMAWriteFirst, 0, 0, 0, 1024, 100, 0, 0},             // FIRST payload ≠ MTU (matrix C8)
		{bth.RCRDMAWriteMiddle, 0, 0, 0, 0, 256, 0, 0},               // MIDDLE without FIRST
		{bth.RCFlush, 0, 0, 0, 0, 0, 0, 0},                           // unimplemented
		{bth.RCRDMAWriteOnly, 0, 0, 0, 100, 50, 0, 0},                // payload ≠ RETH (matrix C8)
		{bth.RCSendOnly, 0, 0, 0, 0, 100, 0, 0},                      // no receive: RNR (class B)
		{bth.RCRDMAWriteOnlyWithImmediate, 0, 0, 0, 4, 4, 0, 0},      // RNR too
		{bth.RCSendFirst, 0, 0, 0, 0, 256, 0, 1},                     // a message left open
		{bth.RCRDMAWriteOnly, 8, 5, 0, 8, 8, 0, 0},                   // flipped key bit
		{bth.RCRDMAReadRequest, 6, 2, 1, 2, 0, 0, 0},                 // top region, va - 1
		{bth.RCAcknowledge, 0, 0, 0, 0, 0, 0, 0},                     // a response with nothing posted
		{bth.RCRDMAReadResponseOnly, 0, 0, 0, 0, 16, 0, 0},           // likewise
		{bth.CNP, 0, 0, 0, 0, 0, 0, 0},                               // not an RC opcode
		{bth.UCSendOnly, 0, 0, 0, 0, 8, 0, 1},                        // UC on an RC QP
		{bth.RCRDMAWriteLastWithImmediate, 0, 0, 0, 0, 8, 0, 1},      // LAST without FIRST
		{bth.RCSendLastWithImmediate, 0, 0, 0, 0, 0, 0, 1},           // empty LAST
		{bth.RCRDMAWriteOnly, 0, 0, 0, 0x8000 | 0x3000, 0, 0, 0},     // huge RETH, no data
		{bth.RCRDMAReadRequest, 0, 1, 0x2000, 0x2000, 0, 0, 0},       // off the end by a lot
		{bth.RCRDMAReadRequest, 5, 0, 0, 4096, 0, 0, 0},              // the receive region (no remote right)
		{bth.RCFetchAdd, 1, 0, 0, 0, 0, 0, 0},                        // no RemoteAtomic on the region
		{bth.RCRDMAWriteFirst, 0, 0, 0, 256, 256, 0, 0},              // FIRST of a one-packet WRITE
		{bth.RCRDMAWriteOnly, 0, 0, 0, 300, 256, 0, 0},               // ONLY of a two-packet WRITE
		{bth.RCSendOnly, 0, 0, 0, 0, 300, 0, 1},                      // > MTU
		{bth.RCAtomicAcknowledge, 0, 0, 0, 0, 0, 0, 0},               // response to nothing
		{bth.RCRDMAReadRequest, 0, 0, 0, 0x8000 | 0x4000, 0, 0, 0},   // exactly 2^31
		{bth.RCRDMAWriteOnly, 200, 0, 0, 8, 8, 0, 0},                 // garbage key
		{bth.RCCompareSwap, 0, 4, 0, 0, 0, 0, 0},                     // va = off<<48|off
		{bth.RCRDMAReadRequest, 0, 1, 0xFFFF, 0xFFFF, 0, 0, 0},       // va near the end of W
		{bth.RCRDMAWriteOnlyWithImmediate, 0, 0, 0, 0, 0, 0x0c, 0},   // (cfg 12: no RR/atomic, no res)
		{bth.RCRDMAReadRequest, 0, 0, 0, 0x100, 0, 0x0c, 0},          // likewise
		{bth.RCSendLastWithInvalidate, 0, 0, 0, 0, 8, 0, 1},          // LAST WITH INVALIDATE alone
		{bth.RCRDMAReadResponseMiddle, 0, 0, 0, 0, 256, 0, 0},        // response MIDDLE to a responder
		{bth.RCRDMAWriteMiddle, 0, 0, 0, 0, 255, 0, 0},               // not MTU
		{bth.RCRDMAWriteLast, 0, 0, 0, 0, 0, 0, 0},                   // empty LAST
		{bth.RCSendMiddle, 0, 0, 0, 0, 256, 0, 1},                    // MIDDLE without FIRST
		{bth.RCSendLast, 0, 0, 0, 0, 1, 0, 1},                        // LAST without FIRST
		{bth.RCRDMAWriteOnly, 0, 2, 1, 1, 1, 0, 0},                   // va = start − 1
		{bth.RCRDMAWriteOnly, 0, 1, 0, 1, 1, 0, 0},                   // va = end
		{bth.RCRDMAWriteOnly, 6, 3, 0, 16, 16, 0, 0},                 // top region, wraps 2^64
		{bth.RCRDMAReadRequest, 6, 5, 0, 2, 0, 0, 0},                 // raw va (zero follows)
		{bth.RCRDMAWriteOnlyWithImmediate, 0, 0, 0, 8, 8, 0, 1},      // fine
		{bth.RCSendOnlyWithImmediate, 0, 0, 0, 0, 0, 0, 2},           // fine, zero length
		{bth.RCRDMAReadRequest, 0, 0, 0, 0, 0, 0, 0},                 // zero-length READ on W
		{bth.RCCompareSwap, 6, 1, 8, 0, 0, 0, 0},                     // top word
		{bth.RCFetchAdd, 6, 1, 0, 0, 0, 0, 0},                        // one past the top: wraps
		{bth.RCRDMAWriteOnly, 5, 0, 0, 8, 8, 0, 0},                   // the receive region
		{bth.RCRDMAReadRequest, 0, 0, 0, 8192, 0, 3, 0},              // MTU 4096, two packets
		{bth.RCRDMAWriteFirst, 0, 0, 0, 8192, 4096, 3, 0},            // MTU 4096 FIRST
		{bth.RCRDMAReadRequest, 0, 0, 0, 8193, 0, 3, 0},              // one past W at MTU 4096
		{bth.RCRDMAWriteOnly, 0, 0, 0, 0, 0, 0, 0},                   // zero-length WRITE
		{bth.RCRDMAWriteOnlyWithImmediate, 0, 0, 0, 0x8000, 0, 0, 1}, // RETH just under 2^31
	} {
		e := &fzEnc{}
		e.u8(c.cfg)
		for range c.recvs {
			recv(e)
		}
		near(e, ack, c.op, 0, c.key, c.vk, c.off, c.dlen, c.pl)
		near(e, ack, bth.RCRDMAWriteOnly, 0, 0, 0, 0, 8, 8) // and the next request
		seeds = append(seeds, e.b)
	}
	// Raw reproducers: opcode 0xFF in a 48-byte packet (upstream 4c6f86d),
	// pad beyond the payload (CVE-2026-46043), a bare BTH, and a valid
	// WRITE ONLY as raw bytes.
	var buf [256]byte
	raw := func(patch uint8, b []byte) []byte {
		e := &fzEnc{}
		e.u8(0, fzRaw|patch).u16(uint16(len(b))).u8(b...)
		return e.b
	}
	ff := make([]byte, 48)
	ff[0] = 0xff
	binary.BigEndian.PutUint16(ff[2:], 0xffff)
	ff[7] = byte(fzQPN)
	seeds = append(seeds, raw(0, ff))
	var f wire.Fields
	f.BTH = bth.Fields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: fzQPN, PSN: fzFirstPSN, AckReq: true}
	n, _ := wire.Build(buf[:], &f, []byte{1, 2})
	pad := bytes.Clone(buf[:n])
	bth.Header(pad[:bth.Size]).SetPadCount(3)
	seeds = append(seeds, raw(0, pad))
	seeds = append(seeds, raw(0, buf[:bth.Size]))
	f = wire.Fields{}
	f.BTH = bth.Fields{Opcode: bth.RCRDMAWriteOnly, PKey: 0xffff, DestQP: fzQPN, PSN: fzFirstPSN, AckReq: true}
	f.RETH.VA, f.RETH.DMALength = fzIOVAW, 4
	n, _ = wire.Build(buf[:], &f, []byte{9, 9, 9, 9})
	seeds = append(seeds, raw(fzRaw|4|8, buf[:n])) // key 0: an rkey violation; patched PSN
	// UC (cfg 0x10, MTU 256): WRITE of three packets, SEND of two into a
	// receive, WRITE with immediate; then a SEND whose MIDDLE is lost (the
	// LAST is dropped) and the resync on the next ONLY, into the same WQE.
	{
		e := &fzEnc{}
		e.u8(0x10)
		recv(e)
		recv(e)
		recv(e)
		near(e, fzNear, bth.RCRDMAWriteFirst, 0, 0, 0, 0, 700, 256)
		near(e, fzNear, bth.RCRDMAWriteMiddle, 0, 0, 0, 0, 0, 256)
		near(e, fzNear, bth.RCRDMAWriteLast, 0, 0, 0, 0, 0, 188)
		near(e, fzNear, bth.RCSendFirst, 0, 0, 0, 0, 0, 256)
		near(e, fzNear, bth.RCSendLast, 0, 0, 0, 0, 0, 10)
		near(e, fzNear, bth.RCRDMAWriteOnlyWithImmediate, 0, 0, 0, 16, 16, 16)
		near(e, fzNear, bth.RCSendFirst, 0, 0, 0, 0, 0, 256)
		near(e, fzNear, bth.RCSendLast, 1, 0, 0, 0, 0, 10) // gap: dropped
		near(e, fzNear, bth.RCSendMiddle, 0, 0, 0, 0, 0, 256)
		near(e, fzNear, bth.RCSendOnly, 3, 0, 0, 0, 0, 20)     // resync
		near(e, fzNear, bth.RCRDMAWriteOnly, 0, 2, 0, 0, 8, 8) // no remote right: dropped
		near(e, fzNear, bth.RCSendMiddle, 0, 0, 0, 0, 0, 256)  // MIDDLE without FIRST
		seeds = append(seeds, e.b)
	}
	// UD (cfg 0x22, port MTU 1024): SEND and SEND with immediate, one
	// too long for its receive WR (LOC_LEN_ERR), one with a wrong Q_Key,
	// one past the MTU, one with no receive WR, PSNs anywhere.
	{
		e := &fzEnc{}
		e.u8(0x22)
		recv(e)
		recv(e)
		e.u8(fzControl | 2<<2)
		recv(e)
		near(e, fzNear, bth.RCSendOnly, 0, 0, 0, 0, 0, 100)
		near(e, fzNear, bth.RCSendOnlyWithImmediate, 40, 0, 0, 0, 0, 1000)
		near(e, fzNear, bth.RCSendOnly, -3, 0, 0, 0, 0, 1000)                                    // 400-byte WR: LOC_LEN_ERR
		e.u8(fzNear, fzRespOpIndex(bth.RCSendOnly), 0, 0, 0).u16(0).u16(0).u16(8).u8(0x41, 0x80) // wrong Q_Key
		near(e, fzNear, bth.RCSendOnly, 0, 0, 0, 0, 0, 1025)                                     // past the MTU
		near(e, fzNear, bth.RCSendOnly, 0, 0, 0, 0, 0, 0)
		near(e, fzNear, bth.RCSendOnly, 0, 0, 0, 0, 0, 5)  // no receive WR
		near(e, fzNear, bth.RCSendFirst, 0, 0, 0, 0, 0, 5) // not a UD opcode
		seeds = append(seeds, e.b)
	}
	// Flood without draining: the reply queue must stay bounded.
	{
		e := &fzEnc{}
		e.u8(0)
		for range 200 {
			near(e, fzNearND|fzAckReq, bth.RCSendOnly, 0, 0, 0, 0, 0, 8) // RNR NAK each
		}
		e.u8(fzControl | 5<<2)
		seeds = append(seeds, e.b)
	}
	return seeds
}

// FuzzRequesterAck: a requester with outstanding WRs of every kind fed
// arbitrary ACK/NAK/READ response/ATOMIC ACK streams.
func FuzzRequesterAck(f *testing.F) {
	for _, s := range fzRequesterSeeds() {
		f.Add(s)
	}
	f.Fuzz(fzRequester)
}

// fzReqOps are the response opcodes FuzzRequesterAck builds (a request and
// a CNP sneak in too).
var fzReqOps = []bth.Opcode{
	bth.RCAcknowledge, bth.RCAtomicAcknowledge, bth.RCRDMAReadResponseFirst,
	bth.RCRDMAReadResponseMiddle, bth.RCRDMAReadResponseLast, bth.RCRDMAReadResponseOnly,
	bth.RCSendOnly, bth.CNP,
}

// fzSyndromes are the syndromes a response picks from unless raw.
var fzSyndromes = []aeth.Syndrome{
	aeth.ACKUnlimited, aeth.ACK(0), aeth.RNR(1), aeth.RNR(0), aeth.NAKPSNSequenceError,
	aeth.NAKInvalidRequest, aeth.NAKRemoteAccessError, aeth.NAKRemoteOperationalError,
	aeth.NAKInvalidRDRequest, 0x40, 0x9f, 0x7f,
}

// fzReqWR is one of the WRs the requester has outstanding.
type fzReqWR struct {
	op     qp.WROpcode
	len    uint32
	flags  qp.SendFlags
	remote uint64
	lkey   uint8 // fzKeyGood, fzKeyBad or fzKeyGone
}

// Local keys of fzReqWR: the requester's region, a garbage key, and a
// region a control chunk may deregister while WRs use it.
const (
	fzKeyGood uint8 = iota
	fzKeyBad
	fzKeyGone
)

// The WRs posted at the start, in order; control chunks may post more of
// them. At MTU 256: SEND of 3 packets, unsignaled WRITE of 2, READ of 3,
// both atomics, WRITE with immediate, inline SEND, zero-length READ and
// SEND, a WRITE of 4.
var fzReqWRs = []fzReqWR{
	{qp.WRSend, 600, qp.SendSignaled, 0, 0},
	{qp.WRRDMAWrite, 300, 0, 0x1000, 0},
	{qp.WRRDMARead, 700, qp.SendSignaled, 0x2000, 0},
	{qp.WRAtomicCmpAndSwp, 8, qp.SendSignaled, 0x3000, 0},
	{qp.WRAtomicFetchAdd, 8, qp.SendSignaled | qp.SendFence, 0x3008, 0},
	{qp.WRRDMAWriteWithImm, 256, qp.SendSignaled, 0x4000, 0},
	{qp.WRSend, 16, qp.SendInline, 0, 0},
	{qp.WRRDMARead, 0, qp.SendSignaled, 0x5000, 0},
	{qp.WRSend, 0, qp.SendSignaled, 0, 0},
	{qp.WRRDMAWrite, 1000, qp.SendSignaled, 0x6000, 0},
	// Only posted by control chunks: local protection errors (matrix C10).
	{qp.WRSend, 64, qp.SendSignaled, 0, fzKeyBad},
	{qp.WRAtomicFetchAdd, 8, 0, 0x3000, fzKeyBad},
	{qp.WRRDMAWrite, 600, qp.SendSignaled, 0x7000, fzKeyGone},
	{qp.WRRDMARead, 600, 0, 0x7000, fzKeyGone},
	{qp.WRSend, 32, qp.SendInline | qp.SendSignaled, 0, fzKeyBad},
}

// fzReqInitial is how many of fzReqWRs are posted at the start.
const fzReqInitial = 10

// fzReqPSNs returns the first PSN of each initial WR at MTU 256.
func fzReqPSNs(sq bth.PSN) []bth.PSN {
	var out []bth.PSN
	p := sq
	for _, w := range fzReqWRs[:fzReqInitial] {
		out = append(out, p)
		n := uint32(1)
		if w.len > 256 && w.op != qp.WRAtomicCmpAndSwp && w.op != qp.WRAtomicFetchAdd {
			n = (w.len + 255) / 256
		}
		p = p.Add(n)
	}
	return out
}

// Requester chunk kinds (control byte & 7).
const (
	fzReqBuilt  = 0 // 0–3: a response from fuzzed fields
	fzReqRaw    = 4 // u16 length, bytes (bit 3: patch the BTH)
	fzReqTimer  = 5 // advance time by u8 × 100 µs and run due timers
	fzReqDrain  = 6 // send what the requester has (bit 3: deregister the "gone" region first)
	fzReqPost   = 7 // post WR u8 % len(fzReqWRs)
	fzReqFar    = 1 << 3
	fzReqRawSyn = 1 << 4
	fzReqNat    = 1 << 5
	fzReqNoSend = 1 << 7 // do not drain after a built response
)

func fzRequester(t *testing.T, data []byte) {
	r := &fzReader{b: data}
	cfg := r.u8()
	sq := bth.PSN(0x100)
	if cfg&1 != 0 {
		sq = 0xFFFFFA // the WRs straddle the PSN wrap
	}
	retry := cfg >> 1 & 7
	z := newFzQP(t, qp.MTU256, mr.LocalWrite, 4, sq, retry)
	mem := make([]byte, 64<<10)
	lm := z.reg(mem, 0x100000, mr.LocalWrite, nil)
	gone := z.reg(make([]byte, 4096), 0x200000, mr.LocalWrite, nil)
	o := testutil.NewOracle()
	var wrid uint64
	psns := uint32(0) // PSNs the posted WRs use, from sq on
	post := func(i int) {
		w := fzReqWRs[i%len(fzReqWRs)]
		wrid++
		off := uint64(wrid%8) * 4096
		wr := qp.SendWR{WRID: wrid, Opcode: w.op, Flags: w.flags, RemoteAddr: w.remote, RKey: 0x1234,
			CompareAdd: 1, Swap: 2, Imm: 0x0a0b0c0d}
		if w.len > 0 {
			wr.SGL = []qp.SGE{{Addr: lm.IOVA() + off, Length: w.len, LKey: lm.LKey()}}
			switch w.lkey {
			case fzKeyBad:
				wr.SGL[0].LKey = 0xdeadbeef
			case fzKeyGone:
				wr.SGL[0] = qp.SGE{Addr: gone.IOVA(), Length: w.len, LKey: gone.LKey()}
			}
		}
		if err := z.q.PostSend(&wr); err != nil {
			wrid--
			return
		}
		n := uint32(1)
		if w.op != qp.WRAtomicCmpAndSwp && w.op != qp.WRAtomicFetchAdd && w.len > uint32(z.mtu) {
			n = (w.len + uint32(z.mtu) - 1) / uint32(z.mtu)
		}
		psns += n
		bl := testutil.AnyLen
		if w.op == qp.WRRDMARead {
			bl = w.len
		}
		o.Post("send", wrid, w.flags&qp.SendSignaled != 0, bl)
	}
	for i := range fzReqInitial {
		post(i)
	}
	const limit = 4096
	// Every request carries a PSN of a posted WR: retries rewind, they never
	// invent PSNs.
	onReq := func(p *wire.Packet) {
		if p.Opcode().IsRequest() && p.BTH.PSN().Sub(sq) >= psns {
			t.Fatalf("%v at PSN %v: the %d posted PSNs start at %v", p.Opcode(), p.BTH.PSN(), psns, sq)
		}
	}
	st := z.q.State()
	completed := 0
	check := func() {
		st = z.checkState(st)
		completed += pollInto(t, z.scq, o, "send")
		if completed > int(wrid) {
			t.Fatalf("%d completions for %d WRs", completed, wrid)
		}
		if z.rcq.Len() != 0 {
			t.Fatalf("receive completions without receive WRs")
		}
	}
	z.drain(limit, onReq)
	check()

	for step := 0; r.more() && step < fzMaxSteps; step++ {
		ctl := r.u8()
		switch k := ctl & 7; {
		case k < fzReqRaw:
			var f wire.Fields
			op := fzReqOps[int(r.u8())%len(fzReqOps)]
			f.BTH.Opcode = op
			d := int32(int8(r.u8()))
			if ctl&fzReqFar != 0 {
				d *= 1 << 16
			}
			f.BTH.PSN = bth.PSN(uint32(int32(sq)+d) & bth.PSNMask)
			s := r.u8()
			if ctl&fzReqRawSyn != 0 {
				f.AETH.Syndrome = aeth.Syndrome(s)
			} else {
				f.AETH.Syndrome = fzSyndromes[int(s)%len(fzSyndromes)]
			}
			f.AETH.MSN = uint32(r.u8())
			pl := int(r.u8()) * 2 % (z.mtu + 32)
			if ctl&fzReqNat != 0 {
				switch {
				case op.IsFirst(), op.IsMiddle():
					pl = z.mtu
				case op.IsLast(), op.IsOnly():
					pl = pl % (z.mtu + 1)
				}
			}
			fill := r.u8()
			f.AtomicAckETH = uint64(fill) * 0x0101010101010101
			if b := z.build(&f, pl, fill); b != nil {
				z.deliver(b)
			}
			check()
			if ctl&fzReqNoSend == 0 {
				z.drain(limit, onReq)
			}
		case k == fzReqRaw:
			n := int(r.u16()) % 600
			b := append(z.in[:0], r.bytes(n)...)
			if ctl&fzReqFar != 0 && len(b) >= bth.Size {
				b[0] = byte(fzReqOps[int(b[0])%6])
				b[1] &= 0xf0
				binary.BigEndian.PutUint16(b[2:], 0xffff)
			}
			z.deliver(b)
			check()
			z.drain(limit, onReq)
		case k == fzReqTimer:
			z.now = z.now.Add(time.Duration(r.u8()) * 100 * time.Microsecond)
			if d, ok := z.q.Deadline(); ok && !z.now.Before(d) {
				z.q.OnTimeout(z.now)
			}
			check()
			z.drain(limit, onReq)
		case k == fzReqDrain:
			if ctl&fzReqFar != 0 && gone.Valid() {
				// The region goes while WRs may be using it.
				if err := z.tbl.Deregister(gone); err != nil {
					t.Fatal(err)
				}
			}
			z.drain(limit, onReq)
		case k == fzReqPost:
			post(int(r.u8()))
		}
		check()
	}

	// Moved to ERR, every WR has its CQE: signaled ones exactly one,
	// unsignaled ones one unless they succeeded silently.
	if z.q.State() != qp.StateErr {
		if err := z.q.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState); err != nil {
			t.Fatal(err)
		}
	}
	z.drain(limit, onReq)
	check()
	if err := o.Check(false); err != nil {
		t.Fatal(err)
	}
	if !o.Done() {
		t.Fatalf("send WRs without a CQE after ERR: %d", o.Outstanding("send"))
	}
}

// fzRequesterSeeds are the responses a correct responder sends for the
// initial WRs (in order, with one per kind), at both starting PSNs, plus
// loss, NAK and timeout conversations.
func fzRequesterSeeds() [][]byte {
	var seeds [][]byte
	for _, cfg := range []uint8{0, 1, 7 << 1} {
		sq := bth.PSN(0x100)
		if cfg&1 != 0 {
			sq = 0xFFFFFA
		}
		first := fzReqPSNs(sq)
		d := func(p bth.PSN) uint8 { return uint8(int8(int32(p.Sub(sq)))) }
		resp := func(e *fzEnc, ctl uint8, op bth.Opcode, p bth.PSN, syn uint8, pl uint8) {
			var idx uint8
			for i, o := range fzReqOps {
				if o == op {
					idx = uint8(i)
				}
			}
			e.u8(ctl, idx, d(p), syn, 0, pl, 0x11)
		}
		synIdx := func(s aeth.Syndrome) uint8 {
			for i, v := range fzSyndromes {
				if v == s {
					return uint8(i)
				}
			}
			return 0
		}
		ack := synIdx(aeth.ACKUnlimited)
		// Everything goes well.
		{
			e := &fzEnc{}
			e.u8(cfg)
			resp(e, 0, bth.RCAcknowledge, first[1].Add(1), ack, 0) // SEND and WRITE
			resp(e, fzReqNat, bth.RCRDMAReadResponseFirst, first[2], ack, 0)
			resp(e, fzReqNat, bth.RCRDMAReadResponseMiddle, first[2].Add(1), ack, 0)
			resp(e, 0, bth.RCRDMAReadResponseLast, first[2].Add(2), ack, 188/2)
			resp(e, 0, bth.RCAtomicAcknowledge, first[3], ack, 0)
			resp(e, 0, bth.RCAtomicAcknowledge, first[4], ack, 0)
			resp(e, 0, bth.RCAcknowledge, first[6], ack, 0)
			resp(e, 0, bth.RCRDMAReadResponseOnly, first[7], ack, 0)
			resp(e, 0, bth.RCAcknowledge, first[9].Add(3), ack, 0)
			seeds = append(seeds, e.b)
		}
		// A NAK of each kind at the READ, after an ACK of what precedes it.
		for _, s := range fzSyndromes[2:] {
			e := &fzEnc{}
			e.u8(cfg)
			resp(e, 0, bth.RCAcknowledge, first[1].Add(1), ack, 0)
			resp(e, 0, bth.RCAcknowledge, first[2], synIdx(s), 0)
			e.u8(fzReqTimer, 200, fzReqTimer, 200)
			seeds = append(seeds, e.b)
		}
		// A lost READ response: the next one arrives, then a timeout.
		{
			e := &fzEnc{}
			e.u8(cfg)
			resp(e, 0, bth.RCAcknowledge, first[1].Add(1), ack, 0)
			resp(e, fzReqNat, bth.RCRDMAReadResponseMiddle, first[2].Add(1), ack, 0)
			e.u8(fzReqTimer, 20)
			resp(e, fzReqNat, bth.RCRDMAReadResponseFirst, first[2], ack, 0)
			resp(e, 0, bth.RCAtomicAcknowledge, first[4], ack, 0) // skips CmpSwap
			for range 8 {
				e.u8(fzReqTimer, 255)
			}
			e.u8(fzReqPost, 0, fzReqPost, 2)
			seeds = append(seeds, e.b)
		}
		// Local protection errors behind outstanding WRs (matrix C10): a bad lkey,
		// and a region deregistered between post and send.
		{
			e := &fzEnc{}
			e.u8(cfg)
			e.u8(fzReqPost, 10, fzReqPost, 12, fzReqDrain|fzReqFar, fzReqPost, 13)
			resp(e, 0, bth.RCAcknowledge, first[1].Add(1), ack, 0)
			resp(e, fzReqNat, bth.RCRDMAReadResponseFirst, first[2], ack, 0)
			resp(e, fzReqNat, bth.RCRDMAReadResponseMiddle, first[2].Add(1), ack, 0)
			resp(e, 0, bth.RCRDMAReadResponseLast, first[2].Add(2), ack, 188/2)
			resp(e, 0, bth.RCAtomicAcknowledge, first[3], ack, 0)
			resp(e, 0, bth.RCAtomicAcknowledge, first[4], ack, 0)
			resp(e, 0, bth.RCAcknowledge, first[9].Add(3), ack, 0)
			seeds = append(seeds, e.b)
		}
		// Ghost and stale responses.
		{
			e := &fzEnc{}
			e.u8(cfg)
			resp(e, 0, bth.RCAcknowledge, sq.Add(bth.PSNMask), ack, 0)
			resp(e, 0, bth.RCAcknowledge, first[9].Add(50), ack, 0)
			resp(e, 0, bth.RCRDMAReadResponseOnly, first[2], ack, 40)
			resp(e, fzReqRawSyn, bth.RCAtomicAcknowledge, first[3], 0x60, 0)
			seeds = append(seeds, e.b)
		}
	}
	return seeds
}
