//go:build linux

package afpacket_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afpacket"
	"github.com/goroce/goroce/qp"
)

func openPair(t *testing.T, v *linktest.Veth, cfg afpacket.Config) (a, b *afpacket.Link) {
	t.Helper()
	open := func(i int) *afpacket.Link {
		c := cfg
		c.Interface = v.Dev[i]
		c.Addr = netip.AddrPortFrom(v.Addr[i], 0)
		return linktest.Open(t, v.NS[i], func() (*afpacket.Link, error) { return afpacket.Open(c) })
	}
	return open(0), open(1)
}

func TestExchange(t *testing.T) {
	tests := []struct {
		name string
		veth linktest.VethConfig
		cfg  afpacket.Config
		mtu  qp.MTU
	}{
		{"v4-unowned-v3-mtu4096", linktest.VethConfig{}, afpacket.Config{Ring: afpacket.RingV3}, qp.MTU4096},
		{"v4-owned-v2-mtu1024", linktest.VethConfig{Configure: true}, afpacket.Config{}, qp.MTU1024},
		{"v4-unowned-v2", linktest.VethConfig{}, afpacket.Config{Ring: afpacket.RingV2}, qp.MTU4096},
		{"v6-unowned-v3", linktest.VethConfig{IPv6: true}, afpacket.Config{Ring: afpacket.RingV3}, qp.MTU4096},
		{"v6-owned-v2", linktest.VethConfig{IPv6: true, Configure: true}, afpacket.Config{}, qp.MTU4096},
		{"v4-unowned-v2-busypoll", linktest.VethConfig{}, afpacket.Config{BusyPoll: 50 * time.Microsecond}, qp.MTU4096},
		{"v4-unowned-v3-busypoll", linktest.VethConfig{}, afpacket.Config{Ring: afpacket.RingV3, BusyPoll: 50 * time.Microsecond}, qp.MTU1024},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := linktest.NewVeth(t, tc.veth)
			a, b := openPair(t, v, tc.cfg)
			require.Equal(t, tc.veth.Configure, a.Info().Owned)
			require.Equal(t, tc.veth.Configure, a.Info().Guarded)
			icmp0 := linktest.SNMP(t, v.NS[1], "Icmp", "OutDestUnreachs")
			p := linktest.NewPair(t, a, b, tc.mtu, 8<<20)
			p.Exchange(t)
			t.Logf("A: %+v %+v", a.Stats(), a.Drops())
			t.Logf("B: %+v %+v", b.Stats(), b.Drops())
			if !tc.veth.IPv6 {
				require.Equal(t, icmp0, linktest.SNMP(t, v.NS[1], "Icmp", "OutDestUnreachs"), "no ICMP port unreachable")
			}
		})
	}
}

// TestUnresolved sends to an address nobody answers for: Send fails with
// ErrUnresolved after ResolveTimeout, and fails fast during the next one.
func TestUnresolved(t *testing.T) {
	v := linktest.NewVeth(t, linktest.VethConfig{})
	cfg := afpacket.Config{Interface: v.Dev[0], Addr: netip.AddrPortFrom(v.Addr[0], 0), ResolveTimeout: 300 * time.Millisecond}
	a := linktest.Open(t, v.NS[0], func() (*afpacket.Link, error) { return afpacket.Open(cfg) })
	defer a.Close()
	dg := []link.Datagram{{Buf: make([]byte, 100), Dst: netip.MustParseAddrPort("10.99.0.77:4791")}}
	start := time.Now()
	n, err := a.Send(dg)
	require.Zero(t, n)
	require.ErrorIs(t, err, afpacket.ErrUnresolved)
	require.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond)
	start = time.Now()
	_, err = a.Send(dg)
	require.ErrorIs(t, err, afpacket.ErrUnresolved)
	require.Less(t, time.Since(start), 50*time.Millisecond, "negative cache")
	require.EqualValues(t, 2, a.Stats().SendErrors)
}
