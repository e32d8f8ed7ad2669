package pingpong

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/qp"
)

// The exchange of pcaps/rc_pingpong.pcap (doc/oob.md §2): client, server, "done".
const (
	clientMsg = "0000:00001a:d48084:00000000000000000000ffff0a4d0003\x00"
	serverMsg = "0000:00001a:5de23d:00000000000000000000ffff0a4d0002\x00"
)

func TestMessageGolden(t *testing.T) {
	d, err := Parse([]byte(clientMsg))
	require.NoError(t, err)
	assert.Equal(t, Dest{QPN: 0x1a, PSN: 0xd48084, GID: netip.MustParseAddr("::ffff:10.77.0.3").As16()}, d)
	b, err := d.Marshal()
	require.NoError(t, err)
	assert.Equal(t, clientMsg, string(b))
	assert.Len(t, b, MsgSize)
	assert.Equal(t, "LID 0x0000, QPN 0x00001a, PSN 0xd48084, GID ::ffff:10.77.0.3", d.String())
}

func TestParseGarbled(t *testing.T) {
	for _, bad := range []string{
		"", "done\x00", clientMsg[:51], clientMsg[:51] + "x",
		strings.Replace(clientMsg, ":", ";", 1),
		strings.Replace(clientMsg, "d48084", "d4808g", 1),
		strings.Replace(clientMsg, "ffff0a4d", "ffff0a4z", 1),
		// perftest's key message is not a pingpong message
		"0000:0001:00001d:9e7bf9:00000eea:0000559840165000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:03:00000000:\x00",
	} {
		_, err := Parse([]byte(bad))
		assert.ErrorIs(t, err, ErrGarbled, "%q", bad)
	}
	_, err := (&Dest{QPN: 1 << 24}).Marshal()
	assert.Error(t, err)
}

func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server = <-ch
	require.NotNil(t, server)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestExchangeBytes: both sides write exactly the bytes rc_pingpong does,
// in its order, and the server connects before it answers.
func TestExchangeBytes(t *testing.T) {
	c, s := tcpPair(t)
	cd, _ := Parse([]byte(clientMsg))
	sd, _ := Parse([]byte(serverMsg))
	var order []string
	type res struct {
		d   Dest
		err error
	}
	sch := make(chan res, 1)
	go func() {
		d, err := ServerExchange(s, sd, func(Dest) error { order = append(order, "connect"); return nil }, time.Second)
		sch <- res{d, err}
	}()
	got, err := ClientExchange(c, cd, time.Second)
	require.NoError(t, err)
	assert.Equal(t, sd, got)
	r := <-sch
	require.NoError(t, r.err)
	assert.Equal(t, cd, r.d)
	assert.Equal(t, []string{"connect"}, order)

	// Against a recorded server: the client's bytes are rc_pingpong's.
	// The server owns order until it is done.
	c, s = tcpPair(t)
	served := make(chan struct{})
	go func() {
		defer close(served)
		b := make([]byte, MsgSize)
		io.ReadFull(s, b)
		order = append(order, string(b))
		s.Write([]byte(serverMsg))
		d := make([]byte, 5)
		io.ReadFull(s, d)
		order = append(order, string(d))
		s.Close()
	}()
	_, err = ClientExchange(c, cd, time.Second)
	require.NoError(t, err)
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("the recorded server did not finish")
	}
	assert.Equal(t, []string{"connect", clientMsg, "done\x00"}, order)
}

// TestExchangeBadPeer: short, garbled or silent peers fail within the
// timeout.
func TestExchangeBadPeer(t *testing.T) {
	sd, _ := Parse([]byte(serverMsg))
	tests := []struct {
		name  string
		send  string
		close bool
		want  error
	}{
		{"silent", "", false, ErrTimeout},
		{"closes", "", true, ErrPeerClosed},
		{"short", clientMsg[:20], true, ErrPeerClosed},
		{"short and silent", clientMsg[:20], false, ErrTimeout},
		{"garbled", strings.Repeat("x", MsgSize), false, ErrGarbled},
		{"no done", clientMsg + "nope!", false, ErrGarbled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, s := tcpPair(t)
			go func() {
				c.Write([]byte(tc.send))
				if tc.close {
					c.Close()
				}
				io.Copy(io.Discard, c)
			}()
			start := time.Now()
			_, err := ServerExchange(s, sd, func(Dest) error { return nil }, 300*time.Millisecond)
			assert.ErrorIs(t, err, tc.want)
			assert.Less(t, time.Since(start), 2*time.Second)
		})
	}
}

