package qp_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// srqRig is n RC connections in virtual time whose receiving ends (recvs,
// one device: one MR table, PD and receive CQ) share one SRQ; senders[i]
// sends to recvs[i]. Each receive WQE owns a slot of srqSlot bytes of
// one region.
type srqRig struct {
	t       *testing.T
	senders []*endpoint
	recvs   []*endpoint
	srq     *qp.SRQ
	rcq     *cq.CQ
	mem     []byte
	region  *mr.Region
	clock   *testutil.Clock
	sim     *testutil.Sim
	wcs     []cq.Completion
	nextWR  uint64
	limits  int // OnLimit calls
}

const srqSlot = 4096

func newSRQRig(t *testing.T, n int, cfg qp.SRQConfig) *srqRig {
	t.Helper()
	rg := &srqRig{t: t, clock: testutil.NewClock()}
	cfg.OnLimit = func() { rg.limits++ }
	srq, err := qp.NewSRQ(cfg)
	require.NoError(t, err)
	rg.srq = srq
	tbl, err := mr.NewTable(mr.TableConfig{})
	require.NoError(t, err)
	pd := tbl.AllocPD()
	rg.rcq, err = cq.New(cq.Config{Capacity: 1 << 12})
	require.NoError(t, err)
	scq, err := cq.New(cq.Config{Capacity: 1 << 12})
	require.NoError(t, err)
	rg.mem = make([]byte, srqSlot*cfg.MaxWR)
	rg.region, err = tbl.Register(pd, mr.RegisterConfig{Buf: rg.mem, Access: mr.LocalWrite})
	require.NoError(t, err)
	rg.sim = testutil.NewSim(rg.clock)
	p := defaultParams()
	p.minRNRTimer = 1 // 0.01 ms: RNR retries come quickly
	for i := 0; i < n; i++ {
		sAddr := fmt.Sprintf("10.0.1.%d:49153", i+1)
		rAddr := fmt.Sprintf("10.0.2.%d:49154", i+1)
		s := newEndpoint(t, fmt.Sprintf("S%d", i), bth.QPN(0x100+i), sAddr, rAddr)
		q, err := qp.New(qp.Config{QPN: bth.QPN(0x200 + i), MRs: tbl, PD: pd, SendCQ: scq, RecvCQ: rg.rcq, SRQ: srq})
		require.NoError(t, err)
		r := &endpoint{
			t: t, name: fmt.Sprintf("R%d", i), tbl: tbl, pd: pd, scq: scq, rcq: rg.rcq, qp: q,
			buf: make([]byte, qp.MaxPacketLen(qp.MTU4096)),
		}
		r.self, r.peer = s.peer, s.self
		s.out = testutil.NewLink(testutil.SubSeed(1, s.name), linkShape(testutil.Impairment{}))
		r.out = testutil.NewLink(testutil.SubSeed(1, r.name), linkShape(testutil.Impairment{}))
		connect(t, s, r, p, p.psnA, p.psnB)
		connect(t, r, s, p, p.psnB, p.psnA)
		for _, e := range []*endpoint{s, r} {
			rg.sim.AddNode(testutil.NodeFuncs{DeadlineFunc: e.deadline, TimeoutFunc: e.onTimeout})
		}
		rg.sim.AddLink(s.out, r.deliver)
		rg.sim.AddLink(r.out, s.deliver)
		rg.senders = append(rg.senders, s)
		rg.recvs = append(rg.recvs, r)
	}
	return rg
}

// post posts k receive WQEs to the SRQ, WRIDs counting up from 0, each on
// the next slot of the region.
func (rg *srqRig) post(k int) {
	rg.t.Helper()
	for j := 0; j < k; j++ {
		wr := rg.nextWR
		slot := wr % uint64(len(rg.mem)/srqSlot)
		sge := rg.region.SGE(int(slot)*srqSlot, srqSlot)
		require.NoError(rg.t, rg.srq.PostRecv(&qp.RecvWR{WRID: wr, SGL: []qp.SGE{sge}}))
		rg.nextWR++
	}
}

