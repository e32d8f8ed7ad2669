//go:build linux

package afxdp_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link/afxdp"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/qp"
)

func open(t *testing.T, v *linktest.Veth, i int, cfg afxdp.Config) *afxdp.Link {
	t.Helper()
	cfg.Interface = v.Dev[i]
	cfg.Addr = netip.AddrPortFrom(v.Addr[i], 0)
	l := linktest.Open(t, v.NS[i], func() (*afxdp.Link, error) { return afxdp.Open(cfg) })
	t.Cleanup(func() { l.Close() })
	return l
}

func TestExchange(t *testing.T) {
	tests := []struct {
		name string
		veth linktest.VethConfig
		cfg  afxdp.Config
		mtu  qp.MTU
	}{
		{"v4-generic-mtu4096", linktest.VethConfig{}, afxdp.Config{Mode: afxdp.ModeGeneric}, qp.MTU4096},
		{"v4-native-mtu4096", linktest.VethConfig{}, afxdp.Config{Mode: afxdp.ModeNative}, qp.MTU4096},
		{"v4-owned-auto-mtu1024", linktest.VethConfig{Configure: true}, afxdp.Config{}, qp.MTU1024},
		{"v4-nosg-mtu2048", linktest.VethConfig{}, afxdp.Config{Mode: afxdp.ModeGeneric, NoMultiBuffer: true}, qp.MTU2048},
		{"v6-generic", linktest.VethConfig{IPv6: true}, afxdp.Config{Mode: afxdp.ModeGeneric}, qp.MTU4096},
		{"v4-generic-busypoll", linktest.VethConfig{}, afxdp.Config{Mode: afxdp.ModeGeneric, BusyPoll: 50 * time.Microsecond}, qp.MTU4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := linktest.NewVeth(t, tc.veth)
			a, b := open(t, v, 0, tc.cfg), open(t, v, 1, tc.cfg)
			t.Logf("A info %+v", a.Info())
			require.True(t, linktest.IPLinkShowsXDP(t, v.NS[0], v.Dev[0]))
			p := linktest.NewPair(t, a, b, tc.mtu, 8<<20)
			p.Exchange(t)
			t.Logf("A: %+v %+v", a.Stats(), a.Drops())
			t.Logf("B: %+v %+v", b.Stats(), b.Drops())
			p.A.Dev.Close()
			p.B.Dev.Close()
			require.False(t, linktest.IPLinkShowsXDP(t, v.NS[0], v.Dev[0]), "XDP program left on %s", v.Dev[0])
			require.False(t, linktest.IPLinkShowsXDP(t, v.NS[1], v.Dev[1]), "XDP program left on %s", v.Dev[1])
		})
	}
}

// TestAcrossBindings runs the exchange between afxdp on one side and the
// kernel UDP binding on the other, each side requesting in turn (fresh
// devices for each direction).
func TestAcrossBindings(t *testing.T) {
	for _, afxdpRequests := range []bool{true, false} {
		name := "udp-requests"
		if afxdpRequests {
			name = "afxdp-requests"
		}
		t.Run(name, func(t *testing.T) {
			v := linktest.NewVeth(t, linktest.VethConfig{Configure: true})
			a := open(t, v, 0, afxdp.Config{})
			b := linktest.Open(t, v.NS[1], func() (*udp.Link, error) {
				return udp.Open(udp.Config{Addr: netip.AddrPortFrom(v.Addr[1], 4791)})
			})
			p := linktest.NewPair(t, a, b, qp.MTU4096, 8<<20)
			if !afxdpRequests {
				p = &linktest.Pair{A: p.B, B: p.A}
			}
			p.Exchange(t)
			t.Logf("afxdp: %+v %+v", a.Stats(), a.Drops())
		})
	}
}
