package qp_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// op is the operation a transfer moves data with.
type op int

const (
	opWrite op = iota
	opRead
	opSend
)

func (o op) String() string { return [...]string{"WRITE", "READ", "SEND"}[o] }

// transfer describes a bulk data transfer from A's src to B's dst (WRITE,
// SEND) or B's src to A's dst (READ), split in messages of msg bytes, with
// at most depth WRs outstanding.
type transfer struct {
	op    op
	total int
	msg   int
	depth int
}

// transferResult is what a transfer measured.
type transferResult struct {
	elapsed  time.Duration // virtual time
	goodput  float64       // payload bits per virtual second
	aSnap    qp.Snapshot
	bSnap    qp.Snapshot
	oracle   *testutil.Oracle
	dataSent int // data-carrying packets sent by the data source
}

// runTransfer moves tr.total bytes and checks integrity: SHA-256 of source
// equals destination, one successful CQE per WR in post order with the
// right byte_len, nothing left outstanding.
func runTransfer(t *testing.T, pr *pair, tr transfer, limit time.Duration) transferResult {
	t.Helper()
	a, b := pr.a, pr.b
	src := testutil.Pattern(pr.seed, tr.total)
	dst := make([]byte, tr.total)
	acc := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead
	var srcMR, dstMR *mr.Region
	var sender, receiver *endpoint
	switch tr.op {
	case opWrite, opSend:
		srcMR, dstMR = a.reg(src, acc), b.reg(dst, acc)
		sender, receiver = a, b
	case opRead:
		srcMR, dstMR = b.reg(src, acc), a.reg(dst, acc)
		sender, receiver = b, a
	}
	_ = sender
	oracle := testutil.NewOracle()
	nmsg := (tr.total + tr.msg - 1) / tr.msg
	posted, completed, recvPosted := 0, 0, 0
	var wrid uint64
	post := func() {
		for posted < nmsg && posted-completed < tr.depth {
			off := posted * tr.msg
			n := min(tr.msg, tr.total-off)
			wrid++
			var wr qp.SendWR
			switch tr.op {
			case opWrite:
				wr = qp.SendWR{WRID: wrid, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
					SGL:        []qp.SGE{{Addr: srcMR.IOVA() + uint64(off), Length: uint32(n), LKey: srcMR.LKey()}},
					RemoteAddr: dstMR.IOVA() + uint64(off), RKey: dstMR.RKey()}
			case opRead:
				wr = qp.SendWR{WRID: wrid, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
					SGL:        []qp.SGE{{Addr: dstMR.IOVA() + uint64(off), Length: uint32(n), LKey: dstMR.LKey()}},
					RemoteAddr: srcMR.IOVA() + uint64(off), RKey: srcMR.RKey()}
			case opSend:
				require.NoError(t, receiver.qp.PostRecv(&qp.RecvWR{WRID: wrid,
					SGL: []qp.SGE{{Addr: dstMR.IOVA() + uint64(off), Length: uint32(n), LKey: dstMR.LKey()}}}))
				oracle.Post("recv", wrid, true, uint32(n))
				recvPosted++
				wr = qp.SendWR{WRID: wrid, Opcode: qp.WRSend, Flags: qp.SendSignaled,
					SGL: []qp.SGE{{Addr: srcMR.IOVA() + uint64(off), Length: uint32(n), LKey: srcMR.LKey()}}}
			}
			require.NoError(t, a.qp.PostSend(&wr))
			oracle.Post("send", wrid, true, uint32(n))
			posted++
		}
	}
	start := pr.clock.Now()
	post()
	err := pr.run(func() bool {
		for _, c := range a.poll() {
			oracle.Complete("send", c.WRID, int(c.Status), c.ByteLen)
			completed++
		}
		for _, c := range b.poll() {
			oracle.Complete("recv", c.WRID, int(c.Status), c.ByteLen)
		}
		if a.qp.State() == qp.StateErr || b.qp.State() == qp.StateErr {
			return true
		}
		post()
		return completed == nmsg && oracle.Done()
	}, limit)
	require.NoError(t, err, "%v a=%+v b=%+v", pr, a.qp.Counters().Snapshot(), b.qp.Counters().Snapshot())
	require.Equal(t, qp.StateRTS, a.qp.State(), "%v", pr)
	require.Equal(t, qp.StateRTS, b.qp.State(), "%v", pr)
	require.NoError(t, oracle.Check(true), "%v", pr)
	testutil.RequireSameBytes(t, src, dst)
	el := pr.clock.Now().Sub(start)
	res := transferResult{
		elapsed: el, goodput: float64(tr.total*8) / el.Seconds(),
		aSnap: a.qp.Counters().Snapshot(), bSnap: b.qp.Counters().Snapshot(), oracle: oracle,
	}
	return res
}

