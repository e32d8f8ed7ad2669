package roce_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/wire"
)

// respPeer is a device QP connected to a rawPeer over link/mem, for
// requests crafted by hand.
type respPeer struct {
	d *roce.Device
	q *roce.QP
	p *rawPeer
	m *mr.Region
}

func newRespPeer(t *testing.T, o roce.ConnectOptions, buf []byte, access mr.AccessFlags) *respPeer {
	t.Helper()
	n := mem.NewNetwork()
	d, q, pd, _ := memDevice(t, n, "10.0.0.1:4791", roce.Config{})
	t.Cleanup(func() { d.Close() })
	p := newRawPeer(t, n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")), d.LocalAddr(), 0x118)
	t.Cleanup(p.close)
	p.psn = 0x1000
	o.MTU = qp.MTU1024
	require.NoError(t, q.Connect(p.info(), o))
	m, err := d.RegisterMR(pd, buf, access)
	require.NoError(t, err)
	return &respPeer{d: d, q: q, p: p, m: m}
}

// read returns a READ request of n bytes at off into the region, at the
// peer's next PSN; the PSN advances past the response's packets.
func (r *respPeer) read(off uint64, n uint32) link.Datagram {
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCRDMAReadRequest, PKey: 0xffff, DestQP: r.q.QPN(), PSN: r.p.psn, AckReq: true}}
	f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.m.IOVA()+off, uint32(r.m.RKey()), n
	r.p.psn = r.p.psn.Add(max(1, (n+1023)/1024))
	return link.Datagram{Buf: r.p.build(&f, nil), Dst: r.p.dev}
}

// fetchAdd returns a FETCH_ADD of add at the region's first word.
func (r *respPeer) fetchAdd(add uint64) link.Datagram {
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCFetchAdd, PKey: 0xffff, DestQP: r.q.QPN(), PSN: r.p.psn, AckReq: true}}
	f.AtomicETH.VA, f.AtomicETH.RKey, f.AtomicETH.SwapData = r.m.IOVA(), uint32(r.m.RKey()), add
	r.p.psn = r.p.psn.Next()
	return link.Datagram{Buf: r.p.build(&f, nil), Dst: r.p.dev}
}

// parse decodes what the device sent.
func parse(t *testing.T, dgs []link.Datagram) []wire.Packet {
	t.Helper()
	out := make([]wire.Packet, len(dgs))
	for i, dg := range dgs {
		require.NoError(t, out[i].Parse(dg.Buf), "packet %d", i)
	}
	return out
}

