package qp_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// invPair is two connected engines for the invalidate family's tests.
type invPair struct {
	*pair
	aMem, bMem []byte
	aMR        *mr.Region // A's local buffer
	bMR        *mr.Region // B's region, bindable and invalidatable
}

func newInvPair(t *testing.T) *invPair {
	pr := newPair(t, defaultParams(), testutil.Impairment{}, testutil.Impairment{})
	f := &invPair{pair: pr, aMem: make([]byte, 8192), bMem: make([]byte, 8192)}
	f.aMR = pr.a.reg(f.aMem, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead)
	var err error
	f.bMR, err = pr.b.tbl.Register(pr.b.pd, mr.RegisterConfig{Buf: f.bMem, IOVA: 0x100000,
		Access: mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.MWBind, Invalidatable: true})
	require.NoError(t, err)
	return f
}

// await runs the pair until e has n more completions and returns them.
func (f *invPair) await(t *testing.T, e *endpoint, n int) []cq.Completion {
	t.Helper()
	var got []cq.Completion
	// Local operations complete without a packet: the simulation may run
	// out of events (a "deadlock") once they have.
	err := f.run(func() bool {
		got = append(got, e.poll()...)
		return len(got) >= n
	}, time.Second)
	got = append(got, e.poll()...)
	if len(got) < n {
		require.NoError(t, err, "%v", f)
	}
	_ = f.run(func() bool { return false }, 10*time.Millisecond) // nothing more comes
	got = append(got, e.poll()...)
	require.Len(t, got, n, "%+v", got)
	return got
}

func (f *invPair) write(t *testing.T, wrid uint64, rkey mr.Key, va uint64, data string) {
	t.Helper()
	copy(f.aMem, data)
	require.NoError(t, f.a.qp.PostSend(&qp.SendWR{WRID: wrid, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: f.aMR.IOVA(), Length: uint32(len(data)), LKey: f.aMR.LKey()}}, RemoteAddr: va, RKey: rkey}))
}

func (f *invPair) sendInv(t *testing.T, wrid uint64, rkey mr.Key, n uint32) {
	t.Helper()
	require.NoError(t, f.a.qp.PostSend(&qp.SendWR{WRID: wrid, Opcode: qp.WRSendWithInv, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: f.aMR.IOVA(), Length: n, LKey: f.aMR.LKey()}}, InvalidateRKey: rkey}))
}

func (f *invPair) postRecvB(t *testing.T, wrid uint64) {
	t.Helper()
	require.NoError(t, f.b.qp.PostRecv(&qp.RecvWR{WRID: wrid,
		SGL: []qp.SGE{{Addr: f.bMR.IOVA() + 4096, Length: 4096, LKey: f.bMR.LKey()}}}))
}

// bindB binds a new window of B through B's QP with a BIND_MW WR.
func (f *invPair) bindB(t *testing.T, typ mr.WindowType, cfg mr.BindConfig) (*mr.Window, mr.Key) {
	t.Helper()
	w, err := f.b.tbl.AllocWindow(f.b.pd, typ)
	require.NoError(t, err)
	cfg.Region = f.bMR
	k := w.RKey()
	cfg.RKey = k&^0xff | (k+1)&0xff // ibv_inc_rkey: the key byte wraps within the index
	require.NoError(t, f.b.qp.PostSend(&qp.SendWR{WRID: 77, Opcode: qp.WRBindMW, Flags: qp.SendSignaled,
		BindMW: qp.BindMW{Window: w, BindConfig: cfg}}))
	wc := f.await(t, f.b, 1)[0]
	require.Equal(t, cq.Completion{WRID: 77, Opcode: cq.OpBindMW, QPN: uint32(f.b.qp.QPN())}, wc)
	require.Equal(t, cfg.RKey, w.RKey())
	return w, cfg.RKey
}

