package testutil

import (
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ecnConn(t *testing.T, a netip.AddrPort) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(a))
	require.NoError(t, err)
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, rc.Control(func(fd uintptr) {
		require.NoError(t, syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_RECVTOS, 1))
	}))
	return c
}

// TestMarkSwitch: a burst of 1000-byte ECT(0) datagrams into a 1 Mb/s port
// with a 3500-byte threshold leaves one every 8 ms; those that find more
// than 3500 bytes queued (the fifth on) arrive CE, a Not-ECT one never
// does, and the reverse path passes the ECN bits through.
//
// The figures hold for a burst that reaches the switch at once. The
// kernel stamps each arrival, so a burst the scheduler spread out (the
// writer preempted for ms on a loaded machine: 400 bytes leave in
// 3.2 ms) shows in the log and is sent again with a fresh switch, up to
// five times; the checks apply to the first burst that arrived within
// 1 ms (125 bytes' departure).
func TestMarkSwitch(t *testing.T) {
	ap := netip.MustParseAddrPort
	rc, sc := ecnConn(t, ap("127.0.0.70:0")), ecnConn(t, ap("127.0.0.71:0"))
	defer rc.Close()
	defer sc.Close()
	recv, send := rc.LocalAddr().(*net.UDPAddr).AddrPort(), sc.LocalAddr().(*net.UDPAddr).AddrPort()

	pkt := make([]byte, 1000-swOverhead)
	want := make([]uint8, 11)
	for i := range want {
		want[i] = 2 // ECT(0)
		if i == 9 {
			want[i] = 0 // Not-ECT
		}
	}
	type arrival struct {
		n     int
		src   netip.AddrPort
		first byte
		ecn   uint8
	}
	buf, oob := make([]byte, 2000), make([]byte, 128)
	const maxSpread, attempts = time.Millisecond, 5
	var (
		sw       *MarkSwitch
		port     SwitchPort
		resealed atomic.Int64
		got      []arrival
		log      []SwitchEvent
	)
	for attempt := 1; ; attempt++ {
		var err error
		resealed.Store(0)
		sw, err = NewMarkSwitch(MarkSwitchConfig{Receiver: recv, Rate: 1e6, Threshold: 3500,
			Ports:  []SwitchPort{{Sender: send, In: ap("127.0.0.72:0"), Out: ap("127.0.0.73:0")}},
			Reseal: func(pkt []byte, oldSrc, oldDst, newSrc, newDst netip.AddrPort) bool { resealed.Add(1); return true }})
		require.NoError(t, err)
		defer sw.Close()
		port = sw.Ports()[0]
		require.NotZero(t, port.In.Port())
		require.Equal(t, port.In.Port(), port.Out.Port(), "fronts share one port")

		for i, e := range want {
			pkt[0] = byte(i)
			writeECN(sc, pkt, port.In, e)
		}
		got = got[:0]
		rc.SetReadDeadline(time.Now().Add(5 * time.Second))
		for range want {
			n, src, ecn, _, err := readECN(rc, buf, oob)
			require.NoError(t, err)
			got = append(got, arrival{n, src, buf[0], ecn})
		}
		log = sw.Log()
		require.Len(t, log, len(want))
		spread := log[len(log)-1].At.Sub(log[0].At)
		if spread < maxSpread {
			break
		}
		require.Less(t, attempt, attempts, "no burst of %d datagrams reached the switch within %v; the last took %v", len(want), maxSpread, spread)
		t.Logf("attempt %d: the burst reached the switch over %v (the writer was descheduled); again", attempt, spread)
		require.NoError(t, sw.Close())
	}
	for i, a := range got {
		// Queue found: i·1000 bytes less what left meanwhile (< 125).
		w := want[i]
		if i >= 4 && w != 0 {
			w = 3
		}
		assert.Equal(t, port.Out, a.src)
		assert.Equal(t, len(pkt), a.n)
		assert.Equal(t, byte(i), a.first, "FIFO order")
		assert.Equal(t, w, a.ecn, "datagram %d", i)
	}
	for i := 1; i < len(log); i++ {
		assert.Equal(t, 8*time.Millisecond, log[i].Depart.Sub(log[i-1].Depart), "departures at 1 Mb/s")
		assert.InDelta(t, i*1000, log[i].Queue, 400, "queue found by %d", i)
	}

	// Reverse: the receiver's CE reaches the sender from In, at once.
	writeECN(rc, []byte("ack"), port.Out, 3)
	sc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, src, ecn, _, err := readECN(sc, buf, oob)
	require.NoError(t, err)
	assert.Equal(t, "ack", string(buf[:n]))
	assert.Equal(t, port.In, src)
	assert.Equal(t, uint8(3), ecn)
	assert.Equal(t, int64(len(want)+1), resealed.Load())
}
