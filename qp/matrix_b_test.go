package qp_test

// Matrix B of doc/matrix.md §3: protocol edge cases and completion
// semantics. Each test is named after its row and asserts the row's pass
// figure, in virtual time. Two drivers are used:
//
//   - a pair (harness_test.go): two QPs over impaired links, the wire
//     observed through the endpoints' trace hook (watch);
//   - a hand driver (hand): one QP fed crafted packets through HandlePacket,
//     its output read back with NextPacket, for exact per-packet counts.
//
// Sizes are the PR tier (go test ./...): every test runs in a few seconds.
// GOROCE_LONG=1 selects the nightly figures the rows name (matrix B1's full PSN
// cycle, matrix B6's 1 GiB). Under -race the transfers shrink to 8 MiB and the
// 2^23-PSN floods are sampled (the reduced set of matrix E5, doc/matrix.md §3).

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/reth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// longTier reports whether the nightly figures are asked for.
func longTier() bool { return os.Getenv("GOROCE_LONG") == "1" }

// prSize is n bytes for a PR-tier transfer, or 8 MiB under -race
// (matrix E5, doc/matrix.md §3).
func prSize(n int) int {
	if raceDetector {
		return min(n, 8<<20)
	}
	return n
}

// floodStride is the step through a 2^23-PSN injection flood: 1 (every
// PSN), or under -race a sample of one PSN in 251 plus both ends.
func floodStride() uint32 {
	if raceDetector {
		return 251
	}
	return 1
}

var (
	matrixMTUs = []qp.MTU{qp.MTU1024, qp.MTU4096}
	matrixOps  = []op{opSend, opWrite, opRead}
)

const allAccess = mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic

// newPairWith is newPair with separate attributes for B's QP: A gets pA,
// B gets pB. The PSNs come from pA (A sends from pA.psnA, B from pA.psnB).
// B's QP is reset and connected again before anything is sent.
func newPairWith(t testing.TB, pA, pB connParams, ab, ba testutil.Impairment) *pair {
	t.Helper()
	pr := newPair(t, pA, ab, ba)
	require.NoError(t, pr.b.qp.Modify(&qp.Attr{State: qp.StateReset}, qp.AttrState))
	connect(t, pr.b, pr.a, pB, pA.psnB, pA.psnA)
	return pr
}

// watch adds f to e's packet trace (keeping a GOROCE_TRACE printer). dir is
// "A>" for a packet A sends (before the link impairs it) and ">A" for one
// delivered to A (before the QP sees it). p is valid during the call only.
func watch(e *endpoint, f func(now time.Time, dir string, p *wire.Packet)) {
	prev := e.trace
	var pkt wire.Packet
	e.trace = func(now time.Time, dir string, b []byte) {
		if prev != nil {
			prev(now, dir, b)
		}
		if pkt.Parse(b) == nil {
			f(now, dir, &pkt)
		}
	}
}

// seal writes the ICRC of a packet from e towards its peer, as pump does.
func seal(e *endpoint, pkt []byte) {
	n := len(pkt)
	var ph [48]byte
	ip, udp := rocev2.PseudoHeaders(&ph, e.self, netip.AddrPortFrom(e.peer.Addr(), rocev2.UDPPort), 0, n)
	rocev2.PutICRC(pkt[n-4:], rocev2.ComputeICRC(ip, udp, pkt[:n-4]))
}

// sendCount is the number of completions A's send CQ has produced so far,
// polled or not (A receives nothing in these tests).
func sendCount(e *endpoint) int { return len(e.wcs) + e.scq.Len() }

// zeroSpurious asserts the counters a clean run must leave at zero.
func zeroSpurious(t *testing.T, name string, s qp.Snapshot) {
	t.Helper()
	assert.Zero(t, s[qp.CounterOutOfSeqRequest], "%s out_of_seq_request", name)
	assert.Zero(t, s[qp.CounterDuplicateRequest], "%s duplicate_request", name)
	assert.Zero(t, s[qp.CounterRcvdSeqErr], "%s rcvd_seq_err", name)
	assert.Zero(t, s[qp.CounterRetransmittedPkts], "%s retransmitted", name)
	assert.Zero(t, s[qp.CounterCompleterRetryErr], "%s completer_retry_err", name)
	assert.Zero(t, s[qp.CounterDroppedResponses], "%s dropped responses", name)
}

// hand drives one QP by hand: the test builds packets, hands them to
// HandlePacket and reads back what NextPacket emits. The QP sends from
// p.psnA and expects p.psnB; the peer endpoint only lends its QPN and
// address. Time stands still unless the test moves now.
type hand struct {
	t    testing.TB
	e    *endpoint
	now  time.Time
	out  wire.Packet
	obuf []byte
}