// TestSendWithInv_Window: BIND_MW of a zero-based type 2 window, a remote
// WRITE through it, then SEND WITH INVALIDATE of its rkey (IBA 9.4.1.1,
// 10.6.7.2.4): the receive completes with IBV_WC_WITH_INV and the key, the
// window is Free, and a later WRITE with the key is NAKed remote access
// error (rxe_lookup_mw fails).
func TestSendWithInv_Window(t *testing.T) {
	f := newInvPair(t)
	w, rkey := f.bindB(t, mr.WindowType2, mr.BindConfig{Addr: 0x100000 + 256, Length: 512,
		Access: mr.RemoteWrite | mr.RemoteRead, ZeroBased: true})

	f.write(t, 1, rkey, 16, "through the window")
	wc := f.await(t, f.a, 1)[0]
	require.Equal(t, cq.StatusSuccess, wc.Status)
	assert.Equal(t, "through the window", string(f.bMem[256+16:256+16+18]))

	// A READ through the window, from its zero base.
	require.NoError(t, f.a.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: f.aMR.IOVA() + 100, Length: 18, LKey: f.aMR.LKey()}}, RemoteAddr: 16, RKey: rkey}))
	require.Equal(t, cq.StatusSuccess, f.await(t, f.a, 1)[0].Status)
	assert.Equal(t, "through the window", string(f.aMem[100:118]))

	f.postRecvB(t, 10)
	copy(f.aMem, "bye")
	f.sendInv(t, 3, rkey, 3)
	wcs := f.await(t, f.b, 1)
	assert.Equal(t, cq.Completion{WRID: 10, Opcode: cq.OpRecv, ByteLen: 3, QPN: uint32(f.b.qp.QPN()),
		Flags: cq.FlagWithInv, InvalidatedRKey: uint32(rkey)}, wcs[0])
	assert.Equal(t, cq.OpSend, f.await(t, f.a, 1)[0].Opcode)
	assert.Equal(t, mr.WindowFree, w.State())
	assert.Nil(t, w.Bound())

	f.write(t, 4, rkey, 16, "again")
	wc = f.await(t, f.a, 1)[0]
	assert.Equal(t, cq.StatusRemAccessErr, wc.Status)
	assert.Equal(t, qp.StateErr, f.b.qp.State())
}

// TestSendWithInv_MultiPacket: a SEND WITH INVALIDATE longer than the MTU
// is SEND FIRST … SEND LAST WITH INVALIDATE; the region named is
// invalidated once the message completes.
func TestSendWithInv_MultiPacket(t *testing.T) {
	f := newInvPair(t)
	for i := range 3000 {
		f.aMem[i] = byte(i)
	}
	f.postRecvB(t, 10)
	f.sendInv(t, 1, f.bMR.RKey(), 3000)
	wc := f.await(t, f.b, 1)[0]
	assert.Equal(t, cq.FlagWithInv, wc.Flags)
	assert.Equal(t, uint32(f.bMR.RKey()), wc.InvalidatedRKey)
	assert.Equal(t, uint32(3000), wc.ByteLen)
	assert.True(t, bytes.Equal(f.aMem[:3000], f.bMem[4096:4096+3000]))
	_, err := f.b.tbl.LookupRemote(f.b.pd, f.bMR.RKey(), f.bMR.IOVA(), 8, mr.RemoteWrite)
	assert.ErrorIs(t, err, mr.ErrInvalidated)
}

// TestSendWithInv_NoReceiveRNR: with no receive posted a SEND WITH
// INVALIDATE is answered RNR like any SEND (rxe check_resource), and
// nothing is invalidated until it is executed.
func TestSendWithInv_NoReceiveRNR(t *testing.T) {
	f := newInvPair(t)
	f.sendInv(t, 1, f.bMR.RKey(), 8)
	require.NoError(t, f.run(func() bool { return f.b.qp.Counters().Load(qp.CounterSendRNRErr) > 0 }, time.Second))
	_, err := f.b.tbl.LookupRemote(f.b.pd, f.bMR.RKey(), f.bMR.IOVA(), 8, mr.RemoteWrite)
	require.NoError(t, err, "invalidated before it was executed")
	assert.Equal(t, qp.StateRTS, f.b.qp.State())
	f.postRecvB(t, 10)
	assert.Equal(t, cq.FlagWithInv, f.await(t, f.b, 1)[0].Flags)
	assert.Equal(t, cq.StatusSuccess, f.await(t, f.a, 1)[0].Status)
	assert.NotZero(t, f.a.qp.Counters().Load(qp.CounterRcvdRNRErr))
}

// TestSendWithInv_Type1IsClassJ: a type 1 window cannot be invalidated
// remotely (o10-37.2.26). rxe's class J: the requester is ACKed, the
// receive completes with REM_INV_REQ_ERR, the responder's QP moves to ERR
// and the window stays bound.
func TestSendWithInv_Type1IsClassJ(t *testing.T) {
	f := newInvPair(t)
	w, rkey := f.bindB(t, mr.WindowType1, mr.BindConfig{Addr: 0x100000, Length: 64, Access: mr.RemoteWrite})
	f.postRecvB(t, 10)
	f.postRecvB(t, 11)
	f.sendInv(t, 1, rkey, 8)
	got := f.await(t, f.b, 2)
	assert.Equal(t, cq.StatusRemInvReqErr, got[0].Status)
	assert.Equal(t, qp.ReasonInvalidateRKey, qp.Reason(got[0].VendorErr))
	assert.Equal(t, cq.StatusWRFlushErr, got[1].Status)
	assert.Equal(t, cq.StatusSuccess, f.await(t, f.a, 1)[0].Status, "class J: no NAK")
	assert.Equal(t, qp.StateErr, f.b.qp.State())
	assert.Equal(t, uint64(1), f.b.qp.Counters().Load(qp.CounterRespInvalidateErr))
	assert.Same(t, f.bMR, w.Bound())
}

