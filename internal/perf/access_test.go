package perf

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// fakeClient plays a perftest client by hand against a goroce perf server:
// the TCP exchange through internal/perftest, then RoCEv2 requests crafted
// and sealed here, over a link/mem network the server's device is on.
type fakeClient struct {
	t    *testing.T
	l    link.Link
	dev  netip.AddrPort // the server device's address
	srv  perftest.Dest  // the server's key message
	psn  bth.PSN
	bufs []link.Datagram
}

// serve starts a goroce perf server for tool (up to the end of the key
// exchange, as RunRemote does before the traffic) and connects fakeClient
// to it. The server's remote is returned for inspection.
func serve(t *testing.T, tool perftest.Tool) (*remote, *fakeClient) {
	t.Helper()
	tcp, _ := freePorts(t)
	const port = 4791 // link/mem: no real UDP socket
	n := mem.NewNetwork()
	cfg := RemoteConfig{Tool: tool, Server: true, Listen: "127.0.0.2", Port: tcp, RoCEPort: port, Size: 4096,
		Iters: 5, Timeout: 10 * time.Second,
		OpenLink: func(a netip.AddrPort) (link.Link, error) { return n.Attach(a), nil }}
	require.NoError(t, cfg.defaults())
	r := &remote{cfg: &cfg}
	t.Cleanup(r.close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- r.connect(ctx) }()

	var nc net.Conn
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}
	require.Eventually(t, func() bool {
		var err error
		nc, err = d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(tcp)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the server does not listen")
	t.Cleanup(func() { nc.Close() })
	conn := perftest.NewConn(nc, perftest.Client)
	conn.Timeout = 10 * time.Second
	ses := perftest.NewSession(conn, tool)
	_, err := ses.Hello(qp.MTU1024)
	require.NoError(t, err)
	c := &fakeClient{t: t, l: n.Attach(netip.MustParseAddrPort("127.0.0.1:4791")),
		dev: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port), psn: 0x100}
	t.Cleanup(func() { c.l.Close() })
	rem, err := ses.Keys([]perftest.Dest{{OutReads: 16, QPN: 0x118, PSN: uint32(c.psn),
		GID: perftest.GIDFromAddr(netip.MustParseAddr("127.0.0.1"))}})
	require.NoError(t, err)
	c.srv = rem[0]
	require.NoError(t, ses.Barrier())
	require.NoError(t, <-done)
	return r, c
}

// request sends one request of opcode op (READ, WRITE ONLY, SEND ONLY or
// FETCH_ADD) at the server's buffer and returns the server's answer.
func (c *fakeClient) request(op bth.Opcode) *wire.Packet {
	c.t.Helper()
	f := wire.Fields{BTH: bth.Fields{Opcode: op, PKey: 0xffff, DestQP: bth.QPN(c.srv.QPN), PSN: c.psn, AckReq: true}}
	c.psn = c.psn.Next()
	var payload []byte
	switch op {
	case bth.RCRDMAReadRequest:
		f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = c.srv.VAddr, c.srv.RKey, 64
	case bth.RCRDMAWriteOnly:
		f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = c.srv.VAddr, c.srv.RKey, 64
		payload = make([]byte, 64)
	case bth.RCSendOnly:
		payload = make([]byte, 64)
	case bth.RCFetchAdd:
		f.AtomicETH.VA, f.AtomicETH.RKey, f.AtomicETH.SwapData = c.srv.VAddr, c.srv.RKey, 1
	}
	buf := make([]byte, 4200)
	n, err := wire.Build(buf, &f, payload)
	require.NoError(c.t, err)
	var ph [48]byte
	ip, udp := rocev2.PseudoHeaders(&ph, c.l.LocalAddr(), c.dev, 0, n)
	rocev2.PutICRC(buf[n-4:n], rocev2.ComputeICRC(ip, udp, buf[:n-4]))
	_, err = c.l.Send([]link.Datagram{{Buf: buf[:n], Dst: c.dev}})
	require.NoError(c.t, err)

	got := make(chan link.Datagram, 1)
	go func() {
		dgs := []link.Datagram{{Buf: make([]byte, 9000)}}
		if k, err := c.l.Recv(dgs); err == nil && k == 1 {
			got <- dgs[0]
		}
	}()
	select {
	case dg := <-got:
		p := new(wire.Packet)
		require.NoError(c.t, p.Parse(dg.Buf))
		return p
	case <-time.After(10 * time.Second):
		c.t.Fatalf("no answer to %v", op)
		return nil
	}
}