func newHand(t testing.TB, p connParams) *hand {
	t.Helper()
	e := newEndpoint(t, "Q", 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
	peer := newEndpoint(t, "P", 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
	connect(t, e, peer, p, p.psnA, p.psnB)
	return &hand{t: t, e: e, now: testutil.Epoch(), obuf: make([]byte, qp.MaxPacketLen(qp.MTU4096))}
}

// packet builds a packet addressed to the QP under test, parsed over its
// own buffer so its headers can be edited in place (SetPSN …).
func (h *hand) packet(f wire.Fields, payload []byte) *wire.Packet {
	h.t.Helper()
	f.BTH.PKey = 0xffff
	f.BTH.DestQP = h.e.qp.QPN()
	b := make([]byte, wire.TransportLen(f.BTH.Opcode, len(payload)))
	n, err := wire.Build(b, &f, payload)
	require.NoError(h.t, err)
	p := new(wire.Packet)
	require.NoError(h.t, p.Parse(b[:n]))
	return p
}

func (h *hand) inject(p *wire.Packet) { h.e.qp.HandlePacket(h.now, p) }

// next returns the next packet the QP emits, valid until the next call.
func (h *hand) next() (*wire.Packet, bool) {
	n, ok := h.e.qp.NextPacket(h.now, h.obuf)
	if !ok {
		return nil, false
	}
	if err := h.out.Parse(h.obuf[:n]); err != nil {
		h.t.Fatalf("the QP emitted a packet that does not parse: %v", err)
	}
	return &h.out, true
}

// emitted is a packet the QP sent, decoded.
type emitted struct {
	f       wire.Fields
	payload []byte
}

// drain returns everything the QP emits now.
func (h *hand) drain() []emitted {
	var out []emitted
	for {
		p, ok := h.next()
		if !ok {
			return out
		}
		out = append(out, emitted{f: p.Fields(), payload: bytes.Clone(p.Payload)})
	}
}

// ack builds an ACKNOWLEDGE with syndrome syn for psn.
func (h *hand) ack(syn aeth.Syndrome, psn bth.PSN, msn uint32) *wire.Packet {
	var f wire.Fields
	f.BTH.Opcode, f.BTH.PSN = bth.RCAcknowledge, psn
	f.AETH.Syndrome, f.AETH.MSN = syn, msn
	return h.packet(f, nil)
}

// req builds a request packet.
func (h *hand) req(opc bth.Opcode, psn bth.PSN, ackReq bool, payload []byte) *wire.Packet {
	var f wire.Fields
	f.BTH.Opcode, f.BTH.PSN, f.BTH.AckReq = opc, psn, ackReq
	return h.packet(f, payload)
}

// reqRETH builds a request packet with a RETH.
func (h *hand) reqRETH(opc bth.Opcode, psn bth.PSN, ackReq bool, va uint64, rkey mr.Key, dlen uint32, payload []byte) *wire.Packet {
	var f wire.Fields
	f.BTH.Opcode, f.BTH.PSN, f.BTH.AckReq = opc, psn, ackReq
	f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = va, uint32(rkey), dlen
	return h.packet(f, payload)
}

// expectOne asserts that the QP emits exactly one packet: an ACKNOWLEDGE
// that is an ACK if want is one (any credit count), else has syndrome
// want, with the given PSN and MSN.
func (h *hand) expectOne(want aeth.Syndrome, psn bth.PSN, msn uint32) {
	h.t.Helper()
	out := h.drain()
	require.Len(h.t, out, 1, "want exactly one %v", want)
	f := out[0].f
	require.Equal(h.t, bth.RCAcknowledge, f.BTH.Opcode)
	if want.IsACK() {
		require.True(h.t, f.AETH.Syndrome.IsACK(), "syndrome %v", f.AETH.Syndrome)
	} else {
		require.Equal(h.t, want, f.AETH.Syndrome)
	}
	require.Equal(h.t, psn, f.BTH.PSN, "PSN")
	require.Equal(h.t, msn, f.AETH.MSN, "MSN")
}

// ---------------------------------------------------------------------------
// matrix B1: PSN wrap.

// wrapCase is one message across the PSN wrap.
type wrapCase struct {
	op   op
	mtu  qp.MTU
	size int
}

// TestB1_PSNWrap runs traffic across the 24-bit PSN wrap: an 8 KiB message
// over PSNs 0xFFFFFE→0x000001 (exactly those at MTU 2048; as many PSNs as
// the MTU gives at 1024 and 4096), a 16 KiB READ at MTU 4096 from
// 0xFFFFFE, each clean and with the packet at PSN 0 lost once, then 64 MiB
// at MTU 1024 (65,536 PSNs) with 1% loss from sq_psn = rq_psn ∈ {0xFFFF00,
// 0xFFFFFF}. Pass: integrity; no spurious NAK or duplicate at the wrap.
// GOROCE_LONG=1 adds the nightly full cycle of 2^24 + 1 packets at MTU 256.
func TestB1_PSNWrap(t *testing.T) {
	var cases []wrapCase
	for _, mtu := range []qp.MTU{qp.MTU1024, qp.MTU2048, qp.MTU4096} {
		for _, o := range matrixOps {
			cases = append(cases, wrapCase{o, mtu, 8 << 10})
		}
	}
	cases = append(cases, wrapCase{opRead, qp.MTU4096, 16 << 10})
	for _, tc := range cases {
		for _, lossAt0 := range []bool{false, true} {
			if lossAt0 && tc.size/tc.mtu.Bytes() < 3 {
				continue // PSN 0 is the message's last packet: nothing follows it to NAK
			}
			name := tc.op.String() + "/" + tc.mtu.String() + "/" + sizeName(tc.size)
			if lossAt0 {
				name += "/lose-PSN-0"
			}
			t.Run(name, func(t *testing.T) { wrapMessage(t, tc, lossAt0) })
		}
	}
	total := prSize(64 << 20)
	for _, start := range []bth.PSN{0xFFFF00, 0xFFFFFF} {
		for _, o := range matrixOps {
			t.Run("bulk/"+o.String()+"/1024/"+start.String(), func(t *testing.T) {
				wrapBulk(t, o, qp.MTU1024, start, total, 0.01)
			})
		}
	}
	t.Run("full-cycle", func(t *testing.T) {
		if !longTier() {
			t.Skip("nightly tier: GOROCE_LONG=1 (2^24 + 1 packets at MTU 256, about 4.3 GB)")
		}
		wrapFullCycle(t)
	})
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return itoa(n>>20) + "MiB"
	}
	return itoa(n>>10) + "KiB"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// wrapMessage sends one message from PSN 0xFFFFFE and checks the PSNs on
// the wire: consecutive across the wrap, and with no retransmission,
// NAK or duplicate unless the packet at PSN 0 was dropped.
func wrapMessage(t *testing.T, tc wrapCase, lossAt0 bool) {
	const start = bth.PSN(0xFFFFFE)
	p := defaultParams()
	p.mtu = tc.mtu
	p.psnA, p.psnB = start, start
	npkts := tc.size / tc.mtu.Bytes()
	var ab, ba testutil.Impairment
	// The data packet at PSN 0 is the third (index 2) that its sender
	// puts on the link: A's for SEND/WRITE, B's response for READ.
	if lossAt0 {
		if tc.op == opRead {
			ba.DropList = []int{2}
		} else {
			ab.DropList = []int{2}
		}
	}
	pr := newPair(t, p, ab, ba)
	var dataPSNs []bth.PSN // first transmissions and retransmissions, in order
	var naks []bth.PSN
	data := pr.a
	if tc.op == opRead {
		data = pr.b
	}
	watch(data, func(_ time.Time, dir string, pk *wire.Packet) {
		if dir == data.name+">" && pk.Opcode() != bth.RCAcknowledge {
			dataPSNs = append(dataPSNs, pk.BTH.PSN())
		}
	})
	watch(pr.b, func(_ time.Time, dir string, pk *wire.Packet) {
		if dir == "B>" && pk.AETH != nil && pk.AETH.Syndrome() == aeth.NAKPSNSequenceError {
			naks = append(naks, pk.BTH.PSN())
		}
	})
	runTransfer(t, pr, transfer{op: tc.op, total: tc.size, msg: tc.size, depth: 1}, time.Second)

	var want []bth.PSN
	for i := 0; i < npkts; i++ {
		want = append(want, start.Add(uint32(i)))
	}
	aS, bS := pr.a.qp.Counters().Snapshot(), pr.b.qp.Counters().Snapshot()
	if !lossAt0 {
		assert.Equal(t, want, dataPSNs, "data PSNs across the wrap")
		if tc.mtu == qp.MTU2048 {
			assert.Equal(t, []bth.PSN{0xFFFFFE, 0xFFFFFF, 0, 1}, dataPSNs)
		}
		zeroSpurious(t, "A", aS)
		zeroSpurious(t, "B", bS)
		assert.Empty(t, naks)
	} else {
		// First transmissions, then Go-Back-N from PSN 0 exactly.
		require.GreaterOrEqual(t, len(dataPSNs), npkts)
		assert.Equal(t, want, dataPSNs[:npkts], "first transmission")
		if tc.op == opRead {
			// The READ is reissued for the rest from PSN 0: the responder
			// replays PSNs 0.. (a duplicate READ inside its resource range,
			// across the wrap).
			assert.Equal(t, want[2:], dataPSNs[npkts:], "replayed responses")
			assert.Equal(t, uint64(1), bS[qp.CounterReadReplays])
			assert.Equal(t, uint64(1), aS[qp.CounterRetransmittedPkts], "one READ request reissued")
		} else {
			assert.Equal(t, want[2:], dataPSNs[npkts:], "retransmission restarts at PSN 0")
			assert.Equal(t, []bth.PSN{0}, naks, "one NAK, carrying PSN 0")
			assert.Equal(t, uint64(npkts-3), bS[qp.CounterOutOfSeqRequest], "the packets after PSN 0")
			assert.Zero(t, bS[qp.CounterDuplicateRequest])
		}
	}
	// A second message continues from the PSN after the first, past the wrap.
	n0 := len(dataPSNs)
	runTransfer(t, pr, transfer{op: tc.op, total: tc.size, msg: tc.size, depth: 1}, time.Second)
	if !lossAt0 {
		var want2 []bth.PSN
		for i := 0; i < npkts; i++ {
			want2 = append(want2, start.Add(uint32(npkts+i)))
		}
		assert.Equal(t, want2, dataPSNs[n0:], "second message")
	}
}

// wrapBulk moves total bytes from start = sq_psn = rq_psn with the given
// loss in both directions. No spurious NAK or duplicate: every NAK needs a
// request lost on its way (a gap), and every duplicate a retransmission.
func wrapBulk(t *testing.T, o op, mtu qp.MTU, start bth.PSN, total int, loss float64) {
	p := defaultParams()
	p.mtu = mtu
	p.psnA, p.psnB = start, start
	pr := newPair(t, p, testutil.Impairment{Loss: loss}, testutil.Impairment{Loss: loss})
	var naks int
	var sawEnd, sawZero bool
	watch(pr.a, func(_ time.Time, dir string, pk *wire.Packet) {
		if dir == "A>" && pk.Opcode().IsRequest() {
			// A READ request covers a PSN range; check the wrap on its first.
			switch pk.BTH.PSN() {
			case 0xFFFFFF:
				sawEnd = true
			case 0:
				sawZero = true
			}
		}
	})
	watch(pr.b, func(_ time.Time, dir string, pk *wire.Packet) {
		if dir != "B>" {
			return
		}
		if pk.AETH != nil && pk.AETH.Syndrome() == aeth.NAKPSNSequenceError {
			naks++
		}
		if pk.Opcode().Mask()&bth.MaskRead != 0 {
			switch pk.BTH.PSN() {
			case 0xFFFFFF:
				sawEnd = true
			case 0:
				sawZero = true
			}
		}
	})
	res := runTransfer(t, pr, transfer{op: o, total: total, msg: 64 << 10, depth: 16}, 60*time.Second)
	require.True(t, sawEnd && sawZero, "the transfer did not cross the PSN wrap")
	lostReq := pr.ab.Stats().TotalDropped()
	assert.LessOrEqual(t, uint64(naks), lostReq, "NAKs without a lost request")
	assert.LessOrEqual(t, res.bSnap[qp.CounterDuplicateRequest], res.aSnap[qp.CounterRetransmittedPkts], "duplicates without a retransmission")
	t.Logf("%v %v from %v: %.2f Gb/s virtual, %d NAKs, %d requests lost, %d retransmitted, %d duplicates",
		o, mtu, start, res.goodput/1e9, naks, lostReq, res.aSnap[qp.CounterRetransmittedPkts], res.bSnap[qp.CounterDuplicateRequest])
}

// wrapFullCycle is matrix B1's nightly figure: at least 2^24 + 1 WRITE packets at
// MTU 256 (a full PSN cycle and one more) with 1% loss, as laps over one
// 64 MiB buffer, each lap with a fresh pattern checked byte for byte.
func wrapFullCycle(t *testing.T) {
	const (
		bufLen = 64 << 20
		msg    = 64 << 10
		depth  = 16
	)
	p := defaultParams()
	p.mtu = qp.MTU256
	p.psnA, p.psnB = 0xFFFF00, 0xFFFF00
	pr := newPair(t, p, testutil.Impairment{Loss: 0.01}, testutil.Impairment{Loss: 0.01})
	src, dst := make([]byte, bufLen), make([]byte, bufLen)
	sm, dm := pr.a.reg(src, allAccess), pr.b.reg(dst, allAccess)
	pktsPerLap := bufLen / p.mtu.Bytes()
	laps := (1<<24 + 1 + pktsPerLap - 1) / pktsPerLap
	var wrid uint64
	for lap := 0; lap < laps; lap++ {
		testutil.FillPattern(src, pr.seed+uint64(lap))
		nmsg := bufLen / msg
		posted, done := 0, 0
		post := func() {
			for posted < nmsg && posted-done < depth {
				off := uint64(posted * msg)
				wrid++
				require.NoError(t, pr.a.qp.PostSend(&qp.SendWR{WRID: wrid, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
					SGL:        []qp.SGE{{Addr: sm.IOVA() + off, Length: msg, LKey: sm.LKey()}},
					RemoteAddr: dm.IOVA() + off, RKey: dm.RKey()}))
				posted++
			}
		}
		post()
		require.NoError(t, pr.run(func() bool {
			for _, c := range pr.a.poll() {
				require.Equal(t, cq.StatusSuccess, c.Status, "lap %d", lap)
				done++
			}
			post()
			return done == nmsg
		}, time.Hour), "lap %d", lap)
		testutil.RequireSameBytes(t, src, dst)
	}
	t.Logf("%d laps, %d packets of 256 bytes; A %+v", laps, laps*pktsPerLap, pr.a.qp.Counters().Snapshot())
}

// ---------------------------------------------------------------------------
// matrix B2: PSN compare.

// TestB2_PSNCompare pins bth.PSN.Compare, the only PSN order the engine
// uses (rxe psn_compare: (s32)((a - b) << 8)): a table with the wrap and
// window edges, and a million seeded random pairs. Pass: antisymmetric for
// |d| < 2^23; (0, 0xFFFFFF) > 0; at |d| = 2^23 both orders are negative
// (documented at bth.MaxPSNWindow).
func TestB2_PSNCompare(t *testing.T) {
	sign := func(v int32) int {
		switch {
		case v > 0:
			return 1
		case v < 0:
			return -1
		}
		return 0
	}
	tests := []struct {
		name string
		a, b bth.PSN
		want int
	}{
		{"(0, 0xFFFFFF) > 0", 0, 0xFFFFFF, 1},
		{"(0xFFFFFF, 0) < 0", 0xFFFFFF, 0, -1},
		{"equal", 0x123456, 0x123456, 0},
		{"1 ahead of 0xFFFFFE across the wrap", 1, 0xFFFFFE, 1},
		{"2^23 - 1 ahead", 1<<23 - 1, 0, 1},
		{"2^23 - 1 behind", 0, 1<<23 - 1, -1},
		{"2^23 - 1 ahead across the wrap", 0x7FFFFE, 0xFFFFFF, 1},
		{"2^23: negative one way", 1 << 23, 0, -1},
		{"2^23: negative the other way too", 0, 1 << 23, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, sign(tc.a.Compare(tc.b)))
			assert.Equal(t, tc.want > 0, tc.a.After(tc.b))
			assert.Equal(t, tc.want < 0, tc.a.Before(tc.b))
		})
	}
	r := rand.New(rand.NewPCG(testutil.Seed(t), 0xB2))
	for i := 0; i < 1_000_000; i++ {
		a := bth.PSN(r.Uint32() & bth.PSNMask)
		d := 1 + r.Uint32N(1<<23-1) // 1 .. 2^23-1
		b := a.Add(d)               // b is d ahead of a
		ab, ba := a.Compare(b), b.Compare(a)
		if !(ab < 0 && ba > 0 && sign(ab) == -sign(ba) && b.After(a) && a.Before(b)) {
			t.Fatalf("a=%v b=%v d=%d: Compare %d / %d", a, b, d, ab, ba)
		}
		if a.Compare(a) != 0 || b.Sub(a) != d {
			t.Fatalf("a=%v b=%v d=%d", a, b, d)
		}
		c := a.Add(1 << 23)
		if a.Compare(c) >= 0 || c.Compare(a) >= 0 {
			t.Fatalf("a=%v: the 2^23 edge changed: %d %d", a, a.Compare(c), c.Compare(a))
		}
	}
}

// ---------------------------------------------------------------------------
// matrix B3, B4: duplicates and out-of-sequence requests, injected by hand.

// injectSet returns one packet of each SEND/WRITE position (FIRST, MIDDLE,
// LAST, ONLY, with and without immediate), with AckReq alternating and a
// payload of 0xEE bytes, for the duplicate and out-of-sequence floods. The
// WRITEs aim at dm.
func injectSet(h *hand, mtu int, dm *mr.Region) []*wire.Packet {
	full := bytes.Repeat([]byte{0xEE}, mtu)
	part := full[:mtu/2]
	va, rk := dm.IOVA(), dm.RKey()
	return []*wire.Packet{
		h.req(bth.RCSendFirst, 0, false, full),
		h.req(bth.RCSendMiddle, 0, true, full),
		h.req(bth.RCSendLast, 0, false, part),
		h.req(bth.RCSendOnly, 0, true, part),
		h.packet(wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnlyWithImmediate}, ImmDt: 7}, part),
		h.reqRETH(bth.RCRDMAWriteFirst, 0, true, va, rk, uint32(3*mtu), full),
		h.req(bth.RCRDMAWriteMiddle, 0, false, full),
		h.req(bth.RCRDMAWriteLast, 0, true, full),
		h.reqRETH(bth.RCRDMAWriteOnly, 0, false, va, rk, uint32(len(part)), part),
		h.packet(wire.Fields{BTH: bth.Fields{Opcode: bth.RCRDMAWriteOnlyWithImmediate, AckReq: true},
			RETH: reth4(va, rk, uint32(len(part))), ImmDt: 9}, part),
	}
}

