package qp_test

// The reliability matrix, table A (doc/matrix.md §3): RC SEND, WRITE and
// READ at MTU 1024 and 4096 over an impaired link in virtual time. Every row
// also requires zero corrupted or missing bytes and the exact CQE accounting
// of runTransfer's oracle (one successful CQE per WR, in post order, with
// the right byte_len), so with retry_cnt = 7 no error CQE may appear.
//
// Goodput is payload bits per virtual second, as a ratio to the clean-link
// goodput G0 of the same operation, MTU and size, measured in the same test
// binary (matrix A1). The link is 10 Gb/s with 10 µs one-way delay; the ACK timeout
// exponent is 8 (1.05 ms, about 20–50 round trips), inside the 8–10 range
// §4.2 sets the thresholds for.
//
// Sizes are the PR tier of §4.1: 64 MiB per transfer (GOROCE_LONG=1: the
// nightly 1 GiB).

import (
	"fmt"
	"os"
	"sync"
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

// matrixSize is the transfer size of the matrix: the PR tier's 64 MiB,
// 1 GiB with GOROCE_LONG, 8 MiB under -race (matrix E5, doc/matrix.md §3).
func matrixSize() int {
	if os.Getenv("GOROCE_LONG") != "" {
		return 1 << 30
	}
	return prSize(64 << 20)
}

type matrixCase struct {
	op  op
	mtu qp.MTU
}

func (c matrixCase) String() string { return fmt.Sprintf("%v/%v", c.op, c.mtu) }

func matrixCases() []matrixCase {
	var cs []matrixCase
	for _, mtu := range []qp.MTU{qp.MTU1024, qp.MTU4096} {
		for _, o := range []op{opWrite, opRead, opSend} {
			cs = append(cs, matrixCase{o, mtu})
		}
	}
	return cs
}

// baseline caches G0 per case and size (matrix A1), measured once per test binary.
var baseline sync.Map

func g0(t *testing.T, c matrixCase, size int) float64 {
	key := fmt.Sprintf("%v/%d", c, size)
	if v, ok := baseline.Load(key); ok {
		return v.(float64)
	}
	p := defaultParams()
	p.mtu = c.mtu
	pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{})
	res := runTransfer(t, pr, transfer{op: c.op, total: size, msg: 1 << 20, depth: 8}, time.Minute)
	baseline.Store(key, res.goodput)
	return res.goodput
}

// impaired runs one matrix row for every case: the same impairment both
// ways unless ba is given.
func impaired(t *testing.T, ab testutil.Impairment, ba *testutil.Impairment, p connParams,
	check func(t *testing.T, c matrixCase, res transferResult, ratio float64)) {
	size := matrixSize()
	for _, c := range matrixCases() {
		t.Run(c.String(), func(t *testing.T) {
			base := g0(t, c, size)
			p := p
			p.mtu = c.mtu
			back := ab
			if ba != nil {
				back = *ba
			}
			pr := newPair(t, p, ab, back)
			res := runTransfer(t, pr, transfer{op: c.op, total: size, msg: 1 << 20, depth: 8}, 10*time.Minute)
			ratio := res.goodput / base
			t.Logf("%v: goodput %.3f Gb/s = %.3f × G0; retransmitted %d, dup %d, ooo %d",
				c, res.goodput/1e9, ratio, res.aSnap[qp.CounterRetransmittedPkts]+res.bSnap[qp.CounterRetransmittedPkts],
				res.aSnap[qp.CounterDuplicateRequest]+res.bSnap[qp.CounterDuplicateRequest], res.aSnap[qp.CounterOutOfSeqRequest]+res.bSnap[qp.CounterOutOfSeqRequest])
			check(t, c, res, ratio)
		})
	}
}

// dataPackets counts the requests carrying data and the unique ones.
func dataSender(c matrixCase, res transferResult) (sent, retrans uint64) {
	// WRITE and SEND data flows A→B; READ data flows B→A as responses.
	if c.op == opRead {
		return res.bSnap[qp.CounterSentPkts], res.bSnap[qp.CounterReplayedPkts]
	}
	return res.aSnap[qp.CounterSentPkts], res.aSnap[qp.CounterRetransmittedPkts]
}

