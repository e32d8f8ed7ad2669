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
//
// Ctrl-C (SIGINT) or SIGTERM ends it as the kernel ends an interrupted
// rdma_cm program: the devices close, which sends the peer a DREQ for an
// established connection and a REJ for one still being set up, so the
// peer does not wait for a timeout; the program exits with 130 (SIGINT)
// or 143 (SIGTERM) within 2 s, at once on a second signal.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/goroce/goroce/roce"
)

// port is the listener's port in rdma_cm's TCP port space.
const port = 7471

// grace bounds the close after a signal.
const grace = 2 * time.Second

func main() {
	server := flag.String("server", "", "run only the listener, on this address")
	client := flag.String("client", "", "run only the dialer, on this address")
	to := flag.String("to", "127.0.0.2", "the listener's address (with -client)")
	flag.Parse()
	os.Exit(interruptible(func(ctx context.Context) error {
		switch {
		case *server != "":
			return listen(ctx, netip.MustParseAddr(*server), nil)
		case *client != "":
			return dial(ctx, netip.MustParseAddr(*client), netip.MustParseAddr(*to))
		}
		up := make(chan struct{})
		lerr := make(chan error, 1)
		go func() { lerr <- listen(ctx, netip.MustParseAddr("127.0.0.2"), up) }()
		select {
		case <-up:
		case err := <-lerr:
			return err
		}
		if err := dial(ctx, netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")); err != nil {
			return err
		}
		return <-lerr
	}))
}

// interruptible runs run with a context the first SIGINT or SIGTERM
// cancels, and returns the exit status: 0, or 1 after an error, or, after
// a signal, 128 + its number (130, 143) once run returned (its deferred
// Closes ran) or grace passed, at once on a second signal.
func interruptible(run func(ctx context.Context) error) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			log.Print(err)
			return 1
		}
		return 0
	case sig := <-sigs:
		cancel()
		select {
		case <-done:
		case <-time.After(grace):
		case <-sigs:
		}
		return 128 + int(sig.(syscall.Signal))
	}
}

// listen accepts one connection, receives one message and waits for the
// peer to disconnect.
func listen(ctx context.Context, addr netip.Addr, up chan<- struct{}) error {
	dev, err := roce.Open(roce.Config{Addr: netip.AddrPortFrom(addr, 4791)})
	if err != nil {
		return err
	}
	defer dev.Close() // also what a signal leads to: the peer gets a DREQ or a REJ
	l, err := dev.Listen(port, roce.ListenConfig{Accept: func(r roce.ConnRequest) ([]byte, error) {
		log.Printf("listener: request from %v: %q", r.RemoteAddr, trim(r.PrivateData))
		return []byte("welcome"), nil
	}})
	if err != nil {
		return err
	}
	defer l.Close()
	if up != nil {
		close(up)
	}
	c, err := l.Accept(ctx)
	if err != nil {
		return err
	}
	// A SEND lands in a posted receive buffer.
	inbox := make([]byte, 256)
	imr, err := dev.RegisterMR(nil, inbox, roce.LocalWrite)
	if err != nil {
		return err
	}
	if err := c.QP().PostRecv(&roce.RecvWR{WRID: 1, SGL: []roce.SGE{imr.SGE(0, len(inbox))}}); err != nil {
		return err
	}
	wc := make([]roce.Completion, 1)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.QP().RecvCQ().Wait(wctx, wc); err != nil {
		return err
	}
	if err := wc[0].Err(); err != nil {
		return err
	}
	fmt.Printf("listener: received %q\n", inbox[:wc[0].ByteLen])
	select {
	case <-c.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Println("listener:", c.Err())
	return c.Close()
}

// dial connects, sends one message and disconnects.
func dial(ctx context.Context, local, remote netip.Addr) error {
	dev, err := roce.Open(roce.Config{Addr: netip.AddrPortFrom(local, 4791)})
	if err != nil {
		return err
	}
	defer dev.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := dev.Dial(ctx, netip.AddrPortFrom(remote, port), roce.DialConfig{PrivateData: []byte("hello")})
	if err != nil {
		return err
	}
	fmt.Printf("dialer: connected %v → %v, QPN %v, reply %q\n", c.LocalAddr(), c.RemoteAddr(), c.QP().QPN(), trim(c.PrivateData()))
	msg := []byte("one SEND over rdma_cm")
	omr, err := dev.RegisterMR(nil, msg, 0)
	if err != nil {
		return err
	}
	if err := c.QP().PostSend(&roce.SendWR{WRID: 1, Opcode: roce.WRSend, Flags: roce.SendSignaled,
		SGL: []roce.SGE{omr.SGE(0, len(msg))}}); err != nil {
		return err
	}
	wc := make([]roce.Completion, 1)
	if _, err := c.QP().SendCQ().Wait(ctx, wc); err != nil {
		return err
	}
	if err := errors.Join(wc[0].Err(), c.Close()); err != nil {
		return err
	}
	fmt.Println("dialer: disconnected")
	return nil
}

// trim drops the zero padding of private data.
func trim(b []byte) []byte { return bytes.TrimRight(b, "\x00") }
