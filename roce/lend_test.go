package roce_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/roce"
)

// closingLender is a lending link whose first RecvLend closes the device
// while it still holds the datagram it is about to lend: Device.Close runs
// to the link's Close (which, in link/udp, unmaps the lent memory), and
// only then does RecvLend return the datagram.
type closingLender struct {
	dev       *roce.Device
	buf       []byte
	closed    chan struct{}
	closeOnce sync.Once
	devClosed chan struct{} // Device.Close, called by RecvLend, returned
	calls     int
}

func (l *closingLender) Send(dgs []link.Datagram) (int, error) { return len(dgs), nil }
func (l *closingLender) Recv(dgs []link.Datagram) (int, error) { return l.RecvLend(dgs) }
func (l *closingLender) LocalAddr() netip.AddrPort {
	return netip.MustParseAddrPort("127.0.0.1:4791")
}

func (l *closingLender) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *closingLender) RecvLend(dgs []link.Datagram) (int, error) {
	l.calls++
	if l.calls > 1 {
		<-l.closed
		return 0, link.ErrClosed
	}
	go func() {
		l.dev.Close()
		close(l.devClosed)
	}()
	select {
	case <-l.closed:
	case <-time.After(10 * time.Second):
	}
	dgs[0] = link.Datagram{Buf: l.buf, Src: netip.MustParseAddrPort("127.0.0.2:4791"), Dst: l.LocalAddr()}
	return 1, nil
}

// TestCloseDuringLentBatch: a batch lent by the link just before Close must
// not be read once Close has closed the link. Before the fix the receive
// loop processed it (with link/udp, a read of an unmapped GRO arena: a
// fatal fault of the whole process).
func TestCloseDuringLentBatch(t *testing.T) {
	l := &closingLender{buf: make([]byte, 128), closed: make(chan struct{}), devClosed: make(chan struct{})}
	// The device's receive goroutine calls RecvLend as soon as Open starts
	// it; RecvLend needs l.dev, so hold it back until Open has returned.
	ready := make(chan struct{})
	wrapped := &gatedLender{closingLender: l, ready: ready}
	dev, err := roce.Open(roce.Config{Link: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	l.dev = dev
	close(ready)
	// Device.Close returns once the receive goroutine has left.
	select {
	case <-l.devClosed:
	case <-time.After(10 * time.Second):
		t.Fatal("Device.Close did not return")
	}
	if n := dev.Stats().RxPackets.Load(); n != 0 {
		t.Fatalf("the device read %d datagram(s) the link lent before Close, after the link was closed", n)
	}
}

// gatedLender makes RecvLend wait until the test has set closingLender.dev.
type gatedLender struct {
	*closingLender
	ready chan struct{}
}

func (g *gatedLender) RecvLend(dgs []link.Datagram) (int, error) {
	<-g.ready
	return g.closingLender.RecvLend(dgs)
}

func (g *gatedLender) Recv(dgs []link.Datagram) (int, error) { return g.RecvLend(dgs) }