func TestA1_Baseline(t *testing.T) {
	size := matrixSize()
	for _, c := range matrixCases() {
		t.Run(c.String(), func(t *testing.T) {
			p := defaultParams()
			p.mtu = c.mtu
			pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{})
			res := runTransfer(t, pr, transfer{op: c.op, total: size, msg: 1 << 20, depth: 8}, time.Minute)
			assert.Zero(t, res.aSnap[qp.CounterRetransmittedPkts]+res.bSnap[qp.CounterRetransmittedPkts], "retransmits")
			assert.Zero(t, res.aSnap[qp.CounterOutOfSeqRequest]+res.bSnap[qp.CounterOutOfSeqRequest], "out_of_seq")
			assert.Zero(t, res.aSnap[qp.CounterDuplicateRequest]+res.bSnap[qp.CounterDuplicateRequest], "duplicates")
			t.Logf("G0 %v: %.3f Gb/s (virtual)", c, res.goodput/1e9)
			baseline.LoadOrStore(fmt.Sprintf("%v/%d", c, size), res.goodput)
		})
	}
}

func TestA2_Loss01Percent(t *testing.T) {
	impaired(t, testutil.Impairment{Loss: 0.001}, nil, defaultParams(), func(t *testing.T, c matrixCase, res transferResult, r float64) {
		assert.GreaterOrEqual(t, r, 0.85)
	})
}

func TestA3_Loss1Percent(t *testing.T) {
	impaired(t, testutil.Impairment{Loss: 0.01}, nil, defaultParams(), func(t *testing.T, c matrixCase, res transferResult, r float64) {
		assert.GreaterOrEqual(t, r, 0.40)
		sent, re := dataSender(c, res)
		// Transmissions per delivered packet: every send over the unique ones.
		tx := float64(sent) / float64(sent-re)
		t.Logf("transmissions per delivered: %.3f (%d sent, %d again)", tx, sent, re)
		assert.LessOrEqual(t, tx, 2.0)
	})
}

func TestA4_Loss5Percent(t *testing.T) {
	impaired(t, testutil.Impairment{Loss: 0.05}, nil, defaultParams(), func(t *testing.T, c matrixCase, res transferResult, r float64) {
		assert.GreaterOrEqual(t, r, 0.05)
	})
}

func TestA5_Bursts(t *testing.T) {
	t.Run("GilbertElliott", func(t *testing.T) {
		ge := testutil.Impairment{GilbertElliott: testutil.GilbertElliott{PGB: 0.005, PBG: 0.30}}
		impaired(t, ge, nil, defaultParams(), func(t *testing.T, c matrixCase, res transferResult, r float64) {
			assert.GreaterOrEqual(t, r, 0.30)
		})
	})
	t.Run("2PercentBurst3", func(t *testing.T) {
		bl := testutil.Impairment{BurstLoss: testutil.BurstLoss{Rate: 0.02, MaxBurst: 3}}
		impaired(t, bl, nil, defaultParams(), func(t *testing.T, c matrixCase, res transferResult, r float64) {
			assert.GreaterOrEqual(t, r, 0.30)
		})
	})
}

func TestA6_Reorder(t *testing.T) {
	ro := testutil.Impairment{Reorder: testutil.Reorder{Rate: 0.01, MinSlots: 1, MaxSlots: 8}}
	impaired(t, ro, nil, defaultParams(), func(t *testing.T, c matrixCase, res transferResult, r float64) {
		assert.GreaterOrEqual(t, r, 0.50)
		if c.op != opRead {
			// READ requests are few; the reordering hits the responses, which
			// the requester sees as gaps (RetransmittedPkts) instead.
			assert.Positive(t, res.bSnap[qp.CounterDuplicateRequest]+res.bSnap[qp.CounterOutOfSeqRequest])
		} else {
			assert.Positive(t, res.aSnap[qp.CounterCompleterRetryErr]+res.bSnap[qp.CounterReadReplays])
		}
	})
}

func TestA7_Duplication(t *testing.T) {
	for _, rate := range []float64{0.01, 0.10} {
		t.Run(fmt.Sprintf("%g", rate), func(t *testing.T) {
			dup := testutil.Impairment{Dup: rate}
			// runTransfer's oracle demands exactly one receive CQE per posted
			// receive WR: duplicates never complete a second one.
			impaired(t, dup, nil, defaultParams(), func(t *testing.T, c matrixCase, res transferResult, r float64) {
				if c.op != opRead {
					assert.Positive(t, res.bSnap[qp.CounterDuplicateRequest])
				}
			})
			t.Run("WriteWithImm", func(t *testing.T) {
				writeImmExactlyOnce(t, dup)
			})
		})
	}
}