// TestB3_DuplicatesReACKed injects SEND and WRITE duplicates at every PSN
// from ePSN−1 down to ePSN−(2^23−1), the whole duplicate region, which here
// crosses the wrap (ePSN = 1). Pass: exactly one ACK per duplicate,
// carrying the last executed PSN (C9-105, rxe duplicate_request: a
// cumulative ACK of prev_psn) and the current MSN; 0 re-executions: memory,
// receive queue and CQs untouched.
func TestB3_DuplicatesReACKed(t *testing.T) {
	p := defaultParams()
	p.psnB = 0xFFFFFE // the responder's first expected PSN
	h := newHand(t, p)
	q := h.e.qp
	mtu := p.mtu.Bytes()
	dst := make([]byte, 4*mtu)
	dm := h.e.reg(dst, allAccess)
	rbuf := make([]byte, 3*mtu)
	rm := h.e.reg(rbuf, mr.LocalWrite)
	for i := 0; i < 3; i++ {
		require.NoError(t, q.PostRecv(&qp.RecvWR{WRID: uint64(i + 1),
			SGL: []qp.SGE{{Addr: rm.IOVA() + uint64(i*mtu), Length: uint32(mtu), LKey: rm.LKey()}}}))
	}
	// Execute three messages: SEND @0xFFFFFE, WRITE @0xFFFFFF, SEND @0.
	msg := testutil.Pattern(testutil.Seed(t), mtu)
	h.inject(h.req(bth.RCSendOnly, 0xFFFFFE, true, msg[:100]))
	h.expectOne(aeth.ACKUnlimited, 0xFFFFFE, 1)
	h.inject(h.reqRETH(bth.RCRDMAWriteOnly, 0xFFFFFF, true, dm.IOVA()+uint64(mtu), dm.RKey(), uint32(mtu), msg))
	h.expectOne(aeth.ACKUnlimited, 0xFFFFFF, 2)
	h.inject(h.req(bth.RCSendOnly, 0, true, msg[:200]))
	h.expectOne(aeth.ACKUnlimited, 0, 3)
	wcs := h.e.poll()
	require.Len(t, wcs, 2)
	const ePSN, last = bth.PSN(1), bth.PSN(0)
	dstBefore, rbufBefore := bytes.Clone(dst), bytes.Clone(rbuf)
	before := q.Counters().Snapshot()

	dups := injectSet(h, mtu, dm)
	n, injected := 1<<23-1, 0
	for k := 1; k <= n; k = nextK(k, n) {
		injected++
		pk := dups[k%len(dups)]
		psn := ePSN.Add(1<<24 - uint32(k))
		pk.BTH.SetPSN(psn)
		h.inject(pk)
		out, ok := h.next()
		if !ok || out.Opcode() != bth.RCAcknowledge || !out.AETH.Syndrome().IsACK() ||
			out.BTH.PSN() != last || out.AETH.MSN() != 3 {
			if !ok {
				t.Fatalf("duplicate %v (ePSN-%d, %v): no ACK", psn, k, pk.Opcode())
			}
			t.Fatalf("duplicate %v (ePSN-%d, %v): got %v %v PSN %v MSN %d, want ACK PSN %v MSN 3",
				psn, k, pk.Opcode(), out.Opcode(), out.AETH.Syndrome(), out.BTH.PSN(), out.AETH.MSN(), last)
		}
		if _, ok := h.next(); ok {
			t.Fatalf("duplicate %v (ePSN-%d): more than one packet in answer", psn, k)
		}
	}
	after := q.Counters().Snapshot()
	assert.Equal(t, uint64(injected), after[qp.CounterDuplicateRequest]-before[qp.CounterDuplicateRequest])
	assert.Equal(t, uint64(injected), after[qp.CounterSentPkts]-before[qp.CounterSentPkts], "one ACK per duplicate")
	assert.Equal(t, qp.StateRTS, q.State())
	assert.Empty(t, h.e.poll(), "no completion from a duplicate")
	assert.Equal(t, dstBefore, dst, "a duplicate WRITE was executed again")
	assert.Equal(t, rbufBefore, rbuf, "a duplicate SEND was executed again")
	// The receive queue was not touched either: the next SEND at ePSN lands
	// in receive WR 3, and the ePSN did not move.
	h.inject(h.req(bth.RCSendOnly, ePSN, true, msg[:300]))
	h.expectOne(aeth.ACKUnlimited, ePSN, 4)
	wcs = h.e.poll()
	require.Len(t, wcs, 1)
	assert.Equal(t, uint64(3), wcs[0].WRID)
	assert.Equal(t, cq.StatusSuccess, wcs[0].Status)
	assert.Equal(t, uint32(300), wcs[0].ByteLen)
	t.Logf("%d duplicates, %d ACKs", injected, after[qp.CounterSentPkts]-before[qp.CounterSentPkts])
}

// TestB4_OutOfSequenceOneNAK injects requests at every PSN from ePSN+1 to
// ePSN+(2^23−1), the whole out-of-sequence region (crossing the wrap), then
// opens two more gaps. Pass: exactly one NAK PSN sequence error, carrying
// the ePSN, per gap until the ePSN arrives (C9-100, rxe check_psn
// sent_psn_nak); a duplicate meanwhile is ACKed but does not re-arm the
// NAK; nothing ahead is executed.
func TestB4_OutOfSequenceOneNAK(t *testing.T) {
	p := defaultParams()
	p.psnB = 0xC00000
	h := newHand(t, p)
	q := h.e.qp
	mtu := p.mtu.Bytes()
	dst := make([]byte, 4*mtu)
	dm := h.e.reg(dst, allAccess)
	rbuf := make([]byte, 2*mtu)
	rm := h.e.reg(rbuf, mr.LocalWrite)
	for i := 0; i < 2; i++ {
		require.NoError(t, q.PostRecv(&qp.RecvWR{WRID: uint64(i + 1),
			SGL: []qp.SGE{{Addr: rm.IOVA() + uint64(i*mtu), Length: uint32(mtu), LKey: rm.LKey()}}}))
	}
	ahead := injectSet(h, mtu, dm)
	injected := 0
	// gap injects the requests at ePSN+k for each k and checks that the
	// first one, and only it, draws a NAK (if nak), and nothing else comes
	// out.
	gap := func(ePSN bth.PSN, msn uint32, ks func(yield func(uint32) bool), nak bool) {
		t.Helper()
		naks, i := 0, 0
		for k := range ks {
			pk := ahead[i%len(ahead)]
			i++
			pk.BTH.SetPSN(ePSN.Add(k))
			h.inject(pk)
			injected++
			for {
				out, ok := h.next()
				if !ok {
					break
				}
				if out.Opcode() != bth.RCAcknowledge || out.AETH.Syndrome() != aeth.NAKPSNSequenceError ||
					out.BTH.PSN() != ePSN || out.AETH.MSN() != msn {
					t.Fatalf("ePSN+%d: got %v %v PSN %v MSN %d, want NAK-PSN-SEQ PSN %v MSN %d",
						k, out.Opcode(), out.AETH.Syndrome(), out.BTH.PSN(), out.AETH.MSN(), ePSN, msn)
				}
				naks++
			}
			if nak && naks != 1 || !nak && naks != 0 {
				t.Fatalf("ePSN+%d (packet %d of the gap): %d NAKs so far", k, i, naks)
			}
		}
	}
	all := func(yield func(uint32) bool) {
		for k := 1; k < 1<<23; k = nextK(k, 1<<23-1) {
			if !yield(uint32(k)) {
				return
			}
		}
	}
	some := func(yield func(uint32) bool) {
		for _, k := range []uint32{1<<23 - 1, 1000, 2, 1, 1 << 22} {
			if !yield(k) {
				return
			}
		}
	}
	ePSN := p.psnB
	gap(ePSN, 0, all, true) // gap 1: the whole region, one NAK
	gap(ePSN, 0, some, false)
	assert.Empty(t, h.e.poll(), "a request ahead of the ePSN was executed")
	assert.Equal(t, make([]byte, len(dst)), dst, "a WRITE ahead of the ePSN was executed")

	// The ePSN arrives: executed, ACKed, and the gap is closed.
	h.inject(h.req(bth.RCSendOnly, ePSN, true, []byte("hello")))
	h.expectOne(aeth.ACKUnlimited, ePSN, 1)
	ePSN = ePSN.Next()
	gap(ePSN, 1, some, true) // gap 2: one NAK
	// A duplicate is ACKed but does not end the gap.
	h.inject(h.req(bth.RCSendOnly, ePSN.Add(1<<24-1), true, []byte("dup")))
	h.expectOne(aeth.ACKUnlimited, ePSN.Add(1<<24-1), 1)
	gap(ePSN, 1, some, false)
	h.inject(h.reqRETH(bth.RCRDMAWriteOnly, ePSN, true, dm.IOVA(), dm.RKey(), 4, []byte("data")))
	h.expectOne(aeth.ACKUnlimited, ePSN, 2)
	ePSN = ePSN.Next()
	gap(ePSN, 2, some, true) // gap 3: one NAK
	gap(ePSN, 2, all, false)

	s := q.Counters().Snapshot()
	assert.Equal(t, uint64(injected), s[qp.CounterOutOfSeqRequest])
	assert.Equal(t, qp.StateRTS, q.State())
	wcs := h.e.poll()
	require.Len(t, wcs, 1, "only the SEND at the ePSN completes")
	assert.Equal(t, uint64(1), wcs[0].WRID)
	assert.Equal(t, []byte("data"), dst[:4])
	assert.Equal(t, make([]byte, len(dst)-4), dst[4:], "a WRITE ahead of the ePSN was executed")
	t.Logf("%d out-of-sequence requests, 3 NAKs", injected)
}

// nextK steps k through 1..n by floodStride, never skipping n.
func nextK(k, n int) int {
	if k == n {
		return n + 1
	}
	return min(k+int(floodStride()), n)
}

func reth4(va uint64, rkey mr.Key, n uint32) reth.Fields {
	return reth.Fields{VA: va, RKey: uint32(rkey), DMALength: n}
}

// ---------------------------------------------------------------------------
// matrix B5: NAK PSN sequence error → Go-Back-N from exactly its PSN.

// TestB5_NAKRestartsAtPSN checks the requester's reaction to NAK 0x60 with
// PSN p (IBA 9.7.5.1.3; rxe check_ack: an implicit ACK of every PSN before
// p, then Go-Back-N from p). Pass: all WQEs ending before p complete;
// retransmission restarts exactly at p, no earlier PSN is sent again.
//
// "hand" feeds a crafted NAK to a requester whose packets all went out, for
// p at the first PSN, at a message boundary and mid-message, so the
// completions come from the NAK alone. "pair" loses one request on the
// link and lets the responder produce the NAK.
func TestB5_NAKRestartsAtPSN(t *testing.T) {
	for _, mtu := range matrixMTUs {
		for _, o := range matrixOps {
			for _, at := range []uint32{0, 8, 10} {
				if o == opRead && at == 10 {
					continue // a READ's NAK PSN is always a request's first PSN
				}
				t.Run("hand/"+o.String()+"/"+mtu.String()+"/p=psn+"+itoa(int(at)), func(t *testing.T) {
					nakHand(t, o, mtu, at)
				})
			}
			t.Run("pair/"+o.String()+"/"+mtu.String(), func(t *testing.T) { nakPair(t, o, mtu) })
		}
	}
}

// nakHand: four WQEs of four packets (PSNs) each; for READ the responses
// of the WQEs before p arrive first (a READ completes on its data).
func nakHand(t *testing.T, o op, mtu qp.MTU, at uint32) {
	p := defaultParams()
	p.mtu = mtu
	h := newHand(t, p)
	q := h.e.qp
	m := mtu.Bytes()
	const nwqe, per = 4, 4
	msg := per * m
	local := testutil.Pattern(testutil.Seed(t), nwqe*msg)
	lm := h.e.reg(local, allAccess)
	const remote = 0x10000000
	for i := 0; i < nwqe; i++ {
		wr := qp.SendWR{WRID: uint64(i), Flags: qp.SendSignaled,
			SGL: []qp.SGE{{Addr: lm.IOVA() + uint64(i*msg), Length: uint32(msg), LKey: lm.LKey()}}}
		switch o {
		case opSend:
			wr.Opcode = qp.WRSend
		case opWrite:
			wr.Opcode, wr.RemoteAddr, wr.RKey = qp.WRRDMAWrite, remote+uint64(i*msg), 0x1234
		case opRead:
			wr.Opcode, wr.RemoteAddr, wr.RKey = qp.WRRDMARead, remote+uint64(i*msg), 0x1234
		}
		require.NoError(t, q.PostSend(&wr))
	}
	first := h.drain()
	if o == opRead {
		require.Len(t, first, nwqe, "one request per READ")
	} else {
		require.Len(t, first, nwqe*per)
	}
	base := p.psnA
	nak := base.Add(at)
	if o == opRead {
		// The responses of the READs before p: FIRST, MIDDLE, MIDDLE, LAST.
		ops := []bth.Opcode{bth.RCRDMAReadResponseFirst, bth.RCRDMAReadResponseMiddle,
			bth.RCRDMAReadResponseMiddle, bth.RCRDMAReadResponseLast}
		for i := uint32(0); i < at; i++ {
			var f wire.Fields
			f.BTH.Opcode, f.BTH.PSN = ops[i%per], base.Add(i)
			f.AETH.Syndrome = aeth.ACKUnlimited
			h.inject(h.packet(f, bytes.Repeat([]byte{byte(i)}, m)))
		}
		require.Empty(t, h.drain())
	}
	h.inject(h.ack(aeth.NAKPSNSequenceError, nak, 0))

	// Completions: exactly the WQEs whose last PSN is before p, in order.
	wcs := h.e.poll()
	done := int(at) / per
	require.Len(t, wcs, done, "WQEs ending before p must complete, and only they")
	for i, wc := range wcs {
		assert.Equal(t, uint64(i), wc.WRID)
		assert.Equal(t, cq.StatusSuccess, wc.Status)
	}
	// Retransmission: from p exactly, the rest of the WQE holding p, then
	// the later WQEs from their start, with the same PSNs as before.
	again := h.drain()
	require.NotEmpty(t, again, "no retransmission after the NAK")
	assert.Equal(t, nak, again[0].f.BTH.PSN, "retransmission must restart at the NAK PSN")
	var want []emitted
	for _, e := range first {
		if !e.f.BTH.PSN.Before(nak) {
			want = append(want, e)
		}
	}
	require.Len(t, again, len(want))
	for i := range want {
		w, g := want[i].f, again[i].f
		assert.Equal(t, w.BTH.PSN, g.BTH.PSN, "packet %d", i)
		assert.Equal(t, w.BTH.Opcode, g.BTH.Opcode, "packet %d", i)
		assert.Equal(t, w.RETH, g.RETH, "packet %d", i)
		assert.Equal(t, want[i].payload, again[i].payload, "packet %d", i)
	}
	s := q.Counters().Snapshot()
	assert.Equal(t, uint64(len(want)), s[qp.CounterRetransmittedPkts])
	assert.Equal(t, uint64(1), s[qp.CounterRcvdSeqErr])
}

