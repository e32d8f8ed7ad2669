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

// ackPair is the fixture of the tests below: a receiving device and QP
// with a 64-byte receive posted in the first 64 KiB of dst, and a sending
// QP that gives up after one ACK timeout (200 ms) without retries, so a
// lost ACK fails its SEND; src (64 KiB, a pattern) is registered on the
// sender, and sink (64 KiB, remote-writable) too.
type ackPair struct {
	recv, send *Device
	qr, qs     *QP
	rmr, smr   *MR
	sink       *MR
	dst, src   []byte
}

func newAckPair(t *testing.T, recvOpts ConnectOptions) *ackPair {
	t.Helper()
	n := mem.NewNetwork()
	open := func(a string) *Device {
		d, err := Open(Config{Link: n.Attach(netip.MustParseAddrPort(a))})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	p := &ackPair{recv: open("10.0.0.1:4791"), send: open("10.0.0.2:4791"),
		dst: make([]byte, 64<<10), src: make([]byte, 64<<10)}
	for i := range p.src {
		p.src[i] = byte(i + 1)
	}
	var err error
	p.qr, err = p.recv.CreateQP(QPConfig{})
	require.NoError(t, err)
	p.qs, err = p.send.CreateQP(QPConfig{})
	require.NoError(t, err)
	p.rmr, err = p.recv.RegisterMR(nil, p.dst, LocalWrite)
	require.NoError(t, err)
	p.smr, err = p.send.RegisterMR(nil, p.src, 0)
	require.NoError(t, err)
	p.sink, err = p.send.RegisterMR(nil, make([]byte, 64<<10), LocalWrite|RemoteWrite)
	require.NoError(t, err)
	require.NoError(t, p.qr.Connect(p.qs.Info(), recvOpts))
	require.NoError(t, p.qs.Connect(p.qr.Info(), ConnectOptions{Timeout: 200 * time.Millisecond, RetryCnt: NoRetries}))
	require.NoError(t, p.qr.PostRecv(&RecvWR{WRID: 7, SGL: []SGE{p.rmr.SGE(0, 64)}}))
	t.Cleanup(func() { testHookIntake.Store(nil) })
	return p
}

// sendAcked posts a 64-byte SEND of src and requires it to complete
// successfully: acknowledged.
func (p *ackPair) sendAcked(t *testing.T) {
	t.Helper()
	require.NoError(t, p.qs.PostSend(&SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{p.smr.SGE(0, 64)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]Completion
	k, err := p.qs.SendCQ().Wait(ctx, wc[:])
	require.NoError(t, err)
	require.Equal(t, 1, k)
	assert.Equal(t, cq.StatusSuccess, wc[0].Status, "the SEND is acknowledged: %v", wc[0].Err())
}

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
	ro := ConnectOptions{}
	if paced {
		ro.MaxRate = cc.Mbps
	}
	p := newAckPair(t, ro)
	recv, qr := p.recv, p.qr

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

	if paced {
		// 64 KiB at 1 Mbit/s takes about half a second: the pacer holds
		// the QP when the SEND arrives.
		require.NoError(t, qr.PostSend(&SendWR{WRID: 2, Opcode: WRRDMAWrite, SGL: []SGE{p.rmr.SGE(0, 64<<10)},
			RemoteAddr: p.sink.IOVA(), RKey: p.sink.RKey()}))
		deadline := time.Now().Add(5 * time.Second)
		for recv.Stats().TxPackets.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	p.sendAcked(t)
	select {
	case err := <-closed:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	assert.Equal(t, p.src[:64], p.dst[:64])
}

// TestDestroyAcknowledgesExecutedRequests: Destroy sends the ACK its QP
// still owes (qp's nextReply in ERR), as Close does.
func TestDestroyAcknowledgesExecutedRequests(t *testing.T) {
	p := newAckPair(t, ConnectOptions{})
	destroyed := make(chan error, 1)
	hook := func(d *Device) {
		if d != p.recv {
			return
		}
		testHookIntake.Store(nil)
		destroyed <- p.qr.Destroy()
	}
	testHookIntake.Store(&hook)
	p.sendAcked(t)
	assert.NoError(t, <-destroyed)
}