// writeImmExactlyOnce posts 2000 WRITE_WITH_IMM of 3000 bytes through dup
// and checks one receive CQE per WR with the right immediate, in order.
func writeImmExactlyOnce(t *testing.T, imp testutil.Impairment) {
	pr := newPair(t, defaultParams(), imp, imp)
	const n, size = 2000, 3000
	src := testutil.Pattern(pr.seed, n*size)
	dst := make([]byte, n*size)
	sm := pr.a.reg(src, mr.LocalWrite)
	dm := pr.b.reg(dst, mr.LocalWrite|mr.RemoteWrite)
	posted, got := 0, 0
	err := pr.run(func() bool {
		for posted < n && posted-got < 32 {
			require.NoError(t, pr.b.qp.PostRecv(&qp.RecvWR{WRID: uint64(posted)}))
			require.NoError(t, pr.a.qp.PostSend(&qp.SendWR{WRID: uint64(posted), Opcode: qp.WRRDMAWriteWithImm,
				SGL:        []qp.SGE{{Addr: sm.IOVA() + uint64(posted*size), Length: size, LKey: sm.LKey()}},
				RemoteAddr: dm.IOVA() + uint64(posted*size), RKey: dm.RKey(), Imm: uint32(posted) ^ 0xa5a5}))
			posted++
		}
		for _, c := range pr.b.poll() {
			require.Equal(t, cq.StatusSuccess, c.Status)
			require.Equal(t, cq.OpRecvRDMAWithImm, c.Opcode)
			require.Equal(t, uint64(got), c.WRID, "receive CQEs in post order, exactly once")
			require.Equal(t, uint32(got)^0xa5a5, c.Imm)
			require.Equal(t, uint32(size), c.ByteLen)
			got++
		}
		pr.a.poll()
		return got == n
	}, time.Minute)
	require.NoError(t, err, "%v", pr)
	testutil.RequireSameBytes(t, src, dst)
	require.Positive(t, pr.b.qp.Counters().Load(qp.CounterDuplicateRequest))
}

func TestA8_Corruption(t *testing.T) {
	size := matrixSize()
	for _, c := range matrixCases() {
		t.Run(c.String(), func(t *testing.T) {
			base := g0(t, c, size)
			var masked int
			// The ICRC does not cover BTH byte 4 (FECN, BECN, Resv6; IBA
			// 7.8.1), so a corruption that lands only there is not detected —
			// nor needs to be: no data changes. Count those.
			imp := testutil.Impairment{Corrupt: testutil.Corrupt{Rate: 0.01, Region: testutil.CorruptAnywhere},
				OnPacket: func(ev testutil.Event) {
					if ev.Kind == testutil.EventCorrupted && len(ev.Pkt) > 4 && ev.Pkt[4] != 0 {
						masked++
					}
				}}
			p := defaultParams()
			p.mtu = c.mtu
			pr := newPair(t, p, imp, imp)
			res := runTransfer(t, pr, transfer{op: c.op, total: size, msg: 1 << 20, depth: 8}, 10*time.Minute)
			corrupted := pr.ab.Stats().Corrupted + pr.ba.Stats().Corrupted
			bad := res.aSnap[qp.CounterBadICRC] + res.bSnap[qp.CounterBadICRC]
			t.Logf("%v: corrupted %d (masked byte %d), bad_icrc %d, ratio %.3f", c, corrupted, masked, bad, res.goodput/base)
			require.Positive(t, corrupted)
			assert.Equal(t, corrupted-uint64(masked), bad, "every corrupted covered byte is caught by the ICRC")
			assert.GreaterOrEqual(t, res.goodput/base, 0.40)
		})
	}
}

func TestA9_Jitter(t *testing.T) {
	j := testutil.Impairment{Delay: time.Millisecond, Jitter: 900 * time.Microsecond}
	p := defaultParams()
	p.timeout = 12 // 16.8 ms: above the 1.9 ms worst-case one-way delay
	impaired(t, j, nil, p, func(t *testing.T, c matrixCase, res transferResult, r float64) {})
}

