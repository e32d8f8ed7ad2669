package qp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestC6_EveryOpcodeChecked: a QP whose access flags enable no remote
// operation (a send test's, least privilege) still takes SEND, which lands
// in a posted receive under no rkey; every WRITE (ONLY, FIRST, with
// immediate), READ and atomic opcode is refused before any R_Key is looked
// at, even on a region that grants everything: NAK invalid request (0x61),
// the receive in use (none here) flushed, the QP in ERR (rxe
// check_op_valid; IBA 9.9.3 class C). Each also passes with the one enable
// it needs, so the refusal is the QP's flag and nothing else.
func TestC6_EveryOpcodeChecked(t *testing.T) {
	tests := []struct {
		op    bth.Opcode
		needs mr.AccessFlags
		pl    int
	}{
		{bth.RCRDMAWriteOnly, mr.RemoteWrite, 64},
		{bth.RCRDMAWriteFirst, mr.RemoteWrite, 1024},
		{bth.RCRDMAWriteOnlyWithImmediate, mr.RemoteWrite, 64},
		{bth.RCRDMAReadRequest, mr.RemoteRead, 0},
		{bth.RCCompareSwap, mr.RemoteAtomic, 0},
		{bth.RCFetchAdd, mr.RemoteAtomic, 0},
	}
	build := func(r *mr.Region, op bth.Opcode, pl int) wire.Fields {
		var f wire.Fields
		f.BTH.Opcode, f.BTH.AckReq = op, true
		switch {
		case op.Mask()&bth.MaskRETH != 0:
			n := uint32(pl)
			if op == bth.RCRDMAWriteFirst {
				n = 2048
			} else if op == bth.RCRDMAReadRequest {
				n = 64
			}
			f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = r.IOVA(), uint32(r.RKey()), n
		case op.Mask()&bth.MaskAtomicETH != 0:
			f.AtomicETH.VA, f.AtomicETH.RKey, f.AtomicETH.SwapData = r.IOVA(), uint32(r.RKey()), 1
		}
		if op.Mask()&bth.MaskImmDt != 0 {
			f.ImmDt = 7
		}
		return f
	}
	for _, tc := range tests {
		t.Run(tc.op.String(), func(t *testing.T) {
			p := defaultParams()
			p.access = mr.LocalWrite // no remote operation
			s := newCSolo(t, p)
			r := s.e.reg(make([]byte, 4096), cAllRemote)
			s.post(1)
			var f wire.Fields
			f.BTH.Opcode, f.BTH.AckReq = bth.RCSendOnly, true
			out := s.send(f, make([]byte, 32))
			require.Len(t, out, 1)
			assert.True(t, out[0].AETH.Syndrome.IsACK(), "SEND needs no remote access")
			require.Equal(t, []cWC{{1000, cq.StatusSuccess}}, pollWCs(s))
			s.recvs = 0 // that receive is done; the class C check wants no flush

			psn := s.psn
			out = s.send(build(r, tc.op, tc.pl), make([]byte, tc.pl))
			s.requireClassC(out, aeth.NAKInvalidRequest, psn, nil)
			assert.Equal(t, uint64(1), s.e.qp.Counters().Snapshot()[qp.CounterRespOpNotEnabledErr])
		})
		t.Run(tc.op.String()+"/enabled", func(t *testing.T) {
			p := defaultParams()
			p.access = mr.LocalWrite | tc.needs
			s := newCSolo(t, p)
			r := s.e.reg(make([]byte, 4096), cAllRemote)
			s.post(1)
			out := s.send(build(r, tc.op, tc.pl), make([]byte, tc.pl))
			if tc.op != bth.RCRDMAWriteFirst { // FIRST is acknowledged with the rest of its message
				require.NotEmpty(t, out)
				assert.True(t, out[0].AETH.Syndrome.IsACK(), "%v", out[0].AETH.Syndrome)
			}
			assert.Equal(t, qp.StateRTS, s.e.qp.State())
			assert.Zero(t, s.e.qp.Counters().Snapshot()[qp.CounterRespOpNotEnabledErr])
		})
	}
}

func pollWCs(s *cSolo) []cWC {
	var got []cWC
	for _, c := range s.e.poll() {
		got = append(got, cWC{c.WRID, c.Status})
	}
	return got
}
