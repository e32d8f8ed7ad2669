package roce_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// openTyped opens a device on n at addr with one QP of type typ.
func openTyped(t *testing.T, n *mem.Network, addr string, typ roce.QPType) *side {
	t.Helper()
	dev, err := roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort(addr))})
	require.NoError(t, err)
	t.Cleanup(func() { dev.Close() })
	s := &side{dev: dev, pd: dev.PD()}
	s.scq, err = dev.CreateCQ(1024)
	require.NoError(t, err)
	s.rcq, err = dev.CreateCQ(1024)
	require.NoError(t, err)
	s.qp, err = dev.CreateQP(roce.QPConfig{SendCQ: s.scq, RecvCQ: s.rcq, Type: typ})
	require.NoError(t, err)
	return s
}

// TestUDBetweenDevices: UD SEND (with immediate) between devices over
// link/mem, to an address handle; a third device may send too (UD takes
// datagrams from anyone); the receive buffer starts with the GRH area
// (the IPv4 header in bytes 20-39); a wrong Q_Key is dropped and counted.
func TestUDBetweenDevices(t *testing.T) {
	n := mem.NewNetwork()
	a := openTyped(t, n, "10.0.0.1:4791", roce.UD)
	b := openTyped(t, n, "10.0.0.2:4791", roce.UD)
	c := openTyped(t, n, "10.0.0.3:4791", roce.UD)
	const qkey = 0x11223344
	for _, s := range []*side{a, b, c} {
		require.NoError(t, s.qp.Ready(qkey))
	}
	assert.ErrorIs(t, a.qp.Connect(b.qp.Info(), roce.ConnectOptions{}), roce.ErrInvalidArg)

	buf := make([]byte, 8192)
	rm, err := b.dev.RegisterMR(nil, buf, mr.LocalWrite)
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{rm.SGE(i*2048, 2048)}}))
	}
	msg := bytes.Repeat([]byte("datagram"), 100)
	ah := roce.AH{Addr: b.dev.LocalAddr().Addr(), QPN: b.qp.QPN(), QKey: qkey}
	for i, s := range []*side{a, c} {
		sm, err := s.dev.RegisterMR(nil, append([]byte(nil), msg...), mr.LocalWrite)
		require.NoError(t, err)
		require.NoError(t, s.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSendWithImm, Flags: qp.SendSignaled,
			Imm: uint32(i), SGL: []qp.SGE{sm.SGE(0, len(msg))}, UD: ah.Dest()}))
		require.Equal(t, cq.StatusSuccess, waitOne(t, s.scq).Status)
		wc := waitOne(t, b.rcq)
		require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
		assert.Equal(t, uint64(i), wc.WRID)
		assert.Equal(t, uint32(s.qp.QPN()), wc.SrcQP)
		assert.Equal(t, uint32(i), wc.Imm)
		assert.Equal(t, uint32(qp.GRHLen+len(msg)), wc.ByteLen)
		assert.NotZero(t, wc.Flags&cq.FlagGRH)
		slot := buf[i*2048:]
		src, ok := qp.GRHSource(slot[:qp.GRHLen])
		require.True(t, ok)
		assert.Equal(t, s.dev.LocalAddr().Addr(), src)
		assert.Equal(t, make([]byte, 20), slot[:20])
		ip := slot[20:40]
		assert.Equal(t, byte(0x45), ip[0])
		// 20 IP + 8 UDP + 12 BTH + 8 DETH + 4 ImmDt + payload + 4 ICRC.
		assert.Equal(t, uint16(20+8+12+8+4+len(msg)+4), binary.BigEndian.Uint16(ip[2:]))
		assert.Equal(t, uint16(0x4000), binary.BigEndian.Uint16(ip[6:]), "DF")
		assert.Equal(t, byte(64), ip[8])
		assert.Equal(t, byte(17), ip[9])
		assert.Equal(t, b.dev.LocalAddr().Addr().AsSlice(), ip[16:20])
		assert.Equal(t, msg, slot[qp.GRHLen:qp.GRHLen+len(msg)])
	}

	// A wrong Q_Key: dropped and counted, the sender completes anyway.
	bad := ah
	bad.QKey = qkey + 1
	require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, UD: bad.Dest()}))
	require.Equal(t, cq.StatusSuccess, waitOne(t, a.scq).Status)
	require.Eventually(t, func() bool { return b.qp.Counters().Load(qp.CounterQKeyViolation) == 1 },
		5e9, 1e6)
	// Longer than the port MTU (1024 by default): refused at post.
	big, err := a.dev.RegisterMR(nil, make([]byte, 1025), mr.LocalWrite)
	require.NoError(t, err)
	err = a.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{big.SGE(0, 1025)}, UD: ah.Dest()})
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
	assert.Zero(t, b.dev.Stats().TxPackets.Load(), "no ACK")
	assert.Zero(t, b.dev.Stats().BadICRC.Load())
}

// TestUCBetweenDevices: UC WRITE with immediate and SEND between devices
// over link/mem, connected with Connect; no ACK comes back; READ is
// refused at post.
func TestUCBetweenDevices(t *testing.T) {
	n := mem.NewNetwork()
	a := openTyped(t, n, "10.0.0.1:4791", roce.UC)
	b := openTyped(t, n, "10.0.0.2:4791", roce.UC)
	require.NoError(t, a.qp.Connect(b.qp.Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
	require.NoError(t, b.qp.Connect(a.qp.Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
	assert.ErrorIs(t, a.qp.Ready(1), roce.ErrInvalidArg)

	src := bytes.Repeat([]byte{1, 2, 3, 4, 5}, 1000)
	sm, err := a.dev.RegisterMR(nil, src, mr.LocalWrite)
	require.NoError(t, err)
	dst := make([]byte, 8192)
	dm, err := b.dev.RegisterMR(nil, dst, mr.LocalWrite|mr.RemoteWrite)
	require.NoError(t, err)
	require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 7, SGL: []qp.SGE{dm.SGE(0, 4)}}))
	require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 8, SGL: []qp.SGE{dm.SGE(6000, 2000)}}))

	require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled, Imm: 77,
		SGL: []qp.SGE{sm.SGE(0, len(src))}, RemoteAddr: dm.IOVA() + 100, RKey: dm.RKey()}))
	require.Equal(t, cq.StatusSuccess, waitOne(t, a.scq).Status)
	wc := waitOne(t, b.rcq)
	require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
	assert.Equal(t, cq.OpRecvRDMAWithImm, wc.Opcode)
	assert.Equal(t, uint32(77), wc.Imm)
	assert.Equal(t, src, dst[100:100+len(src)])

	require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{sm.SGE(0, 1500)}}))
	require.Equal(t, cq.StatusSuccess, waitOne(t, a.scq).Status)
	wc = waitOne(t, b.rcq)
	require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
	assert.Equal(t, uint64(8), wc.WRID)
	assert.Equal(t, src[:1500], dst[6000:7500])

	err = a.qp.PostSend(&qp.SendWR{Opcode: qp.WRRDMARead, SGL: []qp.SGE{sm.SGE(0, 8)}, RemoteAddr: dm.IOVA(), RKey: dm.RKey()})
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
	assert.Zero(t, b.dev.Stats().TxPackets.Load(), "no ACK")
}