func TestA10_Blackhole(t *testing.T) {
	hole := testutil.Impairment{Blackhole: testutil.Blackhole{Windows: []testutil.Window{{Start: 5 * time.Millisecond, End: 2005 * time.Millisecond}}}}
	t.Run("Survives", func(t *testing.T) {
		p := defaultParams()
		p.timeout, p.retryCnt = 18, 7 // 1.07 s × 7 retries outlast 2 s
		for _, c := range []matrixCase{{opWrite, qp.MTU1024}, {opRead, qp.MTU1024}, {opSend, qp.MTU4096}} {
			t.Run(c.String(), func(t *testing.T) {
				p.mtu = c.mtu
				pr := newPair(t, p, hole, hole)
				res := runTransfer(t, pr, transfer{op: c.op, total: 64 << 20, msg: 1 << 20, depth: 8}, time.Minute)
				assert.Greater(t, res.elapsed, 2*time.Second)
			})
		}
	})
	t.Run("RetryExceeded", func(t *testing.T) {
		p := defaultParams()
		p.timeout, p.retryCnt = 10, 3 // 4.19 ms × 4 = 16.8 ms
		start := testutil.Window{Start: 0, End: 10 * time.Second}
		all := testutil.Impairment{Blackhole: testutil.Blackhole{Windows: []testutil.Window{start}}}
		pr := newPair(t, p, all, all)
		buf := make([]byte, 1<<20)
		sm := pr.a.reg(buf, mr.LocalWrite)
		dm := pr.b.reg(make([]byte, 1<<20), mr.LocalWrite|mr.RemoteWrite)
		const n = 10
		for i := 0; i < n; i++ {
			flags := qp.SendSignaled
			if i%2 == 1 {
				flags = 0 // unsignaled WRs are flushed with a CQE too
			}
			require.NoError(t, pr.a.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: flags,
				SGL: []qp.SGE{{Addr: sm.IOVA(), Length: 65536, LKey: sm.LKey()}}, RemoteAddr: dm.IOVA(), RKey: dm.RKey()}))
		}
		t0 := pr.clock.Now()
		var wcs []cq.Completion
		var at time.Duration
		require.NoError(t, pr.run(func() bool {
			for _, c := range pr.a.poll() {
				if len(wcs) == 0 {
					at = pr.clock.Now().Sub(t0)
				}
				wcs = append(wcs, c)
			}
			return len(wcs) == n
		}, time.Second))
		require.Equal(t, cq.StatusRetryExcErr, wcs[0].Status)
		want := 4 * 4194304 * time.Nanosecond
		assert.GreaterOrEqual(t, at, want/2, "RETRY_EXC_ERR at %v", at)
		assert.LessOrEqual(t, at, want*3/2+10*time.Millisecond, "RETRY_EXC_ERR at %v", at)
		for i, c := range wcs {
			assert.Equal(t, uint64(i), c.WRID, "post order")
			if i > 0 {
				assert.Equal(t, cq.StatusWRFlushErr, c.Status)
			}
		}
		assert.Equal(t, qp.StateErr, pr.a.qp.State())
		assert.Equal(t, uint64(1), pr.a.qp.Counters().Load(qp.CounterRetryExceededErr))
	})
}

// isResponse classifies a packet as an ACK/NAK (not a READ response).
func isAck(b []byte) bool {
	return len(b) > 0 && (bth.Opcode(b[0]) == bth.RCAcknowledge || bth.Opcode(b[0]) == bth.RCAtomicAcknowledge)
}

func isReadResponse(b []byte) bool {
	return len(b) > 0 && bth.Opcode(b[0]).Mask().Has(bth.MaskRead|bth.MaskResponse)
}

func TestA11_AckPathLoss(t *testing.T) {
	ackLoss := testutil.Impairment{DropIf: isAck, DropIfRate: 0.05}
	clean := testutil.Impairment{}
	size := matrixSize()
	for _, c := range matrixCases() {
		if c.op == opRead {
			continue // a READ is acknowledged by its responses: see matrix A12
		}
		t.Run(c.String(), func(t *testing.T) {
			p := defaultParams()
			p.mtu = c.mtu
			pr := newPair(t, p, clean, ackLoss)
			res := runTransfer(t, pr, transfer{op: c.op, total: size, msg: 1 << 20, depth: 8}, 10*time.Minute)
			sent, re := dataSender(c, res)
			t.Logf("%v: %d ACKs dropped, %d of %d data packets retransmitted", c, pr.ba.Stats().TotalDropped(), re, sent)
			require.Positive(t, pr.ba.Stats().TotalDropped())
			assert.LessOrEqual(t, float64(re), 0.10*float64(sent-re))
		})
	}
}

