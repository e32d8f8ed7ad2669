package link_test

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
)

// counting is a Link that counts what it sends through the Link it wraps.
type counting struct {
	link.Link
	sent int
}

// Send passes dgs on and counts those sent.
func (c *counting) Send(dgs []link.Datagram) (int, error) {
	n, err := c.Link.Send(dgs)
	c.sent += n
	return n, err
}

var _ link.Link = (*counting)(nil)

// A Link is four methods, so a wrapper — a counter here; an impairment, a
// tap — embeds the Link it wraps and overrides what it changes. A device
// takes any Link as roce.Config.Link.
func Example() {
	n := mem.NewNetwork()
	a := &counting{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))}
	b := n.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))
	defer a.Close()
	defer b.Close()

	out := []link.Datagram{
		{Buf: []byte("first"), Dst: b.LocalAddr()},
		{Buf: []byte("second"), Dst: b.LocalAddr(), ECN: link.ECT0},
	}
	if _, err := a.Send(out); err != nil {
		panic(err)
	}
	in := make([]link.Datagram, 4)
	for i := range in {
		in[i].Buf = make([]byte, 2048)
	}
	k, err := b.Recv(in)
	if err != nil {
		panic(err)
	}
	for _, d := range in[:k] {
		fmt.Printf("%s from %v, ECN %d\n", d.Buf, d.Src, d.ECN)
	}
	fmt.Println("sent:", a.sent)
	// Output:
	// first from 10.0.0.1:4791, ECN 0
	// second from 10.0.0.1:4791, ECN 2
	// sent: 2
}
