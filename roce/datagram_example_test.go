package roce_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// A UD datagram between two devices: Ready instead of Connect, an address
// handle per send, and the 40-byte GRH area at the start of the receive
// buffer, from which GRHSource reads the sender's address.
func ExampleQP_Ready() {
	n := mem.NewNetwork()
	a, _ := roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))})
	defer a.Close()
	b, _ := roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))})
	defer b.Close()
	qa, _ := a.CreateQP(roce.QPConfig{Type: roce.UD})
	qb, _ := b.CreateQP(roce.QPConfig{Type: roce.UD})
	const qkey = 0x11111111
	qa.Ready(qkey)
	qb.Ready(qkey)

	rbuf := make([]byte, qp.GRHLen+64)
	rm, _ := b.RegisterMR(nil, rbuf, mr.LocalWrite)
	qb.PostRecv(&qp.RecvWR{WRID: 1, SGL: []qp.SGE{rm.SGE(0, len(rbuf))}})

	sm, _ := a.RegisterMR(nil, []byte("hello"), mr.LocalWrite)
	ah := roce.AH{Addr: b.LocalAddr().Addr(), QPN: qb.QPN(), QKey: qkey}
	qa.PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{sm.SGE(0, 5)}, UD: ah.Dest()})

	var wc [1]cq.Completion
	qb.RecvCQ().Wait(context.Background(), wc[:])
	src, _ := qp.GRHSource(rbuf[:qp.GRHLen])
	fmt.Println(wc[0].Status, wc[0].ByteLen-qp.GRHLen, wc[0].SrcQP == uint32(qa.QPN()), src)
	fmt.Printf("%s\n", rbuf[qp.GRHLen:qp.GRHLen+5])
	// Output:
	// IBV_WC_SUCCESS 5 true 10.0.0.1
	// hello
}
