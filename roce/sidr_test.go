package roce_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// udaddyMsgs is how many datagrams the SIDR tests send each way, of
// udaddySize bytes (udaddy's defaults are 10 and 100).
const udaddyMsgs, udaddySize = 4, 100

// udBufs is one UDConn side's memory: udaddyMsgs receive slots of GRH area
// plus message, then the message it sends.
type udBufs struct {
	buf []byte
	m   *mr.Region
}

func newUDBufs(t *testing.T, d *roce.Device, fill byte) *udBufs {
	t.Helper()
	slot := qp.GRHLen + udaddySize
	b := &udBufs{buf: make([]byte, udaddyMsgs*slot+udaddySize)}
	copy(b.buf[udaddyMsgs*slot:], bytes.Repeat([]byte{fill}, udaddySize))
	var err error
	b.m, err = d.RegisterMR(nil, b.buf, mr.LocalWrite)
	require.NoError(t, err)
	return b
}

// recvs posts the receive slots (a Setup function).
func (b *udBufs) recvs(q *roce.QP) error {
	slot := qp.GRHLen + udaddySize
	for i := range udaddyMsgs {
		if err := q.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{b.m.SGE(i*slot, slot)}}); err != nil {
			return err
		}
	}
	return nil
}

// send sends udaddyMsgs datagrams to ah as udaddy does: SEND with
// immediate, the immediate data the sender's QPN.
func (b *udBufs) send(t *testing.T, q *roce.QP, ah roce.AH) {
	t.Helper()
	for i := range udaddyMsgs {
		require.NoError(t, q.PostSend(&qp.SendWR{WRID: uint64(100 + i), Opcode: qp.WRSendWithImm, Flags: qp.SendSignaled,
			Imm: uint32(q.QPN()), SGL: []qp.SGE{b.m.SGE(udaddyMsgs*(qp.GRHLen+udaddySize), udaddySize)}, UD: ah.Dest()}))
	}
	for range udaddyMsgs {
		wc := waitOne(t, q.SendCQ())
		require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
	}
}

// recv waits for udaddyMsgs datagrams of fill bytes from the QP peer
// (sender QPN in the immediate data and the completion's source QP) at
// address from, and returns the sender's QPN.
func (b *udBufs) recv(t *testing.T, q *roce.QP, from netip.Addr, fill byte) uint32 {
	t.Helper()
	var src uint32
	for range udaddyMsgs {
		wc := waitOne(t, q.RecvCQ())
		require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
		require.EqualValues(t, qp.GRHLen+udaddySize, wc.ByteLen)
		assert.NotZero(t, wc.Flags&cq.FlagWithImm)
		assert.Equal(t, wc.SrcQP, wc.Imm, "udaddy's immediate data is the sender's QPN")
		slot := b.buf[int(wc.WRID)*(qp.GRHLen+udaddySize):][:qp.GRHLen+udaddySize]
		g, ok := qp.GRHSource(slot[:qp.GRHLen])
		assert.True(t, ok)
		assert.Equal(t, from, g)
		assert.Equal(t, bytes.Repeat([]byte{fill}, udaddySize), slot[qp.GRHLen:])
		src = wc.SrcQP
	}
	return src
}

// recvQPN is recv returning the sender's QPN as udaddy's server learns it.
func (b *udBufs) recvQPN(t *testing.T, q *roce.QP, from netip.Addr, fill byte) bth.QPN {
	return bth.QPN(b.recv(t, q, from, fill))
}

