package qp_test

// Matrix C of doc/matrix.md §3: memory protection. Every row asserts the
// requester CQE status the row gives, the responder QP in ERR (class C,
// §1.5), the matching counter (rkey_violation for NAK 0x62), the rest of both
// queues flushed with WR_FLUSH_ERR in post order (IBA 10.7.3.1), memory left
// untouched, and no panic.
//
// Two harnesses are used:
//   - cPair, a connected pair in virtual time: the offending WR is posted
//     first on A, good WRs of every kind (and an unsignaled one) behind it,
//     receive WRs on both sides; the wire from B is tapped for NAKs.
//   - cSolo, a responder QP alone, fed packets crafted with wire.Build
//     through HandlePacket; what it answers is read back with NextPacket and
//     parsed. It covers what no conforming requester sends (lengths that
//     disagree with the RETH or the MTU, ATOMIC WRITE, SEND WITH INVALIDATE).
//
// Features the engine does not have (memory windows, LOCAL_INV,
// SEND_WITH_INV, ATOMIC_WRITE) are tested as far as they exist: their
// opcodes are invalid requests (NAK 0x61), their WR opcodes are refused.

import (
	"bytes"
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

const cAllRemote = mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic

// cNAK is a NAK seen on the wire.
type cNAK struct {
	Syn aeth.Syndrome
	PSN bth.PSN
}

// cWC is the part of a completion the rows check.
type cWC struct {
	WRID   uint64
	Status cq.Status
}

// cPair is a connected pair for the matrix C rows. B, the responder under
// test, has a region with every remote right (bMR) and receive buffers; A
// has one local region (aMR) for sources, sinks and atomic results.
type cPair struct {
	*pair
	bMem    []byte
	bMR     *mr.Region
	bRecvMR *mr.Region
	aMem    []byte
	aMR     *mr.Region

	naks           []cNAK // NAKs B put on the wire
	dropReadResp   bool   // drop B's READ responses
	droppedRead    int    // READ responses dropped
	deregistered   bool   // set by a test once it deregistered a region
	readAfterDereg int    // READ responses with data B sent after that
}

func newCPair(t *testing.T, p connParams) *cPair {
	t.Helper()
	pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{})
	f := &cPair{pair: pr}
	f.bMem = testutil.Pattern(testutil.SubSeed(pr.seed, "bMem"), 16<<10)
	f.bMR = pr.b.reg(f.bMem, cAllRemote)
	f.bRecvMR = pr.b.reg(make([]byte, 16<<10), mr.LocalWrite)
	f.aMem = testutil.Pattern(testutil.SubSeed(pr.seed, "aMem"), 64<<10)
	f.aMR = pr.a.reg(f.aMem, mr.LocalWrite)
	pr.b.drop = f.tapB
	return f
}

// tapB watches every packet B sends.
func (f *cPair) tapB(b []byte) bool {
	var p wire.Packet
	if p.Parse(b) != nil {
		return false
	}
	op := p.Opcode()
	if op == bth.RCAcknowledge && p.AETH.Syndrome().IsNAK() {
		f.naks = append(f.naks, cNAK{p.AETH.Syndrome(), p.BTH.PSN()})
	}
	if op.IsResponse() && op.Mask()&bth.MaskRead != 0 {
		if f.deregistered && len(p.Payload) > 0 {
			f.readAfterDereg++
		}
		if f.dropReadResp {
			f.droppedRead++
			return true
		}
	}
	return false
}

// aSGE is an SGE of n bytes at offset off in A's region.
func (f *cPair) aSGE(off uint64, n uint32) []qp.SGE {
	return []qp.SGE{{Addr: f.aMR.IOVA() + off, Length: n, LKey: f.aMR.LKey()}}
}

// goodWRs are posted behind the offending WR: one of every kind, plus an
// unsignaled WRITE, which must still get its flush CQE (IBA 10.7.3.1).
func (f *cPair) goodWRs() []qp.SendWR {
	b := f.bMR
	return []qp.SendWR{
		{WRID: 2, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: f.aSGE(0, 2048),
			RemoteAddr: b.IOVA() + 4096, RKey: b.RKey()},
		{WRID: 3, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: f.aSGE(2048, 100)},
		{WRID: 4, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: f.aSGE(32<<10, 1024),
			RemoteAddr: b.IOVA() + 8192, RKey: b.RKey()},
		{WRID: 5, Opcode: qp.WRAtomicFetchAdd, Flags: qp.SendSignaled, SGL: f.aSGE(40<<10, 8),
			RemoteAddr: b.IOVA() + 12288, RKey: b.RKey(), CompareAdd: 1},
		{WRID: 6, Opcode: qp.WRRDMAWrite, SGL: f.aSGE(4096, 64),
			RemoteAddr: b.IOVA() + 4096, RKey: b.RKey()},
	}
}

// cExpect is what a row expects of a pair run.
type cExpect struct {
	status   cq.Status     // requester CQE of the offending WR
	nak      aeth.Syndrome // the one NAK B sends
	nakPSN   bth.PSN       // and its PSN
	recvHead cq.Status     // B's first receive WR (WR_FLUSH_ERR unless a SEND used it)
	recvLen  uint32        // B's receive buffer size (default 4096)
	local    bool          // matrix C10: a local error; nothing on the wire, B untouched
}

const (
	cNumGood  = 5
	cNumRecvB = 3
	cNumRecvA = 2
)

// runRow posts bad (as WR 1) and the good WRs behind it, runs until both
// sides have settled, and checks the row's invariants.
func (f *cPair) runRow(t *testing.T, bad qp.SendWR, exp cExpect) {
	t.Helper()
	a, b := f.a, f.b
	if exp.recvHead == 0 {
		exp.recvHead = cq.StatusWRFlushErr
	}
	if exp.recvLen == 0 {
		exp.recvLen = 4096
	}
	if exp.nakPSN == 0 {
		exp.nakPSN = defaultParams().psnA
	}
	bBefore := bytes.Clone(f.bMem)
	aBefore := bytes.Clone(f.aMem)
	for i := range cNumRecvB {
		require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 1000 + uint64(i), SGL: []qp.SGE{{
			Addr: f.bRecvMR.IOVA() + uint64(i)*4096, Length: exp.recvLen, LKey: f.bRecvMR.LKey()}}}))
	}
	for i := range cNumRecvA {
		require.NoError(t, a.qp.PostRecv(&qp.RecvWR{WRID: 2000 + uint64(i), SGL: f.aSGE(48<<10+uint64(i)*4096, 4096)}))
	}
	bad.WRID = 1
	require.NoError(t, a.qp.PostSend(&bad))
	for _, wr := range f.goodWRs() {
		require.NoError(t, a.qp.PostSend(&wr))
	}
	wantB := cNumRecvB
	if exp.local {
		wantB = 0
	}
	err := f.run(func() bool {
		a.poll()
		b.poll()
		return a.qp.State() == qp.StateErr && (exp.local || b.qp.State() == qp.StateErr) &&
			len(a.wcs) >= 1+cNumGood+cNumRecvA && len(b.wcs) >= wantB
	}, 100*time.Millisecond)
	require.NoError(t, err, "%v a=%+v b=%+v", f.pair, a.qp.Counters().Snapshot(), b.qp.Counters().Snapshot())
	// Let anything still in flight land: no late or duplicate CQE may follow.
	require.NoError(t, f.sim.RunTo(f.clock.Now().Add(50*time.Millisecond)))
	a.poll()
	b.poll()

	aSend, aRecv := cSplit(a.wcs)
	bSend, bRecv := cSplit(b.wcs)
	want := []cWC{{1, exp.status}}
	for i := range cNumGood {
		want = append(want, cWC{uint64(2 + i), cq.StatusWRFlushErr})
	}
	assert.Equal(t, want, aSend, "requester CQEs: the offending WR, then the rest flushed in post order")
	assert.Equal(t, []cWC{{2000, cq.StatusWRFlushErr}, {2001, cq.StatusWRFlushErr}}, aRecv,
		"the requester's receive queue is flushed")
	assert.Empty(t, bSend)
	assert.Equal(t, qp.StateErr, a.qp.State())
	bc := b.qp.Counters().Snapshot()
	if exp.local {
		// matrix C10: nothing reached the wire, so B saw nothing.
		assert.Zero(t, a.sent, "packets A put on the wire")
		assert.Zero(t, a.qp.Counters().Snapshot()[qp.CounterSentPkts])
		assert.Zero(t, bc[qp.CounterRcvdPkts])
		assert.Equal(t, qp.StateRTS, b.qp.State())
		assert.Empty(t, bRecv)
		assert.Empty(t, f.naks)
	} else {
		assert.Equal(t, qp.StateErr, b.qp.State(), "class C: the responder moves to ERR")
		assert.Equal(t, []cNAK{{exp.nak, exp.nakPSN}}, f.naks, "exactly one NAK, at the offending PSN")
		wantRecv := []cWC{{1000, exp.recvHead}}
		for i := 1; i < cNumRecvB; i++ {
			wantRecv = append(wantRecv, cWC{1000 + uint64(i), cq.StatusWRFlushErr})
		}
		assert.Equal(t, wantRecv, bRecv, "responder receive CQEs in post order")
		wantViol := uint64(0)
		if exp.nak == aeth.NAKRemoteAccessError {
			wantViol = 1
		}
		assert.Equal(t, wantViol, bc[qp.CounterRkeyViolation], "rkey_violation")
	}
	assert.True(t, bytes.Equal(bBefore, f.bMem), "the responder's memory was modified")
	assert.True(t, bytes.Equal(aBefore, f.aMem), "the requester's memory was modified")
}

