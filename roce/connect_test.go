package roce_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// Info may be called while another goroutine connects the QP: under -race
// this failed while Info read the send PSN, which Modify sets, without the
// engine lock.
func TestInfoDuringConnect(t *testing.T) {
	d := openMem(t, mem.NewNetwork(), "10.0.0.1:4791")
	defer d.Close()
	q, err := d.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	peer := roce.Info{Addr: netip.MustParseAddr("10.0.0.2"), QPN: 99, PSN: 1}
	done := make(chan error)
	go func() {
		for i := 0; i < 100; i++ {
			if err := q.Modify(&qp.Attr{State: qp.StateReset}, qp.AttrState); err != nil {
				done <- err
				return
			}
			if err := q.Connect(peer, roce.ConnectOptions{}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			return
		default:
			assert.Equal(t, q.QPN(), q.Info().QPN)
		}
	}
}

// Two goroutines may connect one QP at once (a step of the one that loses
// finds the QP a state further and fails with ErrInvalidTransition or
// ErrInvalidAttr): under -race this failed while Connect read the
// send PSN, which the other's Modify sets, without the engine lock.
func TestConcurrentConnect(t *testing.T) {
	d := openMem(t, mem.NewNetwork(), "10.0.0.1:4791")
	defer d.Close()
	q, err := d.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	peer := roce.Info{Addr: netip.MustParseAddr("10.0.0.2"), QPN: 99, PSN: 1}
	errc := make(chan error, 2)
	for g := 0; g < 2; g++ {
		go func() {
			for i := 0; i < 100; i++ {
				if err := q.Modify(&qp.Attr{State: qp.StateReset}, qp.AttrState); err != nil {
					errc <- err
					return
				}
				err := q.Connect(peer, roce.ConnectOptions{})
				if err != nil && !errors.Is(err, qp.ErrInvalidTransition) && !errors.Is(err, qp.ErrInvalidAttr) {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	require.NoError(t, <-errc)
	require.NoError(t, <-errc)
}

// readMR returns a copy of m's memory, read through the region's lock
// (mr.Region.ReadAt). A test must read memory that a device wrote for a
// peer this way when the completion it waited for came over a real socket:
// the kernel orders the device's write before the completion, but the race
// detector cannot see that edge, and it does see the region's lock, which
// the device's copies take too.
func readMR(t testing.TB, m *mr.Region) []byte {
	t.Helper()
	b := make([]byte, m.Len())
	require.NoError(t, m.ReadAt(b, m.IOVA()))
	return b
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
