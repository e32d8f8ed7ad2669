package qp_test

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

const (
	dgQKeyA uint32 = 0x11111111
	dgQKeyB uint32 = 0x22222222
)

// dgBuf is a registered buffer.
type dgBuf struct {
	*mr.Region
	b []byte
}

func dgReg(e *endpoint, b []byte, acc mr.AccessFlags) dgBuf { return dgBuf{e.reg(b, acc), b} }

// Bytes returns the buffer.
func (d dgBuf) Bytes() []byte { return d.b }

// at returns the SGE of n bytes at offset off.
func (d dgBuf) at(off, n int) qp.SGE { return d.Region.SGE(off, n) }

// retype replaces e's QP by a fresh one of type typ (same memory and CQs).
func retype(t testing.TB, e *endpoint, typ qp.Type, portMTU qp.MTU) {
	t.Helper()
	q, err := qp.New(qp.Config{QPN: e.qp.QPN(), Type: typ, MRs: e.tbl, PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq,
		MaxSendWR: 4096, MaxRecvWR: 4096, PortMTU: portMTU})
	require.NoError(t, err)
	e.qp = q
}

// readyUD moves a UD QP to RTS with Q_Key qkey (IBA 10.2.4: RESET → INIT
// takes the Q_Key and port; RTR nothing; RTS the SQ PSN).
func readyUD(t testing.TB, q *qp.QP, qkey uint32, psn bth.PSN) {
	t.Helper()
	require.NoError(t, q.Modify(&qp.Attr{State: qp.StateInit, QKey: qkey, Port: 1},
		qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrQKey))
	require.NoError(t, q.Modify(&qp.Attr{State: qp.StateRTR}, qp.AttrState))
	require.NoError(t, q.Modify(&qp.Attr{State: qp.StateRTS, SQPSN: psn}, qp.AttrState|qp.AttrSQPSN))
}

// connectUC moves a's UC QP to RTS towards b's: UC takes no ACK timeout,
// retry counts or READ/ATOMIC resources.
func connectUC(t testing.TB, a, b *endpoint, mtu qp.MTU, aPSN, bPSN bth.PSN) {
	t.Helper()
	require.NoError(t, a.qp.Modify(&qp.Attr{State: qp.StateInit, AccessFlags: mr.LocalWrite | mr.RemoteWrite},
		qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags))
	require.NoError(t, a.qp.Modify(&qp.Attr{State: qp.StateRTR, PathMTU: mtu, DestQPN: b.qp.QPN(), RQPSN: bPSN,
		AV: qp.AddressVector{Remote: b.self.Addr()}},
		qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN))
	require.NoError(t, a.qp.Modify(&qp.Attr{State: qp.StateRTS, SQPSN: aPSN}, qp.AttrState|qp.AttrSQPSN))
}

// newDgPair is newPair for UC or UD QPs over a clean link (MTU 1024).
func newDgPair(t *testing.T, typ qp.Type) *pair {
	t.Helper()
	seed := testutil.Seed(t)
	a := newEndpoint(t, "A", 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
	b := newEndpoint(t, "B", 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
	retype(t, a, typ, qp.MTU1024)
	retype(t, b, typ, qp.MTU1024)
	pr := &pair{t: t, a: a, b: b, seed: seed, clock: testutil.NewClock()}
	imp := linkShape(testutil.Impairment{})
	pr.ab = testutil.NewLink(testutil.SubSeed(seed, "ab"), imp)
	pr.ba = testutil.NewLink(testutil.SubSeed(seed, "ba"), imp)
	a.out, b.out = pr.ab, pr.ba
	switch typ {
	case qp.TypeUD:
		readyUD(t, a.qp, dgQKeyA, 0x100)
		readyUD(t, b.qp, dgQKeyB, 0x200)
		a.ip = &qp.IPInfo{Src: b.self.Addr(), Dst: a.self.Addr(), TOS: 0x02, TTL: 64, ID: 0xbeef}
		b.ip = &qp.IPInfo{Src: a.self.Addr(), Dst: b.self.Addr(), TOS: 0x6a, TTL: 63, ID: 0x1234}
	case qp.TypeUC:
		connectUC(t, a, b, qp.MTU1024, 0x100, 0x200)
		connectUC(t, b, a, qp.MTU1024, 0x200, 0x100)
	}
	pr.sim = testutil.NewSim(pr.clock)
	for _, e := range []*endpoint{a, b} {
		pr.sim.AddNode(testutil.NodeFuncs{DeadlineFunc: e.deadline, TimeoutFunc: e.onTimeout})
	}
	pr.sim.AddLink(pr.ab, b.deliver)
	pr.sim.AddLink(pr.ba, a.deliver)
	return pr
}

// udTo is the UD destination of e's QP with Q_Key qkey.
func udTo(e *endpoint, qkey uint32) qp.UDDest {
	return qp.UDDest{AH: qp.AddressVector{Remote: e.self.Addr()}, RemoteQPN: e.qp.QPN(), RemoteQKey: qkey}
}

// recvWCs returns e's receive completions so far (e.poll first).
func recvWCs(e *endpoint) []cq.Completion {
	e.poll()
	var out []cq.Completion
	for _, c := range e.wcs {
		if c.Opcode&cq.OpRecv != 0 {
			out = append(out, c)
		}
	}
	return out
}

// sendWCs returns e's send completions so far.
func sendWCs(e *endpoint) []cq.Completion {
	e.poll()
	var out []cq.Completion
	for _, c := range e.wcs {
		if c.Opcode&cq.OpRecv == 0 {
			out = append(out, c)
		}
	}
	return out
}

// wantIPv4GRH is the GRH area rxe gives a UD receive over RoCEv2/IPv4: 20
// zero bytes and the IPv4 header, serialized here by gopacket (an
// independent checksum).
func wantIPv4GRH(t *testing.T, ip *qp.IPInfo, transportLen int) []byte {
	t.Helper()
	h := &layers.IPv4{Version: 4, IHL: 5, TOS: ip.TOS, Length: uint16(20 + 8 + transportLen), Id: ip.ID,
		Flags: layers.IPv4DontFragment, TTL: ip.TTL, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP(ip.Src.AsSlice()), DstIP: net.IP(ip.Dst.AsSlice())}
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, h))
	return append(make([]byte, 20), buf.Bytes()...)
}

