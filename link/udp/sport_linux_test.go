//go:build linux

package udp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

// freePorts returns n UDP ports free on a at the time of the call.
func freePorts(t testing.TB, a netip.Addr, n int) []uint16 {
	var ports []uint16
	var conns []*net.UDPConn
	for len(ports) < n {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
		require.NoError(t, err)
		conns = append(conns, c)
		ports = append(ports, c.LocalAddr().(*net.UDPAddr).AddrPort().Port())
	}
	for _, c := range conns {
		c.Close()
	}
	return ports
}

// TestSourcePortPool: SourcePort opens one send socket per port up to
// MaxSourcePorts, each a file descriptor; past the bound or when the port
// is taken it shares an open one, counted; datagrams leave from the port
// SourcePort returned, with their DSCP; Close closes every socket.
func TestSourcePortPool(t *testing.T) {
	if testing.Short() {
		t.Skip("real UDP sockets")
	}
	fds0 := countFDs()
	tx := open(t, lo4, Config{MaxSourcePorts: 3})
	rx := open(t, lo4b, Config{})
	ps := freePorts(t, lo4, 5)
	taken, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo4, ps[4])))
	require.NoError(t, err)
	defer taken.Close()
	fds1 := countFDs()

	assert.Equal(t, tx.LocalAddr().Port(), tx.SourcePort(0))
	assert.Equal(t, tx.LocalAddr().Port(), tx.SourcePort(tx.LocalAddr().Port()))
	assert.Equal(t, ps[0], tx.SourcePort(ps[0]))
	assert.Equal(t, ps[1], tx.SourcePort(ps[1]))
	assert.Equal(t, ps[0], tx.SourcePort(ps[0]), "asked again: the same socket")
	got := tx.SourcePort(ps[4])
	assert.Contains(t, ps[:2], got, "a port in use shares an open socket")
	assert.Equal(t, ps[2], tx.SourcePort(ps[2]))
	assert.Equal(t, 3, tx.SourcePorts())
	got3 := tx.SourcePort(ps[3])
	assert.Equal(t, ps[int(ps[3])%3], got3, "past the bound: port modulo the open sockets")
	assert.Equal(t, uint64(2), tx.Stats().SourcePortShared)
	assert.Equal(t, 3, countFDs()-fds1, "one file descriptor per send socket")

	// Runs from four ports (two share a socket), GSO-sized, with DSCPs.
	var dgs []link.Datagram
	for i, p := range []uint16{ps[0], ps[0], ps[1], ps[1], got3, tx.LocalAddr().Port(), ps[2]} {
		d := link.Datagram{Buf: make([]byte, 300), Src: netip.AddrPortFrom(lo4, p), Dst: rx.LocalAddr(),
			ECN: link.ECT0, DSCP: uint8(10 + i)}
		d.Buf[0] = byte(i)
		dgs = append(dgs, d)
	}
	tx.PlanIPID(dgs)
	n, err := tx.Send(dgs)
	require.NoError(t, err)
	require.Equal(t, len(dgs), n)
	in := make([]link.Datagram, len(dgs))
	for i := range in {
		in[i].Buf = make([]byte, 2048)
	}
	for k := 0; k < len(dgs); {
		m, err := rx.Recv(in[k:])
		require.NoError(t, err)
		k += m
	}
	for _, d := range in {
		i := int(d.Buf[0])
		assert.Equal(t, dgs[i].Src, d.Src, "datagram %d", i)
		assert.Equal(t, dgs[i].DSCP, d.DSCP, "datagram %d", i)
		assert.Equal(t, link.ECT0, d.ECN)
	}

	require.NoError(t, tx.Close())
	require.NoError(t, rx.Close())
	taken.Close()
	assert.Equal(t, fds0, countFDs(), "Close closes the send sockets")
	assert.Equal(t, tx.LocalAddr().Port(), tx.SourcePort(ps[3]+1), "after Close")
}

// TestSourcePortNone: MaxSourcePorts < 0 opens no socket; every port
// shares the receive socket.
func TestSourcePortNone(t *testing.T) {
	tx := open(t, lo4, Config{MaxSourcePorts: -1})
	assert.Equal(t, tx.LocalAddr().Port(), tx.SourcePort(50000))
	assert.Zero(t, tx.SourcePorts())
	assert.Equal(t, uint64(1), tx.Stats().SourcePortShared)
}

