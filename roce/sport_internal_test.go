package roce

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
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
	"github.com/goroce/goroce/rocev2"
)

// seenDg is what a mem network's Deliver hook saw of one datagram.
type seenDg struct {
	op       bth.Opcode
	destQP   bth.QPN
	src      netip.AddrPort
	dscp     uint8
	ecn      uint8
	prio     uint8
	flow     uint32
	icrcGood bool
}

// TestSourcePortKernelRule: a QP picks its UDP source port as Linux does
// (rdma_get_udp_sport), so that goroce picks the ports rxe used in the
// captures of ../shared/rxe/pcaps (QPN 0x15 ↔ 0x15 → 49593 in
// write_bw_s65536.pcap, 0x11 ↔ 0x11 → 49441 in rc_pingpong.pcap); both
// directions, data and ACKs, leave from it, with the QP's DSCP, PCP and
// flow label. An explicit port or flow label overrides the rule.
func TestSourcePortKernelRule(t *testing.T) {
	tests := []struct {
		name       string
		lqpn, rqpn bth.QPN
		opts       ConnectOptions
		want       uint16
		wantFlow   uint32
	}{
		{name: "rxe write_bw 0x15", lqpn: 0x15, rqpn: 0x15, want: 49593},
		{name: "rxe rc_pingpong 0x11", lqpn: 0x11, rqpn: 0x11, want: 49441},
		{name: "asymmetric", lqpn: 0x1234, rqpn: 0xabcde, want: rocev2.ConnSourcePort(0, 0x1234, 0xabcde)},
		{name: "flow label", lqpn: 0x15, rqpn: 0x15, opts: ConnectOptions{FlowLabel: 0x12345},
			want: rocev2.SourcePort(0x12345), wantFlow: 0x12345},
		{name: "explicit port", lqpn: 0x15, rqpn: 0x15, opts: ConnectOptions{SourcePort: 50000}, want: 50000},
		{name: "traffic class and priority", lqpn: 0x11, rqpn: 0x11,
			opts: ConnectOptions{TrafficClass: 26<<2 | link.ECT1, Priority: 3}, want: 49441},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantFlow == 0 {
				tc.wantFlow = rocev2.FlowLabel(tc.lqpn, tc.rqpn)
			}
			var mu sync.Mutex
			var seen []seenDg
			net := mem.New(mem.Config{Deliver: func(dg *link.Datagram) bool {
				h, err := bth.Parse(dg.Buf)
				require.NoError(t, err)
				var ph [rocev2.PseudoHeaderLen]byte
				ip, udp := rocev2.PseudoHeaders(&ph, dg.Src, dg.Dst, dg.IPID, len(dg.Buf))
				n := len(dg.Buf) - bth.ICRCSize
				good := rocev2.ComputeICRC(ip, udp, dg.Buf[:n]) == rocev2.ReadICRC(dg.Buf[n:])
				mu.Lock()
				seen = append(seen, seenDg{op: h.Opcode(), destQP: h.DestQP(), src: dg.Src, dscp: dg.DSCP,
					ecn: dg.ECN, prio: dg.Priority, flow: dg.FlowLabel, icrcGood: good})
				mu.Unlock()
				return true
			}})
			open := func(addr string, qpn bth.QPN) (*Device, *QP) {
				d, err := Open(Config{Link: net.Attach(netip.MustParseAddrPort(addr))})
				require.NoError(t, err)
				t.Cleanup(func() { d.Close() })
				d.testQPN = func() bth.QPN { return qpn }
				q, err := d.CreateQP(QPConfig{})
				require.NoError(t, err)
				require.Equal(t, qpn, q.QPN())
				return d, q
			}
			da, a := open("10.0.0.1:4791", tc.lqpn)
			db, b := open("10.0.0.2:4791", tc.rqpn)
			require.Equal(t, uint16(4791), a.SourcePort(), "before Connect: the device's port")
			require.NoError(t, a.Connect(b.Info(), tc.opts))
			peerOpts := tc.opts
			peerOpts.Priority, peerOpts.TrafficClass = 0, 0
			require.NoError(t, b.Connect(a.Info(), peerOpts))
			assert.Equal(t, tc.want, a.SourcePort())
			if tc.opts.SourcePort == 0 {
				assert.Equal(t, tc.want, b.SourcePort(), "the rule is symmetric")
			}

			// A WRITE, byte-exact; its ACKs come back from b's port.
			src := bytes.Repeat([]byte("goroce!"), 1000)
			dst := make([]byte, len(src))
			sm, err := da.RegisterMR(nil, src, mr.LocalWrite)
			require.NoError(t, err)
			dm, err := db.RegisterMR(nil, dst, mr.LocalWrite|mr.RemoteWrite)
			require.NoError(t, err)
			require.NoError(t, a.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL: []qp.SGE{{Addr: sm.IOVA(), Length: uint32(len(src)), LKey: sm.LKey()}}, RemoteAddr: dm.IOVA(), RKey: dm.RKey()}))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var wc [1]cq.Completion
			_, err = a.SendCQ().Wait(ctx, wc[:])
			require.NoError(t, err)
			require.Equal(t, cq.StatusSuccess, wc[0].Status)
			require.Equal(t, src, dst)

			mu.Lock()
			defer mu.Unlock()
			var toB, toA int
			for _, s := range seen {
				require.True(t, s.icrcGood, "ICRC over the port the packet carries: %+v", s)
				switch s.src.Addr() {
				case da.LocalAddr().Addr():
					assert.Equal(t, tc.rqpn, s.destQP)
					toB++
					assert.Equal(t, netip.AddrPortFrom(da.LocalAddr().Addr(), tc.want), s.src, "a's %v", s.op)
					assert.Equal(t, tc.opts.TrafficClass>>2, s.dscp)
					assert.Equal(t, tc.opts.Priority, s.prio)
					if tc.opts.TrafficClass&3 != 0 {
						assert.Equal(t, tc.opts.TrafficClass&3, s.ecn)
					}
					assert.Equal(t, tc.wantFlow, s.flow)
				default:
					toA++
					assert.Equal(t, tc.lqpn, s.destQP)
					assert.Equal(t, db.LocalAddr().Addr(), s.src.Addr())
					if tc.opts.SourcePort == 0 {
						assert.Equal(t, tc.want, s.src.Port(), "b's %v from the same port", s.op)
					}
				}
			}
			assert.Positive(t, toB)
			assert.Positive(t, toA, "ACKs")
		})
	}
}

// TestCNPCodes: Config.CNPDSCP and CNPPriority resolve 0 to the ConnectX
// defaults and CodeZero to 0, and refuse the rest out of range.
func TestCNPCodes(t *testing.T) {
	tests := []struct {
		v, def, max int
		want        uint8
		ok          bool
	}{
		{0, DefaultCNPDSCP, 63, 48, true},
		{CodeZero, DefaultCNPDSCP, 63, 0, true},
		{46, DefaultCNPDSCP, 63, 46, true},
		{64, DefaultCNPDSCP, 63, 0, false},
		{-2, DefaultCNPDSCP, 63, 0, false},
		{0, DefaultCNPPriority, 7, 6, true},
		{8, DefaultCNPPriority, 7, 0, false},
	}
	for _, tc := range tests {
		got, err := code(tc.v, tc.def, tc.max, "x")
		if !tc.ok {
			assert.ErrorIs(t, err, ErrInvalidArg, "%d", tc.v)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%d", tc.v)
	}
}
