//go:build linux

package afpacket_test

import (
	"flag"
	"net/netip"
	"testing"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afpacket"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/link/udp"
)

var figures = flag.Bool("figures", false, "measure the throughput and latency figures (slow)")

// TestFigures measures, between two namespaces, the raw one-way ceiling of
// the binding and WRITE 64 KiB at path MTU 4096 and 1024 and the 64-byte
// WRITE latency over it, median of three interleaved runs (and the kernel
// UDP binding for comparison):
//
//	go test ./link/afpacket -run TestFigures -figures -v
//
// With link/afxdp's figures in the same command, add -p 1: go test runs
// packages at the same time, and the two would share the CPUs.
func TestFigures(t *testing.T) {
	if !*figures {
		t.Skip("figures: run with -figures")
	}
	for _, ring := range []afpacket.Ring{afpacket.RingV2, afpacket.RingV3} {
		v := linktest.NewVeth(t, linktest.VethConfig{})
		v.Figures(t, "afpacket "+ring.String(), func(i int) (link.Link, error) {
			return afpacket.Open(afpacket.Config{Interface: v.Dev[i], Addr: netip.AddrPortFrom(v.Addr[i], 0), Ring: ring})
		})
	}
	v := linktest.NewVeth(t, linktest.VethConfig{Configure: true})
	v.Figures(t, "udp", func(i int) (link.Link, error) {
		return udp.Open(udp.Config{Addr: netip.AddrPortFrom(v.Addr[i], 4791)})
	})
	// The device's own ceiling: two devices over the in-memory link.
	nw := mem.New(mem.Config{QueueLen: 8192})
	v.Figures(t, "mem (device only)", func(i int) (link.Link, error) {
		return nw.Attach(netip.AddrPortFrom(v.Addr[i], 4791)), nil
	})
}