// TestUD_SendDelivery: UD SEND and SEND with immediate (IBA 9.8, 11.4):
// one packet with a DETH, no ACK; the receive buffer gets the 40-byte GRH
// area first (for IPv4 the header in bytes 20–39), then the payload; the
// completion has the source QP and FlagGRH and counts the GRH in ByteLen.
func TestUD_SendDelivery(t *testing.T) {
	tests := []struct {
		name string
		op   qp.WROpcode
		n    int
	}{
		{"send-0", qp.WRSend, 0},
		{"send-1", qp.WRSend, 1},
		{"send-mtu", qp.WRSend, 1024},
		{"send-imm-3", qp.WRSendWithImm, 3},
		{"send-imm-mtu", qp.WRSendWithImm, 1024},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := newDgPair(t, qp.TypeUD)
			a, b := pr.a, pr.b
			var opcodes []bth.Opcode
			var lens []int
			a.drop = func(p []byte) bool {
				var w wire.Packet
				require.NoError(t, w.Parse(p))
				opcodes = append(opcodes, w.Opcode())
				lens = append(lens, len(p))
				assert.Equal(t, dgQKeyB, w.DETH.QKey())
				assert.Equal(t, uint32(a.qp.QPN()), w.DETH.SrcQP())
				assert.Equal(t, b.qp.QPN(), w.BTH.DestQP())
				assert.False(t, w.BTH.AckReq(), "nobody ACKs a datagram")
				return false
			}
			data := testutil.Pattern(7, tc.n)
			src := dgReg(a, append([]byte{0}, data...), mr.LocalWrite)
			dst := dgReg(b, make([]byte, 4096), mr.LocalWrite)
			for i := range dst.Bytes() {
				dst.Bytes()[i] = 0xee
			}
			require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 9, SGL: []qp.SGE{dst.at(0, qp.GRHLen+tc.n)}}))
			wr := &qp.SendWR{WRID: 1, Opcode: tc.op, Flags: qp.SendSignaled, Imm: 0xa1b2c3d4, UD: udTo(b, dgQKeyB)}
			if tc.n > 0 {
				wr.SGL = []qp.SGE{src.at(1, tc.n)}
			}
			require.NoError(t, a.qp.PostSend(wr))
			require.NoError(t, pr.run(func() bool { return len(recvWCs(b)) == 1 }, time.Second), pr)

			swc := sendWCs(a)
			require.Len(t, swc, 1)
			assert.Equal(t, cq.StatusSuccess, swc[0].Status)
			assert.Equal(t, cq.OpSend, swc[0].Opcode)
			wc := recvWCs(b)[0]
			assert.Equal(t, cq.StatusSuccess, wc.Status)
			assert.Equal(t, uint64(9), wc.WRID)
			assert.Equal(t, uint32(qp.GRHLen+tc.n), wc.ByteLen, "ByteLen counts the GRH (ibv_wc.byte_len)")
			assert.Equal(t, uint32(a.qp.QPN()), wc.SrcQP)
			assert.NotZero(t, wc.Flags&cq.FlagGRH)
			if tc.op == qp.WRSendWithImm {
				assert.Equal(t, uint32(0xa1b2c3d4), wc.Imm)
				assert.NotZero(t, wc.Flags&cq.FlagWithImm)
			}
			require.Len(t, lens, 1)
			want := wantIPv4GRH(t, b.ip, lens[0])
			got := dst.Bytes()[:qp.GRHLen]
			assert.Equal(t, want, got, "GRH area")
			src4, ok := qp.GRHSource(got)
			assert.True(t, ok)
			assert.Equal(t, a.self.Addr(), src4)
			assert.Equal(t, data, dst.Bytes()[qp.GRHLen:qp.GRHLen+tc.n])
			assert.Equal(t, byte(0xee), dst.Bytes()[qp.GRHLen+tc.n], "nothing past the message")
			wantOp := bth.UDSendOnly
			if tc.op == qp.WRSendWithImm {
				wantOp = bth.UDSendOnlyWithImmediate
			}
			assert.Equal(t, []bth.Opcode{wantOp}, opcodes)
			assert.Zero(t, b.sent, "no ACK on the wire")
		})
	}
}