// cSplit separates send and receive completions.
func cSplit(wcs []cq.Completion) (send, recv []cWC) {
	for _, c := range wcs {
		w := cWC{c.WRID, c.Status}
		if c.Opcode.IsRecv() {
			recv = append(recv, w)
		} else {
			send = append(send, w)
		}
	}
	return send, recv
}

// cCase is one offending WR of a row.
type cCase struct {
	name string
	// setup registers what the case needs and returns the WR.
	wr  func(t *testing.T, f *cPair) qp.SendWR
	exp cExpect
}

func runCCases(t *testing.T, cases []cCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newCPair(t, defaultParams())
			f.runRow(t, tc.wr(t, f), tc.exp)
		})
	}
}

var (
	cRemAccess = cExpect{status: cq.StatusRemAccessErr, nak: aeth.NAKRemoteAccessError}
	cInvReq    = cExpect{status: cq.StatusRemInvReqErr, nak: aeth.NAKInvalidRequest}
)

// cWrite, cRead and cAtomic build the offending WRs: len bytes at va under
// rkey, through a 64 KiB-capable sink or source in A's region at 16 KiB.
func cWrite(f *cPair, va uint64, n uint32, rkey mr.Key) qp.SendWR {
	return qp.SendWR{Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: f.aSGE(0, n), RemoteAddr: va, RKey: rkey}
}

func cRead(f *cPair, va uint64, n uint32, rkey mr.Key) qp.SendWR {
	return qp.SendWR{Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: f.aSGE(16<<10, n), RemoteAddr: va, RKey: rkey}
}

func cAtomic(f *cPair, op qp.WROpcode, va uint64, rkey mr.Key) qp.SendWR {
	return qp.SendWR{Opcode: op, Flags: qp.SendSignaled, SGL: f.aSGE(44<<10, 8), RemoteAddr: va, RKey: rkey,
		CompareAdd: 0, Swap: 0x5555}
}

// cRegB registers n pattern bytes on B with acc, in pd (B's PD if nil).
func cRegB(t *testing.T, f *cPair, n int, acc mr.AccessFlags, pd *mr.PD) *mr.Region {
	t.Helper()
	if pd == nil {
		pd = f.b.pd
	}
	r, err := f.b.tbl.Register(pd, mr.RegisterConfig{Buf: testutil.Pattern(uint64(n), n), Access: acc})
	require.NoError(t, err)
	return r
}

// TestC1_AccessFlags: a WRITE, READ or ATOMIC on a region without the
// matching remote right is a remote access error (IBA 10.6.3.2, C10-7; rxe
// check_rkey → lookup_mr access check).
func TestC1_AccessFlags(t *testing.T) {
	runCCases(t, []cCase{
		{"WriteWithoutRemoteWrite", func(t *testing.T, f *cPair) qp.SendWR {
			r := cRegB(t, f, 4096, mr.LocalWrite|mr.RemoteRead|mr.RemoteAtomic, nil)
			return cWrite(f, r.IOVA(), 1024, r.RKey())
		}, cRemAccess},
		{"MultiPacketWriteWithoutRemoteWrite", func(t *testing.T, f *cPair) qp.SendWR {
			r := cRegB(t, f, 8192, mr.LocalWrite|mr.RemoteRead, nil)
			return cWrite(f, r.IOVA(), 8192, r.RKey())
		}, cRemAccess},
		{"ReadWithoutRemoteRead", func(t *testing.T, f *cPair) qp.SendWR {
			r := cRegB(t, f, 4096, mr.LocalWrite|mr.RemoteWrite|mr.RemoteAtomic, nil)
			return cRead(f, r.IOVA(), 1024, r.RKey())
		}, cRemAccess},
		{"CmpSwapWithoutRemoteAtomic", func(t *testing.T, f *cPair) qp.SendWR {
			r := cRegB(t, f, 4096, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead, nil)
			return cAtomic(f, qp.WRAtomicCmpAndSwp, r.IOVA(), r.RKey())
		}, cRemAccess},
		{"FetchAddWithoutRemoteAtomic", func(t *testing.T, f *cPair) qp.SendWR {
			r := cRegB(t, f, 4096, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead, nil)
			return cAtomic(f, qp.WRAtomicFetchAdd, r.IOVA()+8, r.RKey())
		}, cRemAccess},
		{"ReadLocalOnlyRegion", func(t *testing.T, f *cPair) qp.SendWR {
			r := cRegB(t, f, 4096, mr.LocalWrite, nil)
			return cRead(f, r.IOVA(), 64, r.RKey())
		}, cRemAccess},
	})
}

