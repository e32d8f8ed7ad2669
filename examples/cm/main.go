// Command cm connects two devices with the RDMA connection manager, as
// rdma_cm programs do, over UDP on the loopback: a listener on 127.0.0.2
// accepts (Device.Listen, Listener.Accept), a dialer on 127.0.0.1 connects
// (Device.Dial) with private data both ways, SENDs one message over the
// connected QPs and disconnects (Conn.Close: DREQ, DREP).
//
//	go run ./examples/cm
//
// With -server or -client only one side runs, so the two can be separate
// processes or machines (each binds UDP port 4791 on its address):
//
//	go run ./examples/cm -server 192.0.2.2
//	go run ./examples/cm -client 192.0.2.1 -to 192.0.2.2
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goroce/goroce/roce"
)

// port is the listener's port in rdma_cm's TCP port space.
const port = 7471

func main() {
	server := flag.String("server", "", "run only the listener, on this address")
	client := flag.String("client", "", "run only the dialer, on this address")
	to := flag.String("to", "127.0.0.2", "the listener's address (with -client)")
	flag.Parse()
	switch {
	case *server != "":
		listen(netip.MustParseAddr(*server), nil)
	case *client != "":
		dial(netip.MustParseAddr(*client), netip.MustParseAddr(*to))
	default:
		up := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			listen(netip.MustParseAddr("127.0.0.2"), up)
		}()
		<-up
		dial(netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"))
		<-done
	}
}

// listen accepts one connection, receives one message and waits for the
// peer to disconnect.
func listen(addr netip.Addr, up chan<- struct{}) {
	dev := must(roce.Open(roce.Config{Addr: netip.AddrPortFrom(addr, 4791)}))
	defer dev.Close()
	l := must(dev.Listen(port, roce.ListenConfig{Accept: func(r roce.ConnRequest) ([]byte, error) {
		log.Printf("listener: request from %v: %q", r.RemoteAddr, trim(r.PrivateData))
		return []byte("welcome"), nil
	}}))
	defer l.Close()
	if up != nil {
		close(up)
	}
	c := must(l.Accept(context.Background()))
	// A SEND lands in a posted receive buffer.
	inbox := make([]byte, 256)
	imr := must(dev.RegisterMR(nil, inbox, roce.LocalWrite))
	check(c.QP().PostRecv(&roce.RecvWR{WRID: 1, SGL: []roce.SGE{imr.SGE(0, len(inbox))}}))
	wc := make([]roce.Completion, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(c.QP().RecvCQ().Wait(ctx, wc))
	check(wc[0].Err())
	fmt.Printf("listener: received %q\n", inbox[:wc[0].ByteLen])
	<-c.Done()
	fmt.Println("listener:", c.Err())
	check(c.Close())
}

// dial connects, sends one message and disconnects.
func dial(local, remote netip.Addr) {
	dev := must(roce.Open(roce.Config{Addr: netip.AddrPortFrom(local, 4791)}))
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := must(dev.Dial(ctx, netip.AddrPortFrom(remote, port), roce.DialConfig{PrivateData: []byte("hello")}))
	fmt.Printf("dialer: connected %v → %v, QPN %v, reply %q\n", c.LocalAddr(), c.RemoteAddr(), c.QP().QPN(), trim(c.PrivateData()))
	msg := []byte("one SEND over rdma_cm")
	omr := must(dev.RegisterMR(nil, msg, 0))
	check(c.QP().PostSend(&roce.SendWR{WRID: 1, Opcode: roce.WRSend, Flags: roce.SendSignaled,
		SGL: []roce.SGE{omr.SGE(0, len(msg))}}))
	wc := make([]roce.Completion, 1)
	must(c.QP().SendCQ().Wait(ctx, wc))
	check(wc[0].Err())
	check(c.Close())
	fmt.Println("dialer: disconnected")
}

// trim drops the zero padding of private data.
func trim(b []byte) []byte { return bytes.TrimRight(b, "\x00") }

// must returns v, or exits if err is not nil.
func must[T any](v T, err error) T {
	check(err)
	return v
}

// check exits if err is not nil.
func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
