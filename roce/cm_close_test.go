package roce

import (
	"context"
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cm"
)

// TestCMDeviceCloseTellsPeers (issue 27, part 3): a device's Close tells
// the peer of each of its connections what the kernel's cm_destroy_id
// tells it when a process's cm_ids go (Ctrl-C): an established connection
// gets a DREQ, a connection whose REP awaits its RTU a REJ (consumer
// defined, message rejected Other), a Dial with its REQ out a REJ Timeout
// with the node GUID as ARI; the MADs leave before Close returns, and the
// peers end their side at once instead of timing out. Before, only the
// DREQ was asked for, and it was lost with QP1's flush.
func TestCMDeviceCloseTellsPeers(t *testing.T) {
	cmc := cm.Config{CMResponseTimeout: 20, PacketLifeTime: 10, MaxCMRetries: 3}
	raddr := netip.MustParseAddrPort("10.0.0.2:7174")

	t.Run("established: DREQ", func(t *testing.T) {
		var log madLog
		dd, ld := openCMPair(t, cmTap(log.tap), cmc)
		l, err := ld.Listen(7174, ListenConfig{})
		require.NoError(t, err)
		c, err := dd.Dial(ctxFor(t, 5*time.Second), raddr, DialConfig{})
		require.NoError(t, err)
		_, err = l.Accept(ctxFor(t, 5*time.Second))
		require.NoError(t, err)
		t0 := time.Now()
		require.NoError(t, ld.Close())
		require.Len(t, log.of(cm.AttrDREQ), 1, "the DREQ left before Close returned")
		select {
		case <-c.Done():
		case <-time.After(time.Second):
			t.Fatal("the dialer's Conn did not end within 1 s of the listener's Close")
		}
		assert.ErrorIs(t, c.Err(), ErrDisconnected)
		t.Logf("the peer's Conn ended %v after Close began", time.Since(t0))
	})

	t.Run("REP awaiting its RTU: REJ", func(t *testing.T) {
		var log madLog
		var dropRTU atomic.Bool
		dropRTU.Store(true)
		n := cmTap(func(b []byte, m cm.MAD) bool {
			log.tap(b, m)
			return !(m.AttrID() == cm.AttrRTU && dropRTU.Load())
		})
		dd, ld := openCMPair(t, n, cmc)
		_, err := ld.Listen(7174, ListenConfig{})
		require.NoError(t, err)
		c, err := dd.Dial(ctxFor(t, 5*time.Second), raddr, DialConfig{})
		require.NoError(t, err, "the dialer is established; the listener waits for the RTU")
		require.NoError(t, ld.Close())
		rejs := log.of(cm.AttrREJ)
		require.Len(t, rejs, 1, "the REJ left before Close returned")
		rej := cm.REJ(rejs[0])
		assert.Equal(t, cm.RejectConsumerDefined, rej.Reason())
		assert.Equal(t, cm.MsgTypeOther, rej.MsgRejected())
		select {
		case <-c.Done():
		case <-time.After(time.Second):
			t.Fatal("the dialer's Conn did not end within 1 s")
		}
	})

	t.Run("REQ out: REJ Timeout", func(t *testing.T) {
		var log madLog
		n := cmTap(func(b []byte, m cm.MAD) bool {
			log.tap(b, m)
			return m.AttrID() != cm.AttrREP // the dialer never hears the REP
		})
		dd, ld := openCMPair(t, n, cmc)
		l, err := ld.Listen(7174, ListenConfig{})
		require.NoError(t, err)
		dialed := make(chan error, 1)
		go func() {
			_, err := dd.Dial(context.Background(), raddr, DialConfig{})
			dialed <- err
		}()
		require.Eventually(t, func() bool { return len(log.of(cm.AttrREP)) == 1 }, 2*time.Second, time.Millisecond)
		require.NoError(t, dd.Close())
		require.ErrorIs(t, <-dialed, ErrClosed)
		rejs := log.of(cm.AttrREJ)
		require.Len(t, rejs, 1, "the REJ left before Close returned")
		rej := cm.REJ(rejs[0])
		assert.Equal(t, cm.RejectTimeout, rej.Reason())
		assert.Equal(t, uint64(dd.NodeGUID()), binary.BigEndian.Uint64(rej.ARI()))
		require.Eventually(t, func() bool { return ld.CMStats().Received == 2 }, time.Second, time.Millisecond)
		assertListenerIdle(t, ld, l)
	})
}