// TestC2_RangeEdges: one byte outside the region on either side is a remote
// access error (rxe mr_check_range); the exact fit succeeds.
func TestC2_RangeEdges(t *testing.T) {
	const n = 16 << 10 // len(bMem)
	var cases []cCase
	for _, o := range []struct {
		name string
		mk   func(f *cPair, va uint64, n uint32, rkey mr.Key) qp.SendWR
	}{{"Write", cWrite}, {"Read", cRead}} {
		mk := o.mk
		cases = append(cases,
			cCase{o.name + "/OneBytePastEnd", func(t *testing.T, f *cPair) qp.SendWR {
				return mk(f, f.bMR.IOVA()+n-1023, 1024, f.bMR.RKey())
			}, cRemAccess},
			cCase{o.name + "/StartPlusOneFullLength", func(t *testing.T, f *cPair) qp.SendWR {
				return mk(f, f.bMR.IOVA()+1, n, f.bMR.RKey())
			}, cRemAccess},
			cCase{o.name + "/StartMinusOne", func(t *testing.T, f *cPair) qp.SendWR {
				return mk(f, f.bMR.IOVA()-1, 1, f.bMR.RKey())
			}, cRemAccess},
			cCase{o.name + "/StartMinusOneFullLength", func(t *testing.T, f *cPair) qp.SendWR {
				return mk(f, f.bMR.IOVA()-1, n, f.bMR.RKey())
			}, cRemAccess},
			cCase{o.name + "/LengthPlusOne", func(t *testing.T, f *cPair) qp.SendWR {
				return mk(f, f.bMR.IOVA(), n+1, f.bMR.RKey())
			}, cRemAccess},
			cCase{o.name + "/AtEndOneByte", func(t *testing.T, f *cPair) qp.SendWR {
				return mk(f, f.bMR.IOVA()+n, 1, f.bMR.RKey())
			}, cRemAccess},
		)
	}
	cases = append(cases,
		cCase{"Atomic/LastWordPlusEight", func(t *testing.T, f *cPair) qp.SendWR {
			return cAtomic(f, qp.WRAtomicFetchAdd, f.bMR.IOVA()+n, f.bMR.RKey())
		}, cRemAccess},
		cCase{"Atomic/StartMinusEight", func(t *testing.T, f *cPair) qp.SendWR {
			return cAtomic(f, qp.WRAtomicFetchAdd, f.bMR.IOVA()-8, f.bMR.RKey())
		}, cRemAccess},
	)
	runCCases(t, cases)

	// The exact fit (va = start, len = region length) succeeds, and so do
	// the last byte alone and the last 8-byte word.
	t.Run("ExactFit", func(t *testing.T) {
		f := newCPair(t, defaultParams())
		a, b := f.a, f.b
		src := testutil.Pattern(7, n)
		copy(f.aMem, src)
		iova := f.bMR.IOVA()
		wrs := []qp.SendWR{
			cWrite(f, iova, n, f.bMR.RKey()),
			cRead(f, iova, n, f.bMR.RKey()),
			cWrite(f, iova+n-1, 1, f.bMR.RKey()),
			cRead(f, iova+n-1, 1, f.bMR.RKey()),
			cAtomic(f, qp.WRAtomicFetchAdd, iova+n-8, f.bMR.RKey()),
			cAtomic(f, qp.WRAtomicCmpAndSwp, iova, f.bMR.RKey()),
		}
		wrs[2].SGL = f.aSGE(100, 1) // the byte src[100]
		// The engine reads READ data when it sends the responses, so a later
		// WRITE may overtake it unless fenced (IBA 10.8.3.3).
		wrs[2].Flags |= qp.SendFence
		wrs[3].SGL = f.aSGE(60<<10, 1)
		wrs[4].CompareAdd = 3
		wrs[5].CompareAdd = leU64(src[0:8])
		wrs[5].SGL = f.aSGE(44<<10+8, 8)
		for i := range wrs {
			wrs[i].WRID = uint64(i + 1)
			require.NoError(t, a.qp.PostSend(&wrs[i]))
		}
		require.NoError(t, f.run(func() bool { a.poll(); return len(a.wcs) == len(wrs) || a.qp.State() == qp.StateErr }, time.Second))
		var want []cWC
		for i := range wrs {
			want = append(want, cWC{uint64(i + 1), cq.StatusSuccess})
		}
		send, _ := cSplit(a.wcs)
		require.Equal(t, want, send)
		assert.Equal(t, qp.StateRTS, a.qp.State())
		assert.Equal(t, qp.StateRTS, b.qp.State())
		assert.Zero(t, b.qp.Counters().Snapshot()[qp.CounterRkeyViolation])
		// WRITE then READ of the whole region: the READ saw the WRITE.
		exp := bytes.Clone(src)
		exp[n-1] = src[100]
		assert.Equal(t, -1, testutil.FirstDiff(src, f.aMem[16<<10:16<<10+n]), "exact-fit READ data")
		assert.Equal(t, src[100], f.aMem[60<<10], "last-byte READ")
		assert.Equal(t, leU64(exp[n-8:]), leU64(f.aMem[44<<10:]), "FETCH_ADD on the last word returns it")
		assert.Equal(t, leU64(src[0:8]), leU64(f.aMem[44<<10+8:]), "CMP_SWAP on the first word returns it")
		binaryAdd(exp[n-8:], 3)
		copy(exp[0:8], []byte{0x55, 0x55, 0, 0, 0, 0, 0, 0})
		assert.True(t, bytes.Equal(exp, f.bMem), "responder memory after the exact-fit ops")
	})
}

// binaryAdd adds v to the little-endian word b.
func binaryAdd(b []byte, v uint64) {
	x := leU64(b) + v
	for i := range 8 {
		b[i] = byte(x >> (8 * i))
	}
}

// TestC3_RangeOverflow: va + len wrapping past 2^64 must not pass the range
// check (CVE-2016-8636, CVE-2026-98365: iova = 0xfffffffffffffff8, len = 8),
// and a DMA length above 2^31 is an invalid request (rxe check_length).
func TestC3_RangeOverflow(t *testing.T) {
	const top = ^uint64(0) - 4095 // a region that ends exactly at 2^64
	regTop := func(t *testing.T, f *cPair) *mr.Region {
		r, err := f.b.tbl.Register(f.b.pd, mr.RegisterConfig{Buf: make([]byte, 4096), IOVA: top, Access: cAllRemote})
		require.NoError(t, err)
		return r
	}
	runCCases(t, []cCase{
		{"Write/VA_FFF8_Len8", func(t *testing.T, f *cPair) qp.SendWR {
			return cWrite(f, 0xFFFFFFFFFFFFFFF8, 8, f.bMR.RKey())
		}, cRemAccess},
		{"Write/VA_FFF8_Len16", func(t *testing.T, f *cPair) qp.SendWR {
			return cWrite(f, 0xFFFFFFFFFFFFFFF8, 16, f.bMR.RKey())
		}, cRemAccess},
		{"Read/VA_FFF8_Len8", func(t *testing.T, f *cPair) qp.SendWR {
			return cRead(f, 0xFFFFFFFFFFFFFFF8, 8, f.bMR.RKey())
		}, cRemAccess},
		{"Read/VA_Max_Len2", func(t *testing.T, f *cPair) qp.SendWR {
			return cRead(f, ^uint64(0), 2, f.bMR.RKey())
		}, cRemAccess},
		{"Atomic/VA_FFF8", func(t *testing.T, f *cPair) qp.SendWR {
			return cAtomic(f, qp.WRAtomicFetchAdd, 0xFFFFFFFFFFFFFFF8, f.bMR.RKey())
		}, cRemAccess},
		{"TopRegion/Write_VA_FFF8_Len16", func(t *testing.T, f *cPair) qp.SendWR {
			return cWrite(f, 0xFFFFFFFFFFFFFFF8, 16, regTop(t, f).RKey())
		}, cRemAccess},
		{"TopRegion/Read_VA_Max_Len2", func(t *testing.T, f *cPair) qp.SendWR {
			return cRead(f, ^uint64(0), 2, regTop(t, f).RKey())
		}, cRemAccess},
		{"TopRegion/Read_StartMinusOne_Len4097", func(t *testing.T, f *cPair) qp.SendWR {
			return cRead(f, top-1, 4097, regTop(t, f).RKey())
		}, cRemAccess},
	})

	// A region ending exactly at 2^64: its last word is in range.
	t.Run("TopRegion/LastWordFits", func(t *testing.T) {
		f := newCPair(t, defaultParams())
		r := regTop(t, f)
		copy(f.aMem, []byte{1, 2, 3, 4, 5, 6, 7, 8})
		wrs := []qp.SendWR{
			cWrite(f, 0xFFFFFFFFFFFFFFF8, 8, r.RKey()),
			cRead(f, 0xFFFFFFFFFFFFFFF8, 8, r.RKey()),
			cAtomic(f, qp.WRAtomicFetchAdd, 0xFFFFFFFFFFFFFFF8, r.RKey()),
		}
		for i := range wrs {
			wrs[i].WRID = uint64(i + 1)
			require.NoError(t, f.a.qp.PostSend(&wrs[i]))
		}
		require.NoError(t, f.run(func() bool { f.a.poll(); return len(f.a.wcs) == 3 }, time.Second))
		send, _ := cSplit(f.a.wcs)
		assert.Equal(t, []cWC{{1, cq.StatusSuccess}, {2, cq.StatusSuccess}, {3, cq.StatusSuccess}}, send)
		assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, f.aMem[16<<10:16<<10+8])
		assert.Equal(t, qp.StateRTS, f.b.qp.State())
	})

	// len = 2^31 + 1: the requester refuses to post it (rxe's WR length
	// limit), and a crafted request carrying it is an invalid request.
	t.Run("Len2p31Plus1/PostSend", func(t *testing.T) {
		f := newCPair(t, defaultParams())
		for _, op := range []qp.WROpcode{qp.WRRDMAWrite, qp.WRRDMARead, qp.WRSend} {
			wr := qp.SendWR{Opcode: op, SGL: []qp.SGE{
				{Addr: f.aMR.IOVA(), Length: 1 << 31, LKey: f.aMR.LKey()},
				{Addr: f.aMR.IOVA(), Length: 1, LKey: f.aMR.LKey()}},
				RemoteAddr: f.bMR.IOVA(), RKey: f.bMR.RKey()}
			require.ErrorIs(t, f.a.qp.PostSend(&wr), qp.ErrMessageTooLong, "%v", op)
		}
		assert.Zero(t, f.a.sent)
	})
	for _, op := range []bth.Opcode{bth.RCRDMAReadRequest, bth.RCRDMAWriteFirst, bth.RCRDMAWriteOnly} {
		t.Run("Len2p31Plus1/"+op.String(), func(t *testing.T) {
			s := newCSolo(t, defaultParams())
			r := s.e.reg(make([]byte, 4096), cAllRemote)
			pl := 0
			if op == bth.RCRDMAWriteFirst {
				pl = s.mtu
			}
			f := wire.Fields{}
			f.BTH.Opcode, f.BTH.AckReq = op, true
			f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey()), 1<<31+1
			out := s.send(f, make([]byte, pl))
			s.requireClassC(out, aeth.NAKInvalidRequest, s.firstPSN, nil)
		})
	}
}