// TestServerLeastPrivilege (issue 17, defect 4): a goroce perf server
// grants its peer exactly the remote access of the test, on its MR and its
// QP, as perftest does. The operation under test is answered; any other
// reaches a QP whose access flags do not enable it and is refused as rxe
// refuses it (check_op_valid): NAK invalid request (0x61), the QP to ERR.
func TestServerLeastPrivilege(t *testing.T) {
	tests := []struct {
		name    string
		verb    perftest.Verb
		grant   mr.AccessFlags
		ok      bth.Opcode
		refused bth.Opcode
	}{
		{"write/READ", perftest.Write, mr.RemoteWrite, bth.RCRDMAWriteOnly, bth.RCRDMAReadRequest},
		{"write/FETCH_ADD", perftest.Write, mr.RemoteWrite, bth.RCRDMAWriteOnly, bth.RCFetchAdd},
		{"read/WRITE", perftest.Read, mr.RemoteRead, bth.RCRDMAReadRequest, bth.RCRDMAWriteOnly},
		{"read/FETCH_ADD", perftest.Read, mr.RemoteRead, bth.RCRDMAReadRequest, bth.RCFetchAdd},
		{"atomic/WRITE", perftest.Atomic, mr.RemoteAtomic, bth.RCFetchAdd, bth.RCRDMAWriteOnly},
		{"atomic/READ", perftest.Atomic, mr.RemoteAtomic, bth.RCFetchAdd, bth.RCRDMAReadRequest},
		{"send/WRITE", perftest.Send, 0, bth.RCSendOnly, bth.RCRDMAWriteOnly},
		{"send/READ", perftest.Send, 0, bth.RCSendOnly, bth.RCRDMAReadRequest},
		{"send/FETCH_ADD", perftest.Send, 0, bth.RCSendOnly, bth.RCFetchAdd},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, c := serve(t, perftest.Tool{Verb: tc.verb})
			assert.Equal(t, mr.LocalWrite|tc.grant, r.mr.Access(), "the server's MR")
			q := r.qps[0]

			okPSN := c.psn
			p := c.request(tc.ok)
			assert.NotEqual(t, bth.RCAcknowledge, tc.ok) // the answer below is the op's own
			if p.AETH != nil {
				assert.True(t, p.AETH.Syndrome().IsACK(), "%v answered %v", tc.ok, p.AETH.Syndrome())
			}
			assert.Equal(t, okPSN, p.BTH.PSN())
			require.Equal(t, qp.StateRTS, q.State())

			word := make([]byte, 8) // the first word, which an atomic would change
			require.NoError(t, r.mr.ReadAt(word, r.mr.IOVA()))
			before := binary.LittleEndian.Uint64(word)
			badPSN := c.psn
			p = c.request(tc.refused)
			assert.Equal(t, bth.RCAcknowledge, p.Opcode())
			require.NotNil(t, p.AETH)
			assert.Equal(t, aeth.NAKInvalidRequest, p.AETH.Syndrome(), "NAK invalid request, as rxe")
			assert.Equal(t, badPSN, p.BTH.PSN())
			assert.Equal(t, qp.StateErr, q.State(), "class C: the QP goes to ERR")
			assert.Equal(t, uint64(1), q.Counters().Load(qp.CounterRespOpNotEnabledErr))
			assert.Zero(t, q.Counters().Load(qp.CounterRkeyViolation), "refused by the QP's access flags, not the MR's")
			require.NoError(t, r.mr.ReadAt(word, r.mr.IOVA()))
			assert.Equal(t, before, binary.LittleEndian.Uint64(word), "the refused request changed memory")
		})
	}
}

// TestLoopbackLeastPrivilege: the loopback tests still run with each side
// granting only what it needs (the requester nothing, the target the
// operation under test), over link/mem.
func TestLoopbackLeastPrivilege(t *testing.T) {
	for _, op := range []Op{OpWrite, OpRead, OpSend, OpAtomic} {
		for _, lat := range []bool{false, true} {
			t.Run(string(op)+map[bool]string{false: "/bw", true: "/lat"}[lat], func(t *testing.T) {
				n := mem.NewNetwork()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				res, err := Run(ctx, Config{Op: op, Size: 4096, Iters: 20, Latency: lat, MTU: qp.MTU1024,
					OpenLink: func(a netip.AddrPort) (link.Link, error) { return n.Attach(a), nil }})
				require.NoError(t, err)
				assert.Equal(t, 20, res.Iters)
				assert.Zero(t, res.Errors)
			})
		}
	}
}

// TestRemoteAccessPerRole: what each side of each perftest tool grants its
// peer (perftest_resources.c grants per verb; a side the peer never
// targets grants nothing).
func TestRemoteAccessPerRole(t *testing.T) {
	tests := []struct {
		tool         perftest.Tool
		server, clnt mr.AccessFlags
	}{
		{perftest.Tool{Verb: perftest.Write}, mr.RemoteWrite, 0},
		{perftest.Tool{Verb: perftest.Read}, mr.RemoteRead, 0},
		{perftest.Tool{Verb: perftest.Atomic}, mr.RemoteAtomic, 0},
		{perftest.Tool{Verb: perftest.Send}, 0, 0},
		{perftest.Tool{Verb: perftest.Write, Lat: true}, mr.RemoteWrite, mr.RemoteWrite},
		{perftest.Tool{Verb: perftest.Read, Lat: true}, mr.RemoteRead, 0},
		{perftest.Tool{Verb: perftest.Send, Lat: true}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.tool.Name(), func(t *testing.T) {
			for _, role := range []perftest.Role{perftest.Server, perftest.Client} {
				r := &remote{cfg: &RemoteConfig{Tool: tc.tool}, role: role}
				var got mr.AccessFlags
				if r.targeted() {
					got = remoteAccess(r.op())
				}
				want := tc.server
				if role == perftest.Client {
					want = tc.clnt
				}
				assert.Equal(t, want, got, "%v", role)
			}
		})
	}
}
