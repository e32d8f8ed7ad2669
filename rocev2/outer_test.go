package rocev2_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// TestPutHeadersMatchesBuild: the headers PutHeaders writes around a
// transport packet are the ones Build writes, and the ICRC is not touched.
func TestPutHeadersMatchesBuild(t *testing.T) {
	for _, src := range []string{"10.0.0.1:49152", "[fd00::1]:49152"} {
		s := netip.MustParseAddrPort(src)
		d := netip.AddrPortFrom(s.Addr().Next(), 4791)
		e := rocev2.Encap{Ethernet: true, Src: s, Dst: d, TOS: 2, ID: 7}
		f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly, PKey: rocev2.DefaultPKey, DestQP: 0x11, PSN: 5}}
		want := make([]byte, 256)
		n, err := e.Build(want, &f, []byte("payload!"))
		require.NoError(t, err)
		hl := e.HeaderLen()

		got := make([]byte, n)
		copy(got[hl:], want[hl:n])
		m, err := e.PutHeaders(got, n-hl)
		require.NoError(t, err)
		require.Equal(t, hl, m)
		require.Equal(t, want[:n], got, src)

		_, err = e.PutHeaders(got[:hl-1], n-hl)
		require.Error(t, err)
	}
}
