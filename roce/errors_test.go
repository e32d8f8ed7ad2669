package roce_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// TestVerbsErrorsOneImport: the errors a verbs program meets are matched
// by roce's own names, so that it tests them importing roce alone: the
// work queue's back-pressure, a post in the wrong state, a refused state
// change, a long SGL, a memory check, a port listened on twice.
func TestVerbsErrorsOneImport(t *testing.T) {
	n := mem.NewNetwork()
	d := openMem(t, n, "10.0.0.1:4791")
	defer d.Close()
	m, err := d.RegisterMR(nil, make([]byte, 64), roce.LocalWrite)
	require.NoError(t, err)
	send := roce.SendWR{Opcode: roce.WRSend, SGL: []roce.SGE{m.SGE(0, 8)}}

	fresh, err := d.CreateQP(roce.QPConfig{MaxSendWR: 2, MaxSGE: 1})
	require.NoError(t, err)
	assert.ErrorIs(t, fresh.PostSend(&send), roce.ErrInvalidState, "PostSend in RESET")
	assert.ErrorIs(t, fresh.Modify(&roce.QPAttr{State: roce.StateRTS}, roce.AttrState), roce.ErrInvalidTransition)

	// A QP connected to a peer that never answers: its WRs stay queued.
	q, err := d.CreateQP(roce.QPConfig{MaxSendWR: 2, MaxSGE: 1})
	require.NoError(t, err)
	require.NoError(t, q.Connect(roce.Info{Addr: netip.MustParseAddr("10.0.0.2"), QPN: 99}, roce.ConnectOptions{}))
	two := send
	two.SGL = []roce.SGE{m.SGE(0, 8), m.SGE(8, 8)}
	assert.ErrorIs(t, q.PostSend(&two), roce.ErrTooManySGE)
	var full error
	for range 3 {
		full = q.PostSend(&send)
	}
	assert.ErrorIs(t, full, roce.ErrQueueFull, "the third WR of a 2-deep queue")

	assert.ErrorIs(t, m.CheckRange(m.IOVA()+60, 8), roce.ErrOutOfRange)

	l, err := d.Listen(7471, roce.ListenConfig{})
	require.NoError(t, err)
	defer l.Close()
	_, err = d.Listen(7471, roce.ListenConfig{})
	assert.ErrorIs(t, err, roce.ErrServiceInUse)
}