func TestTransferClean(t *testing.T) {
	for _, mtu := range []qp.MTU{qp.MTU1024, qp.MTU4096} {
		for _, o := range []op{opWrite, opRead, opSend} {
			t.Run(o.String()+"/"+mtu.String(), func(t *testing.T) {
				p := defaultParams()
				p.mtu = mtu
				pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{})
				res := runTransfer(t, pr, transfer{op: o, total: 4 << 20, msg: 64 << 10, depth: 16}, 10*time.Second)
				require.Zero(t, res.aSnap[qp.CounterRetransmittedPkts]+res.bSnap[qp.CounterRetransmittedPkts])
				require.Zero(t, res.aSnap[qp.CounterOutOfSeqRequest]+res.bSnap[qp.CounterOutOfSeqRequest])
				t.Logf("%v %v: %.2f Gb/s virtual", o, mtu, res.goodput/1e9)
			})
		}
	}
}

func TestAtomicsClean(t *testing.T) {
	pr := newPair(t, defaultParams(), testutil.Impairment{}, testutil.Impairment{})
	target := make([]byte, 8)
	tm := pr.b.reg(target, mr.LocalWrite|mr.RemoteAtomic)
	res := make([]byte, 8*100)
	rm := pr.a.reg(res, mr.LocalWrite)
	for i := 0; i < 100; i++ {
		require.NoError(t, pr.a.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRAtomicFetchAdd,
			Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: rm.IOVA() + uint64(8*i), Length: 8, LKey: rm.LKey()}},
			RemoteAddr: tm.IOVA(), RKey: tm.RKey(), CompareAdd: 1}))
	}
	n := 0
	require.NoError(t, pr.run(func() bool {
		for _, c := range pr.a.poll() {
			require.Equal(t, cq.StatusSuccess, c.Status)
			n++
		}
		return n == 100
	}, time.Second))
	seen := map[uint64]bool{}
	for i := 0; i < 100; i++ {
		v := leU64(res[8*i:])
		require.False(t, seen[v])
		seen[v] = true
	}
	require.Equal(t, uint64(100), leU64(target))
}

// gatherable is the number of packets of at least qp.MinGatherLen bytes
// of payload in total bytes sent as messages of msg bytes at path MTU mtu.
func gatherable(total, msg, mtu int) int {
	n := 0
	for total > 0 {
		m := min(msg, total)
		total -= m
		n += m / mtu
		if r := m % mtu; r >= qp.MinGatherLen {
			n++
		}
	}
	return n
}

func leU64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// TestTransferGathered runs WRITE, SEND and READ transfers with the
// payloads left in their regions (NextPacketGather) on both sides, clean
// and with 1 % loss each way, where Go-Back-N retransmissions and READ
// replays pin and read the region again: the data must arrive intact, and
// the data packets (requests, READ responses) must have been gathered
// rather than copied, all but the short last packets of the messages
// (below qp.MinGatherLen, copied).
func TestTransferGathered(t *testing.T) {
	for _, loss := range []float64{0, 0.01} {
		for _, mtu := range []qp.MTU{qp.MTU1024, qp.MTU4096} {
			for _, o := range []op{opWrite, opSend, opRead} {
				t.Run(fmt.Sprintf("%v/%v/loss=%v", o, mtu, loss), func(t *testing.T) {
					p := defaultParams()
					p.mtu = mtu
					imp := testutil.Impairment{Loss: loss}
					pr := newPair(t, p, imp, imp)
					pr.a.gather, pr.b.gather = true, true
					res := runTransfer(t, pr, transfer{op: o, total: 1 << 20, msg: 64<<10 + 3, depth: 8}, 30*time.Second)
					retx := res.aSnap[qp.CounterRetransmittedPkts] + res.bSnap[qp.CounterRetransmittedPkts]
					if loss == 0 {
						require.Zero(t, retx)
					}
					pkts := gatherable(1<<20, 64<<10+3, mtu.Bytes())
					src := pr.a
					if o == opRead {
						src = pr.b // READ responses, from B's region
					}
					require.GreaterOrEqual(t, src.gathered, pkts, "data packets gathered (%d retransmitted)", retx)
				})
			}
		}
	}
}