// TestGRHSource_IPv6: the GRH area of an IPv6 packet is the IPv6 header.
func TestGRHSource_IPv6(t *testing.T) {
	pr := newDgPair(t, qp.TypeUD)
	a, b := pr.a, pr.b
	b.ip = &qp.IPInfo{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), TOS: 0x02,
		TTL: 5, FlowLabel: 0xabcde}
	dst := dgReg(b, make([]byte, 4096), mr.LocalWrite)
	require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 1, SGL: []qp.SGE{dst.at(0, 4096)}}))
	require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, UD: udTo(b, dgQKeyB)}))
	require.NoError(t, pr.run(func() bool { return len(recvWCs(b)) == 1 }, time.Second), pr)
	g := dst.Bytes()[:qp.GRHLen]
	// version 6, traffic class 0x02, flow label 0xabcde; payload length 8
	// (UDP) + 24 (BTH, DETH, ICRC); next header 17; hop limit 5.
	assert.Equal(t, []byte{0x60, 0x2a, 0xbc, 0xde, 0x00, 32, 17, 5}, g[:8])
	src, ok := qp.GRHSource(g)
	require.True(t, ok)
	assert.Equal(t, netip.MustParseAddr("fd00::1"), src)
	assert.Equal(t, netip.MustParseAddr("fd00::2").AsSlice(), g[24:40])
}

// TestUD_QKey: a datagram whose DETH Q_Key is not the receiving QP's is
// dropped silently and counted (rxe check_keys); a controlled Q_Key in the
// WR (high bit set) sends the sending QP's own Q_Key (IBA 10.2.5).
func TestUD_QKey(t *testing.T) {
	tests := []struct {
		name     string
		wrQKey   uint32
		senderQK uint32
		deliver  bool
	}{
		{"match", dgQKeyB, dgQKeyA, true},
		{"wrong", dgQKeyB + 1, dgQKeyA, false},
		{"controlled-own-matches", qp.ControlledQKey, dgQKeyB, true},
		{"controlled-own-differs", qp.ControlledQKey | dgQKeyB, dgQKeyA, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := newDgPair(t, qp.TypeUD)
			a, b := pr.a, pr.b
			require.NoError(t, a.qp.Modify(&qp.Attr{State: qp.StateRTS, QKey: tc.senderQK}, qp.AttrState|qp.AttrQKey))
			var sent []uint32
			a.drop = func(p []byte) bool {
				var w wire.Packet
				require.NoError(t, w.Parse(p))
				sent = append(sent, w.DETH.QKey())
				return false
			}
			dst := dgReg(b, make([]byte, 256), mr.LocalWrite)
			require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 1, SGL: []qp.SGE{dst.at(0, 256)}}))
			require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled,
				UD: udTo(b, tc.wrQKey)}))
			require.NoError(t, pr.run(func() bool { return len(sendWCs(a)) == 1 && pr.ab.Pending() == 0 }, time.Second), pr)
			_ = pr.run(func() bool { return false }, time.Millisecond)
			want := tc.wrQKey
			if tc.wrQKey&qp.ControlledQKey != 0 {
				want = tc.senderQK
			}
			assert.Equal(t, []uint32{want}, sent)
			if tc.deliver {
				assert.Len(t, recvWCs(b), 1)
				assert.Zero(t, b.qp.Counters().Load(qp.CounterQKeyViolation))
			} else {
				assert.Empty(t, recvWCs(b))
				assert.Equal(t, uint64(1), b.qp.Counters().Load(qp.CounterQKeyViolation))
				assert.Equal(t, qp.StateRTS, b.qp.State(), "a bad Q_Key is a silent drop")
			}
			assert.Equal(t, cq.StatusSuccess, sendWCs(a)[0].Status, "the sender never learns")
		})
	}
}

