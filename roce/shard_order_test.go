package roce_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// recvGate holds its first Recv until gate is closed, so that what is
// sent meanwhile arrives as one batch.
type recvGate struct {
	*mem.Link
	gate chan struct{}
}

func (g *recvGate) Recv(dgs []link.Datagram) (int, error) {
	<-g.gate
	return g.Link.Recv(dgs)
}

// TestBatchProcessedInArrivalOrder: datagrams of one received batch are
// processed in the order they arrived, across shards, as rxe processes
// its packets: UD SENDs to QPs in different shards of B, sharing one CQ,
// complete in the order they were sent. Grouping a batch by shard would
// complete them shard by shard, and a DREQ to QP1 could overtake the ACK
// that came before it.
func TestBatchProcessedInArrivalOrder(t *testing.T) {
	n := mem.NewNetwork()
	gl := &recvGate{Link: n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")), gate: make(chan struct{})}
	b, err := roce.Open(roce.Config{Link: gl, Shards: 2})
	require.NoError(t, err)
	defer b.Close()
	a := openTyped(t, n, "10.0.0.1:4791", roce.UD)
	const qkey = 0x5151
	require.NoError(t, a.qp.Ready(qkey))
	rcq, err := b.CreateCQ(64)
	require.NoError(t, err)
	// Four UD QPs on B, two in each shard (QPN mod 2).
	var byShard [2][]*roce.QP
	for len(byShard[0]) < 2 || len(byShard[1]) < 2 {
		q, err := b.CreateQP(roce.QPConfig{Type: roce.UD, SendCQ: rcq, RecvCQ: rcq})
		require.NoError(t, err)
		k := q.QPN() % 2
		if len(byShard[k]) == 2 {
			continue
		}
		require.NoError(t, q.Ready(qkey))
		byShard[k] = append(byShard[k], q)
	}
	// Sent in the order shard 1, shard 0, shard 1, shard 0.
	order := []*roce.QP{byShard[1][0], byShard[0][0], byShard[1][1], byShard[0][1]}
	buf := make([]byte, len(order)*256)
	rm, err := b.RegisterMR(nil, buf, mr.LocalWrite)
	require.NoError(t, err)
	for i, q := range order {
		require.NoError(t, q.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{rm.SGE(i*256, 256)}}))
	}
	sm, err := a.dev.RegisterMR(nil, make([]byte, 8), mr.LocalWrite)
	require.NoError(t, err)
	for i, q := range order {
		ah := roce.AH{Addr: b.LocalAddr().Addr(), QPN: q.QPN(), QKey: qkey}
		require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled,
			SGL: []qp.SGE{sm.SGE(0, 8)}, UD: ah.Dest()}))
		require.Equal(t, cq.StatusSuccess, waitOne(t, a.scq).Status)
	}
	close(gl.gate) // B's first receive takes all four
	for i := range order {
		wc := waitOne(t, rcq)
		require.Equal(t, cq.StatusSuccess, wc.Status)
		require.Equal(t, uint64(i), wc.WRID, "completion %d", i)
	}
}
