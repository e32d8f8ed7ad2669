//go:build linux

package afpacket_test

import (
	"flag"
	"net/netip"
	"testing"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link/afpacket"
)

var rxe = flag.Bool("rxe", false, "run the interop tests against the rxe harness's guests")

// TestRxeInterop talks RoCEv2 over an afpacket link on the rxe harness's
// bridge to a real rxe device in guest 1 (skipped unless the guests run).
func TestRxeInterop(t *testing.T) {
	if !*rxe {
		t.Skip("interop with the rxe guests: ../shared/rxe/rxe start, then go test -run TestRxeInterop -rxe")
	}
	tool := linktest.Rxe(t)
	for _, ring := range []afpacket.Ring{afpacket.RingV3, afpacket.RingV2} {
		t.Run(ring.String(), func(t *testing.T) {
			l := linktest.Open(t, linktest.RxeNetns, func() (*afpacket.Link, error) {
				return afpacket.Open(afpacket.Config{Interface: linktest.RxeBridge, Addr: netip.AddrPortFrom(linktest.RxeHostAddr, 0), Ring: ring})
			})
			linktest.RcImm(t, tool, l)
			t.Logf("link %+v, drops %+v, info %+v", l.Stats(), l.Drops(), l.Info())
		})
	}
}
