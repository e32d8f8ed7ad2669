package roce_test

import (
	"context"
	"testing"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