// nakPair loses one request: for SEND/WRITE (four packets per WQE) the
// third packet of WQE 2, mid-message; for READ the request of READ 2.
func nakPair(t *testing.T, o op, mtu qp.MTU) {
	p := defaultParams()
	p.mtu = mtu
	m := mtu.Bytes()
	const nwqe, per = 6, 4
	drop := 2*per + 2
	if o == opRead {
		drop = 2
	}
	pr := newPair(t, p, testutil.Impairment{DropList: []int{drop}}, testutil.Impairment{})
	base := p.psnA
	var nak bth.PSN
	nakSeen := false
	var firstAfter *bth.PSN
	var doneAtRetry int
	sent := map[bth.PSN]int{}
	var sentBeforeNAK []bth.PSN
	watch(pr.a, func(_ time.Time, dir string, pk *wire.Packet) {
		switch {
		case dir == ">A" && pk.AETH != nil && pk.AETH.Syndrome() == aeth.NAKPSNSequenceError:
			require.False(t, nakSeen, "a second NAK")
			nak, nakSeen = pk.BTH.PSN(), true
		case dir == "A>" && pk.Opcode().IsRequest():
			psn := pk.BTH.PSN()
			if nakSeen && firstAfter == nil {
				firstAfter = &psn
				doneAtRetry = sendCount(pr.a)
			}
			if !nakSeen {
				sentBeforeNAK = append(sentBeforeNAK, psn)
			}
			sent[psn]++
		}
	})
	runTransfer(t, pr, transfer{op: o, total: nwqe * per * m, msg: per * m, depth: nwqe}, time.Second)
	require.True(t, nakSeen, "no NAK")
	require.NotNil(t, firstAfter, "no retransmission")
	wantNAK := base.Add(uint32(drop))
	if o == opRead {
		wantNAK = base.Add(uint32(drop * per))
	}
	assert.Equal(t, wantNAK, nak, "NAK PSN")
	assert.Equal(t, nak, *firstAfter, "retransmission must restart at the NAK PSN")
	assert.Equal(t, int(nak.Sub(base))/per, doneAtRetry, "WQEs ending before p complete by the retransmission")
	var resent uint64
	for psn, n := range sent {
		if n > 1 {
			assert.False(t, psn.Before(nak), "PSN %v before the NAK PSN %v was sent again", psn, nak)
			resent++
		}
	}
	var after uint64 // PSNs at or past p sent before the NAK: the Go-Back-N set
	for _, psn := range sentBeforeNAK {
		if !psn.Before(nak) {
			after++
		}
	}
	assert.Equal(t, after, resent, "every packet from p on, and only those, sent again")
	aS := pr.a.qp.Counters().Snapshot()
	assert.Equal(t, uint64(1), aS[qp.CounterRcvdSeqErr])
	assert.Equal(t, uint64(1), aS[qp.CounterCompleterRetryErr])
}

// ---------------------------------------------------------------------------
// matrix B6: ACK coalescing.

// TestB6_AckCoalescing moves 64 MiB in 1 MiB WRITEs (and SENDs), the PR
// tier of the row's 1 GiB (GOROCE_LONG=1), and watches the wire. Pass:
// AckReq on every last packet and at least every 64 packets (rxe
// init_req_packet, RXE_MAX_PKT_PER_ACK); responder ACKs ≤ packets/64 +
// messages (ACKs only on AckReq, IBA 9.7.5.1.1); outstanding PSNs ≤ 128 at
// all times (RXE_MAX_UNACKED_PSNS).
func TestB6_AckCoalescing(t *testing.T) {
	total := prSize(64 << 20)
	if longTier() {
		total = 1 << 30
	}
	const msg = 1 << 20
	for _, mtu := range matrixMTUs {
		for _, o := range []op{opWrite, opSend} {
			t.Run(o.String()+"/"+mtu.String(), func(t *testing.T) {
				p := defaultParams()
				p.mtu = mtu
				pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{})
				var pkts, lasts, run, maxRun, maxOut, acks int
				var missing []bth.PSN
				acked := p.psnA // oldest PSN not yet acknowledged, as seen on the wire
				watch(pr.a, func(_ time.Time, dir string, pk *wire.Packet) {
					switch {
					case dir == "A>" && pk.Opcode().IsRequest():
						pkts++
						op := pk.Opcode()
						if op.IsLast() || op.IsOnly() {
							lasts++
							if !pk.BTH.AckReq() {
								missing = append(missing, pk.BTH.PSN())
							}
						}
						if pk.BTH.AckReq() {
							run = 0
						} else {
							run++
							maxRun = max(maxRun, run)
						}
						maxOut = max(maxOut, int(pk.BTH.PSN().Sub(acked))+1)
					case dir == ">A" && pk.Opcode() == bth.RCAcknowledge && pk.AETH.Syndrome().IsACK():
						acked = pk.BTH.PSN().Next()
					}
				})
				watch(pr.b, func(_ time.Time, dir string, pk *wire.Packet) {
					if dir == "B>" && pk.Opcode() == bth.RCAcknowledge {
						acks++
					}
				})
				res := runTransfer(t, pr, transfer{op: o, total: total, msg: msg, depth: 16}, time.Minute)
				msgs := total / msg
				assert.Equal(t, msgs, lasts)
				assert.Empty(t, missing, "last packets without AckReq")
				assert.Less(t, maxRun, qp.MaxPktsPerAck, "a run of %d packets without AckReq", maxRun)
				assert.LessOrEqual(t, acks, pkts/qp.MaxPktsPerAck+msgs, "responder ACKs")
				assert.LessOrEqual(t, maxOut, qp.MaxUnackedPSNs, "outstanding PSNs")
				zeroSpurious(t, "A", res.aSnap)
				t.Logf("%d packets, %d messages, %d ACKs (bound %d), longest run without AckReq %d, max outstanding %d; %.2f Gb/s virtual",
					pkts, msgs, acks, pkts/qp.MaxPktsPerAck+msgs, maxRun, maxOut, res.goodput/1e9)
			})
		}
	}
}

// ---------------------------------------------------------------------------
// matrix B7: MSN.

// TestB7_MSN checks the AETH MSN (IBA 9.7.5.1.1; rxe resp.msn): it equals
// the number of messages the responder has completed, mod 2^24, in every
// ACK, NAK, READ response and ATOMIC ACK; a READ (and an ATOMIC) counts
// when it arrives (C9-148); duplicates, NAKed and RNR-NAKed requests and
// unfinished messages do not count.
func TestB7_MSN(t *testing.T) {
	for _, mtu := range matrixMTUs {
		t.Run("pair/"+mtu.String(), func(t *testing.T) { msnPair(t, mtu) })
	}
	t.Run("hand", msnHand)
	t.Run("wrap", msnWrap)
}

// msnPair runs a mix of every operation over a clean pair and checks each
// AETH B sends against the messages B has seen complete.
func msnPair(t *testing.T, mtu qp.MTU) {
	p := defaultParams()
	p.mtu = mtu
	pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{})
	m := mtu.Bytes()
	a, b := pr.a, pr.b
	abuf := testutil.Pattern(pr.seed, 64*m)
	bbuf := testutil.Pattern(pr.seed+1, 64*m)
	am, bm := a.reg(abuf, allAccess), b.reg(bbuf, allAccess)
	// countAt[psn] is the number of messages B had completed once it took
	// the request at psn: what every AETH answering psn must carry. A READ
	// counts on arrival, for each PSN of its response. The link is clean, so
	// requests arrive in order.
	var count uint32
	countAt := map[bth.PSN]uint32{}
	var checked int
	var lastMSN uint32
	watch(b, func(_ time.Time, dir string, pk *wire.Packet) {
		op := pk.Opcode()
		psn := pk.BTH.PSN()
		switch {
		case dir == ">B" && op.IsRequest():
			switch mk := op.Mask(); {
			case mk&bth.MaskRead != 0:
				count++
				n := max(1, (pk.RETH.DMALength()+uint32(m)-1)/uint32(m))
				for k := uint32(0); k < n; k++ {
					countAt[psn.Add(k)] = count
				}
				return
			case mk&bth.MaskAtomic != 0 || op.IsLast() || op.IsOnly():
				count++
			}
			countAt[psn] = count
		case dir == "B>" && pk.AETH != nil:
			want, ok := countAt[psn]
			require.True(t, ok, "%v PSN %v answers no request", op, psn)
			require.Equal(t, want&0xffffff, pk.AETH.MSN(), "%v PSN %v", op, psn)
			require.GreaterOrEqual(t, pk.AETH.MSN(), lastMSN, "%v PSN %v: the MSN went back", op, psn)
			lastMSN = pk.AETH.MSN()
			checked++
		}
	})
	sge := func(off, n int) []qp.SGE {
		return []qp.SGE{{Addr: am.IOVA() + uint64(off), Length: uint32(n), LKey: am.LKey()}}
	}
	wrs := []qp.SendWR{
		{Opcode: qp.WRSend, SGL: sge(0, 3*m)},
		{Opcode: qp.WRRDMAWrite, SGL: sge(0, 2*m), RemoteAddr: bm.IOVA(), RKey: bm.RKey()},
		{Opcode: qp.WRRDMARead, SGL: sge(8*m, 3*m), RemoteAddr: bm.IOVA() + uint64(8*m), RKey: bm.RKey()},
		{Opcode: qp.WRRDMAWriteWithImm, SGL: sge(0, m), RemoteAddr: bm.IOVA() + uint64(16*m), RKey: bm.RKey(), Imm: 5},
		{Opcode: qp.WRSendWithImm, SGL: sge(0, 10), Imm: 6},
		{Opcode: qp.WRRDMARead, SGL: sge(20*m, 100), RemoteAddr: bm.IOVA(), RKey: bm.RKey()},
		{Opcode: qp.WRAtomicFetchAdd, SGL: sge(24*m, 8), RemoteAddr: bm.IOVA() + uint64(32*m), RKey: bm.RKey(), CompareAdd: 1},
		{Opcode: qp.WRRDMAWrite, SGL: nil, RemoteAddr: 0, RKey: 0}, // zero length
		{Opcode: qp.WRAtomicCmpAndSwp, SGL: sge(24*m+8, 8), RemoteAddr: bm.IOVA() + uint64(32*m), RKey: bm.RKey()},
		{Opcode: qp.WRSend, SGL: nil}, // zero length
	}
	const rounds = 40
	var wrid uint64
	for r := 0; r < rounds; r++ {
		for _, w := range wrs {
			wrid++
			w.WRID, w.Flags = wrid, qp.SendSignaled
			if w.Opcode == qp.WRSend || w.Opcode == qp.WRSendWithImm || w.Opcode == qp.WRRDMAWriteWithImm {
				require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: wrid,
					SGL: []qp.SGE{{Addr: bm.IOVA() + uint64(40*m), Length: uint32(4 * m), LKey: bm.LKey()}}}))
			}
			require.NoError(t, a.qp.PostSend(&w))
		}
	}
	n := 0
	require.NoError(t, pr.run(func() bool {
		for _, c := range a.poll() {
			require.Equal(t, cq.StatusSuccess, c.Status, "wr %d", c.WRID)
			n++
		}
		return n == int(wrid)
	}, time.Second))
	assert.Equal(t, uint32(rounds*len(wrs)), count)
	assert.Greater(t, checked, rounds*len(wrs)/2)
	zeroSpurious(t, "B", b.qp.Counters().Snapshot())
	t.Logf("%d messages, %d AETHs checked", count, checked)
}

