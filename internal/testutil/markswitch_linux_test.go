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
func TestMarkSwitch(t *testing.T) {
	ap := netip.MustParseAddrPort
	rc, sc := ecnConn(t, ap("127.0.0.70:0")), ecnConn(t, ap("127.0.0.71:0"))
	defer rc.Close()
	defer sc.Close()
	recv, send := rc.LocalAddr().(*net.UDPAddr).AddrPort(), sc.LocalAddr().(*net.UDPAddr).AddrPort()
	var resealed atomic.Int64
	sw, err := NewMarkSwitch(MarkSwitchConfig{Receiver: recv, Rate: 1e6, Threshold: 3500,
		Ports:  []SwitchPort{{Sender: send, In: ap("127.0.0.72:0"), Out: ap("127.0.0.73:0")}},
		Reseal: func(pkt []byte, oldSrc, oldDst, newSrc, newDst netip.AddrPort) bool { resealed.Add(1); return true }})
	require.NoError(t, err)
	defer sw.Close()
	port := sw.Ports()[0]
	require.NotZero(t, port.In.Port())
	require.Equal(t, port.In.Port(), port.Out.Port(), "fronts share one port")

	pkt := make([]byte, 1000-swOverhead)
	want := make([]uint8, 11)
	for i := range want {
		pkt[0] = byte(i)
		e := uint8(2) // ECT(0)
		if i == 9 {
			e = 0 // Not-ECT
		}
		writeECN(sc, pkt, port.In, e)
		// Queue found: i·1000 bytes less what left meanwhile (µs).
		want[i] = e
		if i >= 4 && e != 0 {
			want[i] = 3
		}
	}
	buf, oob := make([]byte, 2000), make([]byte, 128)
	rc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := range want {
		n, src, ecn, _, err := readECN(rc, buf, oob)
		require.NoError(t, err)
		assert.Equal(t, port.Out, src)
		assert.Equal(t, len(pkt), n)
		assert.Equal(t, byte(i), buf[0], "FIFO order")
		assert.Equal(t, want[i], ecn, "datagram %d", i)
	}
	log := sw.Log()
	require.Len(t, log, len(want))
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