// TestLocalInv: LOCAL_INV of an invalidatable region (IBA 10.6.6)
// completes IBV_WC_LOCAL_INV; a peer's WRITE with the key then gets NAK
// remote access error. LOCAL_INV of a key that cannot be invalidated
// completes LOC_QP_OP_ERR and moves the QP to ERR (rxe_do_local_ops).
func TestLocalInv(t *testing.T) {
	f := newInvPair(t)
	f.write(t, 1, f.bMR.RKey(), f.bMR.IOVA(), "before")
	require.Equal(t, cq.StatusSuccess, f.await(t, f.a, 1)[0].Status)

	require.NoError(t, f.b.qp.PostSend(&qp.SendWR{WRID: 5, Opcode: qp.WRLocalInv, Flags: qp.SendSignaled,
		InvalidateRKey: f.bMR.RKey()}))
	assert.Equal(t, cq.Completion{WRID: 5, Opcode: cq.OpLocalInv, QPN: uint32(f.b.qp.QPN())}, f.await(t, f.b, 1)[0])

	f.write(t, 2, f.bMR.RKey(), f.bMR.IOVA(), "after")
	assert.Equal(t, cq.StatusRemAccessErr, f.await(t, f.a, 1)[0].Status)
	assert.Equal(t, "before", string(f.bMem[:6]))

	g := newInvPair(t)
	plain := g.b.reg(make([]byte, 64), mr.LocalWrite)
	require.NoError(t, g.b.qp.PostSend(&qp.SendWR{WRID: 6, Opcode: qp.WRLocalInv, InvalidateRKey: plain.RKey()}))
	require.NoError(t, g.b.qp.PostSend(&qp.SendWR{WRID: 7, Opcode: qp.WRSend}))
	got := g.await(t, g.b, 2)
	assert.Equal(t, cq.StatusLocQPOpErr, got[0].Status)
	assert.Equal(t, cq.OpLocalInv, got[0].Opcode)
	assert.Equal(t, cq.StatusWRFlushErr, got[1].Status)
	assert.Equal(t, qp.StateErr, g.b.qp.State())
}

// TestBindMW_Errors: a bind the IBA forbids completes MW_BIND_ERR and
// moves the QP to ERR (rxe_do_local_ops); the window is unchanged.
func TestBindMW_Errors(t *testing.T) {
	f := newInvPair(t)
	noBind := f.b.reg(make([]byte, 64), mr.LocalWrite|mr.RemoteWrite)
	w, err := f.b.tbl.AllocWindow(f.b.pd, mr.WindowType2)
	require.NoError(t, err)
	require.NoError(t, f.b.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRBindMW, BindMW: qp.BindMW{Window: w,
		BindConfig: mr.BindConfig{Region: noBind, Addr: noBind.IOVA(), Length: 8, Access: mr.RemoteWrite}}}))
	wc := f.await(t, f.b, 1)[0]
	assert.Equal(t, cq.StatusMWBindErr, wc.Status)
	assert.Equal(t, cq.OpBindMW, wc.Opcode)
	assert.Equal(t, qp.StateErr, f.b.qp.State())
	assert.Equal(t, mr.WindowFree, w.State())
}

// TestLocalOpsCompleteInOrder: a LOCAL_INV posted behind a SEND completes
// after it, though it runs without waiting for the SEND's ACK.
func TestLocalOpsCompleteInOrder(t *testing.T) {
	f := newInvPair(t)
	fr, err := f.a.tbl.Register(f.a.pd, mr.RegisterConfig{Buf: make([]byte, 64), Access: mr.LocalWrite, Invalidatable: true})
	require.NoError(t, err)
	f.postRecvB(t, 10)
	require.NoError(t, f.a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: f.aMR.IOVA(), Length: 8, LKey: f.aMR.LKey()}}}))
	require.NoError(t, f.a.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRLocalInv, Flags: qp.SendSignaled, InvalidateRKey: fr.LKey()}))
	require.NoError(t, f.a.qp.PostSend(&qp.SendWR{WRID: 3, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: f.aMR.IOVA(), Length: 8, LKey: f.aMR.LKey()}}}))
	f.postRecvB(t, 11)
	got := f.await(t, f.a, 3)
	var ids []uint64
	for _, c := range got {
		require.Equal(t, cq.StatusSuccess, c.Status)
		ids = append(ids, c.WRID)
	}
	assert.Equal(t, []uint64{1, 2, 3}, ids)
	assert.Equal(t, cq.OpLocalInv, got[1].Opcode)
}
