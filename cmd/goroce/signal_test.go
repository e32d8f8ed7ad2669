package main

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/internal/cmhostile"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/roce"
)

// madFilter is a link that withholds the CM MADs drop selects from what
// its device sends, and counts every CM MAD its device receives.
type madFilter struct {
	link.Link
	drop func(a cm.AttrID) bool

	mu   sync.Mutex
	recv map[cm.AttrID]int
}

func (l *madFilter) Send(dgs []link.Datagram) (int, error) {
	for i := range dgs {
		if m, ok := cmhostile.GSIMAD(dgs[i].Buf); ok && l.drop != nil && l.drop(m.AttrID()) {
			continue
		}
		if _, err := l.Link.Send(dgs[i : i+1]); err != nil {
			return i, err
		}
	}
	return len(dgs), nil
}

func (l *madFilter) Recv(dgs []link.Datagram) (int, error) {
	n, err := l.Link.Recv(dgs)
	for i := range n {
		if m, ok := cmhostile.GSIMAD(dgs[i].Buf); ok {
			l.mu.Lock()
			l.recv[m.AttrID()]++
			l.mu.Unlock()
		}
	}
	return n, err
}

func (l *madFilter) got(a cm.AttrID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recv[a]
}

// signalPeer is the in-test goroce peer of a tool under a signal: a
// device on addr:port (the tool's --roce-port) whose link may withhold
// MADs.
func signalPeer(t *testing.T, addr string, port int, drop func(cm.AttrID) bool) (*roce.Device, *madFilter) {
	u, err := udp.Open(udp.Config{Addr: netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(port))})
	require.NoError(t, err)
	f := &madFilter{Link: u, drop: drop, recv: map[cm.AttrID]int{}}
	// Quick REQ retransmissions (256 ms plus 2·4 ms) while the tool is not
	// listening yet; the tool's REP timer is the same 256 ms, 16 times.
	d, err := roce.Open(roce.Config{Link: f, DestPort: uint16(port), CM: cm.Config{CMResponseTimeout: 16, PacketLifeTime: 10}})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d, f
}

// tool is a goroce binary started by a test.
type tool struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
	done     chan struct{}
	exitErr  error
	exitedAt time.Time
}