// TestC4_WrongPD: an rkey that names a live region of another PD is a remote
// access error (rxe lookup_mr: mr->pd must be the QP's PD).
func TestC4_WrongPD(t *testing.T) {
	other := func(t *testing.T, f *cPair) *mr.Region {
		return cRegB(t, f, 4096, cAllRemote, f.b.tbl.AllocPD())
	}
	runCCases(t, []cCase{
		{"Write", func(t *testing.T, f *cPair) qp.SendWR {
			r := other(t, f)
			return cWrite(f, r.IOVA(), 512, r.RKey())
		}, cRemAccess},
		{"Read", func(t *testing.T, f *cPair) qp.SendWR {
			r := other(t, f)
			return cRead(f, r.IOVA(), 512, r.RKey())
		}, cRemAccess},
		{"Atomic", func(t *testing.T, f *cPair) qp.SendWR {
			r := other(t, f)
			return cAtomic(f, qp.WRAtomicCmpAndSwp, r.IOVA(), r.RKey())
		}, cRemAccess},
		{"WriteOtherPDSameRange", func(t *testing.T, f *cPair) qp.SendWR {
			// The range is valid in B's own region; only the key is foreign.
			r := other(t, f)
			return cWrite(f, r.IOVA(), 4096, r.RKey())
		}, cRemAccess},
	})
	t.Run("MWType2BoundToOtherQP", func(t *testing.T) {
		t.Skip("memory windows are not implemented (no bind WR, no MW rkeys); only MRs exist")
	})
}

// TestC5_AfterDereg: a deregistered region's rkey is a remote access error,
// including for a READ that is being replayed (rxe_recheck_mr); freed
// memory is never read.
func TestC5_AfterDereg(t *testing.T) {
	dereged := func(t *testing.T, f *cPair) *mr.Region {
		r := cRegB(t, f, 4096, cAllRemote, nil)
		require.NoError(t, f.b.tbl.Deregister(r))
		return r
	}
	runCCases(t, []cCase{
		{"Write", func(t *testing.T, f *cPair) qp.SendWR {
			r := dereged(t, f)
			return cWrite(f, r.IOVA(), 512, r.RKey())
		}, cRemAccess},
		{"Read", func(t *testing.T, f *cPair) qp.SendWR {
			r := dereged(t, f)
			return cRead(f, r.IOVA(), 512, r.RKey())
		}, cRemAccess},
		{"Atomic", func(t *testing.T, f *cPair) qp.SendWR {
			r := dereged(t, f)
			return cAtomic(f, qp.WRAtomicFetchAdd, r.IOVA(), r.RKey())
		}, cRemAccess},
	})

	// The original READ executes (its responses are lost), the region is
	// deregistered and its buffer handed back and overwritten, then the
	// requester's retry arrives as a duplicate READ: the replay must
	// re-check the region and answer NAK remote access error.
	t.Run("DeregBetweenReadAndReplay", func(t *testing.T) {
		f := newCPair(t, defaultParams())
		a, b := f.a, f.b
		src := make([]byte, 4096)
		r := b.reg(src, cAllRemote)
		for i := range cNumRecvB {
			require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 1000 + uint64(i), SGL: []qp.SGE{{
				Addr: f.bRecvMR.IOVA() + uint64(i)*4096, Length: 4096, LKey: f.bRecvMR.LKey()}}}))
		}
		aBefore := bytes.Clone(f.aMem)
		f.dropReadResp = true
		wr := cRead(f, r.IOVA(), 4096, r.RKey())
		wr.WRID = 1
		require.NoError(t, a.qp.PostSend(&wr))
		require.NoError(t, f.run(func() bool { return f.droppedRead == 4 }, time.Second))
		require.Equal(t, int64(1), int64(b.qp.Counters().Snapshot()[qp.CounterRcvdPkts]))

		require.NoError(t, b.tbl.Deregister(r))
		f.deregistered = true
		for i := range src { // the application's buffer again: a secret now
			src[i] = 0xEE
		}
		f.dropReadResp = false
		require.NoError(t, f.run(func() bool {
			a.poll()
			b.poll()
			return a.qp.State() == qp.StateErr && b.qp.State() == qp.StateErr && len(b.wcs) == cNumRecvB
		}, time.Second))
		require.NoError(t, f.sim.RunTo(f.clock.Now().Add(50*time.Millisecond)))
		a.poll()
		send, _ := cSplit(a.wcs)
		assert.Equal(t, []cWC{{1, cq.StatusRemAccessErr}}, send)
		_, bRecv := cSplit(b.wcs)
		assert.Equal(t, []cWC{{1000, cq.StatusWRFlushErr}, {1001, cq.StatusWRFlushErr}, {1002, cq.StatusWRFlushErr}}, bRecv)
		assert.Equal(t, []cNAK{{aeth.NAKRemoteAccessError, defaultParams().psnA}}, f.naks)
		bc := b.qp.Counters().Snapshot()
		assert.Equal(t, uint64(1), bc[qp.CounterRkeyViolation])
		assert.GreaterOrEqual(t, bc[qp.CounterDuplicateRequest], uint64(1), "the retry reached B as a duplicate")
		assert.Zero(t, f.readAfterDereg, "READ data sent after the region was deregistered")
		assert.True(t, bytes.Equal(aBefore, f.aMem), "requester memory")
	})

	// The replay is already queued when the region goes: the responses still
	// to be built must not read it (rxe reads memory again on a replay).
	t.Run("DeregWithReplayQueued", func(t *testing.T) {
		p := defaultParams()
		s := newCSolo(t, p)
		src := testutil.Pattern(5, 8192)
		r := s.e.reg(src, cAllRemote)
		var f wire.Fields
		f.BTH.Opcode = bth.RCRDMAReadRequest
		f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey()), 8192
		s.post(2)
		s.feed(f, nil)
		out := s.drainN(2) // two of the eight responses leave
		require.Len(t, out, 2)
		require.Equal(t, bth.RCRDMAReadResponseFirst, out[0].BTH.Opcode)
		require.Equal(t, src[:1024], out[0].Payload)
		f.BTH.PSN = s.firstPSN // the requester lost them and asks again
		s.psn = s.firstPSN
		s.feed(f, nil)
		require.Equal(t, uint64(1), s.e.qp.Counters().Snapshot()[qp.CounterReadReplays])
		require.NoError(t, s.e.tbl.Deregister(r))
		for i := range src {
			src[i] = 0xEE
		}
		out = s.drain()
		// The NAK names the response that could not be built: the third of
		// the original run, or the first of the replay if the replay
		// superseded the rest of that run.
		require.NotEmpty(t, out)
		assert.Contains(t, []bth.PSN{s.firstPSN, s.firstPSN.Add(2)}, out[0].BTH.PSN)
		s.requireClassC(out, aeth.NAKRemoteAccessError, out[0].BTH.PSN, nil)
		assert.Equal(t, uint64(1), s.e.qp.Counters().Snapshot()[qp.CounterRkeyViolation])
	})

	// The region goes between the FIRST and the MIDDLE of a WRITE: the
	// MIDDLE must not be placed (the buffer is the application's again).
	t.Run("DeregMidWrite", func(t *testing.T) {
		s := newCSolo(t, defaultParams())
		mem := make([]byte, 4096)
		r := s.e.reg(mem, cAllRemote)
		var f wire.Fields
		f.BTH.Opcode = bth.RCRDMAWriteFirst
		f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey()), 3*uint32(s.mtu)
		require.Empty(t, s.send(f, bytes.Repeat([]byte{1}, s.mtu)))
		require.NoError(t, s.e.tbl.Deregister(r))
		clear(mem)
		f = wire.Fields{}
		f.BTH.Opcode, f.BTH.AckReq = bth.RCRDMAWriteMiddle, true
		out := s.send(f, bytes.Repeat([]byte{2}, s.mtu))
		s.requireClassC(out, aeth.NAKRemoteAccessError, s.firstPSN.Add(1), nil)
		assert.Equal(t, make([]byte, 4096), mem, "WRITE data placed in a deregistered buffer")
	})

	// A SEND WITH INVALIDATE naming a region registered without
	// Invalidatable (an ibv_reg_mr region, which rxe_invalidate_mr
	// refuses) is rxe's class J: ACKed, the receive WQE completes with
	// REM_INV_REQ_ERR, the QP moves to ERR, and the region stays valid.
	// The next WR opcode after SEND_WITH_INV is still refused.
	t.Run("LocalInvAndSendWithInv", func(t *testing.T) {
		f := newCPair(t, defaultParams())
		require.ErrorIs(t, f.a.qp.PostSend(&qp.SendWR{Opcode: 10}), qp.ErrUnsupportedOp) // IBV_WR_TSO
		for _, op := range []bth.Opcode{bth.RCSendOnlyWithInvalidate, bth.RCSendLastWithInvalidate} {
			s := newCSolo(t, defaultParams())
			r := s.e.reg(make([]byte, 4096), cAllRemote)
			s.post(2)
			if op == bth.RCSendLastWithInvalidate {
				var first wire.Fields
				first.BTH.Opcode = bth.RCSendFirst
				require.Empty(t, s.send(first, make([]byte, s.mtu)))
			}
			var f wire.Fields
			f.BTH.Opcode, f.BTH.AckReq, f.IETH = op, true, uint32(r.RKey())
			out := s.send(f, []byte{1, 2, 3, 4})
			s.requireClassC(out, aeth.ACKUnlimited, s.psn.Add(bth.PSNMask), []cq.Status{cq.StatusRemInvReqErr, cq.StatusWRFlushErr})
			assert.Equal(t, uint64(1), s.e.qp.Counters().Load(qp.CounterRespInvalidateErr))
			assert.True(t, r.Valid(), "the region was invalidated")
			_, err := s.e.tbl.LookupRemote(s.e.pd, r.RKey(), r.IOVA(), 8, mr.RemoteWrite)
			assert.NoError(t, err)
		}
	})
}

