package qp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestResponderReasons provokes each responder error reason once at a solo
// responder and checks that it is told apart from the others: its NAK, its
// counter alone among the reasons' counters, the state, and the status and
// VendorErr of the receive WQE it ends.
func TestResponderReasons(t *testing.T) {
	const mtu = 1024
	type run func(t *testing.T, s *cSolo, r *mr.Region)
	sendOnly := func(pl int) run {
		return func(t *testing.T, s *cSolo, r *mr.Region) {
			var f wire.Fields
			f.BTH.Opcode, f.BTH.AckReq = bth.RCSendOnly, true
			s.feed(f, make([]byte, pl))
		}
	}
	tests := []struct {
		name    string
		reason  qp.Reason
		params  func(*connParams)
		recvs   int
		badRecv bool // post one receive WQE with an unusable lkey
		run     run
		endsWQE bool // the error completes the receive WQE in use
	}{
		{name: "PSNSequence", reason: qp.ReasonPSNSequence, recvs: 1, run: func(t *testing.T, s *cSolo, r *mr.Region) {
			var f wire.Fields
			f.BTH.Opcode, f.BTH.PSN = bth.RCSendOnly, s.firstPSN.Add(5)
			s.feed(f, []byte{1})
		}},
		{name: "RNR", reason: qp.ReasonRNR, run: sendOnly(8)},
		{name: "OpSequence", reason: qp.ReasonOpSequence, recvs: 1, run: func(t *testing.T, s *cSolo, r *mr.Region) {
			var f wire.Fields
			f.BTH.Opcode = bth.RCSendMiddle
			s.feed(f, make([]byte, mtu))
		}},
		{name: "OpNotEnabled", reason: qp.ReasonOpNotEnabled, recvs: 1,
			params: func(p *connParams) { p.access = mr.LocalWrite | mr.RemoteRead },
			run: func(t *testing.T, s *cSolo, r *mr.Region) {
				var f wire.Fields
				f.BTH.Opcode, f.BTH.AckReq = bth.RCRDMAWriteOnly, true
				f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey()), 8
				s.feed(f, make([]byte, 8))
			}},
		{name: "UnsupportedOpcode", reason: qp.ReasonUnsupportedOpcode, recvs: 1, run: func(t *testing.T, s *cSolo, r *mr.Region) {
			var f wire.Fields
			f.BTH.Opcode, f.BTH.AckReq = bth.RCAtomicWrite, true
			f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey()), 8
			s.feed(f, make([]byte, 8))
		}},
		{name: "NoResources", reason: qp.ReasonNoResources, recvs: 1,
			params: func(p *connParams) { p.maxDestRdAtomic = 0 },
			run: func(t *testing.T, s *cSolo, r *mr.Region) {
				var f wire.Fields
				f.BTH.Opcode = bth.RCRDMAReadRequest
				f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey()), 8
				s.feed(f, nil)
			}},
		{name: "Length", reason: qp.ReasonLength, recvs: 1, run: sendOnly(mtu + 1)},
		{name: "RecvLength", reason: qp.ReasonRecvLength, recvs: 1, endsWQE: true,
			run: func(t *testing.T, s *cSolo, r *mr.Region) {
				// The receive WQE holds 8 KiB: the ninth MTU overflows it.
				for i := range 9 {
					var f wire.Fields
					f.BTH.Opcode = bth.RCSendMiddle
					if i == 0 {
						f.BTH.Opcode = bth.RCSendFirst
					}
					s.feed(f, make([]byte, mtu))
				}
			}},
		{name: "RecvSGE", reason: qp.ReasonRecvSGE, badRecv: true, endsWQE: true, run: sendOnly(8)},
		{name: "MisalignedAtomic", reason: qp.ReasonMisalignedAtomic, recvs: 1, run: func(t *testing.T, s *cSolo, r *mr.Region) {
			var f wire.Fields
			f.BTH.Opcode = bth.RCFetchAdd
			f.AtomicETH.VA, f.AtomicETH.RKey, f.AtomicETH.SwapData = r.IOVA()+4, uint32(r.RKey()), 1
			s.feed(f, nil)
		}},
		{name: "RKeyViolation", reason: qp.ReasonRKeyViolation, recvs: 1, run: func(t *testing.T, s *cSolo, r *mr.Region) {
			var f wire.Fields
			f.BTH.Opcode, f.BTH.AckReq = bth.RCRDMAWriteOnly, true
			f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey())^0xff00, 8
			s.feed(f, make([]byte, 8))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultParams()
			require.Equal(t, qp.MTU1024, p.mtu)
			if tc.params != nil {
				tc.params(&p)
			}
			s := newCSolo(t, p)
			r := s.e.reg(make([]byte, 64), cAllRemote)
			if tc.badRecv {
				require.NoError(t, s.e.qp.PostRecv(&qp.RecvWR{WRID: 1000, SGL: []qp.SGE{{Addr: 0x1000, Length: 64, LKey: 0xdead}}}))
				s.recvs++
			}
			if tc.recvs > 0 {
				s.post(tc.recvs)
			}
			before := s.e.qp.Counters().Snapshot()
			tc.run(t, s, r)
			out := s.drain()

			require.NotEmpty(t, out, "no NAK")
			nak := out[len(out)-1]
			assert.Equal(t, bth.RCAcknowledge, nak.BTH.Opcode)
			if tc.reason == qp.ReasonRNR {
				assert.True(t, nak.AETH.Syndrome.IsRNR(), "%v", nak.AETH.Syndrome)
			} else {
				assert.Equal(t, tc.reason.Syndrome(), nak.AETH.Syndrome)
			}
			want := qp.StateRTS
			if tc.reason.Fatal() {
				want = qp.StateErr
			}
			assert.Equal(t, want, s.e.qp.State())

			d := s.e.qp.Counters().Snapshot().Sub(before)
			for r := qp.ReasonPSNSequence; r <= qp.ReasonRKeyViolation; r++ {
				n := uint64(0)
				if r == tc.reason {
					n = 1
				}
				assert.Equal(t, n, d[r.Counter()], "%v (%v)", r.Counter(), d)
			}

			wcs := s.e.poll()
			if !tc.reason.Fatal() {
				assert.Empty(t, wcs)
				return
			}
			require.Len(t, wcs, s.recvs)
			for i, wc := range wcs {
				if i == 0 && tc.endsWQE {
					assert.Equal(t, tc.reason.Status(), wc.Status)
					assert.Equal(t, tc.reason.VendorErr(), wc.VendorErr)
					assert.Equal(t, tc.reason, qp.Reason(wc.VendorErr))
					continue
				}
				assert.Equal(t, cq.StatusWRFlushErr, wc.Status)
				assert.Zero(t, wc.VendorErr, "a flush has no reason")
			}
		})
	}
}
