package roce_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"

	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// Two QPs of device b share one SRQ: each SEND from a's two QPs takes the
// next receive WQE of the SRQ, and its completion names the QP that
// received it.
func ExampleDevice_CreateSRQ() {
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

	srq, err := b.CreateSRQ(roce.SRQConfig{MaxWR: 16})
	if err != nil {
		log.Fatal(err)
	}
	rcq, err := b.CreateCQ(16)
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 2*64)
	rmr, err := b.RegisterMR(nil, buf, roce.LocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 2 {
		if err := srq.PostRecv(&roce.RecvWR{WRID: uint64(10 + i), SGL: []roce.SGE{rmr.SGE(i*64, 64)}}); err != nil {
			log.Fatal(err)
		}
	}

	var senders, receivers []*roce.QP
	for range 2 {
		s, err := a.CreateQP(roce.QPConfig{})
		if err != nil {
			log.Fatal(err)
		}
		r, err := b.CreateQP(roce.QPConfig{RecvCQ: rcq, SRQ: srq})
		if err != nil {
			log.Fatal(err)
		}
		if err := s.Connect(r.Info(), roce.ConnectOptions{}); err != nil {
			log.Fatal(err)
		}
		if err := r.Connect(s.Info(), roce.ConnectOptions{}); err != nil {
			log.Fatal(err)
		}
		senders, receivers = append(senders, s), append(receivers, r)
	}

	wc := make([]roce.Completion, 1)
	for i, msg := range []string{"to the second QP", "to the first QP"} {
		s := senders[1-i]
		smr, err := a.RegisterMR(nil, []byte(msg), 0)
		if err != nil {
			log.Fatal(err)
		}
		if err := s.PostSend(&roce.SendWR{Opcode: roce.WRSend, SGL: []roce.SGE{smr.SGE(0, len(msg))}}); err != nil {
			log.Fatal(err)
		}
		if _, err := rcq.Wait(context.Background(), wc); err != nil {
			log.Fatal(err)
		}
		qpIndex := 0
		if wc[0].QPN == uint32(receivers[1].QPN()) {
			qpIndex = 1
		}
		off := int(wc[0].WRID-10) * 64
		fmt.Printf("WQE %d on QP %d: %s\n", wc[0].WRID, qpIndex, buf[off:off+int(wc[0].ByteLen)])
	}
	// Output:
	// WQE 10 on QP 1: to the second QP
	// WQE 11 on QP 0: to the first QP
}