// TestC6_QPAccessFlags: the QP's own access flags (qp_access_flags) gate
// remote operations before any key is looked up: an operation they do not
// allow is an invalid request, NAK 0x61 (rxe check_op_valid), even on a
// region that allows it.
func TestC6_QPAccessFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lacks  mr.AccessFlags
		mkWR   func(f *cPair) qp.SendWR
		nakPSN bth.PSN
	}{
		{"NoRemoteRead", mr.RemoteRead, func(f *cPair) qp.SendWR { return cRead(f, f.bMR.IOVA(), 1024, f.bMR.RKey()) }, 0},
		{"NoRemoteAtomic/CmpSwap", mr.RemoteAtomic, func(f *cPair) qp.SendWR {
			return cAtomic(f, qp.WRAtomicCmpAndSwp, f.bMR.IOVA(), f.bMR.RKey())
		}, 0},
		{"NoRemoteAtomic/FetchAdd", mr.RemoteAtomic, func(f *cPair) qp.SendWR {
			return cAtomic(f, qp.WRAtomicFetchAdd, f.bMR.IOVA(), f.bMR.RKey())
		}, 0},
		{"NoRemoteWrite", mr.RemoteWrite, func(f *cPair) qp.SendWR { return cWrite(f, f.bMR.IOVA(), 3000, f.bMR.RKey()) }, 0},
		{"NoRemoteWrite/WriteWithImm", mr.RemoteWrite, func(f *cPair) qp.SendWR {
			wr := cWrite(f, f.bMR.IOVA(), 100, f.bMR.RKey())
			wr.Opcode = qp.WRRDMAWriteWithImm
			return wr
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCPair(t, defaultParams())
			acc := defaultParams().access &^ tc.lacks
			require.NoError(t, f.b.qp.Modify(&qp.Attr{AccessFlags: acc}, qp.AttrAccessFlags))
			require.Equal(t, acc, f.b.qp.Query().AccessFlags)
			f.runRow(t, tc.mkWR(f), cInvReq)
		})
	}
}

// TestC7_MisalignedAtomic: an atomic's address must be 8-byte aligned (IBA
// 9.4.5; rxe RESPST_ERR_MISALIGNED_ATOMIC → NAK invalid request), and an
// ATOMIC WRITE whose payload is not 8 bytes is an invalid request (upstream
// 1114c87: with RETH length 0 rxe read 8 bytes past the payload).
func TestC7_MisalignedAtomic(t *testing.T) {
	var cases []cCase
	for _, op := range []qp.WROpcode{qp.WRAtomicCmpAndSwp, qp.WRAtomicFetchAdd} {
		for _, off := range []uint64{1, 4, 7} {
			cases = append(cases, cCase{op.String() + "/VA+" + string(rune('0'+off)), func(t *testing.T, f *cPair) qp.SendWR {
				return cAtomic(f, op, f.bMR.IOVA()+off, f.bMR.RKey())
			}, cInvReq})
		}
	}
	runCCases(t, cases)

	for _, tc := range []struct {
		name string
		dlen uint32
		pl   int
	}{
		{"Payload0", 8, 0}, {"Payload4", 8, 4}, {"Payload7", 8, 7}, {"Payload9", 8, 9},
		{"Payload16", 16, 16}, {"RETHLen0Payload0", 0, 0}, {"RETHLen0Payload4", 0, 4},
	} {
		t.Run("AtomicWrite/"+tc.name, func(t *testing.T) {
			s := newCSolo(t, defaultParams())
			mem := testutil.Pattern(9, 64)
			before := bytes.Clone(mem)
			r := s.e.reg(mem, cAllRemote)
			s.post(2)
			var f wire.Fields
			f.BTH.Opcode, f.BTH.AckReq = bth.RCAtomicWrite, true
			f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA()+8, uint32(r.RKey()), tc.dlen
			out := s.send(f, bytes.Repeat([]byte{0xAB}, tc.pl))
			s.requireClassC(out, aeth.NAKInvalidRequest, s.firstPSN, nil)
			assert.Equal(t, before, mem, "ATOMIC WRITE changed memory")
		})
	}
}

