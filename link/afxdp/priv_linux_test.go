//go:build linux

package afxdp_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afxdp"
)

func openLo() error {
	_, err := afxdp.Open(afxdp.Config{Interface: "lo", Addr: netip.MustParseAddrPort("10.255.255.1:4791")})
	return err
}

// TestNotSupported opens a link as an unprivileged user (no CAP_NET_RAW)
// and as root without CAP_BPF: both errors match link.ErrNotSupported and
// name what is missing.
func TestNotSupported(t *testing.T) {
	if linktest.IsHelper(t.Name()) {
		err := openLo()
		linktest.HelperVerdict(err, errors.Is(err, link.ErrNotSupported))
		return
	}
	out := linktest.RunUnprivileged(t, t.Name(), "")
	require.Contains(t, out, "HELPER-OK")
	require.Contains(t, out, "CAP_NET_RAW")
	t.Log(out)
}

func TestNotSupportedNoBPF(t *testing.T) {
	if linktest.IsHelper(t.Name()) {
		err := openLo()
		linktest.HelperVerdict(err, errors.Is(err, link.ErrNotSupported))
		return
	}
	out := linktest.RunUnprivileged(t, t.Name(), "cap_bpf,cap_sys_admin,cap_net_admin,cap_perfmon")
	require.Contains(t, out, "HELPER-OK")
	require.Contains(t, out, "CAP_BPF")
	t.Log(out)
}
