package qp_test

import (
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
	"github.com/goroce/goroce/wire"
)

// flowHand is a hand driver for the requester side of end-to-end flow
// control (IBA 9.7.7.2): the test posts one-packet messages, feeds ACKs
// with chosen MSNs and credit codes, and counts what the QP sends.
type flowHand struct {
	*hand
	src  *mr.Region
	dst  *mr.Region
	psn  bth.PSN // PSN of the next request the QP sends
	sent int     // messages sent so far
}

func newFlowHand(t *testing.T) *flowHand {
	p := defaultParams()
	h := newHand(t, p)
	return &flowHand{hand: h, src: h.e.reg(make([]byte, 64), mr.LocalWrite), dst: h.e.reg(make([]byte, 64), allAccess), psn: p.psnA}
}

// post posts a one-packet message of opcode o.
func (f *flowHand) post(o qp.WROpcode) {
	f.t.Helper()
	wr := qp.SendWR{Opcode: o, Flags: qp.SendSignaled, SGL: []qp.SGE{f.src.SGE(0, 8)}}
	if o == qp.WRRDMAWrite || o == qp.WRRDMAWriteWithImm {
		wr.RemoteAddr, wr.RKey = f.dst.IOVA(), f.dst.RKey()
	}
	require.NoError(f.t, f.e.qp.PostSend(&wr))
}

// send returns the opcodes of the requests the QP sends now, checking
// that their PSNs follow on.
func (f *flowHand) send() []bth.Opcode {
	f.t.Helper()
	var ops []bth.Opcode
	for _, e := range f.drain() {
		require.Equal(f.t, f.psn, e.f.BTH.PSN)
		f.psn = f.psn.Next()
		ops = append(ops, e.f.BTH.Opcode)
	}
	f.sent += len(ops)
	return ops
}

// ackN acknowledges the first n messages with an ACK carrying MSN msn and
// credit code code.
func (f *flowHand) ackN(n int, msn uint32, code uint8) {
	f.inject(f.ack(aeth.ACK(code), f.psn.Add(uint32(n-f.sent)).Add(bth.PSNMask), msn))
}

func (f *flowHand) waits() uint64 { return f.e.qp.Counters().Load(qp.CounterCreditWaits) }

func sends(n int) []bth.Opcode {
	ops := make([]bth.Opcode, n)
	for i := range ops {
		ops[i] = bth.RCSendOnly
	}
	return ops
}