// TestSIDRDialListen resolves a UD service between two devices with
// private data both ways, then runs udaddy's exchange: the client sends
// first (its QPN as immediate data), the server answers to the QPN it
// learned from the first datagram.
func TestSIDRDialListen(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	sb := newUDBufs(t, ld, 's')
	cb := newUDBufs(t, dd, 'c')
	var seen roce.ConnRequest
	var setupState qp.State
	l, err := ld.ListenUD(7174, roce.UDListenConfig{
		Accept: func(r roce.ConnRequest) ([]byte, error) {
			seen = roce.ConnRequest{RemoteAddr: r.RemoteAddr, PrivateData: bytes.Clone(r.PrivateData)}
			return []byte("udp welcome"), nil
		},
		Setup: func(q *roce.QP) error {
			setupState = q.State()
			return sb.recvs(q)
		}})
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, netip.MustParseAddrPort("10.0.0.2:7174"), l.Addr())

	dc, err := dd.DialUD(ctxT(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.2:7174"),
		roce.UDDialConfig{PrivateData: []byte("udp hello"), Setup: cb.recvs})
	require.NoError(t, err)
	defer dc.Close()
	lc, err := l.Accept(ctxT(t, 10*time.Second))
	require.NoError(t, err)
	defer lc.Close()

	assert.Equal(t, qp.StateRTS, setupState, "the listener's QP is ready before the SIDR_REP")
	assert.Equal(t, roce.AH{Addr: netip.MustParseAddr("10.0.0.2"), QPN: lc.QP().QPN(), QKey: cm.UDPQKey}, dc.AH())
	assert.Equal(t, roce.AH{Addr: netip.MustParseAddr("10.0.0.1"), QKey: cm.UDPQKey}, lc.AH())
	assert.Len(t, lc.PrivateData(), cm.PrivateDataSIDRREQ-cm.IPHeaderSize)
	assert.True(t, bytes.HasPrefix(lc.PrivateData(), []byte("udp hello")))
	assert.True(t, bytes.HasPrefix(seen.PrivateData, []byte("udp hello")))
	assert.Len(t, dc.PrivateData(), cm.PrivateDataSIDRREP)
	assert.True(t, bytes.HasPrefix(dc.PrivateData(), []byte("udp welcome")))
	assert.Equal(t, dc.LocalAddr(), lc.RemoteAddr())
	assert.Equal(t, seen.RemoteAddr, lc.RemoteAddr())
	assert.Equal(t, netip.MustParseAddrPort("10.0.0.2:7174"), dc.RemoteAddr())
	assert.Equal(t, l.Addr(), lc.LocalAddr())

	cb.send(t, dc.QP(), dc.AH())
	ah := lc.AH()
	ah.QPN = sb.recvQPN(t, lc.QP(), netip.MustParseAddr("10.0.0.1"), 'c')
	assert.Equal(t, dc.QP().QPN(), ah.QPN)
	sb.send(t, lc.QP(), ah)
	assert.Equal(t, uint32(lc.QP().QPN()), cb.recv(t, dc.QP(), netip.MustParseAddr("10.0.0.2"), 's'))
}

// TestSIDRNoListener: a SIDR_REQ for a port nobody listens on in the UDP
// port space gets status 1 (unsupported), as the kernel's CM answers it:
// also when the port is listened on in the TCP port space, and after the
// UD listener closed.
func TestSIDRNoListener(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	rc, err := ld.Listen(7174, roce.ListenConfig{})
	require.NoError(t, err)
	defer rc.Close()
	l, err := ld.ListenUD(7175, roce.UDListenConfig{})
	require.NoError(t, err)
	_, err = ld.ListenUD(7175, roce.UDListenConfig{})
	assert.ErrorIs(t, err, cm.ErrServiceInUse)
	require.NoError(t, l.Close())
	for _, port := range []uint16{7174, 7175, 9} {
		_, err = dd.DialUD(ctxT(t, 10*time.Second), netip.AddrPortFrom(ld.LocalAddr().Addr(), port), roce.UDDialConfig{})
		require.ErrorIs(t, err, roce.ErrRejected, "port %d", port)
		var se *roce.SIDRError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, cm.SIDRUnsupported, se.Status, "port %d", port)
		assert.EqualValues(t, 1, se.Status)
	}
	_, err = l.Accept(context.Background())
	assert.ErrorIs(t, err, roce.ErrClosed)
}

