package roce_test

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// TestOpenFailureClosesItsLink: "if Open fails, it closes the link it
// opened". Found in review: the deferred close read the if-block's shadowed
// err, which was nil, so the UDP socket leaked and the port stayed bound.
func TestOpenFailureClosesItsLink(t *testing.T) {
	// find a free port
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(c.LocalAddr().String())
	c.Close()
	if _, err := roce.Open(roce.Config{Addr: addr, Batch: -1}); err == nil {
		t.Fatal("Open accepted Batch -1")
	}
	l, err := udp.Open(udp.Config{Addr: addr})
	if err != nil {
		t.Fatalf("the failed Open left its UDP socket open: %v", err)
	}
	l.Close()
}

// TestBindMWTwiceWhileQueued: two type 1 binds posted while the first waits
// (behind a fence and an unanswered READ) promise different rkeys. Found in
// review: the key was computed from the window's current key, which changes
// only when the requester executes the BIND_MW, so both promised the same
// key and a peer holding the first binding's rkey could use the second.
func TestBindMWTwiceWhileQueued(t *testing.T) {
	n := mem.NewNetwork()
	a := openMWSide(t, n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")))
	b := openMWSide(t, n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")))
	defer a.dev.Close()
	defer b.dev.Close()
	// Only a connects: b stays in RESET and never answers a's READ.
	if err := a.qp.Connect(b.qp.Info(), roce.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	region, err := a.dev.RegisterMR(a.pd, buf, mr.LocalWrite|mr.MWBind)
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.dev.AllocMW(a.pd, mr.WindowType1)
	if err != nil {
		t.Fatal(err)
	}
	rd := qp.SendWR{WRID: 1, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
		SGL: []qp.SGE{region.SGE(0, 8)}, RemoteAddr: 0x1000, RKey: 0x1234}
	if err := a.qp.PostSend(&rd); err != nil {
		t.Fatal(err)
	}
	k1, err := a.qp.BindMW(w, 2, qp.SendSignaled|qp.SendFence, mr.BindConfig{Region: region, Addr: region.IOVA(), Length: 64, Access: mr.RemoteRead})
	if err != nil {
		t.Fatal(err)
	}
	k2, err := a.qp.BindMW(w, 3, qp.SendSignaled, mr.BindConfig{Region: region, Addr: region.IOVA() + 2048, Length: 64, Access: mr.RemoteRead})
	if err != nil {
		t.Fatal(err)
	}
	if k1 == k2 {
		t.Fatalf("two binds of one window returned the same rkey %v: the first binding's rkey reaches the second", k1)
	}
}

// TestConnectTwiceLeavesQPAlone: a second Connect of a connected QP fails
// before it changes anything: its pacing (MaxRate) stays. Found in review:
// Connect applied the new congestion-control options before the first
// state transition refused it.
func TestConnectTwiceLeavesQPAlone(t *testing.T) {
	n := mem.NewNetwork()
	a := openMWSide(t, n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")))
	b := openMWSide(t, n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")))
	defer a.dev.Close()
	defer b.dev.Close()
	if err := a.qp.Connect(b.qp.Info(), roce.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	err := a.qp.Connect(b.qp.Info(), roce.ConnectOptions{MaxRate: 1e6})
	if !errors.Is(err, qp.ErrInvalidTransition) {
		t.Fatalf("second Connect: %v, want ErrInvalidTransition", err)
	}
	// A packet makes the QP consult its pacer: with MaxRate 1 Mb/s applied
	// it would now be paced.
	buf := make([]byte, 64)
	m, err := a.dev.RegisterMR(a.pd, buf, mr.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	wr := qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{m.SGE(0, 64)}, RemoteAddr: 0x1000, RKey: 0x1234}
	if err := a.qp.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	if s := a.qp.CC(); s.Paced || s.PaceRate != 0 {
		t.Fatalf("the failed Connect changed the QP's pacing: %+v", s)
	}
	if s := a.qp.State(); s != qp.StateRTS {
		t.Fatalf("state %v after the failed Connect, want RTS", s)
	}
}