// msnHand walks the responder through each kind of request by hand.
func msnHand(t *testing.T) {
	p := defaultParams()
	p.psnB = 0x1000
	h := newHand(t, p)
	q := h.e.qp
	m := p.mtu.Bytes()
	buf := testutil.Pattern(testutil.Seed(t), 8*m)
	bm := h.e.reg(buf, allAccess)
	psn := p.psnB
	// WRITE ONLY: MSN 1.
	h.inject(h.reqRETH(bth.RCRDMAWriteOnly, psn, true, bm.IOVA(), bm.RKey(), 8, buf[:8]))
	h.expectOne(aeth.ACKUnlimited, psn, 1)
	psn = psn.Next()
	// READ of three packets: counts when it arrives, MSN 2 on FIRST and LAST.
	readPSN := psn
	h.inject(h.reqRETH(bth.RCRDMAReadRequest, psn, true, bm.IOVA(), bm.RKey(), uint32(3*m), nil))
	out := h.drain()
	require.Len(t, out, 3)
	assert.Equal(t, uint32(2), out[0].f.AETH.MSN)
	assert.Equal(t, bth.RCRDMAReadResponseMiddle, out[1].f.BTH.Opcode)
	assert.Equal(t, uint32(2), out[2].f.AETH.MSN)
	psn = psn.Add(3)
	// A duplicate READ is replayed without counting.
	h.inject(h.reqRETH(bth.RCRDMAReadRequest, readPSN, true, bm.IOVA(), bm.RKey(), uint32(3*m), nil))
	out = h.drain()
	require.Len(t, out, 3)
	assert.Equal(t, uint32(2), out[0].f.AETH.MSN)
	assert.Equal(t, uint32(2), out[2].f.AETH.MSN)
	// A duplicate WRITE: ACK, no count.
	h.inject(h.reqRETH(bth.RCRDMAWriteOnly, p.psnB, true, bm.IOVA(), bm.RKey(), 8, buf[:8]))
	h.expectOne(aeth.ACKUnlimited, psn.Add(1<<24-1), 2)
	// Out of sequence: NAK, no count.
	h.inject(h.req(bth.RCSendOnly, psn.Add(5), true, nil))
	h.expectOne(aeth.NAKPSNSequenceError, psn, 2)
	// SEND without a receive WQE: RNR NAK, no count.
	h.inject(h.req(bth.RCSendOnly, psn, true, []byte("x")))
	h.expectOne(aeth.RNR(p.minRNRTimer), psn, 2)
	require.NoError(t, q.PostRecv(&qp.RecvWR{WRID: 1,
		SGL: []qp.SGE{{Addr: bm.IOVA() + uint64(4*m), Length: uint32(2 * m), LKey: bm.LKey()}}}))
	// SEND FIRST with AckReq: the message is not complete, MSN stays 2.
	h.inject(h.req(bth.RCSendFirst, psn, true, buf[:m]))
	h.expectOne(aeth.ACKUnlimited, psn, 2)
	psn = psn.Next()
	h.inject(h.req(bth.RCSendLast, psn, true, buf[:10]))
	h.expectOne(aeth.ACKUnlimited, psn, 3)
	psn = psn.Next()
	// ATOMIC counts on arrival: MSN 4 in the ATOMIC ACK.
	var f wire.Fields
	f.BTH.Opcode, f.BTH.PSN, f.BTH.AckReq = bth.RCFetchAdd, psn, true
	f.AtomicETH.VA, f.AtomicETH.RKey, f.AtomicETH.SwapData = bm.IOVA()+uint64(7*m), uint32(bm.RKey()), 1
	h.inject(h.packet(f, nil))
	out = h.drain()
	require.Len(t, out, 1)
	assert.Equal(t, bth.RCAtomicAcknowledge, out[0].f.BTH.Opcode)
	assert.Equal(t, uint32(4), out[0].f.AETH.MSN)
}

// msnWrap completes 2^24 + 2 zero-length WRITEs (no AckReq but on the ones
// checked): the MSN wraps to 0, then counts on.
func msnWrap(t *testing.T) {
	if raceDetector {
		t.Skip("2^24 messages: run without -race")
	}
	p := defaultParams()
	p.psnB = 0xFFFF00
	h := newHand(t, p)
	pk := h.req(bth.RCRDMAWriteOnly, 0, false, nil)
	psn := p.psnB
	for i := 1; i < 1<<24-1; i++ {
		pk.BTH.SetPSN(psn)
		h.inject(pk)
		psn = psn.Next()
	}
	if _, ok := h.next(); ok {
		t.Fatal("the responder answered a request without AckReq")
	}
	pk.BTH.SetAckReq(true)
	for _, want := range []uint32{0xffffff, 0, 1} {
		pk.BTH.SetPSN(psn)
		h.inject(pk)
		h.expectOne(aeth.ACKUnlimited, psn, want)
		psn = psn.Next()
	}
}

// ---------------------------------------------------------------------------
// matrix B8, B9: retry exhaustion and reset.

// wrFor returns WR i of a test moving msg bytes per WR between A's region
// am and B's region bm with operation o.
func wrFor(o op, i, msg int, am, bm *mr.Region) qp.SendWR {
	off := uint64(i * msg)
	wr := qp.SendWR{WRID: uint64(i),
		SGL: []qp.SGE{{Addr: am.IOVA() + off, Length: uint32(msg), LKey: am.LKey()}}}
	switch o {
	case opSend:
		wr.Opcode = qp.WRSend
	case opWrite:
		wr.Opcode, wr.RemoteAddr, wr.RKey = qp.WRRDMAWrite, bm.IOVA()+off, bm.RKey()
	case opRead:
		wr.Opcode, wr.RemoteAddr, wr.RKey = qp.WRRDMARead, bm.IOVA()+off, bm.RKey()
	}
	return wr
}

// TestB8_RetryExhaustion loses every packet towards the responder with
// timeout = 10 (4.19 ms) and retry_cnt ∈ {0, 1, 3, 6}. Pass: the first WQE
// completes with RETRY_EXC_ERR after (retry_cnt+1) × 4.19 ms, between 0.9×
// and 2× plus 10 ms (IBA 9.7.6.1.3; rxe retransmit_timer →
// COMPST_ERROR_RETRY); the QP goes to ERR; the other N−1 WQEs, signaled or
// not, complete with WR_FLUSH_ERR in post order (IBA 10.7.3.1); the
// receive WQEs are flushed; post_send in ERR produces flush CQEs.
func TestB8_RetryExhaustion(t *testing.T) {
	for _, mtu := range matrixMTUs {
		for _, o := range matrixOps {
			for _, rc := range []uint8{0, 1, 3, 6} {
				t.Run(o.String()+"/"+mtu.String()+"/retry_cnt="+itoa(int(rc)), func(t *testing.T) {
					retryExhaustion(t, o, mtu, rc)
				})
			}
		}
	}
}

func retryExhaustion(t *testing.T, o op, mtu qp.MTU, rc uint8) {
	p := defaultParams()
	p.mtu, p.timeout, p.retryCnt = mtu, 10, rc
	pr := newPair(t, p, testutil.Impairment{Loss: 1}, testutil.Impairment{})
	a, b := pr.a, pr.b
	m := mtu.Bytes()
	const n = 6
	msg := 2 * m
	am := a.reg(testutil.Pattern(pr.seed, n*msg), allAccess)
	bm := b.reg(make([]byte, n*msg), allAccess)
	oracle := testutil.NewOracle()
	for i := 0; i < 4; i++ {
		require.NoError(t, a.qp.PostRecv(&qp.RecvWR{WRID: uint64(100 + i),
			SGL: []qp.SGE{{Addr: am.IOVA(), Length: uint32(m), LKey: am.LKey()}}}))
		oracle.Post("recv", uint64(100+i), true, testutil.AnyLen)
		require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: uint64(i),
			SGL: []qp.SGE{{Addr: bm.IOVA(), Length: uint32(msg), LKey: bm.LKey()}}}))
	}
	t0 := pr.clock.Now()
	for i := 0; i < n; i++ {
		wr := wrFor(o, i, msg, am, bm)
		signaled := i%2 == 1 // WQE 0, the one that fails, is unsignaled
		if signaled {
			wr.Flags = qp.SendSignaled
		}
		require.NoError(t, a.qp.PostSend(&wr))
		oracle.Post("send", wr.WRID, signaled, uint32(msg))
	}
	var failedAt time.Duration
	require.NoError(t, pr.run(func() bool {
		if len(a.poll()) > 0 && failedAt == 0 {
			failedAt = pr.clock.Now().Sub(t0)
		}
		return failedAt != 0
	}, 10*time.Second))
	T, _ := qp.AckTimeout(10)
	want := time.Duration(rc+1) * T
	t.Logf("retry_cnt=%d: RETRY_EXC_ERR after %v (want %v, bounds [%v, %v])", rc, failedAt, want,
		want*9/10, 2*want+10*time.Millisecond)
	assert.GreaterOrEqual(t, failedAt, want*9/10)
	assert.LessOrEqual(t, failedAt, 2*want+10*time.Millisecond)
	assert.Equal(t, qp.StateErr, a.qp.State())

	// Completions: WQE 0 RETRY_EXC_ERR, then 1..n-1 WR_FLUSH_ERR in post
	// order, then the receive WQEs flushed in post order.
	var sends, recvs []cq.Completion
	for _, c := range a.wcs {
		if c.Opcode.IsRecv() {
			recvs = append(recvs, c)
			oracle.Complete("recv", c.WRID, int(c.Status), c.ByteLen)
		} else {
			sends = append(sends, c)
			oracle.Complete("send", c.WRID, int(c.Status), c.ByteLen)
		}
	}
	require.Len(t, sends, n)
	for i, c := range sends {
		want := cq.StatusWRFlushErr
		if i == 0 {
			want = cq.StatusRetryExcErr
		}
		assert.Equal(t, uint64(i), c.WRID)
		assert.Equal(t, want, c.Status, "WQE %d", i)
	}
	require.Len(t, recvs, 4)
	for i, c := range recvs {
		assert.Equal(t, uint64(100+i), c.WRID)
		assert.Equal(t, cq.StatusWRFlushErr, c.Status)
	}
	// post_send (signaled or not) and post_recv in ERR: flushed at once.
	for i := n; i < n+2; i++ {
		wr := wrFor(o, 0, msg, am, bm)
		wr.WRID = uint64(i)
		signaled := i%2 == 1
		if signaled {
			wr.Flags = qp.SendSignaled
		}
		require.NoError(t, a.qp.PostSend(&wr))
		oracle.Post("send", wr.WRID, signaled, uint32(msg))
	}
	require.NoError(t, a.qp.PostRecv(&qp.RecvWR{WRID: 104}))
	oracle.Post("recv", 104, true, testutil.AnyLen)
	late := a.poll()
	require.Len(t, late, 3)
	for _, c := range late {
		assert.Equal(t, cq.StatusWRFlushErr, c.Status)
		q := "send"
		if c.Opcode.IsRecv() {
			q = "recv"
		}
		oracle.Complete(q, c.WRID, int(c.Status), c.ByteLen)
	}
	require.NoError(t, oracle.Check(false))
	assert.True(t, oracle.Done())
	s := a.qp.Counters().Snapshot()
	assert.Equal(t, uint64(1), s[qp.CounterRetryExceededErr])
	assert.Equal(t, uint64(rc), s[qp.CounterCompleterRetryErr], "retries before giving up")
	// Every retry resent the whole window: rc+1 transmissions of each packet.
	per := 2 // packets per WQE
	if o == opRead {
		per = 1 // one request per READ
	}
	assert.Equal(t, (int(rc)+1)*n*per, a.sent, "packets sent by A")
	assert.Equal(t, qp.StateRTS, b.qp.State())
	if _, ok := a.qp.Deadline(); ok {
		t.Error("a QP in ERR keeps a timer armed")
	}
}

// TestB9_RetryResetsOnProgress moves 64 MiB with retry_cnt = 3 and 1% loss
// in both directions. Pass: no RETRY_EXC_ERR — retry_cnt counts
// consecutive retries without progress (IBA 9.7.6.1.3; rxe
// reset_retry_counters) — while the transfer as a whole needs far more
// than 3 retries.
func TestB9_RetryResetsOnProgress(t *testing.T) {
	for _, mtu := range matrixMTUs {
		for _, o := range matrixOps {
			t.Run(o.String()+"/"+mtu.String(), func(t *testing.T) {
				p := defaultParams()
				p.mtu, p.retryCnt = mtu, 3
				loss := testutil.Impairment{Loss: 0.01}
				pr := newPair(t, p, loss, loss)
				res := runTransfer(t, pr, transfer{op: o, total: prSize(64 << 20), msg: 64 << 10, depth: 16}, time.Minute)
				assert.Zero(t, res.aSnap[qp.CounterRetryExceededErr])
				// More retries in all than retry_cnt: without the reset on
				// progress they would have ended in RETRY_EXC_ERR.
				assert.Greater(t, res.aSnap[qp.CounterCompleterRetryErr], uint64(p.retryCnt),
					"the loss should have needed more retries than retry_cnt")
				t.Logf("%v %v: %d retries, %d retransmitted packets, %.2f Gb/s virtual",
					o, mtu, res.aSnap[qp.CounterCompleterRetryErr], res.aSnap[qp.CounterRetransmittedPkts], res.goodput/1e9)
			})
		}
	}
}

// ---------------------------------------------------------------------------
// matrix B10: RNR.

// rnrCase is a message that needs a receive WQE: a SEND of pkts packets,
// or a WRITE WITH IMMEDIATE (which consumes the WQE on its last packet).
type rnrCase struct {
	name string
	op   qp.WROpcode
	pkts int
}

var rnrCases = []rnrCase{
	{"SEND/1pkt", qp.WRSend, 1},
	{"SEND/3pkt", qp.WRSend, 3},
	{"WRITE_WITH_IMM/3pkt", qp.WRRDMAWriteWithImm, 3},
}

// rnrWatch records, on A's side of the wire, the RNR NAKs A receives and
// the times A sends the packet the responder RNR-NAKs.
type rnrWatch struct {
	nakAt   []time.Duration
	nakPSN  []bth.PSN
	sendAt  []time.Duration // transmissions of the RNR-NAKed PSN
	seqNAKs int             // NAK PSN sequence errors A receives
}

