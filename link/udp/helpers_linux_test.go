//go:build linux

package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link"
)

// TestMain checks that goroutines and file descriptors return to their
// baseline after the package's tests (nothing a test opens may outlive it).
func TestMain(m *testing.M) {
	// The runtime opens its netpoller (epoll fd + eventfd) on first use;
	// start it so the baseline includes them.
	if c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err == nil {
		c.Close()
	}
	fds0, g0 := countFDs(), runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && (countFDs() > fds0 || runtime.NumGoroutine() > g0) {
			time.Sleep(10 * time.Millisecond)
		}
		if fds, g := countFDs(), runtime.NumGoroutine(); fds > fds0 || g > g0 {
			fmt.Fprintf(os.Stderr, "leak: fds %d -> %d, goroutines %d -> %d\n", fds0, fds, g0, g)
			buf := make([]byte, 1<<16)
			os.Stderr.Write(buf[:runtime.Stack(buf, true)])
			code = 1
		}
	}
	os.Exit(code)
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

var (
	lo4  = netip.MustParseAddr("127.0.0.1")
	lo4b = netip.MustParseAddr("127.0.0.2")
	lo6  = netip.MustParseAddr("::1")
)

// open opens a link on addr:0 with cfg's other fields and closes it at the
// end of the test.
func open(t testing.TB, addr netip.Addr, cfg Config) *Link {
	t.Helper()
	cfg.Addr = netip.AddrPortFrom(addr, 0)
	l, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// payload writes a recognizable pattern: seq in the first 4 bytes (when it
// fits), then bytes derived from seq and offset.
func payload(b []byte, seq int) {
	for i := range b {
		b[i] = byte(seq*7 + i)
	}
	if len(b) >= 4 {
		binary.BigEndian.PutUint32(b, uint32(seq))
	}
}

func checkPayload(t testing.TB, b []byte, seq int) {
	t.Helper()
	want := make([]byte, len(b))
	payload(want, seq)
	require.Equal(t, want, b, "datagram %d", seq)
}

// mkDgs builds datagrams of the given sizes to dst, numbered from seq0.
func mkDgs(sizes []int, dst netip.AddrPort, seq0 int) []link.Datagram {
	dgs := make([]link.Datagram, len(sizes))
	for i, n := range sizes {
		dgs[i] = link.Datagram{Buf: make([]byte, n), Dst: dst}
		payload(dgs[i].Buf, seq0+i)
	}
	return dgs
}

// recvN receives n datagrams (buffers of bufCap, slots per call) or fails
// after timeout; it closes l on timeout to unblock Recv.
func recvN(t testing.TB, l *Link, n, slots, bufCap int, timeout time.Duration) []link.Datagram {
	t.Helper()
	type result struct {
		got []link.Datagram
		err error
	}
	done := make(chan result, 1)
	go func() {
		var got []link.Datagram
		dgs := make([]link.Datagram, slots)
		for len(got) < n {
			for i := range dgs {
				dgs[i] = link.Datagram{Buf: make([]byte, bufCap)}
			}
			k, err := l.Recv(dgs[:min(slots, n-len(got))])
			if err != nil {
				done <- result{got, err}
				return
			}
			got = append(got, dgs[:k]...)
		}
		done <- result{got, nil}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		return r.got
	case <-time.After(timeout):
		l.Close()
		r := <-done
		t.Fatalf("received %d of %d datagrams in %v (err %v)", len(r.got), n, timeout, r.err)
		return nil
	}
}

// expectNothing asserts that Recv on l yields nothing within d; it closes l.
func expectNothing(t testing.TB, l *Link, d time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		dgs := []link.Datagram{{Buf: make([]byte, 2048)}}
		_, err := l.Recv(dgs)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("unexpected datagram (err %v)", err)
	case <-time.After(d):
	}
	l.Close()
	require.True(t, errors.Is(<-done, link.ErrClosed))
}

// gatherDgs turns dgs into link.Datagram's two-part form, as a device
// sending from a memory region does: each datagram of 16 bytes or more but
// every third keeps its first 12 bytes and last 4 in Buf (a header and an
// ICRC), and its middle moves into one shared buffer (the "region") that
// Payload slices. The bytes on the wire do not change.
func gatherDgs(dgs []link.Datagram) {
	total := 0
	for i := range dgs {
		total += len(dgs[i].Buf)
	}
	region := make([]byte, 0, total)
	for i := range dgs {
		d := &dgs[i]
		n := len(d.Buf)
		if n < 16 || i%3 == 2 {
			continue
		}
		off := len(region)
		region = append(region, d.Buf[12:n-4]...)
		buf := make([]byte, 16)
		copy(buf, d.Buf[:12])
		copy(buf[12:], d.Buf[n-4:])
		d.Buf, d.Payload, d.PayloadAt = buf, region[off:len(region):len(region)], 12
	}
}