// TestUD_PostChecks: a UD send is one packet of at most the port MTU, a
// SEND (with immediate), with a valid address handle; the rest is refused
// at post with ErrInvalidArg, as ibv_post_send returns EINVAL.
func TestUD_PostChecks(t *testing.T) {
	pr := newDgPair(t, qp.TypeUD)
	a, b := pr.a, pr.b
	src := dgReg(a, make([]byte, 4096), mr.LocalWrite)
	tests := []struct {
		name string
		wr   qp.SendWR
		want error
	}{
		{"mtu", qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{src.at(0, 1024)}, UD: udTo(b, dgQKeyB)}, nil},
		{"over-mtu", qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{src.at(0, 1025)}, UD: udTo(b, dgQKeyB)}, qp.ErrMessageOverMTU},
		{"write", qp.SendWR{Opcode: qp.WRRDMAWrite, UD: udTo(b, dgQKeyB)}, qp.ErrUnsupportedOp},
		{"read", qp.SendWR{Opcode: qp.WRRDMARead, UD: udTo(b, dgQKeyB)}, qp.ErrUnsupportedOp},
		{"fetch-add", qp.SendWR{Opcode: qp.WRAtomicFetchAdd, UD: udTo(b, dgQKeyB)}, qp.ErrUnsupportedOp},
		{"no-ah", qp.SendWR{Opcode: qp.WRSend, UD: qp.UDDest{RemoteQPN: 5}}, qp.ErrInvalidArg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := a.qp.PostSend(&tc.wr)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.want)
			assert.ErrorIs(t, err, qp.ErrInvalidArg)
		})
	}
}

// TestUD_RecvTooSmall: a receive WR without room for the GRH area and the
// message completes with LOC_LEN_ERR; the QP stays in RTS and the next
// datagram lands in the next WR.
func TestUD_RecvTooSmall(t *testing.T) {
	pr := newDgPair(t, qp.TypeUD)
	a, b := pr.a, pr.b
	src := dgReg(a, testutil.Pattern(1, 100), mr.LocalWrite)
	dst := dgReg(b, make([]byte, 4096), mr.LocalWrite)
	require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 1, SGL: []qp.SGE{dst.at(0, qp.GRHLen+99)}}))
	require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 2, SGL: []qp.SGE{dst.at(1024, qp.GRHLen+100)}}))
	for i := range 2 {
		require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend,
			SGL: []qp.SGE{src.at(0, 100)}, UD: udTo(b, dgQKeyB)}))
	}
	require.NoError(t, pr.run(func() bool { return len(recvWCs(b)) == 2 }, time.Second), pr)
	wcs := recvWCs(b)
	assert.Equal(t, uint64(1), wcs[0].WRID)
	assert.Equal(t, cq.StatusLocLenErr, wcs[0].Status)
	assert.Equal(t, uint32(qp.ReasonRecvLength), wcs[0].VendorErr)
	assert.Equal(t, uint64(2), wcs[1].WRID)
	assert.Equal(t, cq.StatusSuccess, wcs[1].Status)
	assert.Equal(t, qp.StateRTS, b.qp.State())
	assert.Zero(t, b.sent)
}

// TestUD_Intake: what a UD responder drops before any WQE: opcodes of
// another transport (bad header), no receive WQE (a class D drop, no RNR
// NAK); and what it ignores: the PSN (UD has no sequence; rxe sets it and
// does not check it).
func TestUD_Intake(t *testing.T) {
	pr := newDgPair(t, qp.TypeUD)
	b := pr.b
	now := pr.clock.Now()
	build := func(op bth.Opcode, psn bth.PSN) *wire.Packet {
		var f wire.Fields
		f.BTH.Opcode, f.BTH.PKey, f.BTH.DestQP, f.BTH.PSN = op, 0xffff, b.qp.QPN(), psn
		f.DETH.QKey, f.DETH.SrcQP = dgQKeyB, 0x77
		buf := make([]byte, 256)
		n, err := wire.Build(buf, &f, []byte("hi"))
		require.NoError(t, err)
		p := new(wire.Packet)
		require.NoError(t, p.Parse(buf[:n]))
		return p
	}
	b.qp.HandlePacket(now, build(bth.UDSendOnly, 5))
	assert.Equal(t, uint64(1), b.qp.Counters().Load(qp.CounterDroppedNoRecvWQE))
	b.qp.HandlePacket(now, build(bth.RCSendOnly, 5))
	assert.Equal(t, uint64(1), b.qp.Counters().Load(qp.CounterBadHdr))
	dst := dgReg(b, make([]byte, 4096), mr.LocalWrite)
	for i := range 3 {
		require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{dst.at(0, 4096)}}))
	}
	for _, psn := range []bth.PSN{9, 3, 0xffffff} {
		b.qp.HandlePacket(now, build(bth.UDSendOnly, psn))
	}
	wcs := recvWCs(b)
	require.Len(t, wcs, 3)
	for _, wc := range wcs {
		assert.Equal(t, cq.StatusSuccess, wc.Status)
		assert.Equal(t, uint32(0x77), wc.SrcQP)
	}
	_, ok := b.qp.NextPacket(now, b.buf)
	assert.False(t, ok, "no ACK, no NAK")
}

