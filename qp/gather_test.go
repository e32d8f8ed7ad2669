package qp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// gatherPair is two QPs in RTS (path MTU 4096) with the same WRs posted,
// one sending with NextPacket and one with NextPacketGather, so their
// packets can be compared byte for byte.
func gatherPair(t *testing.T, wrs func(e *endpoint) []qp.SendWR) (copied, gathered *endpoint) {
	t.Helper()
	p := defaultParams()
	p.mtu = qp.MTU4096
	for i := range 2 {
		e := newEndpoint(t, "A", 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
		peer := newEndpoint(t, "B", 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
		connect(t, e, peer, p, p.psnA, p.psnB)
		for _, wr := range wrs(e) {
			require.NoError(t, e.qp.PostSend(&wr))
		}
		if i == 0 {
			copied = e
		} else {
			gathered = e
		}
	}
	return copied, gathered
}

// TestNextPacketGatherSameBytes checks that the packets NextPacketGather
// describes — headers and trailer in the buffer, the payload in its region
// — are the packets NextPacket builds, for WRITE, WRITE with immediate and
// SEND of odd lengths (pad), a payload spanning two SGEs (copied: *p is
// zero), payloads shorter than qp.MinGatherLen (copied) and inline data
// (copied).
func TestNextPacketGatherSameBytes(t *testing.T) {
	src := testutil.Pattern(7, 16384)
	wrs := func(e *endpoint) []qp.SendWR {
		r := e.reg(src, mr.LocalWrite)
		sge := func(off, n int) qp.SGE {
			return qp.SGE{Addr: r.IOVA() + uint64(off), Length: uint32(n), LKey: r.LKey()}
		}
		return []qp.SendWR{
			{WRID: 1, Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{sge(1, 9000)}, RemoteAddr: 0x1000, RKey: 0x1234},
			{WRID: 2, Opcode: qp.WRRDMAWriteWithImm, Imm: 0xabcd, SGL: []qp.SGE{sge(3, 1027)}, RemoteAddr: 0x1000, RKey: 0x1234},
			{WRID: 3, Opcode: qp.WRSend, SGL: []qp.SGE{sge(0, 1), sge(100, 6000)}},
			{WRID: 4, Opcode: qp.WRSend, Flags: qp.SendInline, SGL: []qp.SGE{sge(5, 50)}},
			{WRID: 5, Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{sge(7, 1023)}, RemoteAddr: 0x1000, RKey: 0x1234},
		}
	}
	c, g := gatherPair(t, wrs)
	now := testutil.Epoch()
	pinned := 0
	for i := 0; ; i++ {
		n, ok := c.qp.NextPacket(now, c.buf)
		var p qp.TxPayload
		gbuf := make([]byte, len(g.buf))
		gn, gok := g.qp.NextPacketGather(now, gbuf, &p)
		require.Equal(t, ok, gok, "packet %d", i)
		if !ok {
			break
		}
		got := gbuf[:gn]
		if p.Region != nil {
			pinned++
			require.GreaterOrEqual(t, p.At, 12, "after the BTH")
			require.GreaterOrEqual(t, len(p.Data), qp.MinGatherLen)
			got = append(append(append([]byte{}, gbuf[:p.At]...), p.Data...), gbuf[p.At:gn]...)
			p.Region.Release()
		} else {
			assert.Zero(t, p, "packet %d: whole in its buffer", i)
		}
		require.Equal(t, c.buf[:n], got, "packet %d", i)
	}
	// WRITE: 3 packets, the last (808 bytes) copied; WRITE with
	// immediate: 1 (1027 bytes, pad 1); SEND: its first packet spans both
	// SGEs, its second (1905 bytes, pad 3) lies in the second; inline and
	// the 1023-byte WRITE: copied.
	assert.Equal(t, 4, pinned)
}

// TestNextPacketGatherPinHoldsDeregister checks that a gathered payload
// stays registered memory until the pin is released: Deregister waits for
// it, and the next packet after Deregister fails LOC_PROT_ERR instead of
// reading the buffer.
func TestNextPacketGatherPinHoldsDeregister(t *testing.T) {
	var r *mr.Region
	wrs := func(e *endpoint) []qp.SendWR {
		r = e.reg(testutil.Pattern(1, 16384), mr.LocalWrite)
		return []qp.SendWR{{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{{Addr: r.IOVA(), Length: 16384, LKey: r.LKey()}}, RemoteAddr: 0x1000, RKey: 0x1234}}
	}
	_, g := gatherPair(t, wrs)
	now := testutil.Epoch()
	var p qp.TxPayload
	_, ok := g.qp.NextPacketGather(now, g.buf, &p)
	require.True(t, ok)
	require.Equal(t, r, p.Region)
	done := make(chan error, 1)
	go func() { done <- g.tbl.Deregister(r) }()
	require.Eventually(t, func() bool { return !r.Valid() }, time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Deregister returned (%v) while a packet's payload was pinned", err)
	case <-time.After(20 * time.Millisecond):
	}
	assert.Equal(t, testutil.Pattern(1, 16384)[:len(p.Data)], p.Data, "still readable while pinned")
	p.Region.Release()
	require.NoError(t, <-done)

	_, ok = g.qp.NextPacketGather(now, g.buf, &p)
	require.False(t, ok)
	assert.Nil(t, p.Region)
	wcs := g.poll()
	require.Len(t, wcs, 1)
	assert.Equal(t, cq.StatusLocProtErr, wcs[0].Status)
}

// TestNextPacketGatherInvalidated checks that a region invalidated after
// the WR was posted is not pinned: the WR completes LOC_PROT_ERR, as with
// the copy.
func TestNextPacketGatherInvalidated(t *testing.T) {
	var r *mr.Region
	wrs := func(e *endpoint) []qp.SendWR {
		var err error
		r, err = e.tbl.Register(e.pd, mr.RegisterConfig{Buf: make([]byte, 4096), Access: mr.LocalWrite, Invalidatable: true})
		require.NoError(t, err)
		return []qp.SendWR{{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled,
			SGL: []qp.SGE{{Addr: r.IOVA(), Length: 4096, LKey: r.LKey()}}}}
	}
	_, g := gatherPair(t, wrs)
	require.NoError(t, g.tbl.Invalidate(g.pd, r.LKey()))
	var p qp.TxPayload
	_, ok := g.qp.NextPacketGather(testutil.Epoch(), g.buf, &p)
	require.False(t, ok)
	assert.Nil(t, p.Region)
	wcs := g.poll()
	require.Len(t, wcs, 1)
	assert.Equal(t, cq.StatusLocProtErr, wcs[0].Status)
	require.NoError(t, g.tbl.Deregister(r), "no pin left behind")
}

// TestLastRegionRechecked checks that the region a QP remembers from its
// last lkey and rkey lookup is checked again before it is used: a WRITE
// from a region deregistered since the last one fails LOC_PROT_ERR, and a
// WRITE into one answers NAK remote access error, as through the table.
func TestLastRegionRechecked(t *testing.T) {
	t.Run("requester", func(t *testing.T) {
		p := defaultParams()
		h := newHand(t, p)
		src := h.e.reg(make([]byte, 64), mr.LocalWrite)
		write := func(id uint64) {
			require.NoError(t, h.e.qp.PostSend(&qp.SendWR{WRID: id, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL: []qp.SGE{src.SGE(0, 8)}, RemoteAddr: 0x1000, RKey: 0x1234}))
		}
		write(1)
		require.Len(t, h.drain(), 1)
		h.inject(h.ack(aeth.ACKUnlimited, p.psnA, 1))
		require.NoError(t, h.e.tbl.Deregister(src))
		write(2)
		assert.Empty(t, h.drain(), "nothing sent from a deregistered region")
		wcs := h.e.poll()
		require.Len(t, wcs, 2)
		assert.Equal(t, cq.StatusSuccess, wcs[0].Status)
		assert.Equal(t, cq.StatusLocProtErr, wcs[1].Status)
	})
	t.Run("responder", func(t *testing.T) {
		p := defaultParams()
		h := newHand(t, p)
		dst := h.e.reg(make([]byte, 64), allAccess)
		h.inject(h.reqRETH(bth.RCRDMAWriteOnly, p.psnB, true, dst.IOVA(), dst.RKey(), 8, make([]byte, 8)))
		h.expectOne(aeth.ACKUnlimited, p.psnB, 1)
		require.NoError(t, h.e.tbl.Deregister(dst))
		h.inject(h.reqRETH(bth.RCRDMAWriteOnly, p.psnB.Next(), true, dst.IOVA(), dst.RKey(), 8, make([]byte, 8)))
		h.expectOne(aeth.NAKRemoteAccessError, p.psnB.Next(), 1)
	})
}
