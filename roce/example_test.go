package roce_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"

	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// Two devices on an in-memory network (package link/mem) and an RDMA WRITE
// from one to the other. With Config.Link nil and Config.Addr set, Open uses
// a UDP socket instead, and the rest is the same: see examples/write.
func Example() {
	net := mem.NewNetwork()
	a, err := roce.Open(roce.Config{Link: net.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := roce.Open(roce.Config{Link: net.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	// One QP each, with the device's default PD and a CQ of its own.
	qa, err := a.CreateQP(roce.QPConfig{})
	if err != nil {
		log.Fatal(err)
	}
	qb, err := b.CreateQP(roce.QPConfig{})
	if err != nil {
		log.Fatal(err)
	}
	dst := make([]byte, 13)
	dmr, err := b.RegisterMR(nil, dst, roce.LocalWrite|roce.RemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	src := []byte("hello, goroce")
	smr, err := a.RegisterMR(nil, src, 0)
	if err != nil {
		log.Fatal(err)
	}

	// The Info each side would send the other out of band: address, QPN,
	// first PSN and, from b, the region a may write.
	ib := qb.Info()
	ib.VA, ib.RKey = dmr.IOVA(), dmr.RKey()
	if err := qa.Connect(ib, roce.ConnectOptions{}); err != nil {
		log.Fatal(err)
	}
	if err := qb.Connect(qa.Info(), roce.ConnectOptions{}); err != nil {
		log.Fatal(err)
	}

	err = qa.PostSend(&roce.SendWR{WRID: 1, Opcode: roce.WRRDMAWrite, Flags: roce.SendSignaled,
		SGL: []roce.SGE{smr.SGE(0, len(src))}, RemoteAddr: ib.VA, RKey: ib.RKey})
	if err != nil {
		log.Fatal(err)
	}
	wc := make([]roce.Completion, 1)
	if _, err := qa.SendCQ().Wait(context.Background(), wc); err != nil {
		log.Fatal(err)
	}
	fmt.Println(wc[0].WRID, wc[0].Status, wc[0].Err())
	fmt.Printf("%s\n", dst)
	// Output:
	// 1 IBV_WC_SUCCESS <nil>
	// hello, goroce
}
