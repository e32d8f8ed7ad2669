//go:build linux

// Package linktest holds the test fixtures of the raw bindings: a pair of
// network namespaces joined by a veth pair (unique names, always deleted),
// a way to open sockets inside a namespace from a test, and a WRITE / READ
// / SEND exchange between two devices verified with SHA-256. It is
// imported by _test.go files only.
package linktest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// RequireRoot skips the test unless it runs as root with iproute2's ip.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, CAP_NET_RAW / CAP_BPF)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip command")
	}
}

// Run runs a command and fails the test with its output on error.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Veth is two namespaces, NS[0] and NS[1], joined by a veth pair whose
// ends are Dev[0] (in NS[0]) and Dev[1] (in NS[1]).
type Veth struct {
	NS   [2]string
	Dev  [2]string
	Addr [2]netip.Addr
	// Configured says Addr are configured on the interfaces (the kernel
	// owns them); otherwise the interfaces have no address of that family.
	Configured bool
}

// VethConfig configures NewVeth.
type VethConfig struct {
	MTU  int  // default 9000
	IPv6 bool // addresses fd00:77::1 and ::2 instead of 10.99.0.1 and .2
	// Configure puts the addresses on the interfaces.
	Configure bool
}

// NewVeth creates the namespaces and the veth pair; t.Cleanup deletes
// them (deleting a namespace deletes its veth end), whatever the outcome.
func NewVeth(t testing.TB, cfg VethConfig) *Veth {
	t.Helper()
	RequireRoot(t)
	if cfg.MTU == 0 {
		cfg.MTU = 9000
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	v := &Veth{
		NS:         [2]string{"grt-" + id + "-a", "grt-" + id + "-b"},
		Dev:        [2]string{"gra" + id, "grb" + id},
		Configured: cfg.Configure,
	}
	if cfg.IPv6 {
		v.Addr = [2]netip.Addr{netip.MustParseAddr("fd00:77::1"), netip.MustParseAddr("fd00:77::2")}
	} else {
		v.Addr = [2]netip.Addr{netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")}
	}
	t.Cleanup(func() {
		for _, ns := range v.NS {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	for _, ns := range v.NS {
		Run(t, "ip", "netns", "add", ns)
	}
	Run(t, "ip", "link", "add", v.Dev[0], "netns", v.NS[0], "type", "veth", "peer", "name", v.Dev[1], "netns", v.NS[1])
	for i := range 2 {
		Run(t, "ip", "-n", v.NS[i], "link", "set", "lo", "up")
		Run(t, "ip", "-n", v.NS[i], "link", "set", v.Dev[i], "mtu", fmt.Sprint(cfg.MTU), "up")
		if cfg.Configure {
			if cfg.IPv6 {
				Run(t, "ip", "-n", v.NS[i], "addr", "add", v.Addr[i].String()+"/64", "dev", v.Dev[i], "nodad")
			} else {
				Run(t, "ip", "-n", v.NS[i], "addr", "add", v.Addr[i].String()+"/24", "dev", v.Dev[i])
			}
		}
	}
	return v
}

// InNetns runs f on an OS thread that has entered namespace ns, and
// returns f's error. Sockets f opens stay in ns after it returns. The
// thread goes back to its namespace afterwards (or is discarded if it
// cannot).
func InNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			runtime.UnlockOSThread()
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			errc <- err
			runtime.UnlockOSThread()
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			runtime.UnlockOSThread()
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return // stay locked: the thread exits with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Open opens a link in namespace ns with open, failing the test on error.
func Open[L link.Link](t testing.TB, ns string, open func() (L, error)) L {
	t.Helper()
	var l L
	err := InNetns(ns, func() error {
		var err error
		l, err = open()
		return err
	})
	if err != nil {
		t.Fatalf("open link in %s: %v", ns, err)
	}
	return l
}

// Side is one device of an exchange with one QP and one registered
// buffer.
type Side struct {
	Dev *roce.Device
	QP  *roce.QP
	CQ  *cq.CQ
	MR  *mr.Region
	Buf []byte
}

// Pair is two connected devices.
type Pair struct{ A, B *Side }

// NewPair opens a device on each link, creates and connects one QP each at
// the given path MTU, and registers size bytes on each side. Closing the
// devices (t.Cleanup) closes the links.
func NewPair(t testing.TB, la, lb link.Link, mtu qp.MTU, size int) *Pair {
	t.Helper()
	open := func(l link.Link) *Side {
		d, err := roce.Open(roce.Config{Link: l})
		if err != nil {
			t.Fatalf("roce.Open: %v", err)
		}
		t.Cleanup(func() { d.Close() })
		pd := d.AllocPD()
		c, err := d.CreateCQ(4096)
		if err != nil {
			t.Fatal(err)
		}
		q, err := d.CreateQP(roce.QPConfig{PD: pd, SendCQ: c, RecvCQ: c})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, size)
		m, err := d.RegisterMR(pd, buf, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead|mr.RemoteAtomic)
		if err != nil {
			t.Fatal(err)
		}
		return &Side{Dev: d, QP: q, CQ: c, MR: m, Buf: buf}
	}
	p := &Pair{A: open(la), B: open(lb)}
	opts := roce.ConnectOptions{MTU: mtu, Timeout: roce.DefaultTimeout} // 67 ms: robust under -race and a loaded machine
	if err := p.A.QP.Connect(p.B.QP.Info(), opts); err != nil {
		t.Fatal(err)
	}
	if err := p.B.QP.Connect(p.A.QP.Info(), opts); err != nil {
		t.Fatal(err)
	}
	return p
}

// Wait waits for one completion on c and fails unless it succeeded.
func Wait(t testing.TB, c *cq.CQ, what string) cq.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wc [1]cq.Completion
	n, err := c.Wait(ctx, wc[:])
	if err != nil || n != 1 {
		t.Fatalf("%s: no completion: %v", what, err)
	}
	if wc[0].Status != cq.StatusSuccess {
		t.Fatalf("%s: completion status %v", what, wc[0].Status)
	}
	return wc[0]
}

// Exchange runs, from A to B: a WRITE of the first half of A's buffer
// into B's, a READ of it back into the second half of A's buffer, and a
// SEND of 1 MiB (or less) into a posted receive; each transfer is verified
// with SHA-256.
func (p *Pair) Exchange(t testing.TB) {
	t.Helper()
	a, b := p.A, p.B
	half := len(a.Buf) / 2
	rand.Read(a.Buf[:half])
	want := sha256.Sum256(a.Buf[:half])

	post := func(wr *qp.SendWR) {
		if err := a.QP.PostSend(wr); err != nil {
			t.Fatal(err)
		}
	}
	post(&qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL:        []qp.SGE{a.MR.SGE(0, half)},
		RemoteAddr: b.MR.IOVA(), RKey: b.MR.RKey()})
	Wait(t, a.CQ, "WRITE")
	if got := sha256.Sum256(b.Buf[:half]); got != want {
		t.Fatalf("WRITE: SHA-256 of the destination %x, want %x", got, want)
	}

	post(&qp.SendWR{WRID: 2, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
		SGL:        []qp.SGE{a.MR.SGE(half, half)},
		RemoteAddr: b.MR.IOVA(), RKey: b.MR.RKey()})
	Wait(t, a.CQ, "READ")
	if got := sha256.Sum256(a.Buf[half : 2*half]); got != want {
		t.Fatalf("READ: SHA-256 of the data read back %x, want %x", got, want)
	}

	n := min(half, 1<<20)
	rand.Read(a.Buf[:n])
	want = sha256.Sum256(a.Buf[:n])
	clear(b.Buf[half : half+n])
	if err := b.QP.PostRecv(&qp.RecvWR{WRID: 7, SGL: []qp.SGE{b.MR.SGE(half, n)}}); err != nil {
		t.Fatal(err)
	}
	post(&qp.SendWR{WRID: 3, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{a.MR.SGE(0, n)}})
	Wait(t, a.CQ, "SEND")
	wc := Wait(t, b.CQ, "SEND (receive side)")
	if wc.WRID != 7 || int(wc.ByteLen) != n {
		t.Fatalf("SEND: receive completion %+v, want WRID 7 and %d bytes", wc, n)
	}
	if got := sha256.Sum256(b.Buf[half : half+n]); got != want || !bytes.Equal(b.Buf[half:half+n], a.Buf[:n]) {
		t.Fatalf("SEND: SHA-256 of the received message %x, want %x", got, want)
	}
	for _, s := range []*Side{a, b} {
		st := s.Dev.Stats()
		if st.BadICRC.Load() != 0 || st.BadHdr.Load() != 0 {
			t.Errorf("device %v: %d bad ICRC, %d bad headers", s.Dev.LocalAddr(), st.BadICRC.Load(), st.BadHdr.Load())
		}
	}
}

// IPLinkShowsXDP reports whether `ip -d link show DEV` in ns lists an XDP
// program.
func IPLinkShowsXDP(t testing.TB, ns, dev string) bool {
	t.Helper()
	out := Run(t, "ip", "-n", ns, "-d", "link", "show", "dev", dev)
	return strings.Contains(out, "xdp") || strings.Contains(out, "prog/xdp")
}

// SNMP returns the counter named key of the given /proc/net/snmp line
// prefix ("Icmp", "Udp") in namespace ns.
func SNMP(t testing.TB, ns, prefix, key string) int64 {
	t.Helper()
	out := Run(t, "ip", "netns", "exec", ns, "cat", "/proc/net/snmp")
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != prefix+":" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, n := range names {
			if n == key && i+1 < len(f) {
				var v int64
				fmt.Sscan(f[i+1], &v)
				return v
			}
		}
	}
	t.Fatalf("no %s %s in /proc/net/snmp", prefix, key)
	return 0
}

// Perf runs one perftest-style test (internal/perf) between a device on a
// link opened by open(0) in NS[0] (the requester) and one on open(1) in
// NS[1].
func (v *Veth) Perf(ctx context.Context, cfg perf.Config, open func(i int) (link.Link, error)) (perf.Result, error) {
	cfg.Addrs = [2]netip.AddrPort{netip.AddrPortFrom(v.Addr[0], 4791), netip.AddrPortFrom(v.Addr[1], 4791)}
	cfg.OpenLink = func(addr netip.AddrPort) (link.Link, error) {
		i := 0
		if addr.Addr() == v.Addr[1] {
			i = 1
		}
		var l link.Link
		err := InNetns(v.NS[i], func() error {
			var err error
			l, err = open(i)
			return err
		})
		return l, err
	}
	return perf.Run(ctx, cfg)
}

// Figures runs, three times each and interleaved so that all share the
// machine's conditions: the raw one-way ceiling of the binding (OneWay,
// 4128- and 1056-byte datagrams: RoCE payload 4096 / 1024 plus BTH, RETH
// and ICRC), WRITE 64 KiB at path MTU 4096 and 1024, and the 64-byte WRITE
// latency; it logs the medians (min..max) and the ratios of goodput to
// ceiling. RoCE payload is counted in 10^9 B/s.
func (v *Veth) Figures(t *testing.T, binding string, open func(i int) (link.Link, error)) {
	t.Helper()
	type series struct {
		name string
		vals []float64
	}
	var (
		raw4, raw1, w4, w1, lat, lat99 series
		retrans                        uint64
	)
	raw4.name, raw1.name = "raw one-way ceiling, 4 KiB payload", "raw one-way ceiling, 1 KiB payload"
	w4.name, w1.name, lat.name = "WRITE 64 KiB, MTU 4096", "WRITE 64 KiB, MTU 1024", "WRITE 64 B latency p50 (µs)"
	oneWay := func(size int) float64 {
		var a, b link.Link
		if err := InNetns(v.NS[0], func() (err error) { a, err = open(0); return }); err != nil {
			t.Fatal(err)
		}
		if err := InNetns(v.NS[1], func() (err error) { b, err = open(1); return }); err != nil {
			t.Fatal(err)
		}
		rx, _ := OneWay(a, b, size, 2*time.Second)
		return rx
	}
	perfRun := func(cfg perf.Config) perf.Result {
		res, err := v.Perf(context.Background(), cfg, open)
		if err != nil {
			t.Fatalf("%s: %+v: %v", binding, cfg, err)
		}
		retrans += res.Retransmitted
		return res
	}
	for range 3 {
		raw4.vals = append(raw4.vals, oneWay(4096+32)*4096/1e9)
		raw1.vals = append(raw1.vals, oneWay(1024+32)*1024/1e9)
		w4.vals = append(w4.vals, perfRun(perf.Config{Op: perf.OpWrite, Size: 64 << 10, Iters: 8000, MTU: qp.MTU4096}).Gbps/8)
		w1.vals = append(w1.vals, perfRun(perf.Config{Op: perf.OpWrite, Size: 64 << 10, Iters: 4000, MTU: qp.MTU1024}).Gbps/8)
		r := perfRun(perf.Config{Op: perf.OpWrite, Size: 64, Iters: 3000, MTU: qp.MTU4096, Latency: true})
		lat.vals = append(lat.vals, r.LatP50us)
		lat99.vals = append(lat99.vals, r.LatP99us)
	}
	med := func(s series) float64 { c := slices.Clone(s.vals); slices.Sort(c); return c[1] }
	for _, s := range []series{raw4, raw1, w4, w1} {
		c := slices.Clone(s.vals)
		slices.Sort(c)
		t.Logf("%s | %-36s | %.3f GB/s (%.3f..%.3f)", binding, s.name, c[1], c[0], c[2])
	}
	c := slices.Clone(lat.vals)
	slices.Sort(c)
	t.Logf("%s | %-36s | %.2f (%.2f..%.2f), p99 of the runs %v", binding, lat.name, c[1], c[0], c[2], lat99.vals)
	t.Logf("%s | ratios: WRITE/ceiling %.2f at 4 KiB, %.2f at 1 KiB; retransmitted packets %d", binding,
		med(w4)/med(raw4), med(w1)/med(raw1), retrans)
}

// OneWay sends size-byte datagrams from a to b as fast as Send accepts
// them for d, while a goroutine receives on b, and returns the packets
// per second b received and a sent. It measures a link without the
// device, as doc/limits.md measured the raw techniques.
func OneWay(a, b link.Link, size int, d time.Duration) (rxPPS, txPPS float64) {
	var got, sent int64
	done := make(chan struct{})
	var first, last time.Time
	rxDone := make(chan struct{})
	go func() {
		defer close(rxDone)
		dgs := make([]link.Datagram, 64)
		bufs := make([][]byte, 64)
		for i := range bufs {
			bufs[i] = make([]byte, 9000)
		}
		for {
			for i := range dgs {
				dgs[i] = link.Datagram{Buf: bufs[i]}
			}
			n, err := b.Recv(dgs)
			if err != nil {
				return
			}
			if got == 0 {
				first = time.Now()
			}
			got += int64(n)
			last = time.Now()
		}
	}()
	payload := make([]byte, size)
	payload[0] = 0x0a // a BTH-looking first byte; the link does not care
	dgs := make([]link.Datagram, 64)
	for i := range dgs {
		dgs[i] = link.Datagram{Buf: payload, Src: a.LocalAddr(), Dst: b.LocalAddr()}
	}
	start := time.Now()
	go func() { time.Sleep(d); close(done) }()
loop:
	for {
		select {
		case <-done:
			break loop
		default:
		}
		n, _ := a.Send(dgs)
		sent += int64(n)
	}
	el := time.Since(start)
	time.Sleep(300 * time.Millisecond)
	b.Close()
	<-rxDone
	a.Close()
	if got > 1 {
		rxPPS = float64(got) / last.Sub(first).Seconds()
	}
	return rxPPS, float64(sent) / el.Seconds()
}

// Inject writes raw Ethernet frames on interface dev of namespace ns
// through an AF_PACKET socket.
func Inject(t testing.TB, ns, dev string, frames [][]byte) {
	t.Helper()
	err := InNetns(ns, func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifc.Index}); err != nil {
			return err
		}
		for _, f := range frames {
			for {
				_, err := unix.Write(fd, f)
				if err == unix.ENOBUFS || err == unix.EAGAIN {
					time.Sleep(100 * time.Microsecond)
					continue
				}
				if err != nil {
					return fmt.Errorf("write %d-byte frame: %w", len(f), err)
				}
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inject frames in %s: %v", ns, err)
	}
}

// MAC returns the MAC address of dev in namespace ns.
func MAC(t testing.TB, ns, dev string) [6]byte {
	t.Helper()
	var mac [6]byte
	err := InNetns(ns, func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		copy(mac[:], ifc.HardwareAddr)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// RoCEFrame builds a well-formed RoCEv2 frame (RC SEND Only with n payload
// bytes for QP 0x11) from src to dst, for injection tests.
func RoCEFrame(t testing.TB, smac, dmac [6]byte, src, dst netip.Addr, n int) []byte {
	t.Helper()
	e := rocev2.Encap{Ethernet: true, SrcMAC: smac, DstMAC: dmac,
		Src: netip.AddrPortFrom(src, 0xc000), Dst: netip.AddrPortFrom(dst, 4791)}
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: 0x11, PSN: 1}}
	buf := make([]byte, e.HeaderLen()+wire.TransportLen(bth.RCSendOnly, n)+64)
	m, err := e.Build(buf, &f, make([]byte, n))
	if err != nil {
		t.Fatal(err)
	}
	return buf[:m]
}

// Resources returns the process's goroutine and open-file counts.
func Resources() (goroutines, fds int) {
	ents, _ := os.ReadDir("/proc/self/fd")
	return runtime.NumGoroutine(), len(ents)
}

// RequireBaseline waits up to 2 s for the goroutine and fd counts to fall
// back to g and f.
func RequireBaseline(t testing.TB, g, f int) {
	t.Helper()
	var gn, fn int
	for range 200 {
		if gn, fn = Resources(); gn <= g && fn <= f {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d goroutines (baseline %d), %d fds (baseline %d)", gn, g, fn, f)
}
