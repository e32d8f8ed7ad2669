package roce_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/cmhostile"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// TestCMHostileTable (issue 27) runs every hostile-CM scenario of
// internal/cmhostile (doc/cm.md §2) against a goroce device over
// link/mem: a peer of its own on the network sends the crafted MADs to
// the device's QP1 and checks each answer against the kernel's, which the
// interop suite's cm-hostile cells check against an rxe guest with the
// same scenarios. The device listens (an RC Listener on 7471, a UD one on
// 7472) for the listener-side scenarios and dials the peer's port 7473 for
// the dialer-side ones.
func TestCMHostileTable(t *testing.T) {
	for i, sc := range cmhostile.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			n := mem.NewNetwork()
			self, target := netip.MustParseAddrPort("10.0.0.1:4791"), netip.MustParseAddrPort("10.0.0.2:4791")
			d, err := roce.Open(roce.Config{Link: n.Attach(target)})
			require.NoError(t, err)
			t.Cleanup(func() { d.Close() })
			peer := cmhostile.NewLinkPeer(n.Attach(self), target)
			t.Cleanup(func() { peer.Close() })
			env := cmhostile.Env{Self: self.Addr(), Target: target.Addr(), RCPort: 7471, UDPort: 7472,
				DialPort: 7473, Wait: 2 * time.Second, Silence: 300 * time.Millisecond, Seed: uint64(i + 1)}
			if sc.Side == cmhostile.Listener {
				l, err := d.Listen(env.RCPort, roce.ListenConfig{Backlog: 8})
				require.NoError(t, err)
				t.Cleanup(func() { l.Close() })
				u, err := d.ListenUD(env.UDPort, roce.UDListenConfig{})
				require.NoError(t, err)
				t.Cleanup(func() { u.Close() })
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			env.Dial = func(k int) error {
				for range k {
					// The device's Close ends what the Dial made.
					go d.Dial(ctx, netip.AddrPortFrom(self.Addr(), env.DialPort), roce.DialConfig{})
					time.Sleep(20 * time.Millisecond) // the REQs in order
				}
				return nil
			}
			s := cmhostile.NewSession(peer, env)
			if err := sc.Run(s); err != nil {
				t.Fatalf("%v\nthe kernel: %s\n--- transcript:\n%s", err, sc.Kernel, s.Transcript())
			}
		})
	}
}