func watchRNR(pr *pair, rnrPSN bth.PSN) *rnrWatch {
	w := &rnrWatch{}
	watch(pr.a, func(now time.Time, dir string, pk *wire.Packet) {
		at := now.Sub(testutil.Epoch())
		switch {
		case dir == ">A" && pk.AETH != nil && pk.AETH.Syndrome().IsRNR():
			w.nakAt = append(w.nakAt, at)
			w.nakPSN = append(w.nakPSN, pk.BTH.PSN())
		case dir == ">A" && pk.AETH != nil && pk.AETH.Syndrome() == aeth.NAKPSNSequenceError:
			w.seqNAKs++
		case dir == "A>" && pk.Opcode().IsRequest() && pk.BTH.PSN() == rnrPSN:
			w.sendAt = append(w.sendAt, at)
		}
	})
	return w
}

// TestB10_RNR has no receive posted at the responder, min_rnr_timer = 12
// (0.64 ms). Pass: the gap between retries is ≥ 0.64 ms (IBA 9.7.5.2.8);
// with rnr_retry = 7 (infinite) a receive posted after 20 ms lets the
// message succeed; with rnr_retry = 2 and no receive the WQE completes with
// RNR_RETRY_EXC_ERR after exactly 3 RNR NAKs; either way retry_cnt is
// unchanged (RNR NAKs do not consume it: with retry_cnt = 0 any transport
// retry would end in RETRY_EXC_ERR) and the responder's ePSN is unchanged.
func TestB10_RNR(t *testing.T) {
	for _, mtu := range matrixMTUs {
		for _, tc := range rnrCases {
			t.Run("recover/"+tc.name+"/"+mtu.String(), func(t *testing.T) { rnrRecover(t, tc, mtu) })
			for _, rc := range []uint8{0, 7} {
				t.Run("exhaust/"+tc.name+"/"+mtu.String()+"/retry_cnt="+itoa(int(rc)), func(t *testing.T) {
					rnrExhaust(t, tc, mtu, rc)
				})
			}
		}
	}
}

// rnrSetup builds the pair and posts n WRs of tc on A (WR 0 signaled, the
// others alternating), with nothing posted at B. It returns the PSN the
// responder RNR-NAKs (the first packet, or the last of a WRITE WITH IMM).
func rnrSetup(t *testing.T, tc rnrCase, mtu qp.MTU, rnrRetry, retryCnt uint8, n int) (*pair, *mr.Region, *mr.Region, []byte, bth.PSN) {
	p := defaultParams()
	p.mtu, p.minRNRTimer, p.rnrRetry, p.retryCnt = mtu, 12, rnrRetry, retryCnt
	pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{})
	msg := tc.pkts * mtu.Bytes()
	src := testutil.Pattern(pr.seed, n*msg)
	am := pr.a.reg(src, allAccess)
	bm := pr.b.reg(make([]byte, n*msg), allAccess)
	for i := 0; i < n; i++ {
		wr := qp.SendWR{WRID: uint64(i), Opcode: tc.op, Imm: 0xabc,
			SGL: []qp.SGE{{Addr: am.IOVA() + uint64(i*msg), Length: uint32(msg), LKey: am.LKey()}}}
		if tc.op == qp.WRRDMAWriteWithImm {
			wr.RemoteAddr, wr.RKey = bm.IOVA()+uint64(i*msg), bm.RKey()
		}
		if i%2 == 0 {
			wr.Flags = qp.SendSignaled
		}
		require.NoError(t, pr.a.qp.PostSend(&wr))
	}
	rnrPSN := p.psnA
	if tc.op == qp.WRRDMAWriteWithImm {
		rnrPSN = rnrPSN.Add(uint32(tc.pkts - 1))
	}
	return pr, am, bm, src, rnrPSN
}

func rnrRecover(t *testing.T, tc rnrCase, mtu qp.MTU) {
	const retryCnt = 0
	pr, _, bm, src, rnrPSN := rnrSetup(t, tc, mtu, 7, retryCnt, 1)
	a, b := pr.a, pr.b
	w := watchRNR(pr, rnrPSN)
	t0 := pr.clock.Now()
	a.pump(t0)
	require.NoError(t, pr.sim.RunTo(t0.Add(20*time.Millisecond)))
	require.Empty(t, a.poll(), "the WQE completed without a receive WQE")
	require.Empty(t, b.poll())
	msg := tc.pkts * mtu.Bytes()
	require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 77,
		SGL: []qp.SGE{{Addr: bm.IOVA(), Length: uint32(msg), LKey: bm.LKey()}}}))
	var sendWC, recvWC []cq.Completion
	require.NoError(t, pr.run(func() bool {
		sendWC = append(sendWC, a.poll()...)
		recvWC = append(recvWC, b.poll()...)
		return len(sendWC) > 0 && len(recvWC) > 0
	}, time.Second))
	require.Len(t, sendWC, 1)
	assert.Equal(t, cq.StatusSuccess, sendWC[0].Status)
	require.Len(t, recvWC, 1)
	assert.Equal(t, cq.StatusSuccess, recvWC[0].Status)
	assert.Equal(t, uint64(77), recvWC[0].WRID)
	assert.Equal(t, uint32(msg), recvWC[0].ByteLen)
	assert.Equal(t, src, bytesOf(t, bm, msg))

	checkRNRGaps(t, w, aeth.RNRDelay(12))
	nNAK := len(w.nakAt)
	rnrDelay := aeth.RNRDelay(12)
	assert.GreaterOrEqual(t, nNAK, int(20*time.Millisecond/(rnrDelay+100*time.Microsecond)), "RNR NAKs in 20 ms")
	assert.LessOrEqual(t, nNAK, int(20*time.Millisecond/rnrDelay)+1, "RNR NAKs in 20 ms")
	aS, bS := a.qp.Counters().Snapshot(), b.qp.Counters().Snapshot()
	assert.Equal(t, uint64(nNAK), aS[qp.CounterRcvdRNRErr])
	assert.Equal(t, uint64(nNAK), bS[qp.CounterSendRNRErr])
	// retry_cnt untouched: no transport retry was started or exhausted.
	assert.Zero(t, aS[qp.CounterCompleterRetryErr], "an RNR NAK consumed retry_cnt")
	assert.Zero(t, aS[qp.CounterRetryExceededErr])
	assert.Equal(t, uint8(retryCnt), a.qp.Query().RetryCnt)
	assert.Zero(t, bS[qp.CounterDuplicateRequest], "a retry arrived behind the ePSN: the ePSN moved")
	t.Logf("%d RNR NAKs in 20 ms; retries %v after each NAK", nNAK, rnrDelay)
}

// bytesOf reads the first n bytes of region r.
func bytesOf(t *testing.T, r *mr.Region, n int) []byte {
	b := make([]byte, n)
	require.NoError(t, r.ReadAt(b, r.IOVA()))
	return b
}

// checkRNRGaps: every RNR NAK names the same PSN, and A retries it no
// sooner than the RNR delay after each NAK (and so no sooner than that
// after its previous transmission).
func checkRNRGaps(t *testing.T, w *rnrWatch, delay time.Duration) {
	t.Helper()
	require.NotEmpty(t, w.nakAt)
	for _, psn := range w.nakPSN {
		require.Equal(t, w.nakPSN[0], psn, "RNR NAK PSNs differ: the ePSN moved")
	}
	require.GreaterOrEqual(t, len(w.sendAt), len(w.nakAt), "transmissions of the RNR-NAKed packet")
	for i := range w.nakAt {
		if i+1 >= len(w.sendAt) {
			break
		}
		gap := w.sendAt[i+1] - w.nakAt[i]
		require.GreaterOrEqual(t, gap, delay, "retry %d only %v after the RNR NAK", i+1, gap)
		require.GreaterOrEqual(t, w.sendAt[i+1]-w.sendAt[i], delay, "retry %d", i+1)
	}
}

func rnrExhaust(t *testing.T, tc rnrCase, mtu qp.MTU, retryCnt uint8) {
	const n = 3
	pr, _, _, _, rnrPSN := rnrSetup(t, tc, mtu, 2, retryCnt, n)
	a, b := pr.a, pr.b
	w := watchRNR(pr, rnrPSN)
	t0 := pr.clock.Now()
	var failedAt time.Duration
	require.NoError(t, pr.run(func() bool {
		if len(a.poll()) > 0 && failedAt == 0 {
			failedAt = pr.clock.Now().Sub(t0)
		}
		return failedAt != 0
	}, time.Second))
	require.Len(t, a.wcs, n)
	for i, c := range a.wcs {
		want := cq.StatusWRFlushErr
		if i == 0 {
			want = cq.StatusRNRRetryExcErr
		}
		assert.Equal(t, uint64(i), c.WRID)
		assert.Equal(t, want, c.Status, "WQE %d", i)
	}
	assert.Equal(t, qp.StateErr, a.qp.State())
	checkRNRGaps(t, w, aeth.RNRDelay(12))
	assert.Len(t, w.nakAt, 3, "RNR NAKs before RNR_RETRY_EXC_ERR")
	aS, bS := a.qp.Counters().Snapshot(), b.qp.Counters().Snapshot()
	assert.Equal(t, uint64(3), aS[qp.CounterRcvdRNRErr])
	assert.Equal(t, uint64(3), bS[qp.CounterSendRNRErr])
	assert.Equal(t, uint64(1), aS[qp.CounterRetryRNRExceededErr])
	assert.Zero(t, aS[qp.CounterCompleterRetryErr], "an RNR episode consumed retry_cnt")
	assert.Zero(t, aS[qp.CounterRetryExceededErr])
	assert.Equal(t, retryCnt, a.qp.Query().RetryCnt)
	t.Logf("RNR_RETRY_EXC_ERR after %v, %d RNR NAKs, %d PSN-sequence NAKs", failedAt, len(w.nakAt), w.seqNAKs)

	// The responder's ePSN did not move: with a receive WQE, the request at
	// the RNR-NAKed PSN is executed now, in sequence.
	require.Equal(t, qp.StateRTS, b.qp.State())
	bq := b.qp
	rbuf := make([]byte, 64)
	rm := b.reg(rbuf, mr.LocalWrite)
	require.NoError(t, bq.PostRecv(&qp.RecvWR{WRID: 9, SGL: []qp.SGE{{Addr: rm.IOVA(), Length: 64, LKey: rm.LKey()}}}))
	ePSN := pr.a.qp.Query().SQPSN // the first PSN A sent: nothing of it was executed
	if tc.op == qp.WRRDMAWriteWithImm {
		ePSN = rnrPSN // FIRST and MIDDLE were executed; LAST is expected
	}
	var f wire.Fields
	f.BTH.PKey, f.BTH.DestQP, f.BTH.PSN, f.BTH.AckReq = 0xffff, bq.QPN(), ePSN, true
	f.BTH.Opcode = bth.RCSendOnly
	if tc.op == qp.WRRDMAWriteWithImm {
		f.BTH.Opcode, f.ImmDt = bth.RCRDMAWriteLastWithImmediate, 1
	}
	payload := []byte("abcd")
	if tc.op == qp.WRRDMAWriteWithImm {
		payload = make([]byte, mtu.Bytes()) // the rest of the message
	}
	buf := make([]byte, qp.MaxPacketLen(mtu))
	nb, err := wire.Build(buf, &f, payload)
	require.NoError(t, err)
	var pk wire.Packet
	require.NoError(t, pk.Parse(buf[:nb]))
	before := bq.Counters().Snapshot()
	bq.HandlePacket(pr.clock.Now(), &pk)
	after := bq.Counters().Snapshot()
	assert.Equal(t, before[qp.CounterOutOfSeqRequest], after[qp.CounterOutOfSeqRequest], "the ePSN moved ahead")
	assert.Equal(t, before[qp.CounterDuplicateRequest], after[qp.CounterDuplicateRequest], "the ePSN moved behind")
	wcs := b.poll()
	require.Len(t, wcs, 1)
	assert.Equal(t, uint64(9), wcs[0].WRID)
	assert.Equal(t, cq.StatusSuccess, wcs[0].Status)
	out := make([]byte, qp.MaxPacketLen(qp.MTU4096))
	no, ok := bq.NextPacket(pr.clock.Now(), out)
	require.True(t, ok)
	var ack wire.Packet
	require.NoError(t, ack.Parse(out[:no]))
	assert.True(t, ack.AETH.Syndrome().IsACK())
	assert.Equal(t, ePSN, ack.BTH.PSN())
}

// ---------------------------------------------------------------------------
// matrix B11: timers.

