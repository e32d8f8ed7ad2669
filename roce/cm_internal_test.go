package roce

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
)

// TestCMListenerRTUTimeout: when the RTU never comes (dropped on the
// wire), the listener retransmits the REP MaxCMRetries times, then gives
// up: the connection's QP is destroyed and nothing reaches Accept. The
// dialer, which sent the RTU, is connected (half-open, as with rdma_cm).
func TestCMListenerRTUTimeout(t *testing.T) {
	var reps, rtus atomic.Int32
	n := mem.New(mem.Config{Deliver: func(dg *link.Datagram) bool {
		b := dg.Buf
		if len(b) < 20+cm.MADSize || b[0] != 0x64 || b[7] != 1 { // UD SEND ONLY to QP1
			return true
		}
		m, err := cm.Parse(b[20:])
		if err != nil {
			return true
		}
		switch m.AttrID() {
		case cm.AttrREP:
			reps.Add(1)
		case cm.AttrRTU:
			rtus.Add(1)
			return false
		}
		return true
	}})
	cmc := cm.Config{CMResponseTimeout: 12, PacketLifeTime: 10, MaxCMRetries: 2}
	open := func(a string) *Device {
		d, err := Open(Config{Link: n.Attach(netip.MustParseAddrPort(a)), CM: cmc})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	dd, ld := open("10.0.0.1:4791"), open("10.0.0.2:4791")
	l, err := ld.Listen(7174, ListenConfig{})
	require.NoError(t, err)
	c, err := dd.Dial(context.Background(), netip.MustParseAddrPort("10.0.0.2:7174"), DialConfig{})
	require.NoError(t, err)
	defer c.Close()

	assert.Equal(t, 2, ld.qpCount(), "QP1 and the pending connection's QP")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = l.Accept(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	s := ld.cms
	s.mu.Lock()
	assert.Zero(t, l.pending)
	assert.Empty(t, s.conns)
	assert.Zero(t, s.m.Len())
	s.mu.Unlock()
	assert.Equal(t, 1, ld.qpCount(), "only QP1 left")
	assert.Equal(t, int32(1+2), reps.Load(), "the REP and its retransmissions")
	assert.Equal(t, int32(3), rtus.Load(), "one RTU per REP (dropped)")
}
