package roce_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/wire"
)

// TestIntakeOrder pins the order of the receive path's checks, rxe_rcv's:
// a datagram too short for a BTH and an ICRC is a bad header; then the
// destination QP must exist, the source be its peer (check_addr) and the
// ICRC verify, and only then does a header that failed to parse count as
// a bad header, on the QP too. The headers are parsed once, before any of
// these checks (rxBatch.process), so the order must come from where the
// parse error is looked at, which this test fixes.
func TestIntakeOrder(t *testing.T) {
	n := mem.NewNetwork()
	d, err := roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))})
	require.NoError(t, err)
	defer d.Close()
	q, err := d.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	p := newRawPeer(t, n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")), d.LocalAddr(), 0x118)
	defer p.close()
	require.NoError(t, q.Connect(p.info(), roce.ConnectOptions{}))
	stranger := n.Attach(netip.MustParseAddrPort("10.0.0.3:4791"))
	defer stranger.Close()

	// send builds an empty SEND ONLY to dst, lets edit break it so that
	// its parse fails with perr, seals it from l's address (or leaves the
	// ICRC zero) and sends it from l.
	send := func(l link.Link, dst roce.QPN, edit func(bth.Header), perr error, sealed bool) {
		f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: dst, PSN: p.psn}}
		buf := make([]byte, 256)
		k, err := wire.Build(buf, &f, nil)
		require.NoError(t, err)
		pkt := buf[:k]
		edit(bth.Header(pkt[:bth.Size]))
		var wp wire.Packet
		require.ErrorIs(t, wp.Parse(pkt), perr)
		if sealed {
			seal(pkt, l.LocalAddr(), d.LocalAddr())
		}
		_, err = l.Send([]link.Datagram{{Buf: pkt, Dst: d.LocalAddr()}})
		require.NoError(t, err)
	}
	badPad := func(h bth.Header) { h.SetPadCount(3) }   // a pad beyond the empty payload
	unknown := func(h bth.Header) { h.SetOpcode(0x1f) } // no RC opcode 0x1F
	other := q.QPN() ^ 1

	type counts struct{ badHdr, noQP, badAddr, badICRC, qpBadHdr, qpBadICRC uint64 }
	tests := []struct {
		name string
		send func()
		want counts
	}{
		{"shorter than BTH and ICRC", func() {
			_, err := p.l.Send([]link.Datagram{{Buf: make([]byte, bth.Size+3), Dst: d.LocalAddr()}})
			require.NoError(t, err)
		}, counts{badHdr: 1}},
		{"bad pad to no QP", func() { send(p.l, other, badPad, wire.ErrBadPad, true) }, counts{noQP: 1}},
		{"unknown opcode from a stranger", func() { send(stranger, q.QPN(), unknown, wire.ErrUnknownOpcode, true) }, counts{badAddr: 1}},
		{"unknown opcode with a bad ICRC", func() { send(p.l, q.QPN(), unknown, wire.ErrUnknownOpcode, false) }, counts{badICRC: 1, qpBadICRC: 1}},
		{"unknown opcode from the peer", func() { send(p.l, q.QPN(), unknown, wire.ErrUnknownOpcode, true) }, counts{badHdr: 1, qpBadHdr: 1}},
		{"bad pad from the peer", func() { send(p.l, q.QPN(), badPad, wire.ErrBadPad, true) }, counts{badHdr: 1, qpBadHdr: 1}},
	}
	st := d.Stats()
	read := func() counts {
		c := q.Counters()
		return counts{st.BadHdr.Load(), st.DroppedNoQP.Load(), st.BadAddr.Load(), st.BadICRC.Load(),
			c.Load(roce.CounterBadHdr), c.Load(roce.CounterBadICRC)}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, rx := read(), st.RxPackets.Load()
			tc.send()
			require.Eventually(t, func() bool { return st.RxPackets.Load() == rx+1 }, 5*time.Second, time.Millisecond)
			after := read()
			got := counts{after.badHdr - before.badHdr, after.noQP - before.noQP, after.badAddr - before.badAddr,
				after.badICRC - before.badICRC, after.qpBadHdr - before.qpBadHdr, after.qpBadICRC - before.qpBadICRC}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestBatchProcessedInArrivalOrder: datagrams of one received batch are
// processed in the order they arrived, across shards, as rxe processes
// its packets: UD SENDs to QPs in different shards of B, sharing one CQ,
// complete in the order they were sent. Grouping a batch by shard would
// complete them shard by shard, and a DREQ to QP1 could overtake the ACK
// that came before it.
func TestBatchProcessedInArrivalOrder(t *testing.T) {
	n := mem.NewNetwork()
	gl := &recvGate{Link: n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")), gate: make(chan struct{})}
	b, err := roce.Open(roce.Config{Link: gl, Shards: 2})
	require.NoError(t, err)
	defer b.Close()
	a := openTyped(t, n, "10.0.0.1:4791", roce.UD)
	const qkey = 0x5151
	require.NoError(t, a.qp.Ready(qkey))
	rcq, err := b.CreateCQ(64)
	require.NoError(t, err)
	// Four UD QPs on B, two in each shard (QPN mod 2).
	var byShard [2][]*roce.QP
	for len(byShard[0]) < 2 || len(byShard[1]) < 2 {
		q, err := b.CreateQP(roce.QPConfig{Type: roce.UD, SendCQ: rcq, RecvCQ: rcq})
		require.NoError(t, err)
		k := q.QPN() % 2
		if len(byShard[k]) == 2 {
			continue
		}
		require.NoError(t, q.Ready(qkey))
		byShard[k] = append(byShard[k], q)
	}
	// Sent in the order shard 1, shard 0, shard 1, shard 0.
	order := []*roce.QP{byShard[1][0], byShard[0][0], byShard[1][1], byShard[0][1]}
	buf := make([]byte, len(order)*256)
	rm, err := b.RegisterMR(nil, buf, mr.LocalWrite)
	require.NoError(t, err)
	for i, q := range order {
		require.NoError(t, q.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{rm.SGE(i*256, 256)}}))
	}
	sm, err := a.dev.RegisterMR(nil, make([]byte, 8), mr.LocalWrite)
	require.NoError(t, err)
	for i, q := range order {
		ah := roce.AH{Addr: b.LocalAddr().Addr(), QPN: q.QPN(), QKey: qkey}
		require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled,
			SGL: []qp.SGE{sm.SGE(0, 8)}, UD: ah.Dest()}))
		require.Equal(t, cq.StatusSuccess, waitOne(t, a.scq).Status)
	}
	close(gl.gate) // B's first receive takes all four
	for i := range order {
		wc := waitOne(t, rcq)
		require.Equal(t, cq.StatusSuccess, wc.Status)
		require.Equal(t, uint64(i), wc.WRID, "completion %d", i)
	}
}

