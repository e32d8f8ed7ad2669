//go:build linux

package afpacket_test

import (
	"testing"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link/afpacket"
)

// TestExactICRCID sends crafted packets across a veth pair: AF_PACKET sees
// the IPv4 ID, so the device checks each ICRC against the header's ID
// exactly and never recovers another (issue 17, defect 1).
func TestExactICRCID(t *testing.T) {
	for _, ring := range []afpacket.Ring{afpacket.RingV2, afpacket.RingV3} {
		t.Run(ring.String(), func(t *testing.T) {
			v := linktest.NewVeth(t, linktest.VethConfig{})
			a, b := openPair(t, v, afpacket.Config{Ring: ring})
			defer a.Close()
			linktest.CheckExactICRCID(t, a, b)
		})
	}
}
