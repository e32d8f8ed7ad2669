package qp_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// handOver moves every packet from's QP has now to to's QP, ICRC sealed
// and parsed as a device would, without letting to's QP send anything
// back; it returns the opcodes moved.
func handOver(t *testing.T, from, to *endpoint) []bth.Opcode {
	t.Helper()
	now := testutil.Epoch()
	var ops []bth.Opcode
	for {
		n, ok := from.qp.NextPacket(now, from.buf)
		if !ok {
			return ops
		}
		pkt := from.buf[:n]
		var ph [48]byte
		ip, udp := rocev2.PseudoHeaders(&ph, from.self, netip.AddrPortFrom(to.self.Addr(), rocev2.UDPPort), 0, n)
		rocev2.PutICRC(pkt[n-4:], rocev2.ComputeICRC(ip, udp, pkt[:n-4]))
		var p wire.Packet
		require.NoError(t, p.Parse(pkt))
		ops = append(ops, p.Opcode())
		to.qp.HandlePacket(now, &p)
	}
}

// A responder that leaves RTS with an ACK still queued sends it: the
// request was executed and its receive completion may already have been
// polled, and rxe acknowledges in the pass that completes the receive.
// Before, ERR dropped the queued ACK, and a goroce ibv_rc_pingpong client
// that closed its device right after its last receive completion left
// rxe's server retrying forever (retry_cnt 7 is infinite on rxe): the
// interop cell hung for 90 s. A READ response is not sent from ERR, and
// the ACK queued behind it is dropped with it (it would acknowledge the
// READ's PSNs).
func TestQueuedACKLeavesFromErr(t *testing.T) {
	for _, leave := range []string{"modify-err", "destroy"} {
		t.Run(leave, func(t *testing.T) {
			p := defaultParams()
			a := newEndpoint(t, "A", 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
			b := newEndpoint(t, "B", 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
			connect(t, a, b, p, p.psnA, p.psnB)
			connect(t, b, a, p, p.psnB, p.psnA)
			src := a.reg(testutil.Pattern(1, 64), 0)
			dst := make([]byte, 64)
			rdst := b.reg(dst, mr.LocalWrite)
			require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: 7, SGL: []qp.SGE{rdst.SGE(0, 64)}}))
			require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled,
				SGL: []qp.SGE{src.SGE(0, 64)}}))

			assert.Equal(t, []bth.Opcode{bth.RCSendOnly}, handOver(t, a, b))
			wcs := b.poll()
			require.Len(t, wcs, 1)
			assert.Equal(t, cq.StatusSuccess, wcs[0].Status, "the receive completed before the QP leaves RTS")
			assert.Equal(t, testutil.Pattern(1, 64), dst)

			if leave == "destroy" {
				b.qp.Destroy()
			} else {
				require.NoError(t, b.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState))
			}
			assert.Equal(t, []bth.Opcode{bth.RCAcknowledge}, handOver(t, b, a), "the queued ACK leaves from ERR")
			wcs = a.poll()
			require.Len(t, wcs, 1)
			assert.Equal(t, cq.StatusSuccess, wcs[0].Status, "the SEND is acknowledged")
			assert.Empty(t, handOver(t, b, a), "nothing more")
		})
	}

	t.Run("read-ahead", func(t *testing.T) {
		p := defaultParams()
		a := newEndpoint(t, "A", 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
		b := newEndpoint(t, "B", 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
		connect(t, a, b, p, p.psnA, p.psnB)
		connect(t, b, a, p, p.psnB, p.psnA)
		lbuf := a.reg(make([]byte, 4096), mr.LocalWrite)
		remote := b.reg(testutil.Pattern(2, 4096), mr.LocalWrite|mr.RemoteRead|mr.RemoteWrite)
		require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
			SGL: []qp.SGE{lbuf.SGE(0, 4096)}, RemoteAddr: remote.IOVA(), RKey: remote.RKey()}))
		require.NoError(t, a.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{lbuf.SGE(0, 64)}, RemoteAddr: remote.IOVA(), RKey: remote.RKey()}))
		assert.Equal(t, []bth.Opcode{bth.RCRDMAReadRequest, bth.RCRDMAWriteOnly}, handOver(t, a, b))
		require.NoError(t, b.qp.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState))
		assert.Empty(t, handOver(t, b, a), "neither the READ response nor the ACK behind it")
		assert.Empty(t, a.poll())
	})
}