// TestRunGoroceToGoroce: a goroce server and a goroce client ping-pong
// over real sockets (two devices on 127.0.0.1 and 127.0.0.2).
func TestRunGoroceToGoroce(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	for _, tc := range []struct {
		size int
		mtu  qp.MTU
	}{{4096, qp.MTU1024}, {64, qp.MTU1024}, {10000, qp.MTU4096}} {
		t.Run(fmt.Sprintf("s%d_m%d", tc.size, tc.mtu.Bytes()), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.2:0")
			require.NoError(t, err)
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			u, err := net.ListenPacket("udp", "127.0.0.1:0")
			require.NoError(t, err)
			rport := uint16(u.LocalAddr().(*net.UDPAddr).Port)
			u.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			base := Config{Port: port, RoCEPort: rport, Size: tc.size, Iters: 50, MTU: tc.mtu, Timeout: 10 * time.Second}
			srv, cli := base, base
			var so, co bytes.Buffer
			srv.Server, srv.Listen, srv.Out = true, "127.0.0.2", &so
			cli.Peer, cli.Out = "127.0.0.2", &co
			errc := make(chan error, 1)
			go func() {
				_, err := Run(ctx, srv)
				errc <- err
			}()
			r, err := Run(ctx, cli)
			require.NoError(t, <-errc, "server:\n%s", so.String())
			require.NoError(t, err, "client:\n%s", co.String())
			assert.Equal(t, int64(tc.size*50*2), r.Bytes)
			assert.Contains(t, co.String(), fmt.Sprintf("%d bytes in ", tc.size*100))
			assert.Contains(t, so.String(), "50 iters in ")
			assert.Contains(t, co.String(), "remote address: LID 0x0000, QPN 0x")
		})
	}
}

// TestRunImpaired: goroce ping-pongs with goroce over a path that loses,
// reorders and duplicates packets both ways on both sides
// (goroce pingpong --impair), and each side reports what its peer did.
func TestRunImpaired(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	rport := uint16(u.LocalAddr().(*net.UDPAddr).Port)
	u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	imp, err := impair.Parse("loss=2%,reorder=1%,dup=1%,seed=3")
	require.NoError(t, err)
	base := Config{Port: port, RoCEPort: rport, Size: 4096, Iters: 200, MTU: qp.MTU1024, Timeout: 10 * time.Second, Impair: &imp}
	srv, cli := base, base
	var so, co, sr, cr bytes.Buffer
	srv.Server, srv.Listen, srv.Out, srv.ImpairOut = true, "127.0.0.2", &so, &sr
	cli.Peer, cli.Out, cli.ImpairOut = "127.0.0.2", &co, &cr
	type ret struct {
		r   Result
		err error
	}
	done := make(chan ret, 1)
	go func() {
		r, err := Run(ctx, srv)
		done <- ret{r, err}
	}()
	r, err := Run(ctx, cli)
	s := <-done
	require.NoError(t, s.err, "server:\n%s", so.String())
	require.NoError(t, err, "client:\n%s", co.String())
	assert.Equal(t, int64(4096*200*2), r.Bytes)
	for _, res := range []Result{r, s.r} {
		require.NotNil(t, res.Impair)
		l := res.Impair.Link
		assert.NotZero(t, l.Tx.Dropped+l.Rx.Dropped)
		assert.Positive(t, res.Impair.LongestStall)
	}
	// Each side's losses on the way out show up as the other side's
	// repairs: retransmissions, and duplicates the peer answered again.
	assert.NotZero(t, r.Impair.Retransmitted+s.r.Impair.Retransmitted)
	assert.NotZero(t, r.Impair.DuplicateRequests+s.r.Impair.DuplicateRequests)
	assert.Contains(t, sr.String(), "Impairment         : tx loss=2%,dup=1%,reorder=1%")
	assert.Contains(t, cr.String(), "Longest stall")
}

// freePorts returns a free TCP port on 127.0.0.2 for the exchange and a
// free UDP port for both devices.
func freePorts(t *testing.T) (tcp int, roce uint16) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	tcp = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	roce = uint16(u.LocalAddr().(*net.UDPAddr).Port)
	u.Close()
	return tcp, roce
}

