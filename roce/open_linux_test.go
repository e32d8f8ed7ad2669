package roce_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/roce"
)

// With Link nil, Open opens a UDP socket on Addr and Close closes it: the
// port can be bound again afterwards.
func TestOpenAddr(t *testing.T) {
	if testing.Short() {
		t.Skip("opens a UDP socket")
	}
	d, err := roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	local := d.LocalAddr()
	assert.Equal(t, netip.MustParseAddr("127.0.0.1"), local.Addr())
	assert.NotZero(t, local.Port())
	q, err := d.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	assert.Equal(t, local.Addr(), q.Info().Addr)

	_, err = udp.Open(udp.Config{Addr: local})
	require.Error(t, err, "the device holds the port")
	require.NoError(t, d.Close())
	l, err := udp.Open(udp.Config{Addr: local})
	require.NoError(t, err, "Close released the port")
	require.NoError(t, l.Close())

	_, err = roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0"), Batch: -1})
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
}