// send has sender i SEND msg (with immediate imm if nonzero).
func (rg *srqRig) send(i int, msg []byte, imm uint32) {
	rg.t.Helper()
	s := rg.senders[i]
	r := s.reg(append([]byte(nil), msg...), 0)
	wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, SGL: []qp.SGE{r.SGE(0, len(msg))}}
	if imm != 0 {
		wr.Opcode, wr.Imm = qp.WRSendWithImm, imm
	}
	require.NoError(rg.t, s.qp.PostSend(&wr))
}

// pollRecv moves the receive completions into rg.wcs.
func (rg *srqRig) pollRecv() int {
	var buf [64]cq.Completion
	for {
		n := rg.rcq.Poll(buf[:])
		if n == 0 {
			return len(rg.wcs)
		}
		rg.wcs = append(rg.wcs, buf[:n]...)
	}
}

// runUntil runs until want receive completions arrived (or 1 s of virtual
// time passed: an error).
func (rg *srqRig) runUntil(want int) {
	rg.t.Helper()
	step := func() bool {
		if rg.pollRecv() >= want {
			return true
		}
		now := rg.clock.Now()
		for i := range rg.senders {
			rg.senders[i].pump(now)
			rg.recvs[i].pump(now)
		}
		return false
	}
	require.NoError(rg.t, rg.sim.Run(step, time.Second))
}

// runFor runs d of virtual time.
func (rg *srqRig) runFor(d time.Duration) {
	rg.t.Helper()
	now := rg.clock.Now()
	for i := range rg.senders {
		rg.senders[i].pump(now)
		rg.recvs[i].pump(now)
	}
	require.NoError(rg.t, rg.sim.RunTo(now.Add(d)))
	rg.pollRecv()
}

// slot returns the bytes of WQE wrid's receive buffer.
func (rg *srqRig) slot(wrid uint64, n uint32) []byte {
	s := wrid % uint64(len(rg.mem)/srqSlot)
	return rg.mem[s*srqSlot : s*srqSlot+uint64(n)]
}

// TestIBA10_2_9_SRQSharedByRCQPs: four RC QPs take receive WQEs from one
// SRQ. Messages sent one at a time, round robin across the QPs, consume
// the WQEs in posting order; each completion is on the shared receive CQ
// with the number of the QP that received it; every byte lands.
func TestIBA10_2_9_SRQSharedByRCQPs(t *testing.T) {
	rg := newSRQRig(t, 4, qp.SRQConfig{MaxWR: 64, MaxSGE: 2})
	rg.post(32)
	var msgs [][]byte
	for k := 0; k < 16; k++ {
		msg := testutil.Pattern(uint64(k+1), 100+k*250) // up to 3850 bytes: 4 packets at MTU 1024
		msgs = append(msgs, msg)
		rg.send(k%4, msg, uint32(k))
		rg.runUntil(k + 1)
	}
	require.Len(t, rg.wcs, 16)
	for k, wc := range rg.wcs {
		assert.Equal(t, uint64(k), wc.WRID, "WQEs are taken in posting order across the QPs")
		assert.Equal(t, cq.StatusSuccess, wc.Status)
		assert.Equal(t, uint32(rg.recvs[k%4].qp.QPN()), wc.QPN, "completion %d", k)
		assert.Equal(t, uint32(len(msgs[k])), wc.ByteLen)
		if k > 0 {
			assert.Equal(t, uint32(k), wc.Imm)
			assert.Equal(t, cq.FlagWithImm, wc.Flags&cq.FlagWithImm)
		}
		assert.True(t, bytes.Equal(msgs[k], rg.slot(wc.WRID, wc.ByteLen)), "message %d", k)
	}
	assert.Equal(t, 16, rg.srq.Len())

	// Now every sender at once, several messages each: every SEND lands
	// exactly once, each QP's messages complete in its own order, and the
	// WQEs used are the 16 left.
	rg.wcs = nil
	sent := map[string]bool{}
	for j := 0; j < 4; j++ {
		for i := 0; i < 4; i++ {
			msg := testutil.Pattern(uint64(1000+i*10+j), 1500+i*300+j)
			sent[string(msg)] = false
			rg.send(i, msg, uint32(i<<8|j+1))
		}
	}
	rg.runUntil(16)
	require.Len(t, rg.wcs, 16)
	wrids := map[uint64]bool{}
	lastJ := map[uint32]int{}
	for _, wc := range rg.wcs {
		require.Equal(t, cq.StatusSuccess, wc.Status)
		assert.False(t, wrids[wc.WRID], "WQE %d used twice", wc.WRID)
		wrids[wc.WRID] = true
		assert.GreaterOrEqual(t, wc.WRID, uint64(16))
		got := string(rg.slot(wc.WRID, wc.ByteLen))
		seen, ok := sent[got]
		assert.True(t, ok && !seen, "WQE %d holds an unknown or repeated message", wc.WRID)
		sent[got] = true
		i, j := int(wc.Imm>>8), int(wc.Imm&0xff)
		assert.Equal(t, uint32(rg.recvs[i].qp.QPN()), wc.QPN)
		assert.Equal(t, lastJ[wc.QPN]+1, j, "QP %#x completes its messages in order", wc.QPN)
		lastJ[wc.QPN] = j
	}
	assert.Equal(t, 0, rg.srq.Len())
}

