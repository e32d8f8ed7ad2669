package roce_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// A listener and a dialer on an in-memory network, connected by the RDMA
// connection manager as rdma_cm connects them (REQ, REP, RTU through
// QP1), private data both ways, one SEND over the connected QPs, and a
// disconnect (DREQ, DREP). Over UDP the same program works between
// machines, and with rdma_cm peers: see examples/cm.
func ExampleDevice_Listen() {
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

	// The listener accepts what asks nicely; the REP carries a greeting.
	l, err := server.Listen(7471, roce.ListenConfig{Accept: func(r roce.ConnRequest) ([]byte, error) {
		if !bytes.HasPrefix(r.PrivateData, []byte("please")) {
			return nil, &roce.RejectError{Reason: cm.RejectConsumerDefined, PrivateData: []byte("ask nicely")}
		}
		return []byte("welcome"), nil
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *roce.Conn, 1)
	go func() {
		c, err := l.Accept(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		accepted <- c
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raddr := netip.MustParseAddrPort("10.0.0.2:7471")
	_, err = client.Dial(ctx, raddr, roce.DialConfig{PrivateData: []byte("hey")})
	var rej *roce.RejectError
	if errors.As(err, &rej) {
		fmt.Printf("rejected: %v, %q\n", rej.Reason, bytes.TrimRight(rej.PrivateData, "\x00"))
	}
	c, err := client.Dial(ctx, raddr, roce.DialConfig{PrivateData: []byte("please")})
	if err != nil {
		log.Fatal(err)
	}
	s := <-accepted
	fmt.Printf("server got %q from %v\n", bytes.TrimRight(s.PrivateData(), "\x00"), s.RemoteAddr().Addr())
	fmt.Printf("client got %q\n", bytes.TrimRight(c.PrivateData(), "\x00"))

	// One SEND over the connected QPs.
	inbox := make([]byte, 64)
	imr, err := server.RegisterMR(nil, inbox, roce.LocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.QP().PostRecv(&roce.RecvWR{WRID: 1, SGL: []roce.SGE{imr.SGE(0, len(inbox))}}); err != nil {
		log.Fatal(err)
	}
	msg := []byte("hello over rdma_cm")
	omr, err := client.RegisterMR(nil, msg, 0)
	if err != nil {
		log.Fatal(err)
	}
	err = c.QP().PostSend(&roce.SendWR{WRID: 2, Opcode: roce.WRSend, SGL: []roce.SGE{omr.SGE(0, len(msg))}})
	if err != nil {
		log.Fatal(err)
	}
	wc := make([]roce.Completion, 1)
	if _, err := s.QP().RecvCQ().Wait(ctx, wc); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v %q\n", wc[0].Status, inbox[:wc[0].ByteLen])

	// The client disconnects; the server's connection ends.
	if err := c.Close(); err != nil {
		log.Fatal(err)
	}
	<-s.Done()
	fmt.Println("server:", s.Err())
	s.Close()
	// Output:
	// rejected: ConsumerDefined, "ask nicely"
	// server got "please" from 10.0.0.1
	// client got "welcome"
	// IBV_WC_SUCCESS "hello over rdma_cm"
	// server: roce: connection disconnected
}
