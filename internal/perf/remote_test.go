package perf

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/roce"
)

// freePorts returns a TCP port free on 127.0.0.2 and a UDP port free on
// both 127.0.0.1 and 127.0.0.2 (the two devices use the same port, as
// RoCEv2 peers use 4791).
func freePorts(t *testing.T) (tcp int, roce uint16) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	tcp = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for range 50 {
		a, err := net.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		p := a.LocalAddr().(*net.UDPAddr).Port
		b, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.2:%d", p))
		a.Close()
		if err == nil {
			b.Close()
			return tcp, uint16(p)
		}
	}
	t.Fatal("no UDP port free on both 127.0.0.1 and 127.0.0.2")
	return 0, 0
}

// runPair runs cfg as a goroce server on 127.0.0.2 and a goroce client on
// 127.0.0.1: the perftest exchange and the traffic of each tool between
// two goroce devices, both roles at once.
func runPair(t *testing.T, cfg RemoteConfig) (srv, cli []Result, srvOut, cliOut string) {
	t.Helper()
	return runPairWith(t, cfg, cfg)
}

// runPairWith is runPair with a config for each side.
func runPairWith(t *testing.T, s, c RemoteConfig) (srv, cli []Result, srvOut, cliOut string) {
	t.Helper()
	tcp, port := freePorts(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.Port, s.RoCEPort, s.Timeout = tcp, port, 10*time.Second
	c.Port, c.RoCEPort, c.Timeout = tcp, port, 10*time.Second
	var sb, cb bytes.Buffer
	s.Server, s.Listen, s.Out = true, "127.0.0.2", &sb
	c.Peer, c.Out = "127.0.0.2", &cb
	type ret struct {
		res []Result
		err error
	}
	done := make(chan ret, 1)
	listening := make(chan struct{})
	if s.RDMACM {
		// A REQ sent before the server's device exists is lost and resent
		// seconds later (rdma_cm's timers); rxe's kernel CM would reject it.
		s.Listening = func() { close(listening) }
	} else {
		close(listening) // the TCP client retries refused connections
	}
	go func() {
		r, err := RunRemote(ctx, s)
		done <- ret{r, err}
	}()
	var sr ret
	select {
	case <-listening:
	case sr = <-done:
		require.NoError(t, sr.err, "server:\n%s", sb.String())
	}
	cli, cerr := RunRemote(ctx, c)
	if sr.err == nil && sr.res == nil {
		sr = <-done
	}
	require.NoError(t, sr.err, "server (client: %v):\n%s", cerr, sb.String())
	require.NoError(t, cerr, "client:\n%s", cb.String())
	return sr.res, cli, sb.String(), cb.String()
}

func TestRemoteGoroceToGoroce(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	tests := []struct {
		name string
		cfg  RemoteConfig
	}{
		{"ib_write_bw", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write}, Size: 65536, Iters: 20}},
		{"ib_write_bw -q 2", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write}, Size: 4096, Iters: 20, QPs: 2}},
		{"ib_write_bw --post_list 16", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write}, Size: 64, Iters: 1000, PostList: 16}},
		{"ib_read_bw --post_list 8", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Read}, Size: 64, Iters: 200, PostList: 8}},
		{"ib_write_bw -D 1", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write}, Size: 4096, Duration: time.Second}},
		{"ib_write_bw -a", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write}, All: true, Iters: 5}},
		{"ib_read_bw", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Read}, Size: 65536, Iters: 20}},
		{"ib_send_bw", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Send}, Size: 65536, Iters: 20}},
		{"ib_send_bw -q 2 -a", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Send}, All: true, Iters: 5, QPs: 2}},
		{"ib_atomic_bw FETCH_AND_ADD", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Atomic}, Iters: 50}},
		{"ib_atomic_bw CMP_AND_SWAP", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Atomic}, Atomic: perftest.CmpAndSwap, Iters: 50}},
		{"ib_write_lat", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write, Lat: true}, Iters: 50}},
		{"ib_write_lat -s 4096", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write, Lat: true}, Size: 4096, Iters: 20}},
		{"ib_write_lat -e", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write, Lat: true}, Iters: 200, Wait: WaitEvent}},
		{"ib_send_lat -e", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Send, Lat: true}, Iters: 200, Wait: WaitEvent}},
		{"ib_write_lat --poll", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write, Lat: true}, Iters: 200, Wait: WaitPoll}},
		{"ib_write_lat --rtc", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write, Lat: true}, Iters: 300, Wait: WaitInline}},
		{"ib_write_lat --rtc -a", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write, Lat: true}, All: true, Iters: 5, Wait: WaitInline}},
		{"ib_read_lat", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Read, Lat: true}, Iters: 50}},
		{"ib_send_lat", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Send, Lat: true}, Iters: 50}},
		{"ib_send_lat -a", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Send, Lat: true}, All: true, Iters: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Gbits = true
			srv, cli, so, co := runPair(t, tc.cfg)
			rows := len(tc.cfg.sizes())
			switch {
			case tc.cfg.Tool.Lat:
				assert.Len(t, cli, rows)
				if !tc.cfg.Tool.ServerPassive() {
					assert.Len(t, srv, rows)
				}
				for _, r := range cli {
					assert.Positive(t, r.LatP50us, "typical latency")
				}
			case tc.cfg.Tool.Verb == perftest.Send:
				assert.Len(t, cli, rows)
				assert.Len(t, srv, rows)
			default:
				assert.Len(t, cli, rows)
				// The passive server prints the client's last row.
				require.Len(t, srv, 1)
				last := cli[len(cli)-1]
				assert.Equal(t, last.Size, srv[0].Size)
				assert.Equal(t, last.Iters, srv[0].Iters)
				assert.InDelta(t, last.Gbps, srv[0].Gbps, 1e-9)
			}
			for _, r := range cli {
				if tc.cfg.Duration == 0 {
					assert.Equal(t, tc.cfg.Iters, r.Iters)
				}
				if !tc.cfg.Tool.Lat {
					assert.Positive(t, r.Gbps)
				}
			}
			for _, out := range []string{so, co} {
				assert.Contains(t, out, " Mtu             : 4096[B]")
				assert.Contains(t, out, "remote address: LID 0000")
			}
		})
	}
}