// TestFlowLabelIPv6: a datagram's FlowLabel reaches the IPv6 header
// (read back with IPV6_FLOWINFO on the receiver), from a pool socket too.
func TestFlowLabelIPv6(t *testing.T) {
	if testing.Short() {
		t.Skip("real UDP sockets")
	}
	tx := open(t, lo6, Config{})
	rc, err := net.ListenUDP("udp6", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo6, 0)))
	require.NoError(t, err)
	defer rc.Close()
	raw, err := rc.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, raw.Control(func(fd uintptr) {
		require.NoError(t, unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, ipv6Flowinfo, 1))
		// The link sends checksum 0, as rxe does (see TestZeroChecksumIPv6).
		require.NoError(t, unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_NO_CHECK6_RX, 1))
	}))
	sp := tx.SourcePort(freePorts(t, lo6, 1)[0])
	for _, src := range []uint16{0, sp} {
		dg := link.Datagram{Buf: []byte("flow"), Src: netip.AddrPortFrom(lo6, src),
			Dst: rc.LocalAddr().(*net.UDPAddr).AddrPort(), FlowLabel: 0xabcde}
		_, err := tx.Send([]link.Datagram{dg})
		require.NoError(t, err)
		buf, oob := make([]byte, 64), make([]byte, 128)
		require.NoError(t, rc.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, oobn, _, from, err := rc.ReadMsgUDPAddrPort(buf, oob)
		require.NoError(t, err)
		if src != 0 {
			assert.Equal(t, src, from.Port())
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		require.NoError(t, err)
		var fl uint32
		for _, m := range msgs {
			if m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == ipv6Flowinfo && len(m.Data) >= 4 {
				fl = binary.BigEndian.Uint32(m.Data) & 0xFFFFF
			}
		}
		assert.Equal(t, uint32(0xabcde), fl, "source port %d", src)
	}
}

// TestZeroAllocsSourcePorts: Send from several source ports (one socket
// each, GSO runs per socket) allocates nothing.
func TestZeroAllocsSourcePorts(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	tx := open(t, lo4, Config{})
	rx := open(t, lo4b, Config{})
	ports := freePorts(t, lo4, 4)
	var dgs []link.Datagram
	for i := 0; i < 64; i++ {
		p := tx.SourcePort(ports[i/16])
		dgs = append(dgs, link.Datagram{Buf: make([]byte, 1068), Src: netip.AddrPortFrom(lo4, p),
			Dst: rx.LocalAddr(), ECN: link.ECT0, DSCP: uint8(i / 16)})
	}
	tx.PlanIPID(dgs)
	in := make([]link.Datagram, 64)
	for i := range in {
		in[i].Buf = make([]byte, 2048)
	}
	roundTrip := func() {
		if _, err := tx.Send(dgs); err != nil {
			panic(err)
		}
		for got := 0; got < len(dgs); {
			n, err := rx.RecvLend(in)
			if err != nil {
				panic(err)
			}
			got += n
		}
	}
	roundTrip()
	require.Zero(t, testing.AllocsPerRun(50, roundTrip))
	require.Positive(t, tx.Info().GSOSent, "GSO per socket")
}

// ipv6Flowinfo is IPV6_FLOWINFO (linux/in6.h): receive the flow
// information as a control message.
const ipv6Flowinfo = 11

// BenchmarkSourcePorts sends batches of 64 datagrams of 1068 bytes (a
// RoCE WRITE MIDDLE at MTU 1024) spread over 1, 4 or 16 source ports, each
// port a send socket (ports=0: the receive socket, as before per-QP
// ports), and receives them on another link.
func BenchmarkSourcePorts(b *testing.B) {
	for _, np := range []int{0, 1, 4, 16} {
		b.Run(fmt.Sprintf("ports=%d", np), func(b *testing.B) {
			tx := open(b, lo4, Config{})
			rx := open(b, lo4b, Config{})
			var ports []uint16
			if np > 0 {
				ports = freePorts(b, lo4, np)
			}
			dgs := make([]link.Datagram, 64)
			for i := range dgs {
				var p uint16
				if np > 0 {
					p = tx.SourcePort(ports[i*np/len(dgs)])
				}
				dgs[i] = link.Datagram{Buf: make([]byte, 1068), Src: netip.AddrPortFrom(lo4, p), Dst: rx.LocalAddr(), ECN: link.ECT0}
			}
			tx.PlanIPID(dgs)
			in := make([]link.Datagram, 64)
			for i := range in {
				in[i].Buf = make([]byte, 2048)
			}
			done := make(chan struct{})
			total := int64(b.N) * int64(len(dgs))
			go func() {
				defer close(done)
				for got := int64(0); got < total; {
					n, err := rx.RecvLend(in)
					if err != nil {
						return
					}
					got += int64(n)
				}
			}()
			b.SetBytes(int64(len(dgs) * 1068))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := tx.Send(dgs); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second): // losses on a loaded host
				rx.Close()
				<-done
			}
			b.ReportMetric(float64(tx.SourcePorts()), "sockets")
		})
	}
}
