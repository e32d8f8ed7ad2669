//go:build linux

package afpacket_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afpacket"
)

// TestNotSupported opens a link without CAP_NET_RAW: the error matches
// link.ErrNotSupported and names the capability.
func TestNotSupported(t *testing.T) {
	if linktest.IsHelper(t.Name()) {
		_, err := afpacket.Open(afpacket.Config{Interface: "lo", Addr: netip.MustParseAddrPort("10.255.255.1:4791")})
		linktest.HelperVerdict(err, errors.Is(err, link.ErrNotSupported))
		return
	}
	out := linktest.RunUnprivileged(t, t.Name(), "")
	require.Contains(t, out, "HELPER-OK")
	require.Contains(t, out, "CAP_NET_RAW")
	t.Log(out)
}