// TestRemoteCPUUtil: a client with --cpu_util (perftest's) ends its
// bw rows with CPU_Util[%], this process's share of the CPUs, and its
// Result carries the CPU time; the server's report is the usual one.
func TestRemoteCPUUtil(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	cfg := RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write}, Size: 65536, Duration: 300 * time.Millisecond}
	cc := cfg
	cc.CPUUtil = true
	_, cli, so, co := runPairWith(t, cfg, cc)
	require.Len(t, cli, 1)
	assert.Positive(t, cli[0].CPUSeconds)
	assert.NotContains(t, so, "CPU_Util")
	head, f := testutil.PerftestRow(co)
	assert.True(t, strings.HasSuffix(head, "CPU_Util[%]"), "header %q", head)
	require.Len(t, f, 6, "row %q", f)
	util, err := strconv.ParseFloat(f[5], 64)
	require.NoError(t, err)
	assert.InDelta(t, cli[0].CPUUse().Util(CPUs()), util, 0.01)
	assert.Positive(t, util)
	assert.LessOrEqual(t, util, 105.0)
}

// TestRemoteBadConfig: refused before any connection.
func TestRemoteBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  RemoteConfig
		want string
	}{
		{"lat -q 2", RemoteConfig{Peer: "x", Tool: perftest.Tool{Verb: perftest.Write, Lat: true}, QPs: 2}, "1 to 1"},
		{"-n 4", RemoteConfig{Peer: "x", Iters: 4}, "5 to 100000000"},
		{"lat -D", RemoteConfig{Peer: "x", Tool: perftest.Tool{Verb: perftest.Send, Lat: true}, Duration: time.Second}, "bw tests only"},
		{"no peer", RemoteConfig{}, "no server"},
		{"--post_list 200", RemoteConfig{Peer: "x", Tool: perftest.Tool{Verb: perftest.Write}, PostList: 200}, "post list 200"},
		{"--cpu_util without -D", RemoteConfig{Peer: "x", CPUUtil: true}, "--cpu_util"},
		{"--cpu_util lat", RemoteConfig{Peer: "x", Tool: perftest.Tool{Verb: perftest.Write, Lat: true}, CPUUtil: true}, "--cpu_util"},
		{"--cpu_util server", RemoteConfig{Server: true, Duration: time.Second, CPUUtil: true}, "--cpu_util"},
		{"--rtc bw", RemoteConfig{Peer: "x", Tool: perftest.Tool{Verb: perftest.Write}, Wait: WaitInline}, "ib_write_lat only"},
		{"--rtc send_lat", RemoteConfig{Peer: "x", Tool: perftest.Tool{Verb: perftest.Send, Lat: true}, Wait: WaitInline}, "ib_write_lat only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RunRemote(context.Background(), tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCheckGIDIndex(t *testing.T) {
	assert.NoError(t, CheckGIDIndex(-1, "-x"))
	assert.NoError(t, CheckGIDIndex(1, "-x"))
	err := CheckGIDIndex(0, "-g")
	assert.ErrorIs(t, err, ErrGIDIndex)
	assert.ErrorContains(t, err, "link-local GID (on rxe too)")
	assert.ErrorContains(t, err, "use -g 1")
	assert.ErrorContains(t, CheckGIDIndex(3, "-x"), "one GID")
}

func TestActiveMTU(t *testing.T) {
	for _, c := range []struct{ ifMTU, want int }{{1500, 1024}, {9000, 4096}, {65536, 4096}, {1104, 1024}, {1103, 512}, {576, 256}} {
		assert.Equal(t, c.want, mtuFor(c.ifMTU).Bytes(), "interface MTU %d", c.ifMTU)
	}
	info, err := ActiveMTU(netipLoopback())
	require.NoError(t, err)
	assert.Equal(t, 4096, info.Active.Bytes())
	_, err = CheckMTU(5, MTUInfo{Interface: "eth0", IfMTU: 1500, Active: 3})
	require.ErrorIs(t, err, ErrMTU)
	assert.True(t, strings.Contains(err.Error(), "needs an interface MTU of at least 4176"))
}

func netipLoopback() netip.Addr { return netip.MustParseAddr("127.0.0.1") }

// TestRemoteRDMACM runs perftest's -R mode between two goroce devices,
// both roles at once: the exchange over an RDMA CM control connection,
// the test QPs connected through the CM, and the teardown (DREQ/DREP) in
// perftest's order.
func TestRemoteRDMACM(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	tests := []struct {
		name string
		cfg  RemoteConfig
	}{
		{"ib_write_bw -R", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write}, Size: 65536, Iters: 20}},
		{"ib_read_bw -R", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Read}, Size: 65536, Iters: 20}},
		{"ib_send_bw -R", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Send}, Size: 65536, Iters: 20}},
		{"ib_write_bw -R -q 2 -m 1024", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write}, Size: 4096, Iters: 20, QPs: 2, MTU: 3}},
		{"ib_send_bw -R -a", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Send}, All: true, Iters: 5}},
		{"ib_atomic_bw -R", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Atomic}, Iters: 50}},
		{"ib_write_lat -R", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write, Lat: true}, Iters: 50}},
		{"ib_read_lat -R", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Read, Lat: true}, Iters: 50}},
		{"ib_send_lat -R", RemoteConfig{Tool: perftest.Tool{Verb: perftest.Send, Lat: true}, Iters: 50}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Gbits, tc.cfg.RDMACM = true, true
			srv, cli, so, co := runPair(t, tc.cfg)
			rows := len(tc.cfg.sizes())
			assert.Len(t, cli, rows)
			switch {
			case tc.cfg.Tool.Lat:
				for _, r := range cli {
					assert.Positive(t, r.LatP50us, "typical latency")
				}
			case tc.cfg.Tool.Verb == perftest.Send:
				assert.Len(t, srv, rows)
			default:
				require.Len(t, srv, 1, "the passive server prints the client's row")
				assert.Equal(t, cli[0].Iters, srv[0].Iters)
				assert.InDelta(t, cli[0].Gbps, srv[0].Gbps, 1e-9)
			}
			for _, r := range cli {
				assert.Equal(t, tc.cfg.Iters, r.Iters)
			}
			mtu := " Mtu             : 4096[B]"
			if tc.cfg.MTU != 0 {
				mtu = fmt.Sprintf(" Mtu             : %d[B]", tc.cfg.MTU.Bytes())
			}
			for _, out := range []string{so, co} {
				assert.Contains(t, out, mtu)
				assert.Contains(t, out, "remote address: LID 0000")
			}
		})
	}
}