// TestC8_LengthErrors: message and packet lengths (rxe check_length and the
// WRITE length checks in check_rkey; IBA 9.7.4.1.6, C9-89..C9-92).
func TestC8_LengthErrors(t *testing.T) {
	// A SEND larger than the receive buffer: NAK invalid request at the
	// packet that overflows; the receive WQE completes with LOC_LEN_ERR (the
	// engine follows hardware; rxe reports REM_INV_REQ_ERR, §1.5 note).
	for _, tc := range []struct {
		name    string
		msg     uint32
		recvLen uint32
		psn     bth.PSN
	}{
		{"SendOnlyLargerThanRecv", 1000, 500, 0},
		{"SendOneByteOver", 1025, 1024, 1}, // two packets; the LAST overflows
		{"MultiPacketSendOverflowsInMiddle", 3500, 1500, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCPair(t, defaultParams())
			wr := qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: f.aSGE(0, tc.msg)}
			exp := cInvReq
			exp.recvHead = cq.StatusLocLenErr
			exp.recvLen = tc.recvLen
			exp.nakPSN = defaultParams().psnA.Add(uint32(tc.psn))
			f.runRow(t, wr, exp)
		})
	}

	mtu := 1024
	type pkt struct {
		op   bth.Opcode
		dlen uint32 // RETH length (FIRST/ONLY of a WRITE)
		pl   int
	}
	for _, tc := range []struct {
		name string
		pkts []pkt // the last one is the offending packet
		head cq.Status
	}{
		{"WriteOnly/PayloadShortOfRETH", []pkt{{bth.RCRDMAWriteOnly, 100, 50}}, 0},
		{"WriteOnly/PayloadBeyondRETH", []pkt{{bth.RCRDMAWriteOnly, 100, 200}}, 0},
		{"WriteOnly/RETH0Payload4", []pkt{{bth.RCRDMAWriteOnly, 0, 4}}, 0},
		{"WriteOnly/LargerThanMTU", []pkt{{bth.RCRDMAWriteOnly, 2048, 2048}}, 0},
		{"WriteOnly/RETHSaysTwoPackets", []pkt{{bth.RCRDMAWriteOnly, 1500, 1024}}, 0},
		{"WriteFirst/ShortOfMTU", []pkt{{bth.RCRDMAWriteFirst, 3072, mtu - 4}}, 0},
		{"WriteFirst/BeyondMTU", []pkt{{bth.RCRDMAWriteFirst, 3072, mtu + 4}}, 0},
		{"WriteFirst/RETHFitsOnePacket", []pkt{{bth.RCRDMAWriteFirst, 1024, mtu}}, 0},
		{"WriteMiddle/ShortOfMTU", []pkt{{bth.RCRDMAWriteFirst, 3072, mtu}, {bth.RCRDMAWriteMiddle, 0, mtu / 2}}, 0},
		{"WriteMiddle/PastRETH", []pkt{{bth.RCRDMAWriteFirst, 2048, mtu}, {bth.RCRDMAWriteMiddle, 0, mtu}}, 0},
		{"WriteLast/ShortOfRETH", []pkt{{bth.RCRDMAWriteFirst, 2500, mtu}, {bth.RCRDMAWriteMiddle, 0, mtu}, {bth.RCRDMAWriteLast, 0, 400}}, 0},
		{"WriteLast/Empty", []pkt{{bth.RCRDMAWriteFirst, 2048, mtu}, {bth.RCRDMAWriteLast, 0, 0}}, 0},
		{"WriteLast/EarlyBeforeRETHEnd", []pkt{{bth.RCRDMAWriteFirst, 4096, mtu}, {bth.RCRDMAWriteLast, 0, mtu}}, 0},
		{"SendFirst/ShortOfMTU", []pkt{{bth.RCSendFirst, 0, mtu - 1}}, 0},
		{"SendMiddle/ShortOfMTU", []pkt{{bth.RCSendFirst, 0, mtu}, {bth.RCSendMiddle, 0, 100}}, cq.StatusRemInvReqErr},
		{"SendMiddle/BeyondMTU", []pkt{{bth.RCSendFirst, 0, mtu}, {bth.RCSendMiddle, 0, mtu + 4}}, cq.StatusRemInvReqErr},
		{"SendLast/Empty", []pkt{{bth.RCSendFirst, 0, mtu}, {bth.RCSendLast, 0, 0}}, cq.StatusRemInvReqErr},
		{"SendOnly/LargerThanMTU", []pkt{{bth.RCSendOnly, 0, mtu + 1}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newCSolo(t, defaultParams())
			require.Equal(t, mtu, s.mtu)
			mem := testutil.Pattern(11, 8192)
			r := s.e.reg(mem, cAllRemote)
			s.post(2)
			for i, pk := range tc.pkts {
				var f wire.Fields
				f.BTH.Opcode, f.BTH.AckReq = pk.op, i == len(tc.pkts)-1
				f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey()), pk.dlen
				before := bytes.Clone(mem)
				out := s.send(f, bytes.Repeat([]byte{byte(0xC0 + i)}, pk.pl))
				if i < len(tc.pkts)-1 {
					require.Empty(t, out, "packet %d of a valid prefix", i)
					require.Equal(t, qp.StateRTS, s.e.qp.State())
					continue
				}
				head := tc.head
				if head == 0 {
					head = cq.StatusWRFlushErr
				}
				s.requireClassC(out, aeth.NAKInvalidRequest, s.psn.Add(bth.PSNMask), []cq.Status{head, cq.StatusWRFlushErr})
				assert.Equal(t, before, mem, "the offending packet was placed")
			}
		})
	}
}

// TestC9_ZeroLength: the documented choice follows rxe: a zero-length READ
// or WRITE is not required to carry a valid rkey or address (rxe check_rkey:
// "A zero-byte op is not required to set an addr or rkey"), so with a
// garbage rkey and va it succeeds and touches no memory.
func TestC9_ZeroLength(t *testing.T) {
	f := newCPair(t, defaultParams())
	a, b := f.a, f.b
	bBefore := bytes.Clone(f.bMem)
	const garbage = mr.Key(0xdeadbeef)
	require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 1000, SGL: []qp.SGE{{
		Addr: f.bRecvMR.IOVA(), Length: 4096, LKey: f.bRecvMR.LKey()}}}))
	wrs := []qp.SendWR{
		{Opcode: qp.WRRDMAWrite, RemoteAddr: 0xFFFFFFFFFFFFFFFF, RKey: garbage},
		{Opcode: qp.WRRDMARead, RemoteAddr: 0x1234, RKey: garbage},
		{Opcode: qp.WRRDMAWrite, RemoteAddr: 0, RKey: 0},
		{Opcode: qp.WRRDMARead, RemoteAddr: 0xFFFFFFFFFFFFFFF8, RKey: f.bMR.RKey() ^ 1},
		{Opcode: qp.WRRDMAWriteWithImm, RemoteAddr: 7, RKey: garbage, Imm: 0x01020304},
		// An SGE of length 0 with a garbage lkey is not checked either.
		{Opcode: qp.WRRDMAWrite, RemoteAddr: 8, RKey: garbage, SGL: []qp.SGE{{Addr: 1, Length: 0, LKey: 0x77}}},
		// And the QP still works for real data afterwards.
		cWrite(f, f.bMR.IOVA(), 100, f.bMR.RKey()),
	}
	for i := range wrs {
		wrs[i].WRID = uint64(i + 1)
		wrs[i].Flags = qp.SendSignaled
		require.NoError(t, a.qp.PostSend(&wrs[i]))
	}
	require.NoError(t, f.run(func() bool {
		a.poll()
		b.poll()
		return len(a.wcs) == len(wrs) && len(b.wcs) == 1 || a.qp.State() == qp.StateErr
	}, time.Second))
	var want []cWC
	for i := range wrs {
		want = append(want, cWC{uint64(i + 1), cq.StatusSuccess})
	}
	send, _ := cSplit(a.wcs)
	assert.Equal(t, want, send)
	for _, c := range a.wcs[1:2] {
		assert.Zero(t, c.ByteLen)
	}
	require.Len(t, b.wcs, 1)
	assert.Equal(t, cq.Completion{WRID: 1000, Status: cq.StatusSuccess, Opcode: cq.OpRecvRDMAWithImm, ByteLen: 0,
		QPN: uint32(b.qp.QPN()), Imm: 0x01020304, Flags: cq.FlagWithImm}, b.wcs[0])
	assert.Equal(t, qp.StateRTS, a.qp.State())
	assert.Equal(t, qp.StateRTS, b.qp.State())
	assert.Zero(t, b.qp.Counters().Snapshot()[qp.CounterRkeyViolation])
	assert.Empty(t, f.naks)
	copy(bBefore, f.aMem[:100])
	assert.True(t, bytes.Equal(bBefore, f.bMem), "only the last WRITE changed the responder's memory")
}

