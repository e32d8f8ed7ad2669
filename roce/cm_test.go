package roce_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/capfmt"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// fastCM shortens rdma_cm's timers (seconds) to tens of milliseconds.
var fastCM = cm.Config{CMResponseTimeout: 14, PacketLifeTime: 12, MaxCMRetries: 3}

// openCM opens a device on n at addr with fast CM timers.
func openCM(t *testing.T, n *mem.Network, addr string, cfg roce.Config) *roce.Device {
	t.Helper()
	cfg.Link = n.Attach(netip.MustParseAddrPort(addr))
	if cfg.CM == (cm.Config{}) {
		cfg.CM = fastCM
	}
	d, err := roce.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// cmPair is a connection between two devices: the dialer's and the
// listener's end.
type cmPair struct {
	dd, ld *roce.Device
	dc, lc *roce.Conn
}

// connect listens on ld, dials from dd and returns both ends.
func cmConnect(t *testing.T, dd, ld *roce.Device, lcfg roce.ListenConfig, dcfg roce.DialConfig) *cmPair {
	t.Helper()
	l, err := ld.Listen(7174, lcfg)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	type res struct {
		c   *roce.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.Accept(ctxT(t, 10*time.Second))
		ch <- res{c, err}
	}()
	dc, err := dd.Dial(ctxT(t, 10*time.Second), netip.AddrPortFrom(ld.LocalAddr().Addr(), 7174), dcfg)
	require.NoError(t, err)
	r := <-ch
	require.NoError(t, r.err)
	return &cmPair{dd: dd, ld: ld, dc: dc, lc: r.c}
}

// TestCMDialAccept connects with private data both ways, then runs an RDMA
// WRITE (the listener grants remote write) and a SEND over the QPs the CM
// brought to RTS; the dialer's Close disconnects (DREQ/DREP) and flushes
// the listener's QP.
func TestCMDialAccept(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	var seen roce.ConnRequest
	msg := bytes.Repeat([]byte("goroce cm "), 200)
	dmr, err := dd.RegisterMR(nil, append(bytes.Clone(msg), make([]byte, 4096)...), mr.LocalWrite)
	require.NoError(t, err)
	var setupState qp.State
	p := cmConnect(t, dd, ld, roce.ListenConfig{Access: mr.RemoteWrite,
		Accept: func(r roce.ConnRequest) ([]byte, error) {
			seen = roce.ConnRequest{RemoteAddr: r.RemoteAddr, PrivateData: bytes.Clone(r.PrivateData)}
			return []byte("welcome"), nil
		}}, roce.DialConfig{PrivateData: []byte("hello"), Setup: func(q *roce.QP) error {
		setupState = q.State()
		return q.PostRecv(&qp.RecvWR{WRID: 2, SGL: []qp.SGE{dmr.SGE(len(msg), 4096)}})
	}})
	assert.Equal(t, qp.StateInit, setupState)

	assert.True(t, bytes.HasPrefix(seen.PrivateData, []byte("hello")))
	assert.Len(t, p.lc.PrivateData(), 56, "REQ private data after the cma_hdr")
	assert.True(t, bytes.HasPrefix(p.lc.PrivateData(), []byte("hello")))
	assert.True(t, bytes.HasPrefix(p.dc.PrivateData(), []byte("welcome")))
	assert.Equal(t, p.dc.LocalAddr(), p.lc.RemoteAddr())
	assert.Equal(t, seen.RemoteAddr, p.lc.RemoteAddr())
	assert.Equal(t, netip.MustParseAddrPort("10.0.0.2:7174"), p.dc.RemoteAddr())
	assert.Equal(t, qp.StateRTS, p.dc.QP().State())
	assert.Equal(t, qp.StateRTS, p.lc.QP().State())

	// WRITE dialer → listener.
	lbuf := make([]byte, 4096)
	lmr, err := ld.RegisterMR(nil, lbuf, mr.LocalWrite|mr.RemoteWrite)
	require.NoError(t, err)
	require.NoError(t, p.dc.QP().PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{dmr.SGE(0, len(msg))}, RemoteAddr: lmr.IOVA(), RKey: lmr.RKey()}))
	wc := waitOne(t, p.dc.QP().SendCQ())
	require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
	assert.Equal(t, msg, lbuf[:len(msg)])

	// SEND listener → dialer, into the receive Setup posted.
	require.NoError(t, p.lc.QP().PostSend(&qp.SendWR{WRID: 3, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{lmr.SGE(0, 100)}}))
	wc = waitOne(t, p.lc.QP().SendCQ())
	require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
	wc = waitOne(t, p.dc.QP().RecvCQ())
	require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
	assert.Equal(t, uint32(100), wc.ByteLen)

	// Without the grant, the listener's peer may not READ (an invalid
	// request, as rxe's responder answers it).
	require.NoError(t, p.dc.QP().PostSend(&qp.SendWR{WRID: 4, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
		SGL: []qp.SGE{dmr.SGE(0, 8)}, RemoteAddr: lmr.IOVA(), RKey: lmr.RKey()}))
	wc = waitOne(t, p.dc.QP().SendCQ())
	assert.Equal(t, cq.StatusRemInvReqErr, wc.Status, wc.Status.String())

	checkDisconnect(t, p.dc, p.lc)
}

