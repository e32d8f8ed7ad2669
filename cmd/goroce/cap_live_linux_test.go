//go:build linux

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/internal/capfmt"
)

// vethPair is two network namespaces joined by a veth pair: dev[0] in
// ns[0] (the capture side), dev[1] in ns[1] (the sender).
type vethPair struct {
	ns, dev [2]string
}

// newVethPair creates the namespaces and the veth; t.Cleanup deletes them
// (which deletes the veth). It skips the test, with the reason, without
// root or network namespaces.
func newVethPair(t *testing.T) *vethPair {
	t.Helper()
	if testing.Short() {
		t.Skip("live capture in network namespaces: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("live capture test needs root (network namespaces, AF_PACKET)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("live capture test needs iproute2's ip command")
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	v := &vethPair{ns: [2]string{"grc-" + id + "-a", "grc-" + id + "-b"}, dev: [2]string{"gca" + id, "gcb" + id}}
	if out, err := exec.Command("ip", "netns", "add", v.ns[0]).CombinedOutput(); err != nil {
		t.Skipf("network namespaces unavailable: ip netns add: %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		for _, ns := range v.ns {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", v.ns[1])
	ip("link", "add", v.dev[0], "netns", v.ns[0], "type", "veth", "peer", "name", v.dev[1], "netns", v.ns[1])
	for i := range 2 {
		ip("-n", v.ns[i], "link", "set", v.dev[i], "mtu", "9000", "up")
	}
	return v
}

// enterNetns moves the calling goroutine, locked to its thread, into ns
// for good: the thread is discarded when the goroutine exits, so nothing
// else ever runs in ns by accident.
func enterNetns(ns string) error {
	runtime.LockOSThread()
	f, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

// runIn runs the goroce command line in-process in namespace ns, in its
// own goroutine, and returns a channel with the exit status. stdout and
// stderr are safe to read while it runs.
func runIn(ns string, stdout, stderr io.Writer, args ...string) <-chan int {
	done := make(chan int, 1)
	go func() {
		if err := enterNetns(ns); err != nil {
			fmt.Fprintf(stderr, "test: %v\n", err)
			done <- -1
			return
		}
		done <- run(args, stdout, stderr)
	}()
	return done
}

// sendFrames transmits raw Ethernet frames on dev in namespace ns through
// an AF_PACKET socket.
func sendFrames(ns, dev string, frames [][]byte) error {
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			if err := enterNetns(ns); err != nil {
				return err
			}
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			ifi, err := net.InterfaceByName(dev) // in ns: this thread's namespace
			if err != nil {
				return err
			}
			to := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
			for _, f := range frames {
				if err := unix.Sendto(fd, f, 0, to); err != nil {
					return fmt.Errorf("send %d bytes: %w", len(f), err)
				}
			}
			return nil
		}()
	}()
	return <-errc
}

// waitReady waits for the capture to start.
func waitReady(t *testing.T, s *syncBuffer, done <-chan int) {
	t.Helper()
	select {
	case <-s.ready:
	case code := <-done:
		t.Fatalf("capture ended before starting (exit %d): %s", code, s.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("capture did not start: %s", s.String())
	}
}

func waitExit(t *testing.T, done <-chan int) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("capture did not end")
		return -1
	}
}

// testFrames returns the frames the live tests send: RoCEv2 frames of a
// real rxe capture (valid ICRCs), one of them again with an 802.1Q tag,
// a PAUSE frame, and two frames the kernel filter must drop (ARP and UDP
// to port 53). want lists the frames a capture must hold, in order.
func testFrames(t *testing.T) (send, want [][]byte) {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "testdata/pcaps/rc_imm.pcap"))
	require.NoError(t, err)
	defer f.Close()
	rd, err := capfmt.NewReader(f)
	require.NoError(t, err)
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var (
		fr capfmt.Frame
		p  capfmt.Packet
	)
	for len(want) < 8 {
		err := rd.Next(&fr)
		require.NoError(t, err, "rc_imm.pcap has 8 RoCEv2 frames")
		dec.Decode(&fr, &p)
		if fr.LinkType == capfmt.LinkEthernet && p.RoCE && p.ICRCChecked && p.ICRCGood {
			want = append(want, bytes.Clone(fr.Data))
		}
	}
	send = append(send, want...)
	arp := make([]byte, 60)
	copy(arp, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 2, 0x08, 0x06})
	dns := bytes.Clone(want[0])
	binary.BigEndian.PutUint16(dns[14+20+2:], 53) // the UDP destination port (IPv4, no options)
	require.Equal(t, byte(0x45), dns[14])
	tagged := make([]byte, 0, len(want[0])+4)
	tagged = append(tagged, want[0][:12]...)
	tagged = append(tagged, 0x81, 0x00, 0x60, 0x64) // PCP 3, VID 100
	tagged = append(tagged, want[0][12:]...)
	pause := make([]byte, 60)
	copy(pause, []byte{0x01, 0x80, 0xc2, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0x08, 0x00, 0x01, 0x00, 0x10})
	send = append(send, arp, dns, tagged, pause)
	want = append(want, tagged, pause)
	return send, want
}

