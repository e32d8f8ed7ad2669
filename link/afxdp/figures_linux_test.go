//go:build linux

package afxdp_test

import (
	"flag"
	"net/netip"
	"testing"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afxdp"
)

var figures = flag.Bool("figures", false, "measure the throughput and latency figures (slow)")

// TestFigures measures WRITE 64 KiB at path MTU 4096 and 1024 and the
// 64-byte WRITE latency between two namespaces, median of three runs:
//
//	go test ./link/afxdp -run TestFigures -figures -v
//
// With link/afpacket's figures in the same command, add -p 1: go test runs
// packages at the same time, and the two would share the CPUs.
func TestFigures(t *testing.T) {
	if !*figures {
		t.Skip("figures: run with -figures")
	}
	for _, mode := range []afxdp.Mode{afxdp.ModeGeneric, afxdp.ModeNative} {
		v := linktest.NewVeth(t, linktest.VethConfig{})
		v.Figures(t, "afxdp "+mode.String(), func(i int) (link.Link, error) {
			return afxdp.Open(afxdp.Config{Interface: v.Dev[i], Addr: netip.AddrPortFrom(v.Addr[i], 0), Mode: mode})
		})
	}
}