// ucMsg is one message of a UC test: a SEND or WRITE of n bytes.
type ucMsg struct {
	op qp.WROpcode
	n  int
}

// TestUC_Delivery: UC SEND and WRITE (with immediate), one and several
// packets, with no ACK (IBA 9.8): the sender completes each WR once it is
// on the wire, the receiver gets the data and the completions of WRs that
// consume a receive WQE.
func TestUC_Delivery(t *testing.T) {
	tests := []struct {
		name   string
		op     qp.WROpcode
		n      int
		recvWC bool
		ops    []bth.Opcode
	}{
		{"send-only", qp.WRSend, 100, true, []bth.Opcode{bth.UCSendOnly}},
		{"send-3", qp.WRSend, 2500, true, []bth.Opcode{bth.UCSendFirst, bth.UCSendMiddle, bth.UCSendLast}},
		{"send-imm-2", qp.WRSendWithImm, 2048, true, []bth.Opcode{bth.UCSendFirst, bth.UCSendLastWithImmediate}},
		{"write-only", qp.WRRDMAWrite, 1024, false, []bth.Opcode{bth.UCRDMAWriteOnly}},
		{"write-3", qp.WRRDMAWrite, 3000, false, []bth.Opcode{bth.UCRDMAWriteFirst, bth.UCRDMAWriteMiddle, bth.UCRDMAWriteLast}},
		{"write-imm-only", qp.WRRDMAWriteWithImm, 10, true, []bth.Opcode{bth.UCRDMAWriteOnlyWithImmediate}},
		{"write-imm-2", qp.WRRDMAWriteWithImm, 1500, true, []bth.Opcode{bth.UCRDMAWriteFirst, bth.UCRDMAWriteLastWithImmediate}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := newDgPair(t, qp.TypeUC)
			a, b := pr.a, pr.b
			var ops []bth.Opcode
			a.drop = func(p []byte) bool {
				var w wire.Packet
				require.NoError(t, w.Parse(p))
				ops = append(ops, w.Opcode())
				assert.False(t, w.BTH.AckReq())
				return false
			}
			data := testutil.Pattern(3, tc.n)
			src := dgReg(a, append([]byte(nil), data...), mr.LocalWrite)
			dst := dgReg(b, make([]byte, 4096), mr.LocalWrite|mr.RemoteWrite)
			rbuf := dgReg(b, make([]byte, 4096), mr.LocalWrite)
			require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 5, SGL: []qp.SGE{rbuf.at(0, 4096)}}))
			require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: tc.op, Flags: qp.SendSignaled, Imm: 42,
				SGL: []qp.SGE{src.at(0, tc.n)}, RemoteAddr: dst.IOVA(), RKey: dst.RKey()}))
			require.NoError(t, pr.run(func() bool { return len(sendWCs(a)) == 1 && pr.ab.Pending() == 0 }, time.Second), pr)
			_ = pr.run(func() bool { return false }, time.Millisecond)
			assert.Equal(t, tc.ops, ops)
			assert.Equal(t, cq.StatusSuccess, sendWCs(a)[0].Status)
			wcs := recvWCs(b)
			if tc.recvWC {
				require.Len(t, wcs, 1)
				assert.Equal(t, cq.StatusSuccess, wcs[0].Status)
				assert.Equal(t, uint32(tc.n), wcs[0].ByteLen)
				if tc.op.String() != "SEND" && tc.op != qp.WRRDMAWrite {
					assert.Equal(t, uint32(42), wcs[0].Imm)
				}
			} else {
				assert.Empty(t, wcs)
			}
			got := rbuf.Bytes()
			if tc.op == qp.WRRDMAWrite || tc.op == qp.WRRDMAWriteWithImm {
				got = dst.Bytes()
			}
			assert.True(t, bytes.Equal(data, got[:tc.n]), "data")
			assert.Zero(t, b.sent, "no ACK on the wire")
		})
	}
}

