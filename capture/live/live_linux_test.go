//go:build linux

package live_test

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/live"
)

func TestOpenNoInterface(t *testing.T) {
	_, err := live.Open("nosuch0", live.Config{})
	assert.ErrorIs(t, err, live.ErrNoInterface)
	_, err = live.Open("", live.Config{})
	assert.ErrorIs(t, err, live.ErrNoInterface)
}

func fds(t *testing.T) int {
	t.Helper()
	e, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(e)
}

// TestHandleWaitStop opens a capture on the loopback of a namespace of
// its own: Next times out after the wait when nothing comes, Stop wakes a
// blocked Next at once, and Close returns every descriptor.
func TestHandleWaitStop(t *testing.T) {
	if testing.Short() {
		t.Skip("raw socket test: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace and an AF_PACKET socket)")
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	ns := "grc-" + hex.EncodeToString(rnd[:])
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("network namespaces unavailable: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	require.NoError(t, exec.Command("ip", "-n", ns, "link", "set", "lo", "up").Run())
	before := fds(t)

	type opened struct {
		h, h2 *live.Handle
		err   error
	}
	c := make(chan opened, 1)
	go func() { // the socket is made in ns; the thread dies with the goroutine
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns)
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			f.Close()
		}
		if err != nil {
			c <- opened{err: err}
			return
		}
		h, err := live.Open("lo", live.Config{Wait: 50 * time.Millisecond})
		if err != nil {
			c <- opened{err: err}
			return
		}
		h2, err := live.Open("lo", live.Config{Wait: time.Hour})
		if err != nil {
			h.Close()
		}
		c <- opened{h, h2, err}
	}()
	o := <-c
	require.NoError(t, o.err)
	h, h2 := o.h, o.h2

	var f capture.Frame
	t0 := time.Now()
	assert.ErrorIs(t, h.Next(&f), live.ErrTimeout)
	assert.ErrorIs(t, h.Next(&f), os.ErrDeadlineExceeded)
	assert.Less(t, time.Since(t0), 2*time.Second)

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		time.Sleep(50 * time.Millisecond)
		h2.Stop()
	}()
	t0 = time.Now()
	assert.ErrorIs(t, h2.Next(&f), io.EOF, "Stop wakes a Next that would wait an hour")
	assert.Less(t, time.Since(t0), 5*time.Second)
	<-stopped
	require.NoError(t, h2.Close())

	h.Stop()
	h.Stop()
	assert.ErrorIs(t, h.Next(&f), io.EOF)
	st, err := h.Stats()
	require.NoError(t, err)
	assert.Zero(t, st.Captured)
	require.NoError(t, h.Close())
	require.NoError(t, h.Close())
	assert.Equal(t, before, fds(t), "descriptors")
}
