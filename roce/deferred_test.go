package roce_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// dropReqLink drops the n-th request packet it is given to send (1 for
// the first) and passes everything else on.
type dropReqLink struct {
	link.Link
	n    int
	reqs atomic.Int32
}

func (l *dropReqLink) Send(dgs []link.Datagram) (int, error) {
	kept := dgs[:0:0]
	for i := range dgs {
		if h, err := bth.Parse(dgs[i].Buf); err == nil && h.Opcode().IsRequest() {
			if int(l.reqs.Add(1)) == l.n {
				continue
			}
		}
		kept = append(kept, dgs[i])
	}
	if _, err := l.Link.Send(kept); err != nil {
		return 0, err
	}
	return len(dgs), nil
}

// TestOnBatchPostLeavesAtOnce: a WRITE that a device's OnBatch function
// posts on a QP whose earlier WRITE still waits for its ACK leaves when
// the function returns, not with the next reply. WRITE 2 is lost, so its
// ACK never comes: WRITE 3, posted when WRITE 1 completed, reaches the
// peer at once (which then NAKs the gap), long before the retransmission
// timer would have sent it. It waited for WRITE 2's ACK before, and the
// run-to-completion message rate test lost half a window per round trip
// to that (doc/limits.md §9).
func TestOnBatchPostLeavesAtOnce(t *testing.T) {
	la, lb := newChanPair("127.0.0.1:4791", "127.0.0.2:4791")
	a, b := openSide(t, &dropReqLink{Link: la, n: 2}), openSide(t, lb)
	t.Cleanup(func() { a.dev.Close(); b.dev.Close() })
	opts := roce.ConnectOptions{MTU: qp.MTU1024, Timeout: 4 * time.Second}
	require.NoError(t, a.qp.Connect(b.qp.Info(), opts))
	require.NoError(t, b.qp.Connect(a.qp.Info(), opts))
	src, err := a.dev.RegisterMR(a.pd, make([]byte, 64), mr.LocalWrite)
	require.NoError(t, err)
	dst, err := b.dev.RegisterMR(b.pd, make([]byte, 64), mr.LocalWrite|mr.RemoteWrite)
	require.NoError(t, err)
	write := func(id uint64) error {
		return a.qp.PostSend(&qp.SendWR{WRID: id, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{src.SGE(0, 8)}, RemoteAddr: dst.IOVA(), RKey: dst.RKey()})
	}
	var (
		mu     sync.Mutex
		posted bool
		wcs    = make([]cq.Completion, 8)
		perr   = make(chan error, 1)
	)
	a.dev.OnBatch(func() {
		mu.Lock()
		defer mu.Unlock()
		for k := a.scq.Poll(wcs); k > 0; k = a.scq.Poll(wcs) {
			for _, wc := range wcs[:k] {
				if wc.WRID == 1 && !posted {
					posted = true
					perr <- write(3)
				}
			}
		}
	})
	defer a.dev.OnBatch(nil)
	mu.Lock()
	require.NoError(t, write(1))
	require.NoError(t, write(2))
	mu.Unlock()
	select {
	case err := <-perr:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("WRITE 1 did not complete")
	}
	require.Eventually(t, func() bool { return b.dev.Stats().RxPackets.Load() >= 2 }, time.Second, time.Millisecond,
		"WRITE 3 did not reach the peer within a second (the retransmission timer is 4 s)")
}