// TestDestroyedQPDropsAfterTraffic: a QP destroyed right after it received
// a stream takes no more of its packets (the shard remembers the last QP a
// packet went to): they are dropped as for a QPN the device does not have,
// and its region is not written.
func TestDestroyedQPDropsAfterTraffic(t *testing.T) {
	a, b, src, dst := writePair(t)
	writeByte(t, a, src, dst, 1)
	writeByte(t, a, src, dst, 2)
	require.NoError(t, b.qp.Destroy())
	before := b.dev.Stats().DroppedNoQP.Load()
	require.NoError(t, src.WriteAt([]byte{3}, src.IOVA()+63))
	require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 3, Opcode: qp.WRRDMAWrite,
		SGL: []qp.SGE{src.SGE(0, 64)}, RemoteAddr: dst.IOVA(), RKey: dst.RKey()}))
	require.Eventually(t, func() bool { return b.dev.Stats().DroppedNoQP.Load() > before },
		10*time.Second, time.Millisecond, "the WRITE to the destroyed QP was not dropped")
	var last [1]byte
	require.NoError(t, dst.ReadAt(last[:], dst.IOVA()+63))
	assert.Equal(t, byte(2), last[0], "the destroyed QP's region was written")
}

// recvGate holds its first Recv until gate is closed, so that what is
// sent meanwhile arrives as one batch.
type recvGate struct {
	*mem.Link
	gate chan struct{}
}

func (g *recvGate) Recv(dgs []link.Datagram) (int, error) {
	<-g.gate
	return g.Link.Recv(dgs)
}
