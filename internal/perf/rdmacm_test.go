package perf

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// TestCMLinkAfterRejects: the -R client's control connection works after
// the server's CM rejected its first REQs (reason 8: perftest's server is
// not listening yet, and rxe's kernel CM answers so). Each rejected
// attempt's QP had its receives posted on the shared CQs and flushed them
// when destroyed; those completions must not be taken for the peer's
// messages (seen against rxe: "work queue full" on the first Recv).
func TestCMLinkAfterRejects(t *testing.T) {
	n := mem.NewNetwork()
	open := func(addr string) *roce.Device {
		d, err := roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort(addr)),
			CM: cm.Config{CMResponseTimeout: 14, PacketLifeTime: 12, MaxCMRetries: 3}})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	cd, sd := open("10.0.0.1:4791"), open("10.0.0.2:4791")
	rejects := 3
	l, err := sd.Listen(18515, roce.ListenConfig{Accept: func(roce.ConnRequest) ([]byte, error) {
		if rejects > 0 {
			rejects--
			return nil, &roce.RejectError{Reason: cm.RejectInvalidServiceID}
		}
		return nil, nil
	}})
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan *roce.Conn, 1)
	go func() {
		c, err := l.Accept(context.Background())
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()

	r := &remote{cfg: &RemoteConfig{Timeout: 5 * time.Second}}
	r.dev = cd
	link, err := newCMLink(cd, perftest.Client, time.Second)
	require.NoError(t, err)
	link.ctrl, err = r.dialCM(context.Background(), netip.MustParseAddrPort("10.0.0.2:18515"),
		roce.DialConfig{QPConfig: link.qpConfig(), Setup: link.postRecvs})
	require.NoError(t, err)
	assert.Zero(t, rejects, "the REQs before were rejected")
	sc := <-accepted
	require.NotNil(t, sc)

	// Three messages from the server, each received whole, in order.
	buf := make([]byte, 64)
	smr, err := sd.RegisterMR(nil, buf, mr.LocalWrite)
	require.NoError(t, err)
	for i := range 3 {
		copy(buf, []byte{'m', byte('0' + i)})
		require.NoError(t, sc.QP().PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled,
			SGL: []qp.SGE{smr.SGE(0, 2)}}))
		got, err := link.Recv(2 * time.Second)
		require.NoError(t, err, "message %d", i)
		assert.Equal(t, []byte{'m', byte('0' + i)}, got)
	}
	// And one the other way.
	require.NoError(t, sc.QP().PostRecv(&qp.RecvWR{WRID: 9, SGL: []qp.SGE{smr.SGE(0, 64)}}))
	require.NoError(t, link.Send([]byte("hello")))
	link.abort()
	_, err = link.Recv(time.Second)
	assert.ErrorIs(t, err, errAborted)
}
