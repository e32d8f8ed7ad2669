package main

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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

// noRTU is a link that withholds the RTUs its device sends when drop is
// set, so that the example's connection waits for one.
type noRTU struct {
	link.Link
	drop bool
}

func (l *noRTU) Send(dgs []link.Datagram) (int, error) {
	for i := range dgs {
		if m, ok := cmhostile.GSIMAD(dgs[i].Buf); ok && l.drop && m.AttrID() == cm.AttrRTU {
			continue
		}
		if _, err := l.Link.Send(dgs[i : i+1]); err != nil {
			return i, err
		}
	}
	return len(dgs), nil
}

// TestExample runs the example's two sides as two processes, as the
// package comment says, on loopback addresses of their own (the default
// ones, 127.0.0.1 and 127.0.0.2 on port 4791, are other packages' tests'
// too), and checks their output.
func TestExample(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	bin := filepath.Join(t.TempDir(), "cm")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var sout bytes.Buffer
	srv := exec.Command(bin, "-server", "127.0.27.4")
	srv.Stdout, srv.Stderr = &sout, &sout
	require.NoError(t, srv.Start())
	t.Cleanup(func() { srv.Process.Kill() })
	var cout []byte
	for end := time.Now().Add(20 * time.Second); ; {
		cout, err = exec.Command(bin, "-client", "127.0.27.3", "-to", "127.0.27.4").CombinedOutput()
		if err == nil || time.Now().After(end) {
			break
		}
		time.Sleep(200 * time.Millisecond) // the listener was not up yet
	}
	require.NoError(t, err, "%s", cout)
	require.NoError(t, srv.Wait(), "%s", sout.String())
	assert.Contains(t, string(cout), `reply "welcome"`)
	assert.Contains(t, string(cout), "dialer: disconnected")
	assert.Contains(t, sout.String(), `listener: received "one SEND over rdma_cm"`)
}

// TestExampleSignals (issue 27, part 3): the example's listener, ended by
// SIGINT with a connection up, or SIGTERM with one waiting for its RTU,
// tells the peer (a DREQ, a REJ: the peer's Conn ends at once, not by a
// timeout) and exits with 130 or 143 within the 2 s bound.
func TestExampleSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example, real sockets")
	}
	bin := filepath.Join(t.TempDir(), "cm")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, tc := range []struct {
		name    string
		sig     os.Signal
		status  int
		noRTU   bool
		rejects bool
	}{
		{"established, SIGINT", os.Interrupt, 130, false, false},
		{"waiting for the RTU, SIGTERM", syscall.SIGTERM, 143, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			p := exec.Command(bin, "-server", "127.0.27.2")
			p.Stderr = &stderr
			require.NoError(t, p.Start())
			exited := make(chan error, 1)
			go func() { exited <- p.Wait() }()
			t.Cleanup(func() { p.Process.Kill() })

			// Quick REQ retransmissions while the example starts; the
			// example's REP timer is as quick (256 ms, 16 times).
			cmc := cm.Config{CMResponseTimeout: 16, PacketLifeTime: 10}
			u, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.27.1:4791")})
			require.NoError(t, err)
			d, err := roce.Open(roce.Config{Link: &noRTU{Link: u, drop: tc.noRTU}, CM: cmc})
			require.NoError(t, err)
			defer d.Close()
			var c *roce.Conn
			for end := time.Now().Add(20 * time.Second); ; {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				c, err = d.Dial(ctx, netip.MustParseAddrPort("127.0.27.2:7471"), roce.DialConfig{})
				cancel()
				if err == nil || time.Now().After(end) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			require.NoError(t, err)
			time.Sleep(200 * time.Millisecond) // our RTU (if sent) reaches the example
			t0 := time.Now()
			require.NoError(t, p.Process.Signal(tc.sig))
			select {
			case <-c.Done():
			case <-time.After(2500 * time.Millisecond):
				t.Fatal("the peer's connection did not end within the bound")
			}
			var re *roce.RejectError
			if tc.rejects {
				assert.ErrorAs(t, c.Err(), &re)
			} else {
				assert.ErrorIs(t, c.Err(), roce.ErrDisconnected)
			}
			select {
			case err := <-exited:
				var ee *exec.ExitError
				require.True(t, errors.As(err, &ee), "exit: %v", err)
				assert.Equal(t, tc.status, ee.ExitCode(), "stderr: %s", stderr.String())
			case <-time.After(2500 * time.Millisecond):
				t.Fatal("the example did not exit within the bound")
			}
			t.Logf("ended %v after the signal", time.Since(t0))
		})
	}
}
