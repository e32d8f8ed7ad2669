package roce_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
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

// QPConfig{} gives the QP the default PD and one CQ of its own sized to its
// queues; Destroy closes that CQ after the flush completions are on it.
func TestQPConfigDefaults(t *testing.T) {
	n := mem.NewNetwork()
	d := openMem(t, n, "10.0.0.1:4791")
	defer d.Close()

	q, err := d.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	require.Same(t, q.SendCQ(), q.RecvCQ())
	assert.Equal(t, 2*qp.DefaultMaxWR, q.SendCQ().Cap())

	q, err = d.CreateQP(roce.QPConfig{MaxSendWR: 4, MaxRecvWR: 8})
	require.NoError(t, err)
	assert.Equal(t, 12, q.SendCQ().Cap())

	mine, err := d.CreateCQ(16)
	require.NoError(t, err)
	q2, err := d.CreateQP(roce.QPConfig{SendCQ: mine, MaxSendWR: 4, MaxRecvWR: 8})
	require.NoError(t, err)
	assert.Same(t, mine, q2.SendCQ())
	assert.NotSame(t, mine, q2.RecvCQ())
	assert.Equal(t, 12, q2.RecvCQ().Cap())

	buf := make([]byte, 64)
	m, err := d.RegisterMR(nil, buf, roce.LocalWrite)
	require.NoError(t, err)
	assert.Same(t, d.PD(), m.PD(), "RegisterMR(nil, …) uses the default PD")
	_, err = d.MRs().LookupLocal(d.PD(), m.LKey(), m.IOVA(), 64, mr.LocalWrite)
	require.NoError(t, err)

	// The QP's WRs are checked against the default PD: a region of another
	// PD is refused.
	require.NoError(t, q.Modify(&qp.Attr{State: qp.StateInit, AccessFlags: roce.LocalWrite},
		qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags))
	require.NoError(t, q.PostRecv(&roce.RecvWR{WRID: 5, SGL: []roce.SGE{m.SGE(0, 64)}}))
	require.NoError(t, q.Destroy())
	wc := make([]cq.Completion, 2)
	k, err := q.RecvCQ().Wait(context.Background(), wc)
	require.NoError(t, err)
	require.Equal(t, 1, k)
	assert.Equal(t, uint64(5), wc[0].WRID)
	assert.ErrorIs(t, wc[0].Err(), roce.StatusWRFlushErr)
	_, err = q.RecvCQ().Wait(context.Background(), wc)
	assert.ErrorIs(t, err, cq.ErrClosed, "Destroy closes the QP's own CQ")
	assert.ErrorIs(t, q.Destroy(), roce.ErrNoSuchQP)
	assert.NoError(t, mine.Push(cq.Completion{}), "the shared CQ stays open")
}

// roce, mr, cq and qp refuse a malformed argument with the same sentinel.
func TestInvalidArgShared(t *testing.T) {
	n := mem.NewNetwork()
	d := openMem(t, n, "10.0.0.1:4791")
	defer d.Close()
	_, err := d.RegisterMR(nil, nil, 0) // mr: empty buffer
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
	_, err = d.CreateCQ(0) // cq: capacity
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
	_, err = d.CreateQP(roce.QPConfig{MaxSGE: qp.MaxSGE + 1}) // qp: config
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
	q, err := d.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	err = q.Modify(&qp.Attr{State: qp.StateInit}, qp.AttrState) // qp: missing attributes
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
	assert.True(t, errors.Is(err, qp.ErrInvalidAttr))
	err = q.Connect(roce.Info{}, roce.ConnectOptions{}) // roce: no address
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
	for _, e := range []error{mr.ErrInvalidArg, cq.ErrInvalidArg, qp.ErrInvalidArg} {
		assert.Equal(t, roce.ErrInvalidArg, e)
	}
}