// TestIBA11_2_3_SRQLimitEvent: the armed limit fires once when the WQE
// count drops below it, disarms (Query reports 0), and fires again only
// after Modify re-arms it (ibv_modify_srq IBV_SRQ_LIMIT; rxe get_srq_wqe).
func TestIBA11_2_3_SRQLimitEvent(t *testing.T) {
	rg := newSRQRig(t, 2, qp.SRQConfig{MaxWR: 16, Limit: 4})
	assert.Equal(t, qp.SRQAttr{MaxWR: 16, MaxSGE: qp.MaxSGE, Limit: 4}, rg.srq.Query())
	rg.post(8)
	for k := 0; k < 8; k++ {
		rg.send(k%2, []byte{byte(k)}, 0)
		rg.runUntil(k + 1)
		left := 8 - (k + 1)
		want := 0
		if left < 4 {
			want = 1
		}
		require.Equal(t, want, rg.limits, "after %d WQEs taken (%d left)", k+1, left)
	}
	assert.Equal(t, 0, rg.srq.Query().Limit, "the limit disarms as it fires")

	// Not re-armed: refilling and draining fires nothing.
	rg.post(3)
	for k := 8; k < 11; k++ {
		rg.send(0, []byte{byte(k)}, 0)
		rg.runUntil(k + 1)
	}
	assert.Equal(t, 1, rg.limits)

	// Re-armed by Modify: one more event on the next crossing.
	require.NoError(t, rg.srq.Modify(2))
	rg.post(4)
	for k := 11; k < 15; k++ {
		rg.send(1, []byte{byte(k)}, 0)
		rg.runUntil(k + 1)
	}
	assert.Equal(t, 2, rg.limits)

	require.ErrorIs(t, rg.srq.Modify(17), qp.ErrInvalidArg)
	require.ErrorIs(t, rg.srq.Modify(-1), qp.ErrInvalidArg)
	for _, wc := range rg.wcs {
		assert.Equal(t, cq.StatusSuccess, wc.Status)
	}
}

