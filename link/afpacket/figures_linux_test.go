//go:build linux

package afpacket_test

import (
	"flag"
	"net/netip"
	"testing"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afpacket"
	"github.com/goroce/goroce/link/internal/linktest"
)

var figures = flag.Bool("figures", false, "measure the throughput and latency figures (slow)")

// TestFigures measures WRITE 64 KiB at path MTU 4096 and 1024 and the
// 64-byte WRITE latency between two namespaces, median of three runs:
// go test ./link/afpacket -run TestFigures -figures -v
func TestFigures(t *testing.T) {
	if !*figures {
		t.Skip("figures: run with -figures")
	}
	for _, ring := range []afpacket.Ring{afpacket.RingV3, afpacket.RingV2} {
		v := linktest.NewVeth(t, linktest.VethConfig{})
		v.Figures(t, "afpacket "+ring.String(), func(i int) (link.Link, error) {
			return afpacket.Open(afpacket.Config{Interface: v.Dev[i], Addr: netip.AddrPortFrom(v.Addr[i], 0), Ring: ring})
		})
	}
}
