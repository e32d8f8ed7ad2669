//go:build linux

package afxdp_test

import (
	"net/netip"
	"testing"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link/afxdp"
	"github.com/goroce/goroce/qp"
)

// TestNoLeak runs exchanges and closes everything: goroutines and file
// descriptors return to their baseline and no XDP program stays.
func TestNoLeak(t *testing.T) {
	v := linktest.NewVeth(t, linktest.VethConfig{})
	g, f := linktest.Resources()
	for range 2 {
		var l [2]*afxdp.Link
		for i := range 2 {
			cfg := afxdp.Config{Interface: v.Dev[i], Addr: netip.AddrPortFrom(v.Addr[i], 0)}
			l[i] = linktest.Open(t, v.NS[i], func() (*afxdp.Link, error) { return afxdp.Open(cfg) })
		}
		p := linktest.NewPair(t, l[0], l[1], qp.MTU4096, 1<<20)
		p.Exchange(t)
		p.A.Dev.Close()
		p.B.Dev.Close()
	}
	linktest.RequireBaseline(t, g, f)
	for i := range 2 {
		if linktest.IPLinkShowsXDP(t, v.NS[i], v.Dev[i]) {
			t.Fatalf("XDP program left on %s", v.Dev[i])
		}
	}
}
