package roce_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/roce"
)

// udpStressPair opens two devices on loopback UDP sockets, each sending to
// the other's port.
func udpStressPair(t *testing.T) (a, b *roce.Device) {
	la, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	lb, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	require.NoError(t, err)
	a, err = roce.Open(roce.Config{Link: la, DestPort: lb.LocalAddr().Port()})
	require.NoError(t, err)
	b, err = roce.Open(roce.Config{Link: lb, DestPort: la.LocalAddr().Port()})
	require.NoError(t, err)
	return a, b
}

// TestStressVerbsUDP is the verbs stress test (stress_test.go) over real
// sockets, where the link's receive goroutine blocks in the kernel.
func TestStressVerbsUDP(t *testing.T) { stressVerbs(t, udpStressPair, 3) }