// TestRunTransports: goroce ping-pongs with goroce as rc_, uc_ and
// ud_pingpong would, over real sockets, each side checking every message
// it receives (Config.Check): for UD the payload starts after the GRH
// area, which must not leak into it.
func TestRunTransports(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	for _, tc := range []struct {
		typ  qp.Type
		size int
		mtu  qp.MTU
	}{
		{qp.TypeRC, 4096, qp.MTU1024},
		{qp.TypeUC, 4096, qp.MTU1024},
		{qp.TypeUC, 64, qp.MTU1024},
		{qp.TypeUC, 10000, qp.MTU4096},
		{qp.TypeUD, 1024, qp.MTU1024},
		{qp.TypeUD, 64, qp.MTU1024},
		{qp.TypeUD, 4096, qp.MTU4096},
	} {
		t.Run(fmt.Sprintf("%v_s%d_m%d", tc.typ, tc.size, tc.mtu.Bytes()), func(t *testing.T) {
			port, rport := freePorts(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			base := Config{Type: tc.typ, Port: port, RoCEPort: rport, Size: tc.size, Iters: 50, MTU: tc.mtu,
				Timeout: 10 * time.Second, Check: true}
			srv, cli := base, base
			var so, co bytes.Buffer
			srv.Server, srv.Listen, srv.Out = true, "127.0.0.2", &so
			cli.Peer, cli.Out = "127.0.0.2", &co
			type ret struct {
				r   Result
				err error
			}
			done := make(chan ret, 1)
			go func() {
				r, err := Run(ctx, srv)
				done <- ret{r, err}
			}()
			r, err := Run(ctx, cli)
			s := <-done
			require.NoError(t, s.err, "server:\n%s", so.String())
			require.NoError(t, err, "client:\n%s", co.String())
			for _, res := range []Result{r, s.r} {
				assert.Equal(t, int64(tc.size*50*2), res.Bytes)
				assert.Equal(t, 50, res.Iters)
			}
			assert.Contains(t, co.String(), fmt.Sprintf("%d bytes in ", tc.size*100))
			assert.Contains(t, so.String(), "50 iters in ")
			assert.Contains(t, co.String(), "remote address: LID 0x0000, QPN 0x")
		})
	}
}

// TestCheckRecvGRH: with Check, a UD message is compared after the GRH
// area and must count it; a payload placed at the start of the buffer
// (the GRH area leaking into the message) or a count without the GRH is
// caught.
func TestCheckRecvGRH(t *testing.T) {
	const size = 64
	cfg := &Config{Type: qp.TypeUD, Size: size}
	buf := make([]byte, 2*size+qp.GRHLen)
	recvd := buf[size:]
	for i := range qp.GRHLen {
		recvd[i] = 0x45 // an IPv4 header's first byte, say
	}
	pattern(recvd[qp.GRHLen:], 3)
	wc := &cq.Completion{ByteLen: size + qp.GRHLen}
	require.NoError(t, checkRecv(cfg, buf, wc, 3))
	assert.ErrorIs(t, checkRecv(cfg, buf, wc, 4), ErrCorrupt, "another message")
	assert.ErrorIs(t, checkRecv(cfg, buf, &cq.Completion{ByteLen: size}, 3), ErrCorrupt, "no GRH counted")

	// The payload at the start of the receive buffer, where the GRH goes.
	clear(recvd)
	pattern(recvd[:size], 3)
	assert.ErrorIs(t, checkRecv(cfg, buf, wc, 3), ErrCorrupt)

	// RC and UC have no GRH area.
	rc := &Config{Type: qp.TypeUC, Size: size}
	buf = make([]byte, 2*size)
	pattern(buf[size:], 0)
	assert.NoError(t, checkRecv(rc, buf, &cq.Completion{ByteLen: size}, 0))
}

// TestConfigTransport: ud_pingpong's defaults and limits.
func TestConfigTransport(t *testing.T) {
	c := Config{Type: qp.TypeUD, Server: true}
	require.Error(t, c.defaults(), "2048 bytes above the default MTU 1024")
	assert.Contains(t, c.defaults().Error(), "larger than the port MTU (1024)")
	c = Config{Type: qp.TypeUD, Server: true, MTU: qp.MTU2048}
	require.NoError(t, c.defaults())
	assert.Equal(t, 2048, c.Size)
	c = Config{Server: true}
	require.NoError(t, c.defaults())
	assert.Equal(t, qp.TypeRC, c.Type)
	assert.Equal(t, 4096, c.Size)
	imp, err := impair.Parse("loss=1%")
	require.NoError(t, err)
	c = Config{Type: qp.TypeUC, Server: true, Impair: &imp}
	assert.ErrorContains(t, c.defaults(), "needs RC")
	c = Config{Type: qp.Type(9), Server: true}
	assert.Error(t, c.defaults())
}