// TestB11_Timers pins the local ACK timeout and the RNR timer table, as
// values and as virtual time. Pass: T(t) = 4.096 µs × 2^t for t = 1..31,
// and a QP retransmits exactly T(t) after sending (IBA 9.7.6.1.3, rxe
// rxe_qp_from_attr); t = 0 never fires: with 100% loss nothing is ever
// resent and no deadline is armed; the 32-entry RNR table (IBA 9.7.5.2.8
// Table 45, 61.44 ms at code 25, not rxe's 61.41) and a QP waiting exactly
// that long after an RNR NAK.
func TestB11_Timers(t *testing.T) {
	t.Run("AckTimeout", func(t *testing.T) {
		d, ok := qp.AckTimeout(0)
		assert.False(t, ok, "t = 0 disables the timer")
		assert.Zero(t, d)
		for tt := uint8(1); tt <= 31; tt++ {
			d, ok := qp.AckTimeout(tt)
			require.True(t, ok)
			assert.Equal(t, time.Duration(4096)<<tt*time.Nanosecond, d, "t = %d", tt)
		}
		ref := map[uint8]time.Duration{ // doc/rxe.md §6
			8: 1048576 * time.Nanosecond, 10: 4194304 * time.Nanosecond, 12: 16777216 * time.Nanosecond,
			14: 67108864 * time.Nanosecond, 18: 1073741824 * time.Nanosecond, 31: 8796093022208 * time.Nanosecond,
		}
		for tt, want := range ref {
			d, _ := qp.AckTimeout(tt)
			assert.Equal(t, want, d, "t = %d", tt)
		}
	})
	t.Run("fires", func(t *testing.T) {
		for tt := uint8(1); tt <= 31; tt++ {
			p := defaultParams()
			p.timeout = tt
			pr := newPair(t, p, testutil.Impairment{Loss: 1}, testutil.Impairment{})
			am := pr.a.reg(make([]byte, 64), allAccess)
			require.NoError(t, pr.a.qp.PostSend(&qp.SendWR{Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL: []qp.SGE{{Addr: am.IOVA(), Length: 64, LKey: am.LKey()}}, RemoteAddr: 0x1000, RKey: 1}))
			var sends []time.Time
			watch(pr.a, func(now time.Time, dir string, _ *wire.Packet) {
				if dir == "A>" {
					sends = append(sends, now)
				}
			})
			want, _ := qp.AckTimeout(tt)
			require.NoError(t, pr.run(func() bool { return len(sends) >= 3 }, 3*want))
			assert.Equal(t, want, sends[1].Sub(sends[0]), "t = %d: first retransmission", tt)
			assert.Equal(t, want, sends[2].Sub(sends[1]), "t = %d: second retransmission", tt)
		}
	})
	t.Run("zero never fires", func(t *testing.T) {
		for _, o := range matrixOps {
			p := defaultParams()
			p.timeout = 0
			pr := newPair(t, p, testutil.Impairment{Loss: 1}, testutil.Impairment{})
			am := pr.a.reg(make([]byte, 8<<10), allAccess)
			bm := pr.b.reg(make([]byte, 8<<10), allAccess)
			for i := 0; i < 4; i++ {
				wr := wrFor(o, i, 2<<10, am, bm)
				wr.Flags = qp.SendSignaled
				require.NoError(t, pr.a.qp.PostSend(&wr))
			}
			pr.a.pump(pr.clock.Now())
			require.NoError(t, pr.sim.Run(nil, 0)) // until no event is left
			_, armed := pr.a.qp.Deadline()
			assert.False(t, armed, "%v: a deadline with timeout = 0", o)
			sent := pr.a.sent
			for _, later := range []time.Duration{time.Second, time.Hour, 1000 * time.Hour} {
				now := pr.clock.Now().Add(later)
				pr.a.qp.OnTimeout(now)
				pr.a.pump(now)
			}
			assert.Equal(t, sent, pr.a.sent, "%v: something was resent with timeout = 0", o)
			want := 8 // two packets per 2 KiB WQE at MTU 1024
			if o == opRead {
				want = 4
			}
			assert.Equal(t, want, sent, "%v", o)
			s := pr.a.qp.Counters().Snapshot()
			assert.Zero(t, s[qp.CounterRetransmittedPkts])
			assert.Zero(t, s[qp.CounterCompleterRetryErr])
			assert.Empty(t, pr.a.poll())
			assert.Equal(t, qp.StateRTS, pr.a.qp.State())
		}
	})
	t.Run("RNR table", func(t *testing.T) {
		want := [32]time.Duration{655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
			1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920,
			122880, 163840, 245760, 327680, 491520}
		for code := range want {
			assert.Equal(t, want[code]*time.Microsecond, aeth.RNRDelay(uint8(code)), "code %d", code)
			assert.Equal(t, aeth.RNRDelay(uint8(code)), aeth.RNRDelay(uint8(code|0x20)), "code %d: 5 bits", code)
		}
		assert.Equal(t, 61440*time.Microsecond, aeth.RNRDelay(25))
	})
	t.Run("RNR waits", func(t *testing.T) {
		for _, code := range []uint8{1, 12, 25, 31, 0} {
			p := defaultParams()
			p.minRNRTimer, p.rnrRetry, p.timeout = code, 1, 8
			pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{})
			am := pr.a.reg(make([]byte, 64), allAccess)
			require.NoError(t, pr.a.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendSignaled,
				SGL: []qp.SGE{{Addr: am.IOVA(), Length: 64, LKey: am.LKey()}}}))
			w := watchRNR(pr, p.psnA)
			require.NoError(t, pr.run(func() bool { return len(pr.a.poll()) > 0 }, 2*time.Second))
			require.Len(t, w.nakAt, 2)
			require.Len(t, w.sendAt, 2)
			assert.Equal(t, aeth.RNRDelay(code), w.sendAt[1]-w.nakAt[0], "code %d", code)
			assert.Equal(t, cq.StatusRNRRetryExcErr, pr.a.wcs[0].Status)
		}
	})
}

// ---------------------------------------------------------------------------
// matrix B12: responder resources.

// TestB12_ResponderResources covers the responder's READ/ATOMIC resources
// (IBA 9.7.5.1.5; rxe check_resource, rxe_prepare_res, find_resource).
// Pass: max_dest_rd_atomic = 0 and a READ (or ATOMIC) → REM_INV_REQ_ERR
// (NAK invalid request, class C: both QPs in ERR); a duplicate READ outside
// the ring, or with another rkey or range, is dropped silently; the
// requester then recovers by retry (the genuine duplicate is replayed) or,
// if its READ fell out of the ring, errors as in matrix B8.
func TestB12_ResponderResources(t *testing.T) {
	for _, mtu := range matrixMTUs {
		for _, atomic := range []bool{false, true} {
			name := "no-resources/READ/" + mtu.String()
			if atomic {
				name = "no-resources/ATOMIC/" + mtu.String()
			}
			t.Run(name, func(t *testing.T) { noResources(t, mtu, atomic) })
		}
	}
	t.Run("ring/hand", ringHand)
	for _, mtu := range matrixMTUs {
		t.Run("replay/"+mtu.String(), func(t *testing.T) { ringReplay(t, mtu) })
		t.Run("forged-duplicate/"+mtu.String(), func(t *testing.T) { forgedDuplicate(t, mtu) })
		t.Run("outside-ring/"+mtu.String(), func(t *testing.T) { outsideRing(t, mtu) })
		t.Run("outrun/READ/"+mtu.String(), func(t *testing.T) { outrun(t, mtu, false) })
		t.Run("outrun/ATOMIC/"+mtu.String(), func(t *testing.T) { outrun(t, mtu, true) })
	}
}

func noResources(t *testing.T, mtu qp.MTU, atomic bool) {
	pA := defaultParams()
	pA.mtu = mtu
	pB := pA
	pB.maxDestRdAtomic = 0
	pr := newPairWith(t, pA, pB, testutil.Impairment{}, testutil.Impairment{})
	var naks []aeth.Syndrome
	watch(pr.b, func(_ time.Time, dir string, pk *wire.Packet) {
		if dir == "B>" && pk.AETH != nil && !pk.AETH.Syndrome().IsACK() {
			naks = append(naks, pk.AETH.Syndrome())
		}
	})
	am := pr.a.reg(make([]byte, 3*mtu.Bytes()), allAccess)
	bm := pr.b.reg(make([]byte, 3*mtu.Bytes()), allAccess)
	wr := wrFor(opRead, 0, 3*mtu.Bytes(), am, bm)
	if atomic {
		wr = qp.SendWR{Opcode: qp.WRAtomicFetchAdd, SGL: []qp.SGE{{Addr: am.IOVA(), Length: 8, LKey: am.LKey()}},
			RemoteAddr: bm.IOVA(), RKey: bm.RKey(), CompareAdd: 1}
	}
	wr.Flags = qp.SendSignaled
	require.NoError(t, pr.a.qp.PostSend(&wr))
	wr2 := wrFor(opWrite, 1, 8, am, bm) // behind it: flushed
	require.NoError(t, pr.a.qp.PostSend(&wr2))
	require.NoError(t, pr.run(func() bool { return len(pr.a.poll()) > 0 }, time.Second))
	require.Len(t, pr.a.wcs, 2)
	assert.Equal(t, cq.StatusRemInvReqErr, pr.a.wcs[0].Status)
	assert.Equal(t, cq.StatusWRFlushErr, pr.a.wcs[1].Status)
	assert.Equal(t, []aeth.Syndrome{aeth.NAKInvalidRequest}, naks)
	assert.Equal(t, qp.StateErr, pr.a.qp.State())
	assert.Equal(t, qp.StateErr, pr.b.qp.State(), "class C: the responder goes to ERR")
	if !atomic {
		assert.Equal(t, make([]byte, 3*mtu.Bytes()), bytesOf(t, am, 3*mtu.Bytes()), "data arrived")
	} else {
		assert.Equal(t, make([]byte, 8), bytesOf(t, bm, 8), "the atomic was executed")
	}
}

// ringHand drives a responder with one resource by hand: READ 1 then READ 2
// push READ 1 out of the ring.
func ringHand(t *testing.T) {
	p := defaultParams()
	p.maxDestRdAtomic = 1
	p.psnB = 0xFFFFFD // the READs cross the wrap
	h := newHand(t, p)
	q := h.e.qp
	m := p.mtu.Bytes()
	buf := testutil.Pattern(testutil.Seed(t), 8*m)
	bm := h.e.reg(buf, allAccess)
	other := h.e.reg(make([]byte, 8*m), allAccess)
	va, rk := bm.IOVA(), bm.RKey()
	r1, r2 := p.psnB, p.psnB.Add(2)
	h.inject(h.reqRETH(bth.RCRDMAReadRequest, r1, true, va, rk, uint32(2*m), nil))
	require.Len(t, h.drain(), 2)
	h.inject(h.reqRETH(bth.RCRDMAReadRequest, r2, true, va+uint64(2*m), rk, uint32(2*m), nil))
	require.Len(t, h.drain(), 2)
	before := q.Counters().Snapshot()
	dropped := []struct {
		name string
		pk   *wire.Packet
	}{
		{"READ 1, out of the ring", h.reqRETH(bth.RCRDMAReadRequest, r1, true, va, rk, uint32(2*m), nil)},
		{"READ 1's second PSN, out of the ring", h.reqRETH(bth.RCRDMAReadRequest, r1.Next(), true, va+uint64(m), rk, uint32(m), nil)},
		{"READ 2 with another rkey", h.reqRETH(bth.RCRDMAReadRequest, r2, true, va+uint64(2*m), other.RKey(), uint32(2*m), nil)},
		{"READ 2 with another rkey, valid for the range", h.reqRETH(bth.RCRDMAReadRequest, r2, true, other.IOVA(), other.RKey(), uint32(2*m), nil)},
		{"READ 2 longer", h.reqRETH(bth.RCRDMAReadRequest, r2, true, va+uint64(2*m), rk, uint32(3*m), nil)},
		{"READ 2 shifted", h.reqRETH(bth.RCRDMAReadRequest, r2, true, va+uint64(2*m)-8, rk, uint32(2*m), nil)},
		{"READ 2 elsewhere", h.reqRETH(bth.RCRDMAReadRequest, r2, true, va, rk, uint32(2*m), nil)},
	}
	for _, d := range dropped {
		h.inject(d.pk)
		assert.Empty(t, h.drain(), "%s: answered", d.name)
		assert.Equal(t, qp.StateRTS, q.State(), "%s", d.name)
	}
	after := q.Counters().Snapshot()
	assert.Equal(t, uint64(len(dropped)), after[qp.CounterDuplicateRequest]-before[qp.CounterDuplicateRequest])
	assert.Zero(t, after[qp.CounterReadReplays]-before[qp.CounterReadReplays])
	assert.Zero(t, after[qp.CounterRkeyViolation]-before[qp.CounterRkeyViolation])
	// The genuine duplicate of READ 2, whole or from its second PSN, is
	// replayed from memory.
	h.inject(h.reqRETH(bth.RCRDMAReadRequest, r2, true, va+uint64(2*m), rk, uint32(2*m), nil))
	out := h.drain()
	require.Len(t, out, 2)
	assert.Equal(t, r2, out[0].f.BTH.PSN)
	assert.Equal(t, buf[2*m:3*m], out[0].payload)
	h.inject(h.reqRETH(bth.RCRDMAReadRequest, r2.Next(), true, va+uint64(3*m), rk, uint32(m), nil))
	out = h.drain()
	require.Len(t, out, 1)
	assert.Equal(t, r2.Next(), out[0].f.BTH.PSN)
	assert.Equal(t, bth.RCRDMAReadResponseLast, out[0].f.BTH.Opcode)
	assert.Equal(t, buf[3*m:4*m], out[0].payload)
	assert.Equal(t, uint64(2), q.Counters().Snapshot()[qp.CounterReadReplays]-before[qp.CounterReadReplays])
	// The ePSN never moved: the next READ is executed in sequence.
	h.inject(h.reqRETH(bth.RCRDMAReadRequest, r2.Add(2), true, va, rk, 8, nil))
	out = h.drain()
	require.Len(t, out, 1)
	assert.Equal(t, bth.RCRDMAReadResponseOnly, out[0].f.BTH.Opcode)
	assert.Equal(t, r2.Add(2), out[0].f.BTH.PSN)
}

