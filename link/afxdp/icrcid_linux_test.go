//go:build linux

package afxdp_test

import (
	"testing"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link/afxdp"
)

// TestExactICRCID sends crafted packets across a veth pair: AF_XDP sees
// the IPv4 ID, so the device checks each ICRC against the header's ID
// exactly and never recovers another (issue 17, defect 1).
func TestExactICRCID(t *testing.T) {
	v := linktest.NewVeth(t, linktest.VethConfig{})
	a, b := open(t, v, 0, afxdp.Config{Mode: afxdp.ModeGeneric}), open(t, v, 1, afxdp.Config{Mode: afxdp.ModeGeneric})
	linktest.CheckExactICRCID(t, a, b)
}
