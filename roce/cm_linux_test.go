package roce_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// TestCMOverUDP: Listen, Dial and a SEND over loopback UDP sockets on free
// ports, the source address of each MAD coming from the socket.
func TestCMOverUDP(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	dd, ld := openCMUDP(t)

	p := cmConnect(t, dd, ld, roce.ListenConfig{Accept: func(roce.ConnRequest) ([]byte, error) {
		return []byte("udp"), nil
	}}, roce.DialConfig{PrivateData: []byte("loopback")})
	assert.True(t, bytes.HasPrefix(p.lc.PrivateData(), []byte("loopback")))
	assert.True(t, bytes.HasPrefix(p.dc.PrivateData(), []byte("udp")))
	assert.Equal(t, netip.MustParseAddr("127.0.0.1"), p.lc.RemoteAddr().Addr())

	buf := make([]byte, 64)
	m, err := ld.RegisterMR(nil, buf, mr.LocalWrite)
	require.NoError(t, err)
	require.NoError(t, p.lc.QP().PostRecv(&qp.RecvWR{WRID: 1, SGL: []qp.SGE{m.SGE(0, 64)}}))
	src, err := dd.RegisterMR(nil, []byte("over udp"), 0)
	require.NoError(t, err)
	require.NoError(t, p.dc.QP().PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{src.SGE(0, 8)}}))
	wc := waitOne(t, p.lc.QP().RecvCQ())
	require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
	assert.Equal(t, "over udp", string(buf[:wc.ByteLen]))

	require.NoError(t, p.dc.Close())
	select {
	case <-p.lc.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no disconnect")
	}
	require.NoError(t, p.lc.Close())
}

// openCMUDP opens a dialing and a listening device with the fast CM
// timings on loopback UDP sockets on free ports, each sending to the
// other's port, and closes them at the end of the test.
func openCMUDP(t *testing.T) (dd, ld *roce.Device) {
	t.Helper()
	la, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	lb, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	require.NoError(t, err)
	dd, err = roce.Open(roce.Config{Link: la, DestPort: lb.LocalAddr().Port(), CM: fastCM})
	require.NoError(t, err)
	t.Cleanup(func() { dd.Close() })
	ld, err = roce.Open(roce.Config{Link: lb, DestPort: la.LocalAddr().Port(), CM: fastCM})
	require.NoError(t, err)
	t.Cleanup(func() { ld.Close() })
	return dd, ld
}