// ringReplay loses the first response of each of the first READs, with
// max_rd_atomic = max_dest_rd_atomic ∈ {1, 4}: the requester retries and
// the responder replays from its ring.
func ringReplay(t *testing.T, mtu qp.MTU) {
	for _, depth := range []uint8{1, 4} {
		p := defaultParams()
		p.mtu, p.maxRdAtomic, p.maxDestRdAtomic = mtu, depth, depth
		var seen int
		firstResp := func(b []byte) bool { // drop the FIRST response of the first 3 READs
			var pk wire.Packet
			if pk.Parse(b) != nil || pk.Opcode() != bth.RCRDMAReadResponseFirst || seen >= 3 {
				return false
			}
			seen++
			return true
		}
		pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{DropIf: firstResp})
		res := runTransfer(t, pr, transfer{op: opRead, total: 64 * mtu.Bytes(), msg: 4 * mtu.Bytes(), depth: 8}, time.Second)
		assert.Equal(t, 3, seen)
		assert.GreaterOrEqual(t, res.bSnap[qp.CounterReadReplays], uint64(3), "depth %d", depth)
		assert.Zero(t, res.aSnap[qp.CounterRetryExceededErr])
	}
}

// forgedDuplicate: the READ's responses are lost; before the requester's
// timeout, an attacker injects copies of its request with another rkey and
// with a longer range. Both are dropped silently (no NAK, no ERR), and the
// requester's own retry is replayed: success.
func forgedDuplicate(t *testing.T, mtu qp.MTU) {
	p := defaultParams()
	p.mtu, p.maxRdAtomic, p.maxDestRdAtomic, p.timeout = mtu, 1, 1, 10
	m := mtu.Bytes()
	pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{DropList: []int{0, 1, 2, 3}})
	var request []byte
	watch(pr.a, func(_ time.Time, dir string, pk *wire.Packet) {
		if dir == "A>" && pk.Opcode() == bth.RCRDMAReadRequest && request == nil {
			request = bytes.Clone(pk.Transport)
		}
	})
	var bOut int
	watch(pr.b, func(_ time.Time, dir string, _ *wire.Packet) {
		if dir == "B>" {
			bOut++
		}
	})
	src := testutil.Pattern(pr.seed, 4*m)
	bm := pr.b.reg(src, allAccess)
	am := pr.a.reg(make([]byte, 4*m), allAccess)
	decoy := pr.b.reg(make([]byte, 8*m), allAccess)
	wr := wrFor(opRead, 0, 4*m, am, bm)
	wr.Flags = qp.SendSignaled
	require.NoError(t, pr.a.qp.PostSend(&wr))
	t0 := pr.clock.Now()
	pr.a.pump(t0)
	require.NoError(t, pr.sim.RunTo(t0.Add(time.Millisecond)))
	require.NotNil(t, request)
	require.Equal(t, 4, bOut, "the four responses (lost)")
	forge := func(edit func(pk *wire.Packet)) {
		b := bytes.Clone(request)
		var pk wire.Packet
		require.NoError(t, pk.Parse(b))
		edit(&pk)
		seal(pr.a, b)
		pr.ab.Inject(pr.clock.Now(), b)
	}
	forge(func(pk *wire.Packet) { pk.RETH.SetRKey(uint32(decoy.RKey())) })
	forge(func(pk *wire.Packet) { pk.RETH.SetDMALength(uint32(5 * m)) })
	forge(func(pk *wire.Packet) { pk.RETH.SetVA(decoy.IOVA()); pk.RETH.SetRKey(uint32(decoy.RKey())) })
	require.NoError(t, pr.sim.RunTo(t0.Add(2*time.Millisecond)))
	assert.Equal(t, 4, bOut, "a forged duplicate was answered")
	assert.Equal(t, qp.StateRTS, pr.b.qp.State())
	bS := pr.b.qp.Counters().Snapshot()
	assert.Equal(t, uint64(3), bS[qp.CounterDuplicateRequest])
	assert.Zero(t, bS[qp.CounterReadReplays])
	assert.Zero(t, bS[qp.CounterRkeyViolation])
	require.NoError(t, pr.run(func() bool { return len(pr.a.poll()) > 0 }, time.Second))
	require.Len(t, pr.a.wcs, 1)
	assert.Equal(t, cq.StatusSuccess, pr.a.wcs[0].Status)
	assert.Equal(t, src, bytesOf(t, am, 4*m))
	assert.Equal(t, uint64(1), pr.b.qp.Counters().Snapshot()[qp.CounterReadReplays])
	assert.Equal(t, uint64(1), pr.a.qp.Counters().Snapshot()[qp.CounterCompleterRetryErr], "recovered by one timeout retry")
}

// outsideRing: the requester over-issues (max_rd_atomic 4 against
// max_dest_rd_atomic 1) and READ 1's response is lost: its duplicate falls
// outside the ring and is dropped every time, so the requester errors as in
// matrix B8: RETRY_EXC_ERR, QP in ERR, the rest flushed in post order.
func outsideRing(t *testing.T, mtu qp.MTU) {
	pA := defaultParams()
	pA.mtu, pA.maxRdAtomic, pA.timeout, pA.retryCnt = mtu, 4, 10, 3
	pB := pA
	pB.maxDestRdAtomic = 1
	m := mtu.Bytes()
	pr := newPairWith(t, pA, pB, testutil.Impairment{}, testutil.Impairment{DropList: []int{0}})
	bm := pr.b.reg(testutil.Pattern(pr.seed, 4*m), allAccess)
	am := pr.a.reg(make([]byte, 4*m), allAccess)
	for i := 0; i < 4; i++ {
		wr := wrFor(opRead, i, m, am, bm)
		wr.Flags = qp.SendSignaled
		require.NoError(t, pr.a.qp.PostSend(&wr))
	}
	t0 := pr.clock.Now()
	require.NoError(t, pr.run(func() bool { return len(pr.a.poll()) > 0 }, time.Second))
	el := pr.clock.Now().Sub(t0)
	require.Len(t, pr.a.wcs, 4)
	for i, c := range pr.a.wcs {
		want := cq.StatusWRFlushErr
		if i == 0 {
			want = cq.StatusRetryExcErr
		}
		assert.Equal(t, uint64(i), c.WRID)
		assert.Equal(t, want, c.Status, "READ %d", i)
	}
	assert.Equal(t, qp.StateErr, pr.a.qp.State())
	assert.Equal(t, qp.StateRTS, pr.b.qp.State(), "a dropped duplicate changes nothing at the responder")
	aS, bS := pr.a.qp.Counters().Snapshot(), pr.b.qp.Counters().Snapshot()
	assert.Equal(t, uint64(1), aS[qp.CounterRetryExceededErr])
	assert.Equal(t, uint64(pA.retryCnt), aS[qp.CounterCompleterRetryErr])
	assert.Zero(t, bS[qp.CounterRkeyViolation])
	// As in matrix B8, but the first retry is spent at once on the gap in the READ
	// responses (rxe check_psn → COMPST_ERROR_RETRY), the others by timer:
	// retry_cnt × T rather than (retry_cnt+1) × T.
	T, _ := qp.AckTimeout(pA.timeout)
	assert.GreaterOrEqual(t, el, time.Duration(pA.retryCnt)*T*9/10)
	assert.LessOrEqual(t, el, 2*time.Duration(pA.retryCnt+1)*T+10*time.Millisecond)
	t.Logf("RETRY_EXC_ERR after %v; responder: %d duplicates, %d replays", el, bS[qp.CounterDuplicateRequest], bS[qp.CounterReadReplays])
}

// outrun: two READs, or two atomics, reach a responder with one resource in
// one receive batch (a requester over its depth, or packets that queued up
// while the process was descheduled). Recycling the resource for the second
// request must not cancel the first one's reply: every request is answered,
// in PSN order, as rxe answers it (rxe_responder finishes read_reply /
// atomic_reply before it takes the next packet). Each atomic is applied once
// and acknowledged with its own original value.
func outrun(t *testing.T, mtu qp.MTU, atomic bool) {
	p := defaultParams()
	p.mtu, p.maxDestRdAtomic = mtu, 1
	h := newHand(t, p)
	q := h.e.qp
	m := mtu.Bytes()
	buf := testutil.Pattern(testutil.Seed(t), 4*m)
	if atomic {
		binary.LittleEndian.PutUint64(buf, 40) // native order: mr.Region's atomics
	}
	bm := h.e.reg(buf, allAccess)
	va, rk := bm.IOVA(), bm.RKey()
	r1 := p.psnB
	if !atomic {
		r2 := r1.Add(2)
		h.inject(h.reqRETH(bth.RCRDMAReadRequest, r1, true, va, rk, uint32(2*m), nil))
		h.inject(h.reqRETH(bth.RCRDMAReadRequest, r2, true, va+uint64(2*m), rk, uint32(m+8), nil))
		out := h.drain()
		require.Equal(t, 4, len(out), "both READs answered")
		want := []struct {
			op  bth.Opcode
			psn bth.PSN
			msn uint32
			at  int
			n   int
		}{
			{bth.RCRDMAReadResponseFirst, r1, 1, 0, m},
			{bth.RCRDMAReadResponseLast, r1.Next(), 1, m, m},
			{bth.RCRDMAReadResponseFirst, r2, 2, 2 * m, m},
			{bth.RCRDMAReadResponseLast, r2.Next(), 2, 3 * m, 8},
		}
		for i, w := range want {
			assert.Equal(t, w.op, out[i].f.BTH.Opcode, "packet %d", i)
			assert.Equal(t, w.psn, out[i].f.BTH.PSN, "packet %d", i)
			assert.Equal(t, buf[w.at:w.at+w.n], out[i].payload, "packet %d", i)
			if w.op != bth.RCRDMAReadResponseMiddle {
				assert.Equal(t, w.msn, out[i].f.AETH.MSN, "packet %d", i)
			}
		}
		assert.Equal(t, qp.StateRTS, q.State())
		return
	}
	atom := func(psn bth.PSN, add uint64) *wire.Packet {
		var f wire.Fields
		f.BTH.Opcode, f.BTH.PSN, f.BTH.AckReq = bth.RCFetchAdd, psn, true
		f.AtomicETH.VA, f.AtomicETH.RKey, f.AtomicETH.SwapData = va, uint32(rk), add
		return h.packet(f, nil)
	}
	h.inject(atom(r1, 1))
	h.inject(atom(r1.Next(), 2))
	out := h.drain()
	require.Equal(t, 2, len(out), "both atomics acknowledged")
	for i, w := range []struct {
		psn  bth.PSN
		orig uint64
	}{{r1, 40}, {r1.Next(), 41}} {
		assert.Equal(t, bth.RCAtomicAcknowledge, out[i].f.BTH.Opcode, "ack %d", i)
		assert.Equal(t, w.psn, out[i].f.BTH.PSN, "ack %d", i)
		assert.True(t, out[i].f.AETH.Syndrome.IsACK(), "ack %d", i)
		assert.Equal(t, w.orig, out[i].f.AtomicAckETH, "ack %d", i)
		assert.Equal(t, uint32(i+1), out[i].f.AETH.MSN, "ack %d", i)
	}
	assert.Equal(t, uint64(43), binary.LittleEndian.Uint64(bytesOf(t, bm, 8)), "each applied once")
	// The second atomic holds the resource: its duplicate is replayed from
	// the saved value, not applied again.
	h.inject(atom(r1.Next(), 2))
	out = h.drain()
	require.Len(t, out, 1)
	assert.Equal(t, uint64(41), out[0].f.AtomicAckETH)
	assert.Equal(t, uint64(43), binary.LittleEndian.Uint64(bytesOf(t, bm, 8)))
	assert.Equal(t, qp.StateRTS, q.State())
}