// TestSIDRRefused: the listener's Accept function refuses with a status
// and private data; a plain error refuses with status 2 (reject); a Setup
// error with status 3 (no QP).
func TestSIDRRefused(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	tests := []struct {
		name   string
		cfg    roce.UDListenConfig
		status cm.SIDRStatus
		pd     string
	}{
		{"SIDRError", roce.UDListenConfig{Accept: func(roce.ConnRequest) ([]byte, error) {
			return nil, &roce.SIDRError{Status: cm.SIDRRedirect, PrivateData: []byte("elsewhere")}
		}}, cm.SIDRRedirect, "elsewhere"},
		{"plain error", roce.UDListenConfig{Accept: func(roce.ConnRequest) ([]byte, error) {
			return nil, errors.New("no")
		}}, cm.SIDRReject, ""},
		{"reply too long", roce.UDListenConfig{Accept: func(roce.ConnRequest) ([]byte, error) {
			return make([]byte, cm.PrivateDataSIDRREP+1), nil
		}}, cm.SIDRReject, ""},
		{"Setup error", roce.UDListenConfig{Setup: func(*roce.QP) error { return errors.New("no receives") }},
			cm.SIDRNoQP, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			port := uint16(8000 + i)
			l, err := ld.ListenUD(port, tc.cfg)
			require.NoError(t, err)
			defer l.Close()
			_, err = dd.DialUD(ctxT(t, 10*time.Second), netip.AddrPortFrom(ld.LocalAddr().Addr(), port), roce.UDDialConfig{})
			var se *roce.SIDRError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.status, se.Status)
			assert.Len(t, se.PrivateData, cm.PrivateDataSIDRREP)
			assert.True(t, bytes.HasPrefix(se.PrivateData, []byte(tc.pd)))
			assert.Contains(t, err.Error(), tc.status.String())
		})
	}
}

// TestSIDRBacklog: requests beyond the backlog are refused (status 2)
// until Accept takes one.
func TestSIDRBacklog(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	l, err := ld.ListenUD(7174, roce.UDListenConfig{Backlog: 1})
	require.NoError(t, err)
	defer l.Close()
	raddr := netip.MustParseAddrPort("10.0.0.2:7174")
	c1, err := dd.DialUD(ctxT(t, 10*time.Second), raddr, roce.UDDialConfig{})
	require.NoError(t, err)
	defer c1.Close()
	_, err = dd.DialUD(ctxT(t, 10*time.Second), raddr, roce.UDDialConfig{})
	var se *roce.SIDRError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, cm.SIDRReject, se.Status)
	a1, err := l.Accept(ctxT(t, time.Second))
	require.NoError(t, err)
	defer a1.Close()
	assert.Equal(t, c1.AH().QPN, a1.QP().QPN())
	c2, err := dd.DialUD(ctxT(t, 10*time.Second), raddr, roce.UDDialConfig{})
	require.NoError(t, err)
	defer c2.Close()
}

// sidrREQs drops the first drop SIDR_REQs on the way and counts them all.
type sidrREQs struct {
	drop int64
	seen atomic.Int64
}

func (s *sidrREQs) deliver(dg *link.Datagram) bool {
	if !isMAD(dg.Buf, cm.AttrSIDRREQ) {
		return true
	}
	return s.seen.Add(1) > s.drop
}

