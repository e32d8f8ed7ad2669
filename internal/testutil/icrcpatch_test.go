package testutil_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/rocev2"
)

// TestPatchICRC: an edited packet's patched ICRC equals the one computed
// afresh over the pseudo-headers and the edited transport.
func TestPatchICRC(t *testing.T) {
	src, dst := netip.MustParseAddrPort("10.77.0.1:4791"), netip.MustParseAddrPort("10.77.0.2:4791")
	pkt := testutil.Pattern(7, 12+8+256+4) // BTH + DETH + MAD + ICRC
	seal := func(b []byte) uint32 {
		var ph [rocev2.PseudoHeaderLen]byte
		ip, udp := rocev2.PseudoHeaders(&ph, src, dst, 0, len(b))
		return rocev2.ComputeICRC(ip, udp, b[:len(b)-4])
	}
	rocev2.PutICRC(pkt[len(pkt)-4:], seal(pkt))
	orig := append([]byte(nil), pkt...)
	pkt[20+50] ^= 0x70 // a REQ's path MTU nibble
	pkt[100] = 0
	testutil.PatchICRC(pkt, orig)
	assert.Equal(t, seal(pkt), rocev2.ReadICRC(pkt[len(pkt)-4:]))
	assert.NotEqual(t, rocev2.ReadICRC(orig[len(orig)-4:]), rocev2.ReadICRC(pkt[len(pkt)-4:]))
}
