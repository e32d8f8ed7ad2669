package roce_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// TestEagerPostWhileAwaitingReply: a WRITE posted while the QP waits for
// the ACK of an earlier one leaves at once from the caller with
// QPConfig.Eager, and waits for the reply (or the retransmit timer)
// without it.
func TestEagerPostWhileAwaitingReply(t *testing.T) {
	for _, eager := range []bool{false, true} {
		la, _ := newChanPair("127.0.0.1:4791", "127.0.0.2:4791") // nobody answers on .2
		cl := &sendCounter{chanLink: la}
		dev, err := roce.Open(roce.Config{Link: cl})
		require.NoError(t, err)
		q, err := dev.CreateQP(roce.QPConfig{Eager: eager})
		require.NoError(t, err)
		require.NoError(t, q.Connect(roce.Info{Addr: la.addr.Addr().Next(), QPN: 0x100, PSN: 0}, roce.ConnectOptions{MTU: qp.MTU1024, Timeout: time.Second}))
		buf := make([]byte, 64)
		m, err := dev.RegisterMR(nil, buf, mr.LocalWrite)
		require.NoError(t, err)
		wr := qp.SendWR{Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{m.SGE(0, 64)}, RemoteAddr: 0x1000, RKey: 1}
		require.NoError(t, q.PostSend(&wr))
		require.Eventually(t, func() bool { return len(cl.take()) > 0 }, time.Second, time.Millisecond, "first WRITE sent")
		require.NoError(t, q.PostSend(&wr))
		time.Sleep(50 * time.Millisecond) // well below the 1 s ACK timeout
		got := cl.take()
		if eager {
			assert.NotEmpty(t, got, "an eager QP sends the second WRITE at once")
		} else {
			assert.Empty(t, got, "the second WRITE waits for the first one's reply")
		}
		dev.Close()
	}
}
