//go:build linux

package udp_test

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
)

// Two links on loopback: a run of three RoCE-sized datagrams leaves as one
// GSO super-packet (IDs planned first, as a device does before computing
// ICRCs) and is split back by GRO on receipt.
func Example() {
	a, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	out := make([]link.Datagram, 3)
	for i := range out {
		out[i] = link.Datagram{Buf: make([]byte, 4140), Dst: b.LocalAddr(), ECN: link.ECT0}
	}
	out[2].Buf = out[2].Buf[:1000] // a shorter last segment
	a.PlanIPID(out)                // IPv4 IDs 0, 1, 2: compute the ICRCs with these
	if _, err := a.Send(out); err != nil {
		panic(err)
	}

	in := make([]link.Datagram, 8)
	for i := range in {
		in[i].Buf = make([]byte, 4200)
	}
	for got := 0; got < 3; {
		n, err := b.Recv(in)
		if err != nil {
			panic(err)
		}
		for _, d := range in[:n] {
			fmt.Println(len(d.Buf), d.ECN == link.ECT0, d.IPIDKnown)
		}
		got += n
	}
	fmt.Println("super-packets:", a.Info().GSOSent, "coalesced:", b.Info().GROReceived)
	// Output:
	// 4140 true false
	// 4140 true false
	// 1000 true false
	// super-packets: 1 coalesced: 1
}