// TestE2ECreditsRequester checks the requester's side of end-to-end flow
// control: the credits of the last ACK hold back SENDs (and WRITEs with
// immediate) beyond MSN + credits + 1, a later ACK releases them, RDMA
// WRITEs pass and move the limit on, the invalid code 0x1F lifts it for
// good, a QP that has seen no count sends freely, and an idle QP may send
// one message to learn the count whatever it was told.
func TestE2ECreditsRequester(t *testing.T) {
	t.Run("credits limit SENDs, ACKs refresh them", func(t *testing.T) {
		f := newFlowHand(t)
		f.post(qp.WRSend)
		require.Equal(t, sends(1), f.send())
		f.ackN(1, 1, aeth.CreditCode(2)) // LSN 3: messages 2 and 3 have a WQE
		for range 6 {
			f.post(qp.WRSend)
		}
		assert.Equal(t, sends(3), f.send(), "messages 2, 3 and one beyond (4)")
		assert.Equal(t, uint64(1), f.waits())
		assert.Empty(t, f.send(), "held until an ACK")
		f.ackN(2, 2, aeth.CreditCode(4)) // LSN 6
		assert.Equal(t, sends(3), f.send(), "messages 5, 6 and 7")
		assert.Equal(t, uint64(1), f.waits(), "one wait")
		f.post(qp.WRSend)
		assert.Empty(t, f.send(), "message 8 is two past the LSN")
		assert.Equal(t, uint64(2), f.waits())
		f.ackN(4, 4, aeth.CreditCode(1)) // LSN 5: says less than before
		assert.Empty(t, f.send(), "the limit never moves back")
		f.ackN(7, 7, aeth.CreditCode(0)) // LSN 7
		assert.Equal(t, sends(1), f.send())
	})
	t.Run("WRITEs pass and move the limit", func(t *testing.T) {
		f := newFlowHand(t)
		f.post(qp.WRSend)
		f.send()
		f.ackN(1, 1, aeth.CreditCode(0)) // LSN 1
		for _, o := range []qp.WROpcode{qp.WRRDMAWrite, qp.WRRDMAWrite, qp.WRSend, qp.WRSend, qp.WRRDMAWriteWithImm} {
			f.post(o)
		}
		assert.Equal(t, []bth.Opcode{bth.RCRDMAWriteOnly, bth.RCRDMAWriteOnly, bth.RCSendOnly}, f.send(),
			"two WRITEs move the LSN to 3; the SEND after them is message 4 = LSN+1")
		assert.Equal(t, uint64(1), f.waits())
		f.ackN(4, 4, aeth.CreditCode(1)) // LSN 5
		assert.Equal(t, []bth.Opcode{bth.RCSendOnly, bth.RCRDMAWriteOnlyWithImmediate}, f.send(),
			"a WRITE with immediate takes a WQE: held like a SEND")
	})
	t.Run("0x1F lifts the limit for good", func(t *testing.T) {
		f := newFlowHand(t)
		f.post(qp.WRSend)
		f.send()
		f.ackN(1, 1, aeth.CreditCode(0))
		for range 5 {
			f.post(qp.WRSend)
		}
		assert.Equal(t, sends(1), f.send())
		f.inject(f.ack(aeth.ACKUnlimited, f.psn.Add(bth.PSNMask), 2))
		assert.Equal(t, sends(4), f.send())
		f.ackN(6, 6, aeth.CreditCode(0))
		for range 3 {
			f.post(qp.WRSend)
		}
		assert.Equal(t, sends(3), f.send(), "a count after 0x1F changes nothing")
		assert.Equal(t, uint64(1), f.waits())
	})
	t.Run("no count before the first ACK", func(t *testing.T) {
		f := newFlowHand(t)
		for range 20 {
			f.post(qp.WRSend)
		}
		assert.Equal(t, sends(20), f.send())
		assert.Zero(t, f.waits())
	})
	t.Run("an idle requester sends one to learn the count", func(t *testing.T) {
		f := newFlowHand(t)
		f.post(qp.WRSend)
		f.send()
		f.ackN(1, 0, aeth.CreditCode(0)) // a peer whose MSN lags: LSN 0
		for range 3 {
			f.post(qp.WRSend)
		}
		assert.Equal(t, sends(1), f.send(), "message 2 is past LSN+1 but nothing is outstanding")
		assert.Equal(t, uint64(1), f.waits(), "message 3 waits for its ACK")
		f.ackN(2, 2, aeth.CreditCode(0))
		assert.Equal(t, sends(1), f.send())
	})
	t.Run("READ responses carry credits", func(t *testing.T) {
		f := newFlowHand(t)
		f.post(qp.WRSend)
		f.send()
		f.ackN(1, 1, aeth.CreditCode(0)) // LSN 1
		wr := qp.SendWR{Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: []qp.SGE{f.src.SGE(0, 8)},
			RemoteAddr: 0x1000, RKey: 0x1234}
		require.NoError(t, f.e.qp.PostSend(&wr))
		for range 3 {
			f.post(qp.WRSend)
		}
		require.Equal(t, []bth.Opcode{bth.RCRDMAReadRequest, bth.RCSendOnly}, f.send(), "READ moves the LSN to 2; SEND 3 is LSN+1")
		var r wire.Fields
		r.BTH.Opcode, r.BTH.PSN = bth.RCRDMAReadResponseOnly, f.psn.Add(bth.PSNMask-1)
		r.AETH.Syndrome, r.AETH.MSN = aeth.ACK(aeth.CreditCode(2)), 2 // LSN 4
		f.inject(f.packet(r, make([]byte, 8)))
		assert.Equal(t, sends(2), f.send(), "messages 4 and 5 (LSN+1)")
		assert.Equal(t, cq.StatusSuccess, f.e.poll()[1].Status, "the READ completed")
	})
}

// TestE2ECreditsResponder checks the credit count a responder reports: the
// receive WQEs it has when the ACK is built, the one a multi-packet SEND
// in progress uses included, in ACKs, READ responses and ATOMIC ACKs.
func TestE2ECreditsResponder(t *testing.T) {
	tests := []struct {
		name   string
		posted int
		op     string
		msn    uint32
		left   int // WQEs after the request
	}{
		{"WRITE, no receives", 0, "write", 1, 0},
		{"WRITE, 5 receives", 5, "write", 1, 5},
		{"SEND, 5 receives", 5, "send", 1, 4},
		{"SEND, 10 receives", 10, "send", 1, 9},
		{"SEND, 600 receives", 600, "send", 1, 599},
		{"SEND FIRST with AckReq, 3 receives", 3, "send-first", 0, 3},
		{"READ, 7 receives", 7, "read", 1, 7},
		{"ATOMIC, 4000 receives", 4000, "atomic", 1, 4000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultParams()
			h := newHand(t, p)
			q := h.e.qp
			buf := make([]byte, 4096)
			m := h.e.reg(buf, allAccess)
			for i := range tc.posted {
				require.NoError(t, q.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{m.SGE(0, 4096)}}))
			}
			mtu := p.mtu.Bytes()
			switch tc.op {
			case "write":
				h.inject(h.reqRETH(bth.RCRDMAWriteOnly, p.psnB, true, m.IOVA(), m.RKey(), 8, make([]byte, 8)))
			case "send":
				h.inject(h.req(bth.RCSendOnly, p.psnB, true, make([]byte, 8)))
			case "send-first":
				h.inject(h.req(bth.RCSendFirst, p.psnB, true, make([]byte, mtu)))
			case "read":
				h.inject(h.reqRETH(bth.RCRDMAReadRequest, p.psnB, true, m.IOVA(), m.RKey(), 8, nil))
			case "atomic":
				var f wire.Fields
				f.BTH.Opcode, f.BTH.PSN, f.BTH.AckReq = bth.RCFetchAdd, p.psnB, true
				f.AtomicETH.VA, f.AtomicETH.RKey, f.AtomicETH.SwapData = m.IOVA(), uint32(m.RKey()), 1
				h.inject(h.packet(f, nil))
			}
			out := h.drain()
			require.Len(t, out, 1)
			want := aeth.ACK(aeth.CreditCode(tc.left))
			assert.Equal(t, want, out[0].f.AETH.Syndrome, "%v", out[0].f.BTH.Opcode)
			assert.Equal(t, tc.msn, out[0].f.AETH.MSN)
		})
	}
}