// TestRemoteRDMACMNoServer: a -R client whose peer's CM rejects the port
// (nobody listens: reason 8, as rxe's kernel answers) retries until its
// timeout, then says so.
func TestRemoteRDMACMNoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	tcp, port := freePorts(t)
	peer, err := OpenDevice(netip.MustParseAddr("127.0.0.2"), port)
	require.NoError(t, err)
	defer peer.Close()
	l, err := peer.Listen(uint16(tcp)+1, roce.ListenConfig{}) // starts its CM, on another port
	require.NoError(t, err)
	defer l.Close()
	start := time.Now()
	_, err = RunRemote(context.Background(), RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write}, RDMACM: true,
		Peer: "127.0.0.2", Port: tcp, RoCEPort: port, Timeout: 700 * time.Millisecond})
	require.Error(t, err)
	assert.ErrorIs(t, err, roce.ErrRejected)
	assert.ErrorContains(t, err, fmt.Sprintf("nobody listens on rdma_cm port %d of 127.0.0.2", tcp))
	assert.Less(t, time.Since(start), 5*time.Second)
}

// TestRemoteWriteLatRTCMixed: ib_write_lat run to completion on one side
// only talks to a peer that waits the ordinary way (as perftest's
// ib_write_lat does), as client and as server.
func TestRemoteWriteLatRTCMixed(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	plain := RemoteConfig{Tool: perftest.Tool{Verb: perftest.Write, Lat: true}, Iters: 300, Wait: WaitEvent}
	rtc := plain
	rtc.Wait = WaitInline
	for _, tc := range []struct {
		name     string
		srv, cli RemoteConfig
	}{{"rtc client", plain, rtc}, {"rtc server", rtc, plain}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli, _, _ := runPairWith(t, tc.srv, tc.cli)
			require.Len(t, srv, 1)
			require.Len(t, cli, 1)
			assert.Equal(t, 300, cli[0].Iters)
			assert.Positive(t, cli[0].LatP50us)
			assert.Positive(t, srv[0].LatP50us)
		})
	}
}