// TestSIDRRetransmit: DialUD retransmits a lost SIDR_REQ on the CM's
// timer and resolves with the second; with every SIDR_REQ lost it returns
// ErrUnreachable after 1 + MaxCMRetries of them.
func TestSIDRRetransmit(t *testing.T) {
	f := &sidrREQs{drop: 1}
	n := mem.New(mem.Config{Deliver: f.deliver})
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	l, err := ld.ListenUD(7174, roce.UDListenConfig{})
	require.NoError(t, err)
	defer l.Close()
	c, err := dd.DialUD(ctxT(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.2:7174"), roce.UDDialConfig{})
	require.NoError(t, err)
	defer c.Close()
	assert.EqualValues(t, 2, f.seen.Load())

	f.drop = 1 << 40
	f.seen.Store(0)
	_, err = dd.DialUD(ctxT(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.2:7174"), roce.UDDialConfig{})
	assert.ErrorIs(t, err, roce.ErrUnreachable)
	assert.EqualValues(t, 1+fastCM.MaxCMRetries, f.seen.Load())
}

// TestSIDRDialCancel: a canceled DialUD returns the context's error and
// sends no more SIDR_REQs; a DialUD waiting when the device closes returns
// ErrClosed, and so do ListenUD and DialUD after.
func TestSIDRDialCancel(t *testing.T) {
	f := &sidrREQs{drop: 1 << 40}
	n := mem.New(mem.Config{Deliver: f.deliver})
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	silent := n.Attach(netip.MustParseAddrPort("10.0.0.9:4791")) // a peer that never answers
	defer silent.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	_, err := dd.DialUD(ctx, netip.MustParseAddrPort("10.0.0.9:7174"), roce.UDDialConfig{})
	assert.ErrorIs(t, err, context.Canceled)
	sent := f.seen.Load()
	time.Sleep(300 * time.Millisecond) // fastCM retransmits every ≈ 20 ms
	assert.Equal(t, sent, f.seen.Load(), "SIDR_REQs after the cancel")

	errc := make(chan error, 1)
	go func() {
		_, err := dd.DialUD(context.Background(), netip.MustParseAddrPort("10.0.0.9:7174"), roce.UDDialConfig{})
		errc <- err
	}()
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, dd.Close())
	assert.ErrorIs(t, <-errc, roce.ErrClosed)
	_, err = dd.ListenUD(1, roce.UDListenConfig{})
	assert.ErrorIs(t, err, roce.ErrClosed)
	_, err = dd.DialUD(context.Background(), netip.MustParseAddrPort("10.0.0.9:7174"), roce.UDDialConfig{})
	assert.ErrorIs(t, err, roce.ErrClosed)
}

// TestSIDRBadArgs: too much private data and an invalid address are
// refused before anything is sent.
func TestSIDRBadArgs(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	_, err := dd.DialUD(context.Background(), netip.MustParseAddrPort("10.0.0.2:7174"),
		roce.UDDialConfig{PrivateData: make([]byte, 181)})
	assert.ErrorIs(t, err, cm.ErrPrivateData)
	_, err = dd.DialUD(context.Background(), netip.AddrPort{}, roce.UDDialConfig{})
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
	_, err = dd.ListenUD(1, roce.UDListenConfig{Backlog: -1})
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
}

// TestSIDRCapture: the SIDR MADs on the wire are CM MADs (class 7,
// SIDR_REQ 0x0017 out, SIDR_REP 0x0018 in) with good ICRCs.
func TestSIDRCapture(t *testing.T) {
	n := mem.NewNetwork()
	var buf bytes.Buffer
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{Capture: &roce.CaptureConfig{W: &buf}, CM: cm.Config{MaxCMRetries: 3}})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{CM: cm.Config{MaxCMRetries: 3}})
	l, err := ld.ListenUD(7174, roce.UDListenConfig{})
	require.NoError(t, err)
	defer l.Close()
	c, err := dd.DialUD(ctxT(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.2:7174"), roce.UDDialConfig{PrivateData: []byte("x")})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, dd.Close())

	var got []string
	for _, v := range capFields(t, buf.Bytes(), "infiniband.mad.mgmtclass", "infiniband.mad.attributeid") {
		got = append(got, v[0]+"/"+v[1])
	}
	assert.Equal(t, []string{"0x07/0x0017", "0x07/0x0018"}, got)
}

// TestSIDRListenerClose: closing a UDListener destroys the QPs of the
// answered requests nobody accepted (their datagrams find no QP), and
// closing the device ends Accept on another listener with ErrClosed.
func TestSIDRListenerClose(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	l, err := ld.ListenUD(7174, roce.UDListenConfig{})
	require.NoError(t, err)
	c, err := dd.DialUD(ctxT(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.2:7174"), roce.UDDialConfig{})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "idempotent")
	// A datagram to the unaccepted request's QP finds none.
	src, err := dd.RegisterMR(nil, []byte("anyone?"), 0)
	require.NoError(t, err)
	require.NoError(t, c.QP().PostSend(&qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{src.SGE(0, 7)}, UD: c.AH().Dest()}))
	waitOne(t, c.QP().SendCQ())
	require.Eventually(t, func() bool { return ld.Stats().DroppedNoQP.Load() == 1 }, 5*time.Second, time.Millisecond)

	l2, err := ld.ListenUD(7175, roce.UDListenConfig{})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := l2.Accept(context.Background())
		errc <- err
	}()
	require.NoError(t, ld.Close())
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, roce.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return")
	}
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "idempotent")
}
