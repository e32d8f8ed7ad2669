package roce_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

func openMem(t *testing.T, n *mem.Network, addr string) *roce.Device {
	t.Helper()
	d, err := roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort(addr))})
	require.NoError(t, err)
	return d
}

// After Close every verb returns ErrClosed; before, PostSend on a closed
// device returned nil.
func TestClosedVerbs(t *testing.T) {
	n := mem.NewNetwork()
	d := openMem(t, n, "10.0.0.1:4791")
	q, err := d.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	q2, err := d.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	buf := make([]byte, 64)
	m, err := d.RegisterMR(nil, buf, roce.LocalWrite)
	require.NoError(t, err)
	peer := roce.Info{Addr: netip.MustParseAddr("10.0.0.2"), QPN: 99}
	require.NoError(t, q2.Connect(peer, roce.ConnectOptions{}))

	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "Close is idempotent")

	send := &roce.SendWR{Opcode: roce.WRSend, SGL: []roce.SGE{m.SGE(0, 64)}}
	recv := &roce.RecvWR{SGL: []roce.SGE{m.SGE(0, 64)}}
	for _, q := range []*roce.QP{q, q2} {
		assert.ErrorIs(t, q.PostSend(send), roce.ErrClosed)
		assert.ErrorIs(t, q.PostRecv(recv), roce.ErrClosed)
		assert.ErrorIs(t, q.Modify(&qp.Attr{State: qp.StateReset}, qp.AttrState), roce.ErrClosed)
		assert.ErrorIs(t, q.Connect(peer, roce.ConnectOptions{}), roce.ErrClosed)
		assert.ErrorIs(t, q.Destroy(), roce.ErrClosed)
	}
	_, err = d.CreateQP(roce.QPConfig{})
	assert.ErrorIs(t, err, roce.ErrClosed)
	_, err = d.RegisterMR(nil, make([]byte, 8), 0)
	assert.ErrorIs(t, err, roce.ErrClosed)
	_, err = d.RegisterMRConfig(nil, roce.MRConfig{Buf: make([]byte, 8)})
	assert.ErrorIs(t, err, roce.ErrClosed)
	_, err = d.CreateCQ(8)
	assert.ErrorIs(t, err, roce.ErrClosed)
}

// Close closes the CQs the device made, so a Wait blocked on one returns;
// a CQ the application made stays open.
func TestCloseWakesWait(t *testing.T) {
	n := mem.NewNetwork()
	d := openMem(t, n, "10.0.0.1:4791")
	made, err := d.CreateCQ(8)
	require.NoError(t, err)
	q, err := d.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	mine, err := cq.New(cq.Config{Capacity: 8})
	require.NoError(t, err)
	defer mine.Close()
	_, err = d.CreateQP(roce.QPConfig{SendCQ: mine, RecvCQ: mine})
	require.NoError(t, err)

	waits := []*cq.CQ{made, q.SendCQ()}
	errc := make(chan error, len(waits))
	for _, c := range waits {
		go func() {
			_, err := c.Wait(context.Background(), make([]cq.Completion, 1))
			errc <- err
		}()
	}
	time.Sleep(10 * time.Millisecond) // let the waiters block
	require.NoError(t, d.Close())
	for range waits {
		select {
		case err := <-errc:
			assert.ErrorIs(t, err, roce.ErrClosed)
			assert.ErrorIs(t, err, cq.ErrClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("Wait did not return after Close")
		}
	}
	assert.NoError(t, mine.Push(cq.Completion{}), "the application's CQ stays open")
}
