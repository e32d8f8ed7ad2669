package qp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// TestAwaitingReply: a WRITE that is posted but not sent awaits nothing;
// once on the wire it awaits its ACK with the retransmit timer armed; after
// the ACK, nothing again. With Timeout 0 there is no timer to fall back on,
// so a driver must not wait for a reply (AwaitingReply stays false).
func TestAwaitingReply(t *testing.T) {
	tests := []struct {
		name    string
		timeout uint8
		want    bool
	}{
		{"retransmit timer", 8, true},
		{"timeout 0: no timer", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultParams()
			p.timeout = tc.timeout
			pr := newPair(t, p, testutil.Impairment{}, testutil.Impairment{})
			acc := mr.LocalWrite | mr.RemoteWrite
			src, dst := pr.a.reg(make([]byte, 64), acc), pr.b.reg(make([]byte, 64), acc)
			require.NoError(t, pr.a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL: []qp.SGE{{Addr: src.IOVA(), Length: 64, LKey: src.LKey()}}, RemoteAddr: dst.IOVA(), RKey: dst.RKey()}))
			assert.False(t, pr.a.qp.AwaitingReply(), "posted, not sent")
			pr.a.pump(pr.clock.Now())
			assert.Equal(t, tc.want, pr.a.qp.AwaitingReply(), "sent")
			var wcs []cq.Completion
			require.NoError(t, pr.run(func() bool { wcs = append(wcs, pr.a.poll()...); return len(wcs) > 0 }, time.Second))
			assert.Equal(t, cq.StatusSuccess, wcs[0].Status)
			assert.False(t, pr.a.qp.AwaitingReply(), "acknowledged")
		})
	}
}
