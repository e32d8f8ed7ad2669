package roce_test

import (
	"bytes"
	"context"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// chanLink is a minimal in-test Link: datagrams are copied into the peer's
// channel (dropped when it is full, like a socket buffer).
type chanLink struct {
	addr   netip.AddrPort
	in     chan link.Datagram
	peers  map[netip.Addr]*chanLink
	closed chan struct{}
	once   sync.Once
}

func newChanPair(a, b string) (*chanLink, *chanLink) {
	peers := map[netip.Addr]*chanLink{}
	la := &chanLink{addr: netip.MustParseAddrPort(a), in: make(chan link.Datagram, 8192), peers: peers, closed: make(chan struct{})}
	lb := &chanLink{addr: netip.MustParseAddrPort(b), in: make(chan link.Datagram, 8192), peers: peers, closed: make(chan struct{})}
	peers[la.addr.Addr()], peers[lb.addr.Addr()] = la, lb
	return la, lb
}

func (l *chanLink) Send(dgs []link.Datagram) (int, error) {
	for i, dg := range dgs {
		p := l.peers[dg.Dst.Addr()]
		if p == nil {
			continue
		}
		select {
		case p.in <- link.Datagram{Buf: bytes.Clone(dg.Buf), Src: l.addr, Dst: dg.Dst, ECN: dg.ECN}:
		case <-l.closed:
			return i, link.ErrClosed
		default:
		}
	}
	return len(dgs), nil
}

func (l *chanLink) Recv(dgs []link.Datagram) (int, error) {
	select {
	case dg := <-l.in:
		n := copy(dgs[0].Buf[:cap(dgs[0].Buf)], dg.Buf)
		dgs[0] = link.Datagram{Buf: dgs[0].Buf[:n], Src: dg.Src, Dst: dg.Dst, ECN: dg.ECN}
		return 1, nil
	case <-l.closed:
		return 0, link.ErrClosed
	}
}

func (l *chanLink) LocalAddr() netip.AddrPort { return l.addr }
func (l *chanLink) Close() error              { l.once.Do(func() { close(l.closed) }); return nil }

type side struct {
	dev      *roce.Device
	pd       *mr.PD
	scq, rcq *cq.CQ
	qp       *roce.QP
}

func openSide(t *testing.T, l link.Link) *side { return openSideConfig(t, roce.Config{Link: l}) }

// openSideConfig is openSide for a device of configuration cfg.
func openSideConfig(t *testing.T, cfg roce.Config) *side {
	dev, err := roce.Open(cfg)
	require.NoError(t, err)
	s := &side{dev: dev, pd: dev.AllocPD()}
	s.scq, err = dev.CreateCQ(4096)
	require.NoError(t, err)
	s.rcq, err = dev.CreateCQ(4096)
	require.NoError(t, err)
	s.qp, err = dev.CreateQP(roce.QPConfig{PD: s.pd, SendCQ: s.scq, RecvCQ: s.rcq})
	require.NoError(t, err)
	return s
}

func waitOne(t *testing.T, c *cq.CQ) cq.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]cq.Completion
	n, err := c.Wait(ctx, wc[:])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	return wc[0]
}

func TestDeviceLoopback(t *testing.T) {
	g0 := runtime.NumGoroutine()
	la, lb := newChanPair("127.0.0.1:4791", "127.0.0.2:4791")
	a, b := openSide(t, la), openSide(t, lb)
	require.NoError(t, a.qp.Connect(b.qp.Info(), roce.ConnectOptions{MTU: qp.MTU4096}))
	require.NoError(t, b.qp.Connect(a.qp.Info(), roce.ConnectOptions{MTU: qp.MTU4096}))

	const size = 4 << 20
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, size)
	back := make([]byte, size)
	acc := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic
	sm, err := a.dev.RegisterMR(a.pd, src, acc)
	require.NoError(t, err)
	bm, err := a.dev.RegisterMR(a.pd, back, acc)
	require.NoError(t, err)
	dm, err := b.dev.RegisterMR(b.pd, dst, acc)
	require.NoError(t, err)

	// WRITE 4 MiB, then READ it back.
	require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: sm.IOVA(), Length: size, LKey: sm.LKey()}}, RemoteAddr: dm.IOVA(), RKey: dm.RKey()}))
	wc := waitOne(t, a.scq)
	require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
	require.True(t, bytes.Equal(src, dst))
	require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: bm.IOVA(), Length: size, LKey: bm.LKey()}}, RemoteAddr: dm.IOVA(), RKey: dm.RKey()}))
	wc = waitOne(t, a.scq)
	require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
	require.True(t, bytes.Equal(src, back))

	// SEND with immediate into a posted receive.
	require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 9, SGL: []qp.SGE{{Addr: dm.IOVA(), Length: 100, LKey: dm.LKey()}}}))
	require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 3, Opcode: qp.WRSendWithImm, Flags: qp.SendSignaled, Imm: 0x1234,
		SGL: []qp.SGE{{Addr: sm.IOVA(), Length: 100, LKey: sm.LKey()}}}))
	require.Equal(t, cq.StatusSuccess, waitOne(t, a.scq).Status)
	rwc := waitOne(t, b.rcq)
	require.Equal(t, uint64(9), rwc.WRID)
	require.Equal(t, uint32(0x1234), rwc.Imm)
	require.Equal(t, uint32(100), rwc.ByteLen)

	require.Zero(t, a.dev.Stats().BadICRC.Load()+b.dev.Stats().BadICRC.Load())
	require.NoError(t, a.dev.Close())
	require.NoError(t, b.dev.Close())
	requireGoroutines(t, g0)
}

// requireGoroutines waits up to 2 s for the goroutine count to fall back to
// n (testify's Eventually runs its condition on a goroutine of its own).
func requireGoroutines(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < 200 && runtime.NumGoroutine() > n; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > n {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines, want %d:\n%s", got, n, buf[:runtime.Stack(buf, true)])
	}
}
