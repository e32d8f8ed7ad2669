package mem_test

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
)

// Two links on one in-memory network exchange a CE-marked datagram.
func Example() {
	n := mem.NewNetwork()
	a := n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))
	b := n.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))
	defer a.Close()
	defer b.Close()

	a.Send([]link.Datagram{{Buf: []byte("BTH…ICRC"), Dst: b.LocalAddr(), ECN: link.CE}})

	in := []link.Datagram{{Buf: make([]byte, 4200)}}
	k, _ := b.Recv(in)
	fmt.Println(k, string(in[0].Buf), in[0].Src, in[0].ECN == link.CE, in[0].IPIDKnown)
	// Output: 1 BTH…ICRC 10.0.0.1:4791 true true
}