// TestOutrunResponderResources (issue 17, defect 2): two READs, or two
// FETCH_ADDs, reach a device QP with max_dest_rd_atomic 1 in one receive
// batch (link/mem hands one Send to one Recv). The second request recycles
// the only resource, but the first one's reply is still owed: both are
// answered, in PSN order, with the right data; each atomic is applied once
// and acknowledged (rxe answers every request before it takes the next).
func TestOutrunResponderResources(t *testing.T) {
	t.Run("READ", func(t *testing.T) {
		buf := make([]byte, 4096)
		for i := range buf {
			buf[i] = byte(i*7 + i>>8)
		}
		r := newRespPeer(t, roce.ConnectOptions{MaxDestRdAtomic: 1}, buf, mr.RemoteRead)
		psn := r.p.psn
		r.p.send(r.read(0, 2048), r.read(2048, 1500))
		got := parse(t, r.p.collectN(4, 5*time.Second))
		require.Equal(t, 4, len(got), "both READs answered")
		want := []struct {
			op     bth.Opcode
			psn    bth.PSN
			at, to int
		}{
			{bth.RCRDMAReadResponseFirst, psn, 0, 1024},
			{bth.RCRDMAReadResponseLast, psn.Add(1), 1024, 2048},
			{bth.RCRDMAReadResponseFirst, psn.Add(2), 2048, 3072},
			{bth.RCRDMAReadResponseLast, psn.Add(3), 3072, 3548},
		}
		for i, w := range want {
			assert.Equal(t, w.op, got[i].Opcode(), "packet %d", i)
			assert.Equal(t, w.psn, got[i].BTH.PSN(), "packet %d", i)
			assert.True(t, bytes.Equal(buf[w.at:w.to], got[i].Payload), "packet %d: data", i)
		}
		assert.Equal(t, qp.StateRTS, r.q.State())
	})
	t.Run("FETCH_ADD", func(t *testing.T) {
		buf := make([]byte, 64)
		binary.LittleEndian.PutUint64(buf, 100)
		r := newRespPeer(t, roce.ConnectOptions{MaxDestRdAtomic: 1}, buf, mr.LocalWrite|mr.RemoteAtomic)
		psn := r.p.psn
		r.p.send(r.fetchAdd(1), r.fetchAdd(10))
		got := parse(t, r.p.collectN(2, 5*time.Second))
		require.Equal(t, 2, len(got), "both atomics acknowledged")
		for i, orig := range []uint64{100, 101} {
			assert.Equal(t, bth.RCAtomicAcknowledge, got[i].Opcode(), "ack %d", i)
			assert.Equal(t, psn.Add(uint32(i)), got[i].BTH.PSN(), "ack %d", i)
			assert.True(t, got[i].AETH.Syndrome().IsACK(), "ack %d", i)
			assert.Equal(t, orig, got[i].AtomicAckETH.OrigRemData(), "ack %d", i)
		}
		word := make([]byte, 8)
		require.NoError(t, r.m.ReadAt(word, r.m.IOVA()))
		assert.Equal(t, uint64(111), binary.LittleEndian.Uint64(word), "each applied once")
		assert.Equal(t, qp.StateRTS, r.q.State())
	})
}

// TestShrinkResourcesWithRepliesQueued: SQD→SQD may set MaxDestRdAtomic,
// which reallocates the responder's resource ring, while READ replies are
// still queued. Found in review: a queued reply kept its index into the old
// ring, and a smaller ring made the engine goroutine index out of range
// (a crash of the process). The replies now go out without it.
func TestShrinkResourcesWithRepliesQueued(t *testing.T) {
	n := mem.NewNetwork()
	a := openMWSide(t, n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")))
	b := openMWSide(t, n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")))
	defer a.dev.Close()
	defer b.dev.Close()
	if err := a.qp.Connect(b.qp.Info(), roce.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	// b's replies are paced slowly, so they stay queued.
	if err := b.qp.Connect(a.qp.Info(), roce.ConnectOptions{MaxRate: 2e6}); err != nil {
		t.Fatal(err)
	}
	abuf := make([]byte, 65536)
	amr, _ := a.dev.RegisterMR(a.pd, abuf, mr.LocalWrite)
	bbuf := make([]byte, 65536)
	bmr, _ := b.dev.RegisterMR(b.pd, bbuf, mr.LocalWrite|mr.RemoteRead)
	for i := 0; i < 2; i++ {
		wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
			SGL: []qp.SGE{amr.SGE(i*32768, 32768)}, RemoteAddr: bmr.IOVA() + uint64(i*32768), RKey: bmr.RKey()}
		if err := a.qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	t.Logf("before SQD: a completions %d, b sent %d, b cc %+v", a.scq.Len(), b.dev.Stats().TxPackets.Load(), b.qp.CC())
	if err := b.qp.Modify(&qp.Attr{State: qp.StateSQD}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Modify(&qp.Attr{State: qp.StateSQD, MaxDestRdAtomic: 1}, qp.AttrState|qp.AttrMaxDestRdAtomic); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the engine sends the queued replies
	t.Logf("after: a completions %d, b sent %d, b state %v", a.scq.Len(), b.dev.Stats().TxPackets.Load(), b.qp.State())
}