// TestIBA10_2_9_SRQEmptyRNR: a SEND to a QP whose SRQ is empty is
// answered with RNR NAK, as with an empty receive queue (IBA 9.7.5.2.8),
// and lands once a WQE is posted to the SRQ.
func TestIBA10_2_9_SRQEmptyRNR(t *testing.T) {
	rg := newSRQRig(t, 2, qp.SRQConfig{MaxWR: 8})
	rg.send(1, []byte("hello"), 0)
	rg.runFor(time.Millisecond)
	assert.Empty(t, rg.wcs)
	assert.NotZero(t, rg.recvs[1].qp.Counters().Load(qp.CounterSendRNRErr))
	assert.NotZero(t, rg.senders[1].qp.Counters().Load(qp.CounterRcvdRNRErr))
	rg.post(1)
	rg.runUntil(1)
	require.Len(t, rg.wcs, 1)
	assert.Equal(t, cq.StatusSuccess, rg.wcs[0].Status)
	assert.Equal(t, uint32(rg.recvs[1].qp.QPN()), rg.wcs[0].QPN)
	assert.Equal(t, "hello", string(rg.slot(0, rg.wcs[0].ByteLen)))
	assert.Equal(t, qp.StateRTS, rg.senders[1].qp.State())
}

// TestSRQVerbsMisuse: the verbs errors around an SRQ.
func TestSRQVerbsMisuse(t *testing.T) {
	rg := newSRQRig(t, 2, qp.SRQConfig{MaxWR: 4, MaxSGE: 1})
	r := rg.recvs[0]
	sge := rg.region.SGE(0, 16)

	// A QP with an SRQ has no RQ of its own (ibv_post_recv fails).
	require.ErrorIs(t, r.qp.PostRecv(&qp.RecvWR{SGL: []qp.SGE{sge}}), qp.ErrInvalidArg)
	assert.Same(t, rg.srq, r.qp.SRQ())

	// max_wr and max_sge.
	for k := 0; k < 4; k++ {
		require.NoError(t, rg.srq.PostRecv(&qp.RecvWR{WRID: uint64(k), SGL: []qp.SGE{sge}}))
	}
	require.ErrorIs(t, rg.srq.PostRecv(&qp.RecvWR{SGL: []qp.SGE{sge}}), qp.ErrQueueFull)
	require.ErrorIs(t, rg.srq.PostRecv(&qp.RecvWR{SGL: []qp.SGE{sge, sge}}), qp.ErrTooManySGE)
	assert.Equal(t, 4, rg.srq.Len())

	// A QP moving to ERR leaves the SRQ's WQEs alone: none is its own.
	require.NoError(t, r.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState))
	assert.Equal(t, 4, rg.srq.Len())
	assert.Zero(t, rg.pollRecv())

	// Destroy is refused while a QP uses the SRQ (EBUSY).
	require.ErrorIs(t, rg.srq.Destroy(), qp.ErrBusy)
	rg.recvs[0].qp.Destroy()
	rg.recvs[0].qp.Destroy() // idempotent: detaches once
	require.ErrorIs(t, rg.srq.Destroy(), qp.ErrBusy)
	rg.recvs[1].qp.Destroy()
	require.NoError(t, rg.srq.Destroy())
	require.ErrorIs(t, rg.srq.Destroy(), qp.ErrInvalidState)
	require.ErrorIs(t, rg.srq.PostRecv(&qp.RecvWR{SGL: []qp.SGE{sge}}), qp.ErrInvalidState)
	require.ErrorIs(t, rg.srq.Modify(1), qp.ErrInvalidState)

	// A destroyed SRQ cannot be attached.
	_, err := qp.New(qp.Config{QPN: 0x300, MRs: r.tbl, PD: r.pd, SendCQ: r.scq, RecvCQ: r.rcq, SRQ: rg.srq})
	require.ErrorIs(t, err, qp.ErrInvalidConfig)
}

func TestNewSRQConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  qp.SRQConfig
		want qp.SRQAttr
		err  error
	}{
		{"defaults", qp.SRQConfig{}, qp.SRQAttr{MaxWR: qp.DefaultMaxWR, MaxSGE: qp.MaxSGE}, nil},
		{"limit", qp.SRQConfig{MaxWR: 8, MaxSGE: 3, Limit: 8}, qp.SRQAttr{MaxWR: 8, MaxSGE: 3, Limit: 8}, nil},
		{"limit above max_wr", qp.SRQConfig{MaxWR: 8, Limit: 9}, qp.SRQAttr{}, qp.ErrInvalidConfig},
		{"max_wr too large", qp.SRQConfig{MaxWR: qp.MaxWR + 1}, qp.SRQAttr{}, qp.ErrInvalidConfig},
		{"max_sge too large", qp.SRQConfig{MaxSGE: qp.MaxSGE + 1}, qp.SRQAttr{}, qp.ErrInvalidConfig},
		{"negative", qp.SRQConfig{MaxWR: -1}, qp.SRQAttr{}, qp.ErrInvalidArg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := qp.NewSRQ(tc.cfg)
			if tc.err != nil {
				require.True(t, errors.Is(err, tc.err), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.Query())
		})
	}
}

func TestEventTypeString(t *testing.T) {
	assert.Equal(t, "SRQ_LIMIT_REACHED", qp.EventSRQLimitReached.String())
	assert.Equal(t, "EventType(3)", qp.EventType(3).String())
}

