package roce_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/roce"
)

// TestSIDROverUDP: ListenUD, DialUD and udaddy's exchange both ways over
// loopback UDP sockets on free ports.
func TestSIDROverUDP(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	dd, ld := openCMUDP(t)

	sb := newUDBufs(t, ld, 's')
	cb := newUDBufs(t, dd, 'c')
	l, err := ld.ListenUD(7174, roce.UDListenConfig{Setup: sb.recvs,
		Accept: func(roce.ConnRequest) ([]byte, error) { return []byte("udp"), nil }})
	require.NoError(t, err)
	defer l.Close()
	dc, err := dd.DialUD(ctxT(t, 10*time.Second), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), 7174),
		roce.UDDialConfig{PrivateData: []byte("loopback"), Setup: cb.recvs})
	require.NoError(t, err)
	defer dc.Close()
	lc, err := l.Accept(ctxT(t, 10*time.Second))
	require.NoError(t, err)
	defer lc.Close()
	assert.True(t, bytes.HasPrefix(lc.PrivateData(), []byte("loopback")))
	assert.True(t, bytes.HasPrefix(dc.PrivateData(), []byte("udp")))
	assert.Equal(t, lc.QP().QPN(), dc.AH().QPN)

	cb.send(t, dc.QP(), dc.AH())
	ah := lc.AH()
	ah.QPN = sb.recvQPN(t, lc.QP(), netip.MustParseAddr("127.0.0.1"), 'c')
	assert.Equal(t, dc.QP().QPN(), ah.QPN)
	sb.send(t, lc.QP(), ah)
	cb.recv(t, dc.QP(), netip.MustParseAddr("127.0.0.2"), 's')
}