// TestC10_BadLKey: a send WR whose local SGE fails the lkey, PD, range or
// access check completes with LOC_PROT_ERR and puts nothing on the wire —
// the check runs on every SGE before the first packet (cf. CVE-2021-47076:
// an atomic with an invalid lkey).
func TestC10_BadLKey(t *testing.T) {
	local := cExpect{status: cq.StatusLocProtErr, local: true}
	garbage := func(f *cPair) []qp.SGE { return []qp.SGE{{Addr: f.aMR.IOVA(), Length: 64, LKey: 0xdeadbeef}} }
	runCCases(t, []cCase{
		{"Write", func(t *testing.T, f *cPair) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMAWrite, SGL: garbage(f), RemoteAddr: f.bMR.IOVA(), RKey: f.bMR.RKey()}
		}, local},
		{"Send", func(t *testing.T, f *cPair) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRSend, SGL: garbage(f)}
		}, local},
		{"SendInline", func(t *testing.T, f *cPair) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendInline, SGL: garbage(f)}
		}, local},
		{"ReadSink", func(t *testing.T, f *cPair) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRRDMARead, SGL: garbage(f), RemoteAddr: f.bMR.IOVA(), RKey: f.bMR.RKey()}
		}, local},
		{"AtomicResult", func(t *testing.T, f *cPair) qp.SendWR {
			wr := cAtomic(f, qp.WRAtomicFetchAdd, f.bMR.IOVA(), f.bMR.RKey())
			wr.SGL[0].LKey = 0xdeadbeef
			return wr
		}, local},
		{"BadSecondSGEOfMultiPacketWrite", func(t *testing.T, f *cPair) qp.SendWR {
			// The first 2 KiB are fine: a lazy check would send two packets.
			sgl := append(f.aSGE(0, 2048), qp.SGE{Addr: f.aMR.IOVA(), Length: 100, LKey: 0xdeadbeef})
			return qp.SendWR{Opcode: qp.WRRDMAWrite, SGL: sgl, RemoteAddr: f.bMR.IOVA(), RKey: f.bMR.RKey()}
		}, local},
		{"SGEPastRegionEnd", func(t *testing.T, f *cPair) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRSend, SGL: f.aSGE(64<<10-10, 11)}
		}, local},
		{"SGEBeforeRegionStart", func(t *testing.T, f *cPair) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{{Addr: f.aMR.IOVA() - 1, Length: 2, LKey: f.aMR.LKey()}}}
		}, local},
		{"DeregisteredLKey", func(t *testing.T, f *cPair) qp.SendWR {
			r := f.a.reg(make([]byte, 4096), mr.LocalWrite)
			require.NoError(t, f.a.tbl.Deregister(r))
			return qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{{Addr: r.IOVA(), Length: 64, LKey: r.LKey()}}}
		}, local},
		{"OtherPDLKey", func(t *testing.T, f *cPair) qp.SendWR {
			r, err := f.a.tbl.Register(f.a.tbl.AllocPD(), mr.RegisterConfig{Buf: make([]byte, 4096), Access: mr.LocalWrite})
			require.NoError(t, err)
			return qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{{Addr: r.IOVA(), Length: 64, LKey: r.LKey()}}}
		}, local},
		{"ReadSinkWithoutLocalWrite", func(t *testing.T, f *cPair) qp.SendWR {
			r := f.a.reg(make([]byte, 4096), mr.RemoteRead)
			return qp.SendWR{Opcode: qp.WRRDMARead, SGL: []qp.SGE{{Addr: r.IOVA(), Length: 64, LKey: r.LKey()}},
				RemoteAddr: f.bMR.IOVA(), RKey: f.bMR.RKey()}
		}, local},
	})
}

// TestC10_BadLKeyBehindOutstandingWR: the WR with the bad lkey is not at the
// head of the send queue: a WRITE before it is on the wire, not yet
// acknowledged. The error must still be reported in post order (IBA
// 10.7.3.1; rxe req_error → the completer reaches the WQE in order): the
// WRITE completes when its ACK comes, then the bad WR with LOC_PROT_ERR,
// then the rest flushed — each exactly once — and the bad WR puts nothing on
// the wire.
func TestC10_BadLKeyBehindOutstandingWR(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(t *testing.T, f *cPair) qp.SendWR
	}{
		{"GarbageLKey", func(t *testing.T, f *cPair) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{{Addr: f.aMR.IOVA(), Length: 64, LKey: 0xdeadbeef}}}
		}},
		{"InlineGarbageLKey", func(t *testing.T, f *cPair) qp.SendWR {
			return qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendInline,
				SGL: []qp.SGE{{Addr: f.aMR.IOVA(), Length: 64, LKey: 0xdeadbeef}}}
		}},
		{"AtomicGarbageLKey", func(t *testing.T, f *cPair) qp.SendWR {
			wr := cAtomic(f, qp.WRAtomicFetchAdd, f.bMR.IOVA(), f.bMR.RKey())
			wr.SGL[0].LKey = 0xdeadbeef
			return wr
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCPair(t, defaultParams())
			a, b := f.a, f.b
			src := bytes.Clone(f.aMem[:2048])
			first := cWrite(f, f.bMR.IOVA(), 2048, f.bMR.RKey()) // two packets at MTU 1024
			first.WRID = 1
			require.NoError(t, a.qp.PostSend(&first))
			bad := tc.bad(t, f)
			bad.WRID = 2
			require.NoError(t, a.qp.PostSend(&bad))
			for _, wr := range f.goodWRs() {
				wr.WRID++
				require.NoError(t, a.qp.PostSend(&wr))
			}
			require.NoError(t, f.run(func() bool {
				a.poll()
				return a.qp.State() == qp.StateErr && len(a.wcs) >= 2+cNumGood
			}, 100*time.Millisecond), "%v", f.pair)
			require.NoError(t, f.sim.RunTo(f.clock.Now().Add(50*time.Millisecond)))
			a.poll()
			send, _ := cSplit(a.wcs)
			want := []cWC{{1, cq.StatusSuccess}, {2, cq.StatusLocProtErr}}
			for i := range cNumGood {
				want = append(want, cWC{uint64(3 + i), cq.StatusWRFlushErr})
			}
			assert.Equal(t, want, send, "each WR exactly once, in post order")
			assert.Equal(t, 2, a.sent, "only the WRITE's two packets go on the wire")
			assert.Equal(t, qp.StateRTS, b.qp.State())
			assert.Equal(t, uint64(2), b.qp.Counters().Snapshot()[qp.CounterRcvdPkts])
			assert.Equal(t, src, f.bMem[:2048])
		})
	}

	// The region of a multi-packet WRITE goes after its first packet, while
	// an earlier WRITE is still unacknowledged: the rest of the WRITE cannot
	// be read (LOC_PROT_ERR), reported after the earlier WRITE completes.
	t.Run("RegionGoesMidMessage", func(t *testing.T) {
		e := hpQP(t) // MTU 4096, the peer exists only as a QPN
		keep := e.reg(make([]byte, 4096), mr.LocalWrite)
		gone := e.reg(make([]byte, 3*4096), mr.LocalWrite)
		now, out := testutil.Epoch(), make([]byte, qp.MaxPacketLen(qp.MTU4096))
		post := func(id uint64, r *mr.Region, n uint32) {
			require.NoError(t, e.qp.PostSend(&qp.SendWR{WRID: id, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL: []qp.SGE{{Addr: r.IOVA(), Length: n, LKey: r.LKey()}}, RemoteAddr: 0x1000, RKey: 0x1234}))
		}
		post(1, keep, 4096)
		post(2, gone, 3*4096)
		post(3, keep, 8)
		sent := func() int {
			n := 0
			for {
				if _, ok := e.qp.NextPacket(now, out); !ok {
					return n
				}
				n++
			}
		}
		// WR 1, then the first packet of WR 2.
		_, ok := e.qp.NextPacket(now, out)
		require.True(t, ok)
		_, ok = e.qp.NextPacket(now, out)
		require.True(t, ok)
		require.NoError(t, e.tbl.Deregister(gone))
		assert.Zero(t, sent(), "packets of WR 2 after its region went")
		assert.Empty(t, e.poll(), "a CQE before WR 1 is acknowledged")

		var f wire.Fields
		f.BTH = bth.Fields{Opcode: bth.RCAcknowledge, PKey: 0xffff, DestQP: e.qp.QPN(), PSN: defaultParams().psnB}
		f.AETH.Syndrome = aeth.ACKUnlimited
		buf := make([]byte, 64)
		n, err := wire.Build(buf, &f, nil)
		require.NoError(t, err)
		var p wire.Packet
		require.NoError(t, p.Parse(buf[:n]))
		e.qp.HandlePacket(now, &p)
		assert.Zero(t, sent())
		var got []cWC
		for _, c := range e.poll() {
			got = append(got, cWC{c.WRID, c.Status})
		}
		assert.Equal(t, []cWC{{1, cq.StatusSuccess}, {2, cq.StatusLocProtErr}, {3, cq.StatusWRFlushErr}}, got)
		assert.Equal(t, qp.StateErr, e.qp.State())
	})
}

