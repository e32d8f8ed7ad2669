//go:build linux

package afpacket_test

import (
	"testing"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link/afpacket"
	"github.com/goroce/goroce/qp"
)

// TestNoLeak runs an exchange and closes everything: goroutines and file
// descriptors return to their baseline.
func TestNoLeak(t *testing.T) {
	v := linktest.NewVeth(t, linktest.VethConfig{})
	g, f := linktest.Resources()
	for _, ring := range []afpacket.Ring{afpacket.RingV3, afpacket.RingV2} {
		a, b := openPair(t, v, afpacket.Config{Ring: ring})
		p := linktest.NewPair(t, a, b, qp.MTU4096, 1<<20)
		p.Exchange(t)
		p.A.Dev.Close()
		p.B.Dev.Close()
	}
	linktest.RequireBaseline(t, g, f)
}
