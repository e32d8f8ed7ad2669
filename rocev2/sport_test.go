package rocev2_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
)

// TestConnSourcePort pins the kernel rule (rdma_get_udp_sport) on ports seen
// in real rdma_rxe captures and on hand-computed cases.
func TestConnSourcePort(t *testing.T) {
	tests := []struct {
		name       string
		fl         uint32
		lqpn, rqpn bth.QPN
		wantFL     uint32
		want       uint16
	}{
		// shared/rxe/pcaps/write_bw_s65536.pcap: 0x15·0x15 = 441.
		{name: "rxe write_bw 0x15", lqpn: 0x15, rqpn: 0x15, wantFL: 441, want: 49593},
		// shared/rxe/pcaps/rc_pingpong.pcap: 0x11·0x11 = 289.
		{name: "rxe rc_pingpong 0x11", lqpn: 0x11, rqpn: 0x11, wantFL: 289, want: 49441},
		// The largest QPNs: the 48-bit product folds to 0xFFF1E, and the
		// port is 0x3F1E ^ 0x3F (computed independently in Python).
		{name: "max QPNs", lqpn: 0xFFFFFF, rqpn: 0xFFFFFF, wantFL: 0xFFF1E, want: 0xC000 | 0x3F21},
		// The product carries into bit 20: 0x1000·0x100 = 0x100000 folds to 1.
		{name: "fold", lqpn: 0x1000, rqpn: 0x100, wantFL: 1, want: 0xC001},
		// An explicit flow label wins over the QPNs: 0xABCDE → 0x3CDE ^ 0x2A.
		{name: "flow label", fl: 0xABCDE, lqpn: 0x15, rqpn: 0x15, wantFL: 0xABCDE, want: 0xC000 | 0x3CDE ^ 0x2A},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fl := tc.fl
			if fl == 0 {
				fl = rocev2.FlowLabel(tc.lqpn, tc.rqpn)
				assert.Equal(t, rocev2.FlowLabel(tc.rqpn, tc.lqpn), fl, "symmetric")
			}
			assert.Equal(t, tc.wantFL, fl)
			assert.Equal(t, tc.want, rocev2.SourcePort(fl))
			assert.Equal(t, tc.want, rocev2.ConnSourcePort(tc.fl, tc.lqpn, tc.rqpn))
		})
	}
}

// TestSourcePortRange checks the port stays in [0xC000, 0xFFFF] and bits
// above the 20-bit label are ignored.
func TestSourcePortRange(t *testing.T) {
	for fl := uint32(0); fl < 1<<21; fl += 977 {
		p := rocev2.SourcePort(fl)
		assert.GreaterOrEqual(t, p, uint16(rocev2.SourcePortMin))
		assert.Equal(t, rocev2.SourcePort(fl&rocev2.FlowLabelMask), p)
	}
}