// checkDisconnect closes a and checks that b's QP was flushed.
func checkDisconnect(t *testing.T, a, b *roce.Conn) {
	t.Helper()
	require.NoError(t, b.QP().PostRecv(&qp.RecvWR{WRID: 99}))
	require.NoError(t, a.Close())
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the peer's Conn did not end")
	}
	assert.ErrorIs(t, b.Err(), roce.ErrDisconnected)
	assert.Equal(t, qp.StateErr, b.QP().State())
	wc := waitOne(t, b.QP().RecvCQ())
	assert.Equal(t, uint64(99), wc.WRID)
	assert.Equal(t, cq.StatusWRFlushErr, wc.Status, wc.Status.String())
	assert.ErrorIs(t, a.Err(), roce.ErrClosed)
	require.NoError(t, b.Close())
	require.NoError(t, a.Close(), "idempotent")
}

// TestCMCloseFromListener: the accepting side disconnects.
func TestCMCloseFromListener(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	p := cmConnect(t, dd, ld, roce.ListenConfig{}, roce.DialConfig{})
	checkDisconnect(t, p.lc, p.dc)
}

// TestCMReject: the listener's Accept function refuses with a reason and
// private data, which Dial returns.
func TestCMReject(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	l, err := ld.Listen(18515, roce.ListenConfig{Accept: func(r roce.ConnRequest) ([]byte, error) {
		return nil, &roce.RejectError{Reason: cm.RejectConsumerDefined, PrivateData: []byte("go away")}
	}})
	require.NoError(t, err)
	defer l.Close()
	_, err = dd.Dial(ctxT(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.2:18515"), roce.DialConfig{})
	require.ErrorIs(t, err, roce.ErrRejected)
	var re *roce.RejectError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, cm.RejectConsumerDefined, re.Reason)
	assert.True(t, bytes.HasPrefix(re.PrivateData, []byte("go away")))

	// A plain error rejects as consumer-defined, without private data.
	l2, err := ld.Listen(18516, roce.ListenConfig{Accept: func(roce.ConnRequest) ([]byte, error) {
		return nil, errors.New("no")
	}})
	require.NoError(t, err)
	defer l2.Close()
	_, err = dd.Dial(ctxT(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.2:18516"), roce.DialConfig{})
	require.ErrorAs(t, err, &re)
	assert.Equal(t, cm.RejectConsumerDefined, re.Reason)
}

// TestCMNoListener: a REQ for a port nobody listens on is rejected with
// reason 8 (invalid service ID), as the kernel's CM answers it; so is one
// after the listener closed.
func TestCMNoListener(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	l, err := ld.Listen(1, roce.ListenConfig{}) // starts the CM
	require.NoError(t, err)
	_, err = ld.Listen(1, roce.ListenConfig{})
	assert.ErrorIs(t, err, cm.ErrServiceInUse)
	for _, port := range []uint16{2, 1} {
		if port == 1 {
			require.NoError(t, l.Close())
		}
		_, err = dd.Dial(ctxT(t, 10*time.Second), netip.AddrPortFrom(ld.LocalAddr().Addr(), port), roce.DialConfig{})
		var re *roce.RejectError
		require.ErrorAs(t, err, &re, "port %d", port)
		assert.Equal(t, cm.RejectInvalidServiceID, re.Reason)
		assert.Equal(t, cm.RejectReason(8), re.Reason)
	}
	_, err = l.Accept(context.Background())
	assert.ErrorIs(t, err, roce.ErrClosed)
}

// TestCMDialCancel: a Dial to an address nobody answers from returns the
// context's error when it is canceled; the device closes cleanly after.
func TestCMDialCancel(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{CM: cm.Config{}}) // rdma_cm's timers: seconds
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := dd.Dial(ctx, netip.MustParseAddrPort("10.0.0.9:7174"), roce.DialConfig{})
	assert.ErrorIs(t, err, context.Canceled)

	// Unreachable once the (fast) retries run out.
	dd2 := openCM(t, n, "10.0.0.3:4791", roce.Config{})
	_, err = dd2.Dial(ctxT(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.9:7174"), roce.DialConfig{})
	assert.ErrorIs(t, err, roce.ErrUnreachable)

	// A Dial waiting when the device closes returns ErrClosed.
	errc := make(chan error, 1)
	go func() {
		_, err := dd.Dial(context.Background(), netip.MustParseAddrPort("10.0.0.9:7174"), roce.DialConfig{})
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, dd.Close())
	assert.ErrorIs(t, <-errc, roce.ErrClosed)
	_, err = dd.Listen(1, roce.ListenConfig{})
	assert.ErrorIs(t, err, roce.ErrClosed)
}

// TestCMDeviceCloseEndsConns: closing a device ends its listeners and
// connections, and disconnects the peer.
func TestCMDeviceCloseEndsConns(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	l, err := ld.Listen(9, roce.ListenConfig{})
	require.NoError(t, err)
	p := cmConnect(t, dd, ld, roce.ListenConfig{}, roce.DialConfig{})
	require.NoError(t, ld.Close())
	<-p.lc.Done()
	assert.ErrorIs(t, p.lc.Err(), roce.ErrClosed)
	_, err = l.Accept(context.Background())
	assert.ErrorIs(t, err, roce.ErrClosed)
	select {
	case <-p.dc.Done(): // the DREQ of the closing device
	case <-time.After(10 * time.Second):
		t.Fatal("the peer's Conn did not end")
	}
	require.NoError(t, p.dc.Close())
	require.NoError(t, p.lc.Close())
}

// isMAD reports whether a RoCEv2 datagram is a CM MAD of attribute a: a
// UD SEND ONLY (opcode 0x64) to QP1, the MAD after BTH and DETH.
func isMAD(b []byte, a cm.AttrID) bool {
	if len(b) < 12+8+cm.MADSize || b[0] != 0x64 || b[5] != 0 || b[6] != 0 || b[7] != 1 {
		return false
	}
	m, err := cm.Parse(b[20:])
	return err == nil && m.AttrID() == a
}

// TestCMCapture: the CM MADs on the wire are UD SEND ONLY to QP1 that
// goroce's capture decoder reads as CM (management class 7), each with a
// good ICRC.
func TestCMCapture(t *testing.T) {
	n := mem.NewNetwork()
	var buf bytes.Buffer
	// rdma_cm's timers (seconds): no retransmission in the capture.
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{Capture: &roce.CaptureConfig{W: &buf}, CM: cm.Config{MaxCMRetries: 3}})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{CM: cm.Config{MaxCMRetries: 3}})
	p := cmConnect(t, dd, ld, roce.ListenConfig{}, roce.DialConfig{PrivateData: []byte("x")})
	require.NoError(t, p.dc.Close())
	require.NoError(t, dd.Close())

	var got []string
	for _, v := range capFields(t, buf.Bytes(), "infiniband.mad.mgmtclass", "infiniband.mad.attributeid") {
		got = append(got, v[0]+"/"+v[1])
	}
	// REQ out, REP in, RTU out, DREQ out, DREP in.
	assert.Equal(t, []string{"0x07/0x0010", "0x07/0x0013", "0x07/0x0014", "0x07/0x0015", "0x07/0x0016"}, got)
}

// TestCMRdAtomic: DialConfig's and ListenConfig's responder resources and
// initiator depth reach the wire as rdma_conn_param's do (perftest's read
// tests offer their out_reads, 128), and the REP lowers each to what the
// REQ offered the other way (cm.Manager.Accept). Zero offers the default
// 16.
func TestCMRdAtomic(t *testing.T) {
	tests := []struct {
		name         string
		dResp, dInit uint8 // DialConfig
		lResp, lInit uint8 // ListenConfig
		req, rep     [2]string
	}{
		{"defaults", 0, 0, 0, 0, [2]string{"0x10", "0x10"}, [2]string{"0x10", "0x10"}},
		{"perftest read", 128, 128, 128, 128, [2]string{"0x80", "0x80"}, [2]string{"0x80", "0x80"}},
		{"lowered", 128, 2, 64, 64, [2]string{"0x80", "0x02"}, [2]string{"0x02", "0x40"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := mem.NewNetwork()
			var buf bytes.Buffer
			dd := openCM(t, n, "10.0.0.1:4791", roce.Config{Capture: &roce.CaptureConfig{W: &buf}})
			ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
			p := cmConnect(t, dd, ld, roce.ListenConfig{ResponderResources: tc.lResp, InitiatorDepth: tc.lInit},
				roce.DialConfig{ResponderResources: tc.dResp, InitiatorDepth: tc.dInit})
			require.NoError(t, p.dc.Close())
			require.NoError(t, dd.Close())
			req := capFields(t, buf.Bytes(), "infiniband.cm.req.responderres", "infiniband.cm.req.initdepth")
			rep := capFields(t, buf.Bytes(), "infiniband.cm.rep.respres", "infiniband.cm.rep.initdepth")
			assert.Equal(t, [][2]string{tc.req}, req, "REQ responder resources, initiator depth")
			assert.Equal(t, [][2]string{tc.rep}, rep, "REP responder resources, initiator depth")
		})
	}
}

// capFields returns the values of two fields in each frame of a device's
// own capture that has both; every frame must be RoCE with a good ICRC.
func capFields(t *testing.T, pcap []byte, a, b string) [][2]string {
	t.Helper()
	rd, err := capfmt.NewReader(bytes.NewReader(pcap))
	require.NoError(t, err)
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	fa, ok := capfmt.FieldByName(a)
	require.True(t, ok, a)
	fb, ok := capfmt.FieldByName(b)
	require.True(t, ok, b)
	var f capfmt.Frame
	var pk capfmt.Packet
	var got [][2]string
	for {
		err := rd.Next(&f)
		if errors.Is(err, io.EOF) {
			return got
		}
		require.NoError(t, err)
		dec.Decode(&f, &pk)
		require.True(t, pk.RoCE && pk.ICRCChecked && pk.ICRCGood, "frame %d", f.Number)
		va, oka := pk.Lookup(fa)
		vb, okb := pk.Lookup(fb)
		if oka && okb {
			got = append(got, [2]string{string(capfmt.AppendValue(nil, &va)), string(capfmt.AppendValue(nil, &vb))})
		}
	}
}