// TestAllocsResponderSendSRQ pins the SRQ receive path at 0 allocations
// (as hotpath_test.go does for the other paths): post to the
// SRQ, a 4 KiB SEND ONLY taking the WQE, its ACK, its completion.
func TestAllocsResponderSendSRQ(t *testing.T) {
	p := defaultParams()
	p.mtu = hpMTU
	e := newEndpoint(t, "B", 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
	peer := newEndpoint(t, "A", 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
	limits := 0
	srq, err := qp.NewSRQ(qp.SRQConfig{MaxWR: 64, Limit: 1, OnLimit: func() { limits++ }})
	require.NoError(t, err)
	e.qp, err = qp.New(qp.Config{QPN: 0x22, MRs: e.tbl, PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq, SRQ: srq})
	require.NoError(t, err)
	connect(t, e, peer, p, p.psnB, p.psnA)
	r := e.reg(make([]byte, hpPkt), mr.LocalWrite)
	wr := qp.RecvWR{SGL: []qp.SGE{r.SGE(0, hpPkt)}}
	var f wire.Fields
	f.BTH.Opcode = bth.RCSendOnly
	pkt := hpPacket(t, f, testutil.Pattern(1, hpPkt))
	psn, now := p.psnA, testutil.Epoch()
	out := make([]byte, qp.MaxPacketLen(hpMTU))
	wcs := make([]cq.Completion, 4)
	step := func() {
		wr.WRID++
		if err := srq.PostRecv(&wr); err != nil {
			t.Fatal(err)
		}
		pkt.BTH.SetPSN(psn)
		pkt.BTH.SetAckReq(true)
		e.qp.HandlePacket(now, pkt)
		if _, ok := e.qp.NextPacket(now, out); !ok {
			t.Fatal("no ACK")
		}
		if n := e.rcq.Poll(wcs); n != 1 || wcs[0].Status != cq.StatusSuccess || wcs[0].WRID != wr.WRID {
			t.Fatalf("%d completions: %+v", n, wcs[0])
		}
		psn = psn.Next()
	}
	step()
	require.Equal(t, 1, limits)
	require.NoError(t, srq.Modify(1))
	allocs := testing.AllocsPerRun(100, func() {
		step()
		if err := srq.Modify(1); err != nil { // the limit fires on every step
			t.Fatal(err)
		}
	})
	assert.Equal(t, 102, limits)
	assert.Zero(t, allocs, "allocations per SRQ SEND")
}

// TestIBA10_2_9_SRQWQEHeldPerMessage: a QP takes its SRQ WQE when a
// message starts and keeps it to the message's end, while other QPs take
// the next ones (rxe get_srq_wqe into resp.srq_wqe); a WQE a QP holds when
// it enters ERR is flushed on its receive CQ with WR_FLUSH_ERR and the
// QP's number, and the SRQ keeps the rest.
func TestIBA10_2_9_SRQWQEHeldPerMessage(t *testing.T) {
	rg := newSRQRig(t, 2, qp.SRQConfig{MaxWR: 8})
	rg.post(4)
	r0, r1 := rg.recvs[0], rg.recvs[1]
	p := defaultParams()
	data := testutil.Pattern(7, 1024) // one MTU
	buf := make([]byte, qp.MaxPacketLen(qp.MTU1024))
	now := rg.clock.Now()
	deliver := func(e *endpoint, op bth.Opcode, psn bth.PSN) {
		t.Helper()
		var f wire.Fields
		f.BTH.Opcode, f.BTH.PKey, f.BTH.DestQP, f.BTH.PSN = op, 0xffff, e.qp.QPN(), psn
		f.BTH.AckReq = true
		n, err := wire.Build(buf, &f, data)
		require.NoError(t, err)
		var pkt wire.Packet
		require.NoError(t, pkt.Parse(buf[:n]))
		e.qp.HandlePacket(now, &pkt)
	}
	deliver(r0, bth.RCSendFirst, p.psnA)  // r0 takes WQE 0
	deliver(r1, bth.RCSendOnly, p.psnA)   // r1 takes WQE 1 and completes
	deliver(r0, bth.RCSendLast, p.psnA+1) // r0 completes WQE 0
	deliver(r0, bth.RCSendFirst, p.psnA+2)
	assert.Equal(t, 1, rg.srq.Len(), "WQE 2 is r0's, WQE 3 is left")
	require.NoError(t, r0.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState))
	rg.pollRecv()
	want := []struct {
		wrid   uint64
		qpn    bth.QPN
		status cq.Status
		n      uint32
	}{
		{1, r1.qp.QPN(), cq.StatusSuccess, 1024},
		{0, r0.qp.QPN(), cq.StatusSuccess, 2048},
		{2, r0.qp.QPN(), cq.StatusWRFlushErr, 0},
	}
	require.Len(t, rg.wcs, len(want))
	for i, w := range want {
		wc := rg.wcs[i]
		assert.Equal(t, w.wrid, wc.WRID, "completion %d", i)
		assert.Equal(t, uint32(w.qpn), wc.QPN, "completion %d", i)
		assert.Equal(t, w.status, wc.Status, "completion %d", i)
		if w.status == cq.StatusSuccess {
			assert.Equal(t, w.n, wc.ByteLen, "completion %d", i)
		}
	}
	assert.Equal(t, 1, rg.srq.Len())
}

// TestSRQLastWQEReached: a QP with an SRQ raises EventQPLastWQEReached
// once as it enters ERR (IBV_EVENT_QP_LAST_WQE_REACHED; rxe raises it when
// it flushes such a QP); a QP without an SRQ raises nothing.
func TestSRQLastWQEReached(t *testing.T) {
	tbl, err := mr.NewTable(mr.TableConfig{})
	require.NoError(t, err)
	c, err := cq.New(cq.Config{Capacity: 16})
	require.NoError(t, err)
	srq, err := qp.NewSRQ(qp.SRQConfig{MaxWR: 4})
	require.NoError(t, err)
	var got []qp.EventType
	on := func(e qp.EventType) { got = append(got, e) }
	cfg := qp.Config{QPN: 0x40, MRs: tbl, PD: tbl.AllocPD(), SendCQ: c, RecvCQ: c, SRQ: srq, OnEvent: on}
	q, err := qp.New(cfg)
	require.NoError(t, err)
	require.NoError(t, q.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState))
	require.NoError(t, q.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState))
	q.Destroy()
	assert.Equal(t, []qp.EventType{qp.EventQPLastWQEReached}, got)

	cfg.QPN, cfg.SRQ, got = 0x41, nil, nil
	q, err = qp.New(cfg)
	require.NoError(t, err)
	q.Destroy()
	assert.Empty(t, got)
	assert.Equal(t, "QP_LAST_WQE_REACHED", qp.EventQPLastWQEReached.String())
}
