//go:build linux

package afpacket_test

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link/afpacket"
)

// TestGuard checks the ICMP suppression on an address the kernel owns:
// without the guard the kernel answers RoCE frames with ICMP port
// unreachable, with it the kernel stays silent, and the guard refuses a
// port another socket owns.
func TestGuard(t *testing.T) {
	v := linktest.NewVeth(t, linktest.VethConfig{Configure: true})
	smac, dmac := linktest.MAC(t, v.NS[1], v.Dev[1]), linktest.MAC(t, v.NS[0], v.Dev[0])
	good := linktest.RoCEFrame(t, smac, dmac, v.Addr[1], v.Addr[0], 64)
	unreach := func(guard afpacket.Guard) int64 {
		cfg := afpacket.Config{Interface: v.Dev[0], Addr: netip.AddrPortFrom(v.Addr[0], 0), Guard: guard}
		a := linktest.Open(t, v.NS[0], func() (*afpacket.Link, error) { return afpacket.Open(cfg) })
		defer a.Close()
		require.Equal(t, guard == afpacket.GuardAuto, a.Info().Guarded)
		before := linktest.SNMP(t, v.NS[0], "Icmp", "OutDestUnreachs")
		linktest.Inject(t, v.NS[1], v.Dev[1], [][]byte{good, good, good})
		require.Equal(t, 3, recvN(t, a, 3, 80))
		time.Sleep(10 * time.Millisecond)
		return linktest.SNMP(t, v.NS[0], "Icmp", "OutDestUnreachs") - before
	}
	require.Positive(t, unreach(afpacket.GuardOff), "without the guard the kernel sends port unreachable")
	time.Sleep(1100 * time.Millisecond) // the ICMP rate limiter's bucket refills
	require.Zero(t, unreach(afpacket.GuardAuto), "with the guard it does not")

	// Another socket on the port: Open refuses.
	var c *net.UDPConn
	linktest.InNetns(v.NS[0], func() (err error) {
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(v.Addr[0], 4791)))
		return err
	})
	require.NotNil(t, c)
	defer c.Close()
	err := linktest.InNetns(v.NS[0], func() error {
		_, err := afpacket.Open(afpacket.Config{Interface: v.Dev[0], Addr: netip.AddrPortFrom(v.Addr[0], 0)})
		return err
	})
	require.True(t, errors.Is(err, afpacket.ErrPortInUse), "%v", err)
}