// TestCapLiveWrite captures in a namespace with -c and -w while RoCEv2
// frames cross a veth, then checks the pcapng: exactly the frames the
// filter must pass, byte for byte (the VLAN tag the kernel strips put
// back), good ICRCs, the interface's name, link type and statistics, and
// that goroce cap -r reads it.
func TestCapLiveWrite(t *testing.T) {
	v := newVethPair(t)
	send, want := testFrames(t)
	file := filepath.Join(t.TempDir(), "live.pcapng")
	stdout, stderr := newSyncBuffer(""), newSyncBuffer("Capturing on")
	done := runIn(v.ns[0], stdout, stderr, "cap", "-i", v.dev[0], "-c", fmt.Sprint(len(want)), "-a", "duration:15",
		"-w", file, "-P", "-Y", "infiniband", "-T", "fields", "-e", "infiniband.bth.psn", "-e", "roce.icrc.status")
	waitReady(t, stderr, done)
	require.NoError(t, sendFrames(v.ns[1], v.dev[1], send))
	require.Equal(t, 0, waitExit(t, done), stderr.String())
	assert.Contains(t, stderr.String(), fmt.Sprintf("%d packets captured, 0 dropped", len(want)))
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	assert.Len(t, lines, len(want)-1, "printed: the RoCEv2 frames, not the PAUSE")
	for _, l := range lines {
		assert.True(t, strings.HasSuffix(l, "\tgood"), l)
	}

	b, err := os.ReadFile(file)
	require.NoError(t, err)
	rd, err := capfmt.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var (
		fr capfmt.Frame
		p  capfmt.Packet
	)
	for i, w := range want {
		require.NoError(t, rd.Next(&fr), "frame %d", i+1)
		assert.Equal(t, capfmt.LinkEthernet, fr.LinkType)
		assert.Equal(t, w, fr.Data, "frame %d", i+1)
		dec.Decode(&fr, &p)
		if i < len(want)-1 {
			assert.True(t, p.RoCE && p.ICRCChecked && p.ICRCGood, "frame %d: RoCEv2 with a good ICRC", i+1)
		} else {
			assert.False(t, p.RoCE)
			assert.Equal(t, []byte{0x88, 0x08}, fr.Data[12:14], "the PAUSE frame")
		}
	}
	assert.ErrorIs(t, rd.Next(&fr), io.EOF)

	ng, err := pcapgo.NewNgReader(bytes.NewReader(b), pcapgo.DefaultNgReaderOptions)
	require.NoError(t, err)
	for {
		if _, _, err := ng.ReadPacketData(); err != nil {
			break
		}
	}
	iface, err := ng.Interface(0)
	require.NoError(t, err)
	assert.Equal(t, v.dev[0], iface.Name)
	assert.EqualValues(t, capfmt.LinkEthernet, iface.LinkType)
	assert.Equal(t, uint64(0), iface.Statistics.PacketsDropped)
	assert.GreaterOrEqual(t, iface.Statistics.PacketsReceived, uint64(len(want)))

	code, out, errOut := runCmd("cap", "-r", file, "-Y", "roce.icrc.status == good", "-T", "fields", "-e", "frame.number")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "1\n2\n3\n4\n5\n6\n7\n8\n9\n", out)
}

// TestCapLiveFlows runs goroce cap flows -i until -a duration ends it,
// with frames sent throughout: the live table each interval, then the
// flow summary, exit 0.
func TestCapLiveFlows(t *testing.T) {
	v := newVethPair(t)
	send, want := testFrames(t)
	stdout, stderr := newSyncBuffer(""), newSyncBuffer("Capturing on")
	start := time.Now()
	done := runIn(v.ns[0], stdout, stderr, "cap", "flows", "-i", v.dev[0], "-a", "duration:1.5", "-interval", "300ms")
	waitReady(t, stderr, done)
	const rounds = 3
	for range rounds {
		require.NoError(t, sendFrames(v.ns[1], v.dev[1], send))
		time.Sleep(200 * time.Millisecond)
	}
	code := waitExit(t, done)
	el := time.Since(start)
	require.Equal(t, 0, code, stderr.String())
	assert.Less(t, el, 5*time.Second, "-a duration:1.5 ends the capture")
	n := rounds * len(want)
	assert.Contains(t, stderr.String(), fmt.Sprintf("%d packets captured, 0 dropped", n))
	out := stdout.String()
	assert.Contains(t, out, "direction")
	assert.Contains(t, out, " s] ")
	assert.Contains(t, out, fmt.Sprintf("capture %s: %d frames, %d RoCEv2, %d other", v.dev[0], n, n-rounds, rounds))
	assert.Contains(t, out, "connection 1: RC")
}

// TestCapLiveInterrupt ends a capture without a stop condition with
// SIGINT, as Ctrl-C does: exit 0, the summary, the file complete.
func TestCapLiveInterrupt(t *testing.T) {
	v := newVethPair(t)
	send, want := testFrames(t)
	file := filepath.Join(t.TempDir(), "int.pcapng")
	stdout, stderr := newSyncBuffer(""), newSyncBuffer("Capturing on")
	done := runIn(v.ns[0], stdout, stderr, "cap", "lint", "-i", v.dev[0], "-w", file)
	waitReady(t, stderr, done)
	require.NoError(t, sendFrames(v.ns[1], v.dev[1], send))
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	code := waitExit(t, done)
	assert.Contains(t, []int{0, 1}, code, "lint's status: clean or findings, not an error: %s", stderr.String())
	assert.Contains(t, stderr.String(), fmt.Sprintf("%d packets captured, 0 dropped", len(want)))
	assert.Contains(t, stdout.String(), v.dev[0]+": ")
	code, out, errOut := runCmd("cap", "-r", file, "-T", "fields", "-e", "frame.number")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, len(want), strings.Count(out, "\n"))
}