// TestE2ECreditsSRQ checks that a QP with a shared receive queue reports
// the invalid credit code 0x1F in every ACK, as hardware does (its WQEs
// are other QPs' too), and that its requester peer is never held.
func TestE2ECreditsSRQ(t *testing.T) {
	rg := newSRQRig(t, 1, qp.SRQConfig{MaxWR: 64})
	var syns []aeth.Syndrome
	watch(rg.recvs[0], func(_ time.Time, dir string, p *wire.Packet) {
		if dir == "R0>" && p.AETH != nil {
			syns = append(syns, p.AETH.Syndrome())
		}
	})
	rg.post(4)
	for range 4 {
		rg.send(0, []byte("hello"), 0)
	}
	rg.runUntil(4)
	require.NotEmpty(t, syns)
	for _, s := range syns {
		assert.Equal(t, aeth.ACKUnlimited, s)
	}
	assert.Zero(t, rg.senders[0].qp.Counters().Load(qp.CounterCreditWaits))
}

// TestE2ECreditsUC checks that end-to-end flow control leaves UC alone: a
// UC responder sends no ACK, and its requester sends every message at
// once whatever the peer's receive queue holds.
func TestE2ECreditsUC(t *testing.T) {
	pr := newDgPair(t, qp.TypeUC)
	m := pr.b.reg(make([]byte, 4096), mr.LocalWrite)
	require.NoError(t, pr.b.qp.PostRecv(&qp.RecvWR{WRID: 1, SGL: []qp.SGE{m.SGE(0, 4096)}}))
	src := pr.a.reg(make([]byte, 64), 0)
	for i := range 10 {
		require.NoError(t, pr.a.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, SGL: []qp.SGE{src.SGE(0, 8)}}))
	}
	require.NoError(t, pr.run(func() bool { return pr.a.sent == 10 && pr.b.qp.Counters().Load(qp.CounterRcvdPkts) == 10 }, time.Second))
	assert.Equal(t, 10, pr.a.sent, "every SEND left")
	assert.Zero(t, pr.b.sent, "no ACKs")
	assert.Len(t, recvWCs(pr.b), 1)
	assert.Zero(t, pr.a.qp.Counters().Load(qp.CounterCreditWaits))
}

// TestE2ECreditsStopAtReceiveQueue runs two QPs: B has 8 receives posted
// when A, having learnt B's count, posts 20 SENDs. A sends the 8 and one
// beyond, which finds no WQE (RNR NAK), and holds the rest instead of
// sending them into RNR NAKs too. Once B posts 12 more receives, all 20
// complete with that one SEND sent twice; without the limit B would have
// dropped the 11 sent behind the RNR NAK and A sent them all again.
func TestE2ECreditsStopAtReceiveQueue(t *testing.T) {
	p := defaultParams()
	pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{})
	a, b := pr.a, pr.b
	sendsOut := 0
	watch(a, func(_ time.Time, dir string, pk *wire.Packet) {
		if dir == "A>" && pk.Opcode() == bth.RCSendOnly {
			sendsOut++
		}
	})
	rbuf := b.reg(make([]byte, 64*64), mr.LocalWrite)
	recv := func(n int) {
		for i := range n {
			require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{rbuf.SGE(64*i, 64)}}))
		}
	}
	src := a.reg(make([]byte, 64), 0)
	send := func(n int) {
		for range n {
			require.NoError(t, a.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{src.SGE(0, 8)}}))
		}
	}
	done := func(n int) func() bool { return func() bool { a.poll(); return len(a.wcs) >= n } }
	recv(9)
	send(1)
	require.NoError(t, pr.run(done(1), time.Second)) // A learns: 8 credits
	send(20)
	rnrs := func() uint64 { return b.qp.Counters().Load(qp.CounterSendRNRErr) }
	require.NoError(t, pr.run(func() bool { return rnrs() > 0 }, time.Second))
	assert.Equal(t, 1+9, sendsOut, "the 8 credits and one beyond")
	assert.Equal(t, uint64(1), a.qp.Counters().Load(qp.CounterCreditWaits))
	recv(12)
	require.NoError(t, pr.run(done(21), time.Second))
	for _, c := range a.wcs {
		require.Equal(t, cq.StatusSuccess, c.Status)
	}
	assert.Equal(t, 21+1, sendsOut, "one SEND sent again after its RNR NAK")
	assert.Equal(t, uint64(1), rnrs())
	assert.Equal(t, uint64(1), a.qp.Counters().Load(qp.CounterRetransmittedPkts))
	assert.Len(t, recvWCs(b), 21)
}
