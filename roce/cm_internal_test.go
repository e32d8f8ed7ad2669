package roce

import (
	"bytes"
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
)

// cmTap is a memory network whose Deliver hands every CM MAD (a UD SEND
// ONLY to QP1, the MAD after BTH and DETH) to tap with its datagram; tap
// may edit the datagram and says whether to deliver it. Other datagrams
// pass.
func cmTap(tap func(b []byte, m cm.MAD) bool) *mem.Network {
	return mem.New(mem.Config{Deliver: func(dg *link.Datagram) bool {
		b := dg.Buf
		if len(b) < 20+cm.MADSize || b[0] != 0x64 || b[7] != 1 {
			return true
		}
		m, err := cm.Parse(b[20:])
		if err != nil {
			return true
		}
		return tap(b, m)
	}})
}

// openCMPair opens a dialer's and a listener's device on n with CM
// timers cmc.
func openCMPair(t *testing.T, n *mem.Network, cmc cm.Config) (dd, ld *Device) {
	open := func(a string) *Device {
		d, err := Open(Config{Link: n.Attach(netip.MustParseAddrPort(a)), CM: cmc})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	return open("10.0.0.1:4791"), open("10.0.0.2:4791")
}

// assertListenerIdle checks that ld's CM keeps nothing of l's
// connections, pending or not, and that only QP1 is left on ld.
func assertListenerIdle(t *testing.T, ld *Device, l *Listener) {
	t.Helper()
	s := ld.cms
	s.mu.Lock()
	assert.Zero(t, l.pending)
	assert.Empty(t, s.conns)
	assert.Zero(t, s.m.Len())
	s.mu.Unlock()
	assert.Equal(t, 1, ld.qpCount(), "only QP1 left on the listener")
}

// TestCMListenerRTUTimeout: when the RTU never comes (dropped on the
// wire), the listener retransmits the REP MaxCMRetries times, then gives
// up: the connection's QP is destroyed and nothing reaches Accept. The
// dialer, which sent the RTU, is connected (half-open, as with rdma_cm).
func TestCMListenerRTUTimeout(t *testing.T) {
	var reps, rtus atomic.Int32
	n := cmTap(func(b []byte, m cm.MAD) bool {
		switch m.AttrID() {
		case cm.AttrREP:
			reps.Add(1)
		case cm.AttrRTU:
			rtus.Add(1)
			return false
		}
		return true
	})
	cmc := cm.Config{CMResponseTimeout: 12, PacketLifeTime: 10, MaxCMRetries: 2}
	dd, ld := openCMPair(t, n, cmc)
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

	assertListenerIdle(t, ld, l)
	assert.Equal(t, int32(1+2), reps.Load(), "the REP and its retransmissions")
	assert.Equal(t, int32(3), rtus.Load(), "one RTU per REP (dropped)")
	st := ld.CMStats()
	assert.EqualValues(t, 1, st.TimedOut, "the half-open connection, counted")
	assert.EqualValues(t, 2, st.Retransmitted)
}

// TestCMDialCancelRejects: a Dial canceled after its REQ went out sends a
// REJ with reason Timeout (cm_destroy_id in REQ_SENT), so the listener,
// whose REP was lost, drops its half-open connection at once: its QP is
// destroyed, nothing reaches Accept, and no REP is retransmitted. The
// dialer keeps nothing either.
func TestCMDialCancelRejects(t *testing.T) {
	var reps, rejs atomic.Int32
	var reason atomic.Uint32
	n := cmTap(func(b []byte, m cm.MAD) bool {
		switch m.AttrID() {
		case cm.AttrREP:
			reps.Add(1)
			return false // the dialer never hears the REP
		case cm.AttrREJ:
			rejs.Add(1)
			reason.Store(uint32(cm.REJ(m).Reason()))
		}
		return true
	})
	// Slow REP retransmissions (4 s), so only the REJ can end the
	// listener's connection within the test.
	cmc := cm.Config{CMResponseTimeout: 20, PacketLifeTime: 10, MaxCMRetries: 3}
	dd, ld := openCMPair(t, n, cmc)
	l, err := ld.Listen(7174, ListenConfig{})
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for reps.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err = dd.Dial(ctx, netip.MustParseAddrPort("10.0.0.2:7174"), DialConfig{})
	require.ErrorIs(t, err, context.Canceled)

	require.Eventually(t, func() bool { return ld.CMStats().Received == 2 }, 2*time.Second, time.Millisecond,
		"the listener received the REQ and the REJ")
	assert.Equal(t, int32(1), rejs.Load())
	assert.Equal(t, uint32(cm.RejectTimeout), reason.Load())
	assertListenerIdle(t, ld, l)
	assert.Equal(t, 1, dd.qpCount(), "only QP1 left on the dialer")
	dd.cms.mu.Lock()
	assert.Empty(t, dd.cms.conns)
	assert.Zero(t, dd.cms.m.Len())
	dd.cms.mu.Unlock()
	assert.EqualValues(t, 1, dd.CMStats().Destroyed)
	assert.EqualValues(t, 1, dd.CMStats().Rejected)
	assert.Zero(t, ld.CMStats().Unmatched)

	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	_, err = l.Accept(ctx2)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, int32(1), reps.Load(), "no REP retransmitted")
}

// TestCMListenerReservedMTU: a REQ whose path MTU is a reserved code (7,
// IBA 12.6.5) is rejected with reason consumer defined (28), as an rdma_cm
// listener on the kernel answers it (the cm-hostile req-reserved-mtu
// interop cell); no REP leaves and the listener keeps nothing. Before, the
// QP's RTR transition failed after the Manager had accepted, and the
// Manager's timer then sent the unsent REP for the destroyed QP.
func TestCMListenerReservedMTU(t *testing.T) {
	var reps, reqs atomic.Int32
	n := cmTap(func(b []byte, m cm.MAD) bool {
		switch m.AttrID() {
		case cm.AttrREQ:
			reqs.Add(1)
			orig := bytes.Clone(b)
			cm.REQ(m).SetPathMTU(7)
			testutil.PatchICRC(b, orig)
		case cm.AttrREP:
			reps.Add(1)
		}
		return true
	})
	dd, ld := openCMPair(t, n, cm.Config{CMResponseTimeout: 12, PacketLifeTime: 10, MaxCMRetries: 2})
	l, err := ld.Listen(7174, ListenConfig{})
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = dd.Dial(ctx, netip.MustParseAddrPort("10.0.0.2:7174"), DialConfig{})
	var re *RejectError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, cm.RejectConsumerDefined, re.Reason)
	time.Sleep(200 * time.Millisecond) // a REP timer would have fired by now
	assert.Zero(t, reps.Load(), "no REP")
	assertListenerIdle(t, ld, l)
	// Each REQ that reached the listener got a REJ: one, unless the load
	// delayed the REJ past the dialer's REQ timeout (-race), when the
	// retransmitted REQs are rejected as well.
	assert.EqualValues(t, reqs.Load(), ld.CMStats().Rejected, "a REJ for every REQ")
	assert.Zero(t, ld.CMStats().Retransmitted)
}
