package roce_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// TestSRQSharedByRCQPs: four RC QPs of one device share an SRQ; four peer
// QPs on another device (over link/mem) SEND to them at once, messages of
// one to several packets. Every message lands once, byte-exact, in a WQE
// of the SRQ; its completion is on the shared receive CQ with the number
// of the QP that received it; each QP's messages complete in order; the
// armed limit raises one event on Device.Events.
func TestSRQSharedByRCQPs(t *testing.T) {
	const nQP, perQP, slot = 4, 12, 8192
	g0 := runtime.NumGoroutine()
	net := mem.NewNetwork()
	a, err := roce.Open(roce.Config{Link: net.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))})
	require.NoError(t, err)
	b, err := roce.Open(roce.Config{Link: net.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))})
	require.NoError(t, err)

	srq, err := b.CreateSRQ(roce.SRQConfig{MaxWR: 64, MaxSGE: 1})
	require.NoError(t, err)
	rcq, err := b.CreateCQ(256)
	require.NoError(t, err)
	mem := make([]byte, 64*slot)
	rmr, err := b.RegisterMR(nil, mem, roce.LocalWrite)
	require.NoError(t, err)
	for k := 0; k < nQP*perQP; k++ {
		require.NoError(t, srq.PostRecv(&roce.RecvWR{WRID: uint64(k), SGL: []roce.SGE{rmr.SGE(k*slot, slot)}}))
	}
	require.NoError(t, srq.Modify(8))
	assert.Equal(t, roce.SRQAttr{MaxWR: 64, MaxSGE: 1, Limit: 8}, srq.Query())

	var senders, recvs []*roce.QP
	for i := 0; i < nQP; i++ {
		s, err := a.CreateQP(roce.QPConfig{})
		require.NoError(t, err)
		r, err := b.CreateQP(roce.QPConfig{RecvCQ: rcq, SRQ: srq})
		require.NoError(t, err)
		require.NoError(t, s.Connect(r.Info(), roce.ConnectOptions{MTU: roce.MTU1024}))
		require.NoError(t, r.Connect(s.Info(), roce.ConnectOptions{MTU: roce.MTU1024}))
		senders, recvs = append(senders, s), append(recvs, r)
	}
	require.ErrorIs(t, recvs[0].PostRecv(&roce.RecvWR{SGL: []roce.SGE{rmr.SGE(0, 8)}}), roce.ErrInvalidArg)

	msg := func(i, j int) []byte { return testutil.Pattern(uint64(i*100+j+1), 1+(i*perQP+j)*677%slot) }
	var wg sync.WaitGroup
	for i, s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var bufs [][]byte
			for j := 0; j < perQP; j++ {
				m := msg(i, j)
				bufs = append(bufs, m)
				smr, err := a.RegisterMR(nil, m, 0)
				if !assert.NoError(t, err) {
					return
				}
				assert.NoError(t, s.PostSend(&roce.SendWR{WRID: uint64(j), Opcode: roce.WRSendWithImm,
					Flags: roce.SendSignaled, Imm: uint32(i<<8 | j), SGL: []roce.SGE{smr.SGE(0, len(m))}}))
			}
			wc := make([]roce.Completion, perQP)
			for got := 0; got < perQP; {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				n, err := s.SendCQ().Wait(ctx, wc)
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				for _, c := range wc[:n] {
					assert.Equal(t, roce.StatusSuccess, c.Status)
				}
				got += n
			}
		}()
	}
	wg.Wait()

	var wcs []roce.Completion
	buf := make([]roce.Completion, 64)
	for len(wcs) < nQP*perQP {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, err := rcq.Wait(ctx, buf)
		cancel()
		require.NoError(t, err)
		wcs = append(wcs, buf[:n]...)
	}
	used := map[uint64]bool{}
	next := map[uint32]int{}
	for _, wc := range wcs {
		require.Equal(t, roce.StatusSuccess, wc.Status)
		require.False(t, used[wc.WRID], "WQE %d used twice", wc.WRID)
		used[wc.WRID] = true
		i, j := int(wc.Imm>>8), int(wc.Imm&0xff)
		require.Less(t, i, nQP)
		assert.Equal(t, uint32(recvs[i].QPN()), wc.QPN)
		assert.Equal(t, next[wc.QPN], j, "QP %d completes in order", i)
		next[wc.QPN] = j + 1
		want := msg(i, j)
		require.Equal(t, uint32(len(want)), wc.ByteLen)
		got := mem[int(wc.WRID)*slot:][:len(want)]
		assert.True(t, bytes.Equal(want, got), fmt.Sprintf("message %d of QP %d in WQE %d", j, i, wc.WRID))
	}
	assert.Zero(t, srq.Len())

	select {
	case ev := <-b.Events():
		assert.Equal(t, roce.EventSRQLimitReached, ev.Type)
		assert.Same(t, srq, ev.SRQ)
	case <-time.After(10 * time.Second):
		t.Fatal("no SRQ limit event")
	}
	select {
	case ev := <-b.Events():
		t.Fatalf("second event %+v: the limit fires once per Modify", ev)
	default:
	}
	assert.Zero(t, srq.Query().Limit)

	// Destroy: refused while a QP uses the SRQ.
	require.ErrorIs(t, srq.Destroy(), roce.ErrBusy)
	for _, r := range recvs {
		require.NoError(t, r.Destroy())
	}
	require.NoError(t, srq.Destroy())
	// Each QP of the SRQ raised Last WQE Reached as it entered ERR.
	for _, r := range recvs {
		select {
		case ev := <-b.Events():
			assert.Equal(t, roce.EventQPLastWQEReached, ev.Type)
			assert.Same(t, r, ev.QP)
			assert.Same(t, srq, ev.SRQ)
		default:
			t.Fatalf("no Last WQE Reached event for QP %v", r.QPN())
		}
	}

	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	_, open := <-b.Events()
	assert.False(t, open, "Close closes Events")
	require.ErrorIs(t, srq.PostRecv(&roce.RecvWR{}), roce.ErrClosed)
	requireGoroutines(t, g0)
}

// TestSRQOtherDevice: a QP cannot use another device's SRQ.
func TestSRQOtherDevice(t *testing.T) {
	net := mem.NewNetwork()
	a, err := roce.Open(roce.Config{Link: net.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))})
	require.NoError(t, err)
	defer a.Close()
	b, err := roce.Open(roce.Config{Link: net.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))})
	require.NoError(t, err)
	defer b.Close()
	srq, err := b.CreateSRQ(roce.SRQConfig{})
	require.NoError(t, err)
	_, err = a.CreateQP(roce.QPConfig{SRQ: srq})
	require.ErrorIs(t, err, roce.ErrNotAttached)
	_, err = b.CreateSRQ(roce.SRQConfig{MaxWR: 4, Limit: 5})
	require.ErrorIs(t, err, roce.ErrInvalidArg)
}
