package roce

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/qp"
)

// TestCloseAcknowledgesExecutedRequests: a device closed between a batch's
// intake (a SEND executed, its receive completion pushed) and the transmit
// pass that would have sent its ACK still sends the ACK, in Close's last
// engine pass. Before, the pass after the batch stopped at closed and
// Close's move to ERR dropped the queued ACK; a goroce ibv_rc_pingpong
// client that closed its device right after its last receive left rxe's
// server retrying forever (retry_cnt 7 is infinite on rxe, doc/rxe.md
// §6): the interop cell hung. The sender here gives up after one ACK
// timeout (200 ms) without retries, so a lost ACK fails its SEND.
//
// paced: the receiving QP is held by its pacer (MaxRate 1 Mbit/s, a
// 64 KiB WRITE of its own under way), which must not keep the owed ACK
// in Close's last pass.
func TestCloseAcknowledgesExecutedRequests(t *testing.T) {
	for _, paced := range []bool{false, true} {
		name := "unpaced"
		if paced {
			name = "paced"
		}
		t.Run(name, func(t *testing.T) { testCloseAcknowledges(t, paced) })
	}
}

func testCloseAcknowledges(t *testing.T, paced bool) {
	n := mem.NewNetwork()
	open := func(a string) *Device {
		d, err := Open(Config{Link: n.Attach(netip.MustParseAddrPort(a))})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	recv, send := open("10.0.0.1:4791"), open("10.0.0.2:4791")
	qr, err := recv.CreateQP(QPConfig{})
	require.NoError(t, err)
	qs, err := send.CreateQP(QPConfig{})
	require.NoError(t, err)
	dst := make([]byte, 64<<10)
	rmr, err := recv.RegisterMR(nil, dst, LocalWrite)
	require.NoError(t, err)
	src := make([]byte, 64<<10)
	for i := range src {
		src[i] = byte(i + 1)
	}
	smr, err := send.RegisterMR(nil, src, 0)
	require.NoError(t, err)
	sink, err := send.RegisterMR(nil, make([]byte, 64<<10), LocalWrite|RemoteWrite)
	require.NoError(t, err)
	ro := ConnectOptions{}
	if paced {
		ro.MaxRate = cc.Mbps
	}
	require.NoError(t, qr.Connect(qs.Info(), ro))
	require.NoError(t, qs.Connect(qr.Info(), ConnectOptions{Timeout: 200 * time.Millisecond, RetryCnt: NoRetries}))
	require.NoError(t, qr.PostRecv(&RecvWR{WRID: 7, SGL: []SGE{rmr.SGE(0, 64)}}))

	// The hook closes recv from another goroutine, as a program that
	// polled the receive completion would, in the batch that completed
	// it, and lets the batch go on once Close has moved the QP to ERR
	// (its engine pass over the shard is done; Close then waits for the
	// batch to end).
	closed := make(chan error, 1)
	hook := func(d *Device) {
		if d != recv {
			return
		}
		var wc [1]cq.Completion
		if qr.RecvCQ().Poll(wc[:]) == 0 {
			return // a batch of ACKs for the paced WRITE
		}
		testHookIntake.Store(nil)
		assert.Equal(t, cq.StatusSuccess, wc[0].Status)
		go func() { closed <- recv.Close() }()
		for {
			qr.sh.lock()
			st := qr.q.State()
			qr.sh.unlock()
			if st == qp.StateErr {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	testHookIntake.Store(&hook)
	t.Cleanup(func() { testHookIntake.Store(nil) })

	if paced {
		// 64 KiB at 1 Mbit/s takes about half a second: the pacer holds
		// the QP when the SEND arrives.
		require.NoError(t, qr.PostSend(&SendWR{WRID: 2, Opcode: WRRDMAWrite, SGL: []SGE{rmr.SGE(0, 64<<10)},
			RemoteAddr: sink.IOVA(), RKey: sink.RKey()}))
		deadline := time.Now().Add(5 * time.Second)
		for recv.Stats().TxPackets.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	require.NoError(t, qs.PostSend(&SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{smr.SGE(0, 64)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]Completion
	k, err := qs.SendCQ().Wait(ctx, wc[:])
	require.NoError(t, err)
	require.Equal(t, 1, k)
	assert.Equal(t, cq.StatusSuccess, wc[0].Status, "the SEND is acknowledged: %v", wc[0].Err())
	select {
	case err := <-closed:
		assert.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	assert.Equal(t, src[:64], dst[:64])
}

// TestDestroyAcknowledgesExecutedRequests: Destroy sends the ACK its QP
// still owes (qp's nextReply in ERR), as Close does.
func TestDestroyAcknowledgesExecutedRequests(t *testing.T) {
	n := mem.NewNetwork()
	open := func(a string) *Device {
		d, err := Open(Config{Link: n.Attach(netip.MustParseAddrPort(a))})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	recv, send := open("10.0.0.1:4791"), open("10.0.0.2:4791")
	qr, err := recv.CreateQP(QPConfig{})
	require.NoError(t, err)
	qs, err := send.CreateQP(QPConfig{})
	require.NoError(t, err)
	rmr, err := recv.RegisterMR(nil, make([]byte, 64), LocalWrite)
	require.NoError(t, err)
	smr, err := send.RegisterMR(nil, make([]byte, 64), 0)
	require.NoError(t, err)
	require.NoError(t, qr.Connect(qs.Info(), ConnectOptions{}))
	require.NoError(t, qs.Connect(qr.Info(), ConnectOptions{Timeout: 200 * time.Millisecond, RetryCnt: NoRetries}))
	require.NoError(t, qr.PostRecv(&RecvWR{WRID: 7, SGL: []SGE{rmr.SGE(0, 64)}}))

	destroyed := make(chan error, 1)
	hook := func(d *Device) {
		if d != recv {
			return
		}
		testHookIntake.Store(nil)
		destroyed <- qr.Destroy()
	}
	testHookIntake.Store(&hook)
	t.Cleanup(func() { testHookIntake.Store(nil) })

	require.NoError(t, qs.PostSend(&SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{smr.SGE(0, 64)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]Completion
	k, err := qs.SendCQ().Wait(ctx, wc[:])
	require.NoError(t, err)
	require.Equal(t, 1, k)
	assert.Equal(t, cq.StatusSuccess, wc[0].Status, "the SEND is acknowledged: %v", wc[0].Err())
	assert.NoError(t, <-destroyed)
}