// TestUC_GapDropsMessage: IBA 9.8 — a PSN gap drops the rest of the
// message; nothing of it completes; the receiver resynchronises on the next
// FIRST or ONLY, whatever its PSN, and the receive WQE the dropped SEND was
// filling takes the next SEND from its start.
func TestUC_GapDropsMessage(t *testing.T) {
	tests := []struct {
		name    string
		msgs    []ucMsg
		dropIdx []int // packets (from 0, over the whole run) lost on the wire
		got     []int // the messages that arrive, by index, in completion order
		ooo     uint64
		dropped uint64
	}{
		{"middle", []ucMsg{{qp.WRSend, 3000}, {qp.WRSend, 2000}}, []int{1}, []int{1}, 1, 1},
		{"last", []ucMsg{{qp.WRSend, 3000}, {qp.WRSend, 2000}}, []int{2}, []int{1}, 1, 0},
		{"first", []ucMsg{{qp.WRSend, 3000}, {qp.WRSend, 100}}, []int{0}, []int{1}, 1, 2},
		{"middle-then-only", []ucMsg{{qp.WRSend, 3000}, {qp.WRSend, 10}, {qp.WRSend, 20}}, []int{1}, []int{1, 2}, 1, 1},
		{"write-middle-then-send", []ucMsg{{qp.WRRDMAWriteWithImm, 3000}, {qp.WRSend, 30}}, []int{1}, []int{1}, 1, 1},
		{"two-gaps", []ucMsg{{qp.WRSend, 3000}, {qp.WRSend, 3000}, {qp.WRSend, 5}}, []int{1, 4}, []int{2}, 2, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := newDgPair(t, qp.TypeUC)
			a, b := pr.a, pr.b
			k := 0
			a.drop = func([]byte) bool {
				defer func() { k++ }()
				for _, d := range tc.dropIdx {
					if d == k {
						return true
					}
				}
				return false
			}
			dst := dgReg(b, make([]byte, 4096), mr.LocalWrite|mr.RemoteWrite)
			rbuf := dgReg(b, make([]byte, 4*4096), mr.LocalWrite)
			for i := range 4 {
				require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: uint64(100 + i),
					SGL: []qp.SGE{rbuf.at(i*4096, 4096)}}))
			}
			for i, m := range tc.msgs {
				src := dgReg(a, testutil.Pattern(uint64(i+1), m.n), mr.LocalWrite)
				require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: m.op, Flags: qp.SendSignaled,
					Imm: uint32(i), SGL: []qp.SGE{src.at(0, m.n)}, RemoteAddr: dst.IOVA(), RKey: dst.RKey()}))
			}
			require.NoError(t, pr.run(func() bool { return len(sendWCs(a)) == len(tc.msgs) && pr.ab.Pending() == 0 }, time.Second), pr)
			_ = pr.run(func() bool { return false }, time.Millisecond)
			wcs := recvWCs(b)
			require.Len(t, wcs, len(tc.got))
			for j, mi := range tc.got {
				wc := wcs[j]
				assert.Equal(t, cq.StatusSuccess, wc.Status)
				assert.Equal(t, uint64(100+j), wc.WRID, "the dropped message's WQE is reused")
				assert.Equal(t, uint32(tc.msgs[mi].n), wc.ByteLen)
				off := j * 4096
				assert.Equal(t, testutil.Pattern(uint64(mi+1), tc.msgs[mi].n), rbuf.Bytes()[off:off+tc.msgs[mi].n])
			}
			assert.Equal(t, tc.ooo, b.qp.Counters().Load(qp.CounterOutOfSeqRequest), "gaps")
			assert.Equal(t, tc.dropped, b.qp.Counters().Load(qp.CounterUCDroppedPkts), "packets dropped")
			assert.Equal(t, qp.StateRTS, b.qp.State())
			assert.Zero(t, b.sent)
		})
	}
}

// TestUC_PostChecks: UC has no READ, atomics or SEND with invalidate (IBA
// 9.8; ibv_post_send returns EINVAL).
func TestUC_PostChecks(t *testing.T) {
	pr := newDgPair(t, qp.TypeUC)
	for _, op := range []qp.WROpcode{qp.WRRDMARead, qp.WRAtomicCmpAndSwp, qp.WRAtomicFetchAdd, qp.WRSendWithInv} {
		err := pr.a.qp.PostSend(&qp.SendWR{Opcode: op})
		assert.ErrorIs(t, err, qp.ErrUnsupportedOp, "%v", op)
		assert.ErrorIs(t, err, qp.ErrInvalidArg, "%v", op)
	}
	assert.NoError(t, pr.a.qp.PostSend(&qp.SendWR{Opcode: qp.WRRDMAWrite}))
}