func TestA12_ReadResponseLoss(t *testing.T) {
	for _, depth := range []uint8{1, 4, 16} {
		t.Run(fmt.Sprintf("rd_atomic=%d", depth), func(t *testing.T) {
			p := defaultParams()
			p.maxRdAtomic, p.maxDestRdAtomic = depth, depth
			loss := testutil.Impairment{DropIf: isReadResponse, DropIfRate: 0.01}
			pr := newPair(t, p, testutil.Impairment{}, loss)
			// READ messages outstanding on the wire: a request sent by A
			// whose LAST/ONLY response has not reached A yet. A message is
			// keyed by its last response PSN, which a re-issued (resumed)
			// request shares with the original.
			open := map[bth.PSN]bool{}
			maxOut := 0
			pr.a.trace = func(now time.Time, dir string, b []byte) {
				var pk wire.Packet
				if pk.Parse(b) != nil {
					return
				}
				switch op := pk.Opcode(); {
				case dir == "A>" && op == bth.RCRDMAReadRequest:
					n := (pk.RETH.DMALength() + 1023) / 1024
					open[pk.BTH.PSN().Add(max(n, 1)-1)] = true
					maxOut = max(maxOut, len(open))
				case dir == ">A" && (op == bth.RCRDMAReadResponseLast || op == bth.RCRDMAReadResponseOnly):
					delete(open, pk.BTH.PSN())
				}
			}
			res := runTransfer(t, pr, transfer{op: opRead, total: matrixSize() / 2, msg: 64 << 10, depth: 32}, 10*time.Minute)
			t.Logf("replays %d, retries %d, max outstanding READs %d", res.bSnap[qp.CounterReadReplays], res.aSnap[qp.CounterCompleterRetryErr], maxOut)
			assert.Positive(t, res.bSnap[qp.CounterReadReplays])
			assert.LessOrEqual(t, maxOut, int(depth))
		})
	}
}

func TestA13_AtomicsExactlyOnce(t *testing.T) {
	imp := testutil.Impairment{Loss: 0.05, Dup: 0.02}
	t.Run("FetchAdd", func(t *testing.T) {
		pr := newPair(t, defaultParams(), imp, imp)
		const n = 10000
		target := make([]byte, 8)
		tm := pr.b.reg(target, mr.RemoteAtomic|mr.LocalWrite)
		res := make([]byte, 8*n)
		rm := pr.a.reg(res, mr.LocalWrite)
		posted, done := 0, 0
		require.NoError(t, pr.run(func() bool {
			for posted < n && posted-done < 16 {
				require.NoError(t, pr.a.qp.PostSend(&qp.SendWR{WRID: uint64(posted), Opcode: qp.WRAtomicFetchAdd,
					Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: rm.IOVA() + uint64(8*posted), Length: 8, LKey: rm.LKey()}},
					RemoteAddr: tm.IOVA(), RKey: tm.RKey(), CompareAdd: 1}))
				posted++
			}
			for _, c := range pr.a.poll() {
				require.Equal(t, cq.StatusSuccess, c.Status, "%v", pr)
				require.Equal(t, uint64(done), c.WRID)
				done++
			}
			return done == n
		}, 10*time.Minute), "%v", pr)
		assert.Equal(t, uint64(n), leU64(target))
		seen := make([]bool, n)
		for i := 0; i < n; i++ {
			v := leU64(res[8*i:])
			require.Less(t, v, uint64(n))
			require.False(t, seen[v], "original value %d returned twice", v)
			seen[v] = true
		}
		t.Logf("atomic replays %d", pr.b.qp.Counters().Load(qp.CounterAtomicReplays))
		assert.Positive(t, pr.b.qp.Counters().Load(qp.CounterAtomicReplays))
	})
	t.Run("CmpSwapChain", func(t *testing.T) {
		pr := newPair(t, defaultParams(), imp, imp)
		const n = 1000
		target := make([]byte, 8)
		tm := pr.b.reg(target, mr.RemoteAtomic|mr.LocalWrite)
		res := make([]byte, 8*n)
		rm := pr.a.reg(res, mr.LocalWrite)
		// Each CMP_SWAP expects i and swaps in i+1: a chain that breaks if
		// any is executed twice or skipped.
		posted, done := 0, 0
		require.NoError(t, pr.run(func() bool {
			for posted < n && posted-done < 16 {
				require.NoError(t, pr.a.qp.PostSend(&qp.SendWR{WRID: uint64(posted), Opcode: qp.WRAtomicCmpAndSwp,
					Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: rm.IOVA() + uint64(8*posted), Length: 8, LKey: rm.LKey()}},
					RemoteAddr: tm.IOVA(), RKey: tm.RKey(), CompareAdd: uint64(posted), Swap: uint64(posted + 1)}))
				posted++
			}
			for _, c := range pr.a.poll() {
				require.Equal(t, cq.StatusSuccess, c.Status, "%v", pr)
				done++
			}
			return done == n
		}, 10*time.Minute), "%v", pr)
		assert.Equal(t, uint64(n), leU64(target))
		for i := 0; i < n; i++ {
			require.Equal(t, uint64(i), leU64(res[8*i:]), "CMP_SWAP %d saw the chain at the wrong value", i)
		}
	})
}