func startTool(t *testing.T, bin string, args ...string) *tool {
	p := &tool{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	require.NoError(t, p.cmd.Start())
	go func() {
		p.exitErr = p.cmd.Wait()
		p.exitedAt = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits up to d for the tool to exit and returns its exit status.
func (p *tool) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("the tool did not exit within %v\nstdout: %s\nstderr: %s", d, p.out.String(), p.err.String())
	}
	var ee *exec.ExitError
	if errors.As(p.exitErr, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, p.exitErr)
	return 0
}

// dialRetry dials until the tool listens (before, its device has no CM
// to answer, or answers REJ 8).
func dialRetry(t *testing.T, d *roce.Device, to netip.AddrPort) *roce.Conn {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := d.Dial(ctx, to, roce.DialConfig{})
		cancel()
		if err == nil {
			return c
		}
		if time.Now().After(end) {
			t.Fatalf("dial %v: %v", to, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ended waits up to d for c to end, and says how long that took.
func ended(t *testing.T, c *roce.Conn, since time.Time, d time.Duration) time.Duration {
	t.Helper()
	select {
	case <-c.Done():
		return time.Since(since)
	case <-time.After(d):
		t.Fatalf("the peer's connection did not end within %v of the signal", d)
		return 0
	}
}

// TestToolsSignals (issue 27, part 3) builds the goroce binary and ends
// its long-running subcommands with SIGINT or SIGTERM while they hold a
// connection to an in-test goroce peer on the loopback: the peer's side
// ends within the grace period (2 s) because the tool's device sent the
// DREQ (established) or the REJ (a connection whose REP awaits its RTU),
// as the kernel does for an interrupted rdma_cm program, not by a
// timeout; the tool exits with 130 (SIGINT) or 143 (SIGTERM). A tool whose
// close waits (the peer never answers the DREQ) exits after the grace
// period, or at once on a second signal.
func TestToolsSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, real sockets")
	}
	bin := filepath.Join(t.TempDir(), "goroce")
	b := exec.Command("go", "build", "-o", bin, ".")
	out, err := b.CombinedOutput()
	require.NoError(t, err, "%s", out)
	const grace = shutdownGrace + 500*time.Millisecond // the bound, and a margin for a loaded machine

	t.Run("rping server, established, SIGINT: DREQ, 130", func(t *testing.T) {
		port := freeUDPPort(t)
		p := startTool(t, bin, "rping", "-s", "-a", "127.0.0.2", "-p", "7174", "-roce-port", strconv.Itoa(port))
		d, f := signalPeer(t, "127.0.0.1", port, nil)
		c := dialRetry(t, d, netip.MustParseAddrPort("127.0.0.2:7174"))
		time.Sleep(200 * time.Millisecond) // our RTU reaches the tool
		t0 := time.Now()
		require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
		took := ended(t, c, t0, grace)
		assert.ErrorIs(t, c.Err(), roce.ErrDisconnected)
		assert.Equal(t, 1, f.got(cm.AttrDREQ), "the tool's DREQ")
		assert.Equal(t, 130, p.wait(t, grace))
		t.Logf("the peer's Conn ended %v after SIGINT; the tool exited %v after it", took, p.exitedAt.Sub(t0))
	})

	t.Run("rping server, REP awaiting its RTU, SIGTERM: REJ, 143", func(t *testing.T) {
		port := freeUDPPort(t)
		p := startTool(t, bin, "rping", "-s", "-a", "127.0.0.2", "-p", "7174", "-roce-port", strconv.Itoa(port))
		d, f := signalPeer(t, "127.0.0.1", port, func(a cm.AttrID) bool { return a == cm.AttrRTU })
		c := dialRetry(t, d, netip.MustParseAddrPort("127.0.0.2:7174")) // established here, not there
		t0 := time.Now()
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		ended(t, c, t0, grace)
		var re *roce.RejectError
		assert.ErrorAs(t, c.Err(), &re, "ended by the tool's REJ, not a timeout")
		assert.Equal(t, 1, f.got(cm.AttrREJ))
		assert.Equal(t, 143, p.wait(t, grace))
	})

	t.Run("rping client, established, SIGINT: DREQ, 130", func(t *testing.T) {
		port := freeUDPPort(t)
		d, f := signalPeer(t, "127.0.0.2", port, nil)
		l, err := d.Listen(7174, roce.ListenConfig{})
		require.NoError(t, err)
		p := startTool(t, bin, "rping", "-c", "-a", "127.0.0.2", "-I", "127.0.0.1", "-p", "7174", "-roce-port", strconv.Itoa(port))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := l.Accept(ctx)
		require.NoError(t, err)
		t0 := time.Now()
		require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
		ended(t, c, t0, grace)
		assert.Equal(t, 1, f.got(cm.AttrDREQ))
		assert.Equal(t, 130, p.wait(t, grace))
	})

	for _, role := range []string{"server", "client"} {
		t.Run("perf -R "+role+", SIGTERM: DREQ, 143", func(t *testing.T) {
			port := freeUDPPort(t)
			var c *roce.Conn
			var f *madFilter
			var p *tool
			if role == "server" {
				p = startTool(t, bin, "perf", "write", "--server", "-R", "--source_ip", "127.0.0.2", "-p", "18601",
					"--roce-port", strconv.Itoa(port))
				var d *roce.Device
				d, f = signalPeer(t, "127.0.0.1", port, nil)
				c = dialRetry(t, d, netip.MustParseAddrPort("127.0.0.2:18601"))
			} else {
				var d *roce.Device
				d, f = signalPeer(t, "127.0.0.2", port, nil)
				l, err := d.Listen(18601, roce.ListenConfig{})
				require.NoError(t, err)
				p = startTool(t, bin, "perf", "write", "-R", "--source_ip", "127.0.0.1", "-p", "18601",
					"--roce-port", strconv.Itoa(port), "127.0.0.2")
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				c, err = l.Accept(ctx)
				require.NoError(t, err)
			}
			time.Sleep(200 * time.Millisecond) // the tool waits for the exchange
			t0 := time.Now()
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			ended(t, c, t0, grace)
			assert.Equal(t, 1, f.got(cm.AttrDREQ), "the control connection's DREQ")
			assert.Equal(t, 143, p.wait(t, grace), "stderr: %s", p.err.String())
		})
	}

	t.Run("pingpong server, SIGINT: 130", func(t *testing.T) {
		p := startTool(t, bin, "pingpong", "-p", strconv.Itoa(18700+os.Getpid()%200))
		time.Sleep(300 * time.Millisecond)
		t0 := time.Now()
		require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
		assert.Equal(t, 130, p.wait(t, grace))
		assert.Less(t, p.exitedAt.Sub(t0), grace)
	})

	t.Run("DREP withheld: exit after the grace period, or at once on a second signal", func(t *testing.T) {
		for _, twice := range []bool{false, true} {
			port := freeUDPPort(t)
			p := startTool(t, bin, "rping", "-s", "-a", "127.0.0.2", "-p", "7174", "-roce-port", strconv.Itoa(port))
			d, _ := signalPeer(t, "127.0.0.1", port, func(a cm.AttrID) bool { return a == cm.AttrDREP })
			c := dialRetry(t, d, netip.MustParseAddrPort("127.0.0.2:7174"))
			time.Sleep(200 * time.Millisecond)
			t0 := time.Now()
			require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
			ended(t, c, t0, grace) // the DREQ came; our DREP never reaches the tool
			if twice {
				time.Sleep(300 * time.Millisecond)
				t1 := time.Now()
				require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
				assert.Equal(t, 130, p.wait(t, time.Second))
				assert.Less(t, p.exitedAt.Sub(t1), 500*time.Millisecond, "the second signal exits at once")
				continue
			}
			assert.Equal(t, 130, p.wait(t, grace))
			assert.GreaterOrEqual(t, p.exitedAt.Sub(t0), shutdownGrace-100*time.Millisecond, "the tool waited for its DREP")
			assert.Contains(t, p.err.String(), "not closed after 2s: exiting")
		}
	})
}
