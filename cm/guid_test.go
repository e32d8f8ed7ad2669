package cm_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/cm"
)

// TestGUIDFromMAC: rxe's node GUID of a netdev is the modified EUI-64 of
// its MAC (addrconf_addr_eui48): FF:FE in the middle, the U/L bit
// flipped. The guests' eth0 (52:54:00:77:00:02) gives the node_guid
// their ibv_devinfo prints; no MAC, or the loopback's zero MAC, gives
// none.
func TestGUIDFromMAC(t *testing.T) {
	tests := []struct {
		name string
		mac  []byte
		want cm.GUID
		ok   bool
	}{
		{"rxe guest", []byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x02}, 0x505400fffe770002, true},
		{"universal MAC: the bit is set", []byte{0x00, 0x1b, 0x21, 0x0a, 0x0b, 0x0c}, 0x021b21fffe0a0b0c, true},
		{"locally administered MAC: the bit is cleared", []byte{0x02, 0xfc, 0x00, 0x00, 0x00, 0x01}, 0x00fc00fffe000001, true},
		{"loopback's zero MAC", make([]byte, 6), 0, false},
		{"no MAC", nil, 0, false},
		{"InfiniBand's 20-byte address", make([]byte, 20), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, ok := cm.GUIDFromMAC(tc.mac)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, g, "%v", g)
		})
	}
	g, _ := cm.GUIDFromMAC([]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x02})
	assert.Equal(t, "5054:00ff:fe77:0002", g.String(), "ibv_devinfo's node_guid format")
}

// TestGUIDFromAddr: the GUID of a device without a MAC is stable,
// non-zero, locally administered (first byte 0x02), and differs between
// addresses and between ports of one address.
func TestGUIDFromAddr(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.1:4791")
	seen := map[cm.GUID]netip.AddrPort{}
	for _, s := range []string{"127.0.0.1:4791", "127.0.0.2:4791", "127.0.0.1:4792", "10.0.0.1:4791", "[::1]:4791", "0.0.0.0:4791"} {
		ap := netip.MustParseAddrPort(s)
		g := cm.GUIDFromAddr(ap)
		assert.NotZero(t, g, "%v", ap)
		assert.Equal(t, byte(0x02), byte(g>>56), "%v: %v: locally administered, unicast", ap, g)
		if o, dup := seen[g]; dup {
			t.Errorf("%v and %v share GUID %v", ap, o, g)
		}
		seen[g] = ap
	}
	assert.Equal(t, cm.GUIDFromAddr(a), cm.GUIDFromAddr(a), "stable")
	assert.Equal(t, cm.GUIDFromAddr(a), cm.GUIDFromAddr(netip.AddrPortFrom(netip.AddrFrom16(a.Addr().As16()), 4791)),
		"an IPv4-mapped address is the same device")
}
