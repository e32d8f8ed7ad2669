package roce_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// sendCounter is a chanLink that records the size of each Send batch.
type sendCounter struct {
	*chanLink
	mu      sync.Mutex
	batches []int
}

func (l *sendCounter) Send(dgs []link.Datagram) (int, error) {
	l.mu.Lock()
	l.batches = append(l.batches, len(dgs))
	l.mu.Unlock()
	return l.chanLink.Send(dgs)
}

func (l *sendCounter) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.batches
	l.batches = nil
	return b
}

// TestPostSendBatch checks the list semantics of PostSendBatch: the WRs
// before a bad one are posted and complete, the bad one's index and error
// come back (ibv_post_send's bad_wr), nothing after it is posted; and a
// list's packets reach the link in one Send.
func TestPostSendBatch(t *testing.T) {
	la, lb := newChanPair("127.0.0.1:4791", "127.0.0.2:4791")
	cl := &sendCounter{chanLink: la}
	a, b := openSide(t, cl), openSide(t, lb)
	defer a.dev.Close()
	defer b.dev.Close()
	require.NoError(t, a.qp.Connect(b.qp.Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
	require.NoError(t, b.qp.Connect(a.qp.Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
	acc := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead
	src, dst := make([]byte, 1024), make([]byte, 1024)
	for i := range src {
		src[i] = byte(i)
	}
	sm, err := a.dev.RegisterMR(a.pd, src, acc)
	require.NoError(t, err)
	dm, err := b.dev.RegisterMR(b.pd, dst, acc)
	require.NoError(t, err)
	write := func(id uint64) qp.SendWR {
		off := id * 64
		return qp.SendWR{WRID: id, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{{Addr: sm.IOVA() + off, Length: 64, LKey: sm.LKey()}}, RemoteAddr: dm.IOVA() + off, RKey: dm.RKey()}
	}

	t.Run("bad WR in the middle", func(t *testing.T) {
		wrs := []qp.SendWR{write(0), write(1), write(2), write(3)}
		wrs[2].Opcode = qp.WROpcode(99)
		n, err := a.qp.PostSendBatch(wrs)
		require.Equal(t, 2, n, "wrs[n] is the bad WR")
		require.True(t, errors.Is(err, qp.ErrUnsupportedOp), "%v", err)
		for _, want := range []uint64{0, 1} {
			wc := waitOne(t, a.scq)
			assert.Equal(t, want, wc.WRID)
			assert.Equal(t, cq.StatusSuccess, wc.Status)
		}
		require.Zero(t, a.scq.Len(), "nothing after the bad WR was posted")
		n, err = a.qp.PostSendBatch(wrs[3:])
		require.NoError(t, err)
		require.Equal(t, 1, n)
		assert.Equal(t, uint64(3), waitOne(t, a.scq).WRID)
		assert.Equal(t, src[:128], dst[:128])
		assert.Equal(t, src[192:256], dst[192:256])
		assert.Zero(t, dst[128], "the bad WR wrote nothing")
	})

	t.Run("one Send per list", func(t *testing.T) {
		cl.take()
		wrs := make([]qp.SendWR, 8)
		for i := range wrs {
			wrs[i] = write(uint64(i + 4))
		}
		n, err := a.qp.PostSendBatch(wrs)
		require.NoError(t, err)
		require.Equal(t, 8, n)
		for range wrs {
			require.Equal(t, cq.StatusSuccess, waitOne(t, a.scq).Status)
		}
		assert.Equal(t, 8, cl.take()[0], "the list's packets leave in one Send")
		assert.Equal(t, src[256:768], dst[256:768])
	})

	t.Run("empty list", func(t *testing.T) {
		n, err := a.qp.PostSendBatch(nil)
		assert.Zero(t, n)
		assert.NoError(t, err)
	})

	t.Run("receives", func(t *testing.T) {
		rwrs := []qp.RecvWR{
			{WRID: 1, SGL: []qp.SGE{{Addr: dm.IOVA(), Length: 8, LKey: dm.LKey()}}},
			{WRID: 2, SGL: make([]qp.SGE, 64)}, // more SGEs than MaxSGE
			{WRID: 3, SGL: []qp.SGE{{Addr: dm.IOVA(), Length: 8, LKey: dm.LKey()}}},
		}
		n, err := b.qp.PostRecvBatch(rwrs)
		require.Equal(t, 1, n)
		require.True(t, errors.Is(err, qp.ErrTooManySGE), "%v", err)
	})

	require.Zero(t, a.dev.Stats().BadICRC.Load()+b.dev.Stats().BadICRC.Load())
}