// TestC_ErrorBehindPipelinedRead: the offending WR follows a READ and an
// ATOMIC that are valid, pipelined so that it reaches the responder while
// the READ's responses are still leaving at line rate. A class C NAK
// acknowledges everything before it, so the replies to those requests must
// still go out ahead of the NAK, as rxe (which finishes a READ's responses
// before taking the next request) sends them: the READ and ATOMIC succeed,
// the offending WR gets the row's status, the rest is flushed.
func TestC_ErrorBehindPipelinedRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(f *cPair) qp.SendWR
		exp  cExpect
	}{
		{"WriteBadRKey", func(f *cPair) qp.SendWR {
			return cWrite(f, f.bMR.IOVA(), 64, f.bMR.RKey()^0x100)
		}, cRemAccess},
		{"C2_ReadOnePastEnd", func(f *cPair) qp.SendWR {
			return cRead(f, f.bMR.IOVA()+16<<10-63, 64, f.bMR.RKey())
		}, cRemAccess},
		{"C7_MisalignedAtomic", func(f *cPair) qp.SendWR {
			return cAtomic(f, qp.WRAtomicFetchAdd, f.bMR.IOVA()+4, f.bMR.RKey())
		}, cInvReq},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCPair(t, defaultParams())
			a, b := f.a, f.b
			read := cRead(f, f.bMR.IOVA(), 8192, f.bMR.RKey()) // 8 responses at MTU 1024
			read.WRID = 1
			atomic := cAtomic(f, qp.WRAtomicFetchAdd, f.bMR.IOVA()+8192, f.bMR.RKey())
			atomic.WRID, atomic.SGL, atomic.CompareAdd = 2, f.aSGE(40<<10, 8), 5
			bad := tc.bad(f)
			bad.WRID = 3
			for _, wr := range []*qp.SendWR{&read, &atomic, &bad} {
				require.NoError(t, a.qp.PostSend(wr))
			}
			require.NoError(t, f.run(func() bool {
				a.poll()
				return a.qp.State() == qp.StateErr && len(a.wcs) >= 3
			}, time.Second), "%v", f.pair)
			send, _ := cSplit(a.wcs)
			assert.Equal(t, []cWC{{1, cq.StatusSuccess}, {2, cq.StatusSuccess}, {3, tc.exp.status}}, send)
			assert.Equal(t, -1, testutil.FirstDiff(f.bMem[:8192], f.aMem[16<<10:16<<10+8192]), "READ data")
			assert.Equal(t, leU64(f.bMem[8192:])-5, leU64(f.aMem[40<<10:]), "FETCH_ADD result")
			assert.Equal(t, qp.StateErr, b.qp.State())
			assert.Equal(t, []cNAK{{tc.exp.nak, defaultParams().psnA.Add(9)}}, f.naks)
			assert.Zero(t, a.qp.Counters().Snapshot()[qp.CounterRetryExceededErr])
		})
	}
}

// cSolo is a responder QP alone in RTS, fed crafted packets. Its peer (A)
// exists only as a QPN and address.
type cSolo struct {
	t        *testing.T
	e        *endpoint
	now      time.Time
	mtu      int
	firstPSN bth.PSN // the first PSN the responder expects
	psn      bth.PSN // the PSN of the next packet fed
	in       []byte
	recvs    int
}

func newCSolo(t *testing.T, p connParams) *cSolo {
	t.Helper()
	b := newEndpoint(t, "B", 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
	a := newEndpoint(t, "A", 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
	connect(t, b, a, p, p.psnB, p.psnA)
	return &cSolo{t: t, e: b, now: testutil.Epoch(), mtu: p.mtu.Bytes(), firstPSN: p.psnA, psn: p.psnA,
		in: make([]byte, 16<<10)}
}

// post posts n receive WRs (WRID 1000…) of 8 KiB each.
func (s *cSolo) post(n int) {
	s.t.Helper()
	r := s.e.reg(make([]byte, n*8192), mr.LocalWrite)
	for i := range n {
		require.NoError(s.t, s.e.qp.PostRecv(&qp.RecvWR{WRID: 1000 + uint64(s.recvs), SGL: []qp.SGE{{
			Addr: r.IOVA() + uint64(i)*8192, Length: 8192, LKey: r.LKey()}}}))
		s.recvs++
	}
}

// feed builds a packet from f (PKey, DestQP and, unless set, the PSN filled
// in), hands it to the QP and advances the PSN for the next one.
func (s *cSolo) feed(f wire.Fields, payload []byte) {
	s.t.Helper()
	f.BTH.PKey, f.BTH.DestQP = 0xffff, s.e.qp.QPN()
	if f.BTH.PSN == 0 {
		f.BTH.PSN = s.psn
	}
	n, err := wire.Build(s.in, &f, payload)
	require.NoError(s.t, err)
	var p wire.Packet
	require.NoError(s.t, p.Parse(s.in[:n]))
	s.e.qp.HandlePacket(s.now, &p)
	s.psn = f.BTH.PSN.Next()
	if f.BTH.Opcode == bth.RCRDMAReadRequest && f.RETH.DMALength > 0 {
		s.psn = f.BTH.PSN.Add((f.RETH.DMALength + uint32(s.mtu) - 1) / uint32(s.mtu))
	}
}

// cOut is a packet the responder sent.
type cOut struct {
	wire.Fields
	Payload []byte
}

// send feeds one packet and returns everything the QP answers.
func (s *cSolo) send(f wire.Fields, payload []byte) []cOut {
	s.feed(f, payload)
	return s.drain()
}

func (s *cSolo) drain() []cOut { return s.drainN(1 << 16) }

// drainN returns up to n packets from NextPacket, parsed and copied.
func (s *cSolo) drainN(n int) []cOut {
	s.t.Helper()
	var out []cOut
	buf := make([]byte, qp.MaxPacketLen(qp.MTU4096))
	for range n {
		m, ok := s.e.qp.NextPacket(s.now, buf)
		if !ok {
			break
		}
		var p wire.Packet
		require.NoError(s.t, p.Parse(buf[:m]))
		require.Equal(s.t, bth.QPN(0x11), p.BTH.DestQP())
		out = append(out, cOut{p.Fields(), bytes.Clone(p.Payload)})
	}
	return out
}

// requireClassC checks a class C error: exactly one NAK syn at psn went out,
// the QP is in ERR, later requests are dropped without an answer, and the
// receive WRs completed with recv (default: all WR_FLUSH_ERR) in post order.
func (s *cSolo) requireClassC(out []cOut, syn aeth.Syndrome, psn bth.PSN, recv []cq.Status) {
	s.t.Helper()
	t := s.t
	require.Len(t, out, 1, "exactly one answer: %+v", out)
	assert.Equal(t, bth.RCAcknowledge, out[0].BTH.Opcode)
	assert.Equal(t, syn, out[0].AETH.Syndrome)
	assert.Equal(t, psn, out[0].BTH.PSN)
	assert.Empty(t, out[0].Payload)
	assert.Equal(t, qp.StateErr, s.e.qp.State())
	if recv == nil {
		for range s.recvs {
			recv = append(recv, cq.StatusWRFlushErr)
		}
	}
	var want, got []cWC
	for i, st := range recv {
		want = append(want, cWC{1000 + uint64(i), st})
	}
	for _, c := range s.e.poll() {
		got = append(got, cWC{c.WRID, c.Status})
	}
	assert.Equal(t, want, got, "responder receive CQEs")
	viol := uint64(0)
	if syn == aeth.NAKRemoteAccessError {
		viol = 1
	}
	assert.Equal(t, viol, s.e.qp.Counters().Snapshot()[qp.CounterRkeyViolation], "rkey_violation")
	// In ERR nothing more is executed or answered.
	var f wire.Fields
	f.BTH.Opcode, f.BTH.AckReq = bth.RCSendOnly, true
	assert.Empty(t, s.send(f, []byte{1}))
	assert.Empty(t, s.e.poll())
	assert.Equal(t, qp.StateErr, s.e.qp.State())
}