// TestUC_Drops: UC responder errors are class D drops (rxe_responder's
// UC arms): no receive WQE, WRITE without remote write access, a bad rkey —
// no NAK, the QP stays in RTS, the next message arrives.
func TestUC_Drops(t *testing.T) {
	tests := []struct {
		name    string
		noWQE   bool
		access  mr.AccessFlags
		badRKey bool
		counter qp.Counter
	}{
		{"no-wqe", true, mr.LocalWrite | mr.RemoteWrite, false, qp.CounterDroppedNoRecvWQE},
		{"write-not-enabled", false, mr.LocalWrite, false, qp.CounterRespOpNotEnabledErr},
		{"bad-rkey", false, mr.LocalWrite | mr.RemoteWrite, true, qp.CounterRkeyViolation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := newDgPair(t, qp.TypeUC)
			a, b := pr.a, pr.b
			require.NoError(t, b.qp.Modify(&qp.Attr{State: qp.StateRTS, AccessFlags: tc.access}, qp.AttrState|qp.AttrAccessFlags))
			dst := dgReg(b, make([]byte, 4096), mr.LocalWrite|mr.RemoteWrite)
			src := dgReg(a, testutil.Pattern(1, 2048), mr.LocalWrite)
			rkey := dst.RKey()
			if tc.badRKey {
				rkey ^= 0x100
			}
			first := qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{src.at(0, 2048)},
				RemoteAddr: dst.IOVA(), RKey: rkey}
			if tc.noWQE {
				first.Opcode = qp.WRSend
			}
			require.NoError(t, a.qp.PostSend(&first))
			require.NoError(t, pr.run(func() bool { return pr.ab.Pending() == 0 && len(sendWCs(a)) == 0 && a.sent == 2 }, time.Second), pr)
			_ = pr.run(func() bool { return false }, time.Millisecond)
			assert.Equal(t, uint64(1), b.qp.Counters().Load(tc.counter))
			assert.Equal(t, uint64(1), b.qp.Counters().Load(qp.CounterUCDroppedPkts), "the LAST after the error")
			assert.Equal(t, qp.StateRTS, b.qp.State())
			assert.Empty(t, recvWCs(b))
			// The next message gets through.
			rbuf := dgReg(b, make([]byte, 4096), mr.LocalWrite)
			require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 7, SGL: []qp.SGE{rbuf.at(0, 4096)}}))
			require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRSend, SGL: []qp.SGE{src.at(0, 5)}}))
			require.NoError(t, pr.run(func() bool { return len(recvWCs(b)) == 1 }, time.Second), pr)
			assert.Equal(t, cq.StatusSuccess, recvWCs(b)[0].Status)
			assert.Zero(t, b.sent)
		})
	}
}

// TestC10_TransitionsPerType: IBA 10.2.4's attribute table (the kernel's
// qp_state_table, ib_modify_qp_is_ok) per QP type.
func TestC10_TransitionsPerType(t *testing.T) {
	init := qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort
	rcRTR := qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
	ucRTR := qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
	rcRTS := qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
	tests := []struct {
		name  string
		typ   qp.Type
		steps []qp.AttrMask // applied in order: INIT, RTR, RTS
		fail  int           // index of the step that must fail with ErrInvalidAttr, -1 none
	}{
		{"ud-ok", qp.TypeUD, []qp.AttrMask{init | qp.AttrQKey, qp.AttrState, qp.AttrState | qp.AttrSQPSN}, -1},
		{"ud-init-needs-qkey", qp.TypeUD, []qp.AttrMask{init}, 0},
		{"ud-init-no-access", qp.TypeUD, []qp.AttrMask{init | qp.AttrQKey | qp.AttrAccessFlags}, 0},
		{"ud-rtr-no-av", qp.TypeUD, []qp.AttrMask{init | qp.AttrQKey, qp.AttrState | qp.AttrAV}, 1},
		{"ud-rtr-no-mtu", qp.TypeUD, []qp.AttrMask{init | qp.AttrQKey, qp.AttrState | qp.AttrPathMTU}, 1},
		{"ud-rtr-qkey", qp.TypeUD, []qp.AttrMask{init | qp.AttrQKey, qp.AttrState | qp.AttrQKey, qp.AttrState | qp.AttrSQPSN | qp.AttrQKey}, -1},
		{"ud-rts-needs-sqpsn", qp.TypeUD, []qp.AttrMask{init | qp.AttrQKey, qp.AttrState, qp.AttrState}, 2},
		{"ud-rts-no-timeout", qp.TypeUD, []qp.AttrMask{init | qp.AttrQKey, qp.AttrState, qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout}, 2},
		{"uc-ok", qp.TypeUC, []qp.AttrMask{init | qp.AttrAccessFlags, ucRTR, qp.AttrState | qp.AttrSQPSN}, -1},
		{"uc-init-no-qkey", qp.TypeUC, []qp.AttrMask{init | qp.AttrAccessFlags | qp.AttrQKey}, 0},
		{"uc-rtr-no-rd-atomic", qp.TypeUC, []qp.AttrMask{init | qp.AttrAccessFlags, rcRTR}, 1},
		{"uc-rtr-needs-dest", qp.TypeUC, []qp.AttrMask{init | qp.AttrAccessFlags, ucRTR &^ qp.AttrDestQPN}, 1},
		{"uc-rts-no-retry", qp.TypeUC, []qp.AttrMask{init | qp.AttrAccessFlags, ucRTR, rcRTS}, 2},
		{"rc-rtr-needs-rd-atomic", qp.TypeRC, []qp.AttrMask{init | qp.AttrAccessFlags, ucRTR}, 1},
		{"rc-rts-needs-retry", qp.TypeRC, []qp.AttrMask{init | qp.AttrAccessFlags, rcRTR, qp.AttrState | qp.AttrSQPSN}, 2},
	}
	states := []qp.State{qp.StateInit, qp.StateRTR, qp.StateRTS}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, "A", 0x11, "10.0.0.1:1", "10.0.0.2:1")
			retype(t, e, tc.typ, 0)
			for i, m := range tc.steps {
				a := qp.Attr{State: states[i], PathMTU: qp.MTU1024, DestQPN: 0x22,
					AV: qp.AddressVector{Remote: netip.MustParseAddr("10.0.0.2")}, QKey: 7}
				err := e.qp.Modify(&a, m)
				if i == tc.fail {
					assert.ErrorIs(t, err, qp.ErrInvalidAttr, "%v", m)
					return
				}
				require.NoError(t, err, "step %d %v", i, m)
			}
			assert.Equal(t, qp.StateRTS, e.qp.State())
		})
	}
	// RESET → RTS is no transition, for any type.
	for _, typ := range []qp.Type{qp.TypeRC, qp.TypeUC, qp.TypeUD} {
		e := newEndpoint(t, "A", 0x11, "10.0.0.1:1", "10.0.0.2:1")
		retype(t, e, typ, 0)
		q := e.qp
		err := q.Modify(&qp.Attr{State: qp.StateRTS}, qp.AttrState)
		assert.True(t, errors.Is(err, qp.ErrInvalidTransition), "%v RESET → RTS", typ)
	}
}

