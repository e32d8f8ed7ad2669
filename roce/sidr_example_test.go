package roce_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// A UD server and client on an in-memory network, introduced by the RDMA
// connection manager as rdma_cm introduces udaddy's: the client resolves
// the server's port in the UDP port space (SIDR_REQ, SIDR_REP through
// QP1) and gets an address handle for the server's UD QP; the server
// learns the client's QPN from its first datagram and answers. Over UDP
// the same program works with rdma_cm peers such as udaddy.
func ExampleDevice_ListenUD() {
	net := mem.NewNetwork()
	server, err := roce.Open(roce.Config{Link: net.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))})
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	client, err := roce.Open(roce.Config{Link: net.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// The server posts a receive on each request's QP before it answers.
	sbuf := make([]byte, qp.GRHLen+64)
	smr, _ := server.RegisterMR(nil, sbuf, mr.LocalWrite)
	l, err := server.ListenUD(7174, roce.UDListenConfig{Setup: func(q *roce.QP) error {
		return q.PostRecv(&qp.RecvWR{SGL: []qp.SGE{smr.SGE(0, len(sbuf))}})
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	cbuf := append(make([]byte, qp.GRHLen+64), "ping"...)
	cmr, _ := client.RegisterMR(nil, cbuf, mr.LocalWrite)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialUD(ctx, netip.MustParseAddrPort("10.0.0.2:7174"), roce.UDDialConfig{
		Setup: func(q *roce.QP) error {
			return q.PostRecv(&qp.RecvWR{SGL: []qp.SGE{cmr.SGE(0, qp.GRHLen+64)}})
		}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Printf("resolved %v: Q_Key %#x\n", c.RemoteAddr(), c.AH().QKey)

	s, err := l.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	fmt.Println("server QPN matches:", c.AH().QPN == s.QP().QPN())

	// Client → server.
	c.QP().PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{cmr.SGE(qp.GRHLen+64, 4)}, UD: c.AH().Dest()})
	var wc [1]cq.Completion
	s.QP().RecvCQ().Wait(ctx, wc[:])
	fmt.Printf("server got %q from %v\n", sbuf[qp.GRHLen:wc[0].ByteLen], s.RemoteAddr().Addr())

	// Server → client, to the QPN the datagram came from.
	ah := s.AH()
	ah.QPN = bth.QPN(wc[0].SrcQP)
	copy(sbuf, "pong")
	s.QP().PostSend(&qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendInline, SGL: []qp.SGE{smr.SGE(0, 4)}, UD: ah.Dest()})
	c.QP().RecvCQ().Wait(ctx, wc[:])
	fmt.Printf("client got %q, Q_Key is cm.UDPQKey: %v\n", cbuf[qp.GRHLen:wc[0].ByteLen], c.AH().QKey == cm.UDPQKey)
	// Output:
	// resolved 10.0.0.2:7174: Q_Key 0x1234567
	// server QPN matches: true
	// server got "ping" from 10.0.0.1
	// client got "pong", Q_Key is cm.UDPQKey: true
}
