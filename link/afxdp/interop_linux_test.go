//go:build linux

package afxdp_test

import (
	"flag"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link/afxdp"
)

var rxe = flag.Bool("rxe", false, "run the interop tests against the rxe harness's guests")

// TestRxeInterop talks RoCEv2 over an afxdp link on the rxe harness's
// bridge to a real rxe device in guest 1 (skipped unless the guests run),
// then checks the bridge has no XDP program left.
func TestRxeInterop(t *testing.T) {
	if !*rxe {
		t.Skip("interop with the rxe guests: ../shared/rxe/rxe start, then go test -run TestRxeInterop -rxe")
	}
	tool := linktest.Rxe(t)
	l := linktest.Open(t, linktest.RxeNetns, func() (*afxdp.Link, error) {
		return afxdp.Open(afxdp.Config{Interface: linktest.RxeBridge, Addr: netip.AddrPortFrom(linktest.RxeHostAddr, 0)})
	})
	linktest.RcImm(t, tool, l)
	t.Logf("link %+v, drops %+v, info %+v", l.Stats(), l.Drops(), l.Info())
	require.False(t, linktest.IPLinkShowsXDP(t, linktest.RxeNetns, linktest.RxeBridge), "XDP program left on the bridge")
}