// TestUDUC_Types: qp.New takes the three types; a UD QP's MTU is its
// port's.
func TestUDUC_Types(t *testing.T) {
	e := newEndpoint(t, "A", 0x11, "10.0.0.1:1", "10.0.0.2:1")
	for _, typ := range []qp.Type{qp.TypeRC, qp.TypeUC, qp.TypeUD} {
		retype(t, e, typ, qp.MTU4096)
		assert.Equal(t, typ, e.qp.Type())
	}
	_, err := qp.New(qp.Config{QPN: 0x11, Type: 9, MRs: e.tbl, PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq})
	assert.ErrorIs(t, err, qp.ErrInvalidConfig)
	readyUD(t, e.qp, 1, 0)
	src := dgReg(e, make([]byte, 4096), mr.LocalWrite)
	assert.NoError(t, e.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{src.at(0, 4096)},
		UD: qp.UDDest{AH: qp.AddressVector{Remote: netip.MustParseAddr("10.0.0.2")}, RemoteQPN: 5}}))
	n, ok := e.qp.NextPacket(testutil.Epoch(), e.buf)
	require.True(t, ok)
	av, ok := e.qp.PacketAH()
	require.True(t, ok)
	assert.Equal(t, netip.MustParseAddr("10.0.0.2"), av.Remote)
	assert.Equal(t, 12+8+4096+4, n)
}

// TestAllocsUD pins the UD data path at 0 allocations per packet: post,
// NextPacket of a 1 KiB SEND with immediate, HandlePacketIP into a receive
// WR with its GRH, completions.
func TestAllocsUD(t *testing.T) {
	a := newEndpoint(t, "A", 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
	b := newEndpoint(t, "B", 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
	retype(t, a, qp.TypeUD, qp.MTU1024)
	retype(t, b, qp.TypeUD, qp.MTU1024)
	readyUD(t, a.qp, dgQKeyA, 0)
	readyUD(t, b.qp, dgQKeyB, 0)
	src := dgReg(a, make([]byte, 1024), mr.LocalWrite)
	dst := dgReg(b, make([]byte, 2048), mr.LocalWrite)
	ip := &qp.IPInfo{Src: a.self.Addr(), Dst: b.self.Addr(), TTL: 64}
	wr := qp.SendWR{Opcode: qp.WRSendWithImm, Flags: qp.SendSignaled, SGL: []qp.SGE{src.at(0, 1024)}, UD: udTo(b, dgQKeyB)}
	rwr := qp.RecvWR{SGL: []qp.SGE{dst.at(0, qp.GRHLen+1024)}}
	var p wire.Packet
	var wcs [4]cq.Completion
	now := testutil.Epoch()
	got := 0
	step := func() {
		if b.qp.PostRecv(&rwr) != nil || a.qp.PostSend(&wr) != nil {
			t.Fatal("post")
		}
		n, ok := a.qp.NextPacket(now, a.buf)
		if !ok || p.Parse(a.buf[:n]) != nil {
			t.Fatal("no packet")
		}
		b.qp.HandlePacketIP(now, &p, ip)
		got += b.rcq.Poll(wcs[:])
		a.scq.Poll(wcs[:])
	}
	step()
	assert.Zero(t, testing.AllocsPerRun(200, step))
	assert.Equal(t, 202, got)
}
