package perf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
)

// figures turns TestVethFigures from a smoke test into the measurement:
//
//	sudo go test ./internal/perf -run TestVethFigures -figures -v
var figures = flag.Bool("figures", false, "TestVethFigures: measure (3 runs of 2 s, medians) instead of a short smoke run")

// vethHelperEnv names a helper role of this test binary (TestVethHelper);
// its arguments follow in vethArgsEnv, separated by spaces.
const (
	vethHelperEnv = "GOROCE_VETH_HELPER"
	vethArgsEnv   = "GOROCE_VETH_ARGS"
	vethReady     = "VETH-READY"
	vethResult    = "VETH-RESULT "
)

// Addresses of the two namespaces' veth ends.
var (
	vethA = netip.MustParseAddr("10.77.15.1")
	vethB = netip.MustParseAddr("10.77.15.2")
)

// vethNet is a pair of network namespaces joined by a veth pair (MTU
// 9000, so RoCE runs at MTU 4096), removed at the end of the test.
type vethNet struct{ a, b string }

func newVethNet(t *testing.T) vethNet {
	t.Helper()
	id := strconv.Itoa(os.Getpid())
	n := vethNet{a: "grbl" + id + "a", b: "grbl" + id + "b"}
	ip := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	}
	ip("netns", "add", n.a)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.a).Run() })
	ip("netns", "add", n.b)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.b).Run() })
	ip("link", "add", n.a, "netns", n.a, "mtu", "9000", "type", "veth", "peer", "name", n.b, "netns", n.b, "mtu", "9000")
	for _, s := range []struct {
		ns   string
		addr netip.Addr
	}{{n.a, vethA}, {n.b, vethB}} {
		ip("-n", s.ns, "addr", "add", s.addr.String()+"/24", "dev", s.ns)
		ip("-n", s.ns, "link", "set", s.ns, "up")
		ip("-n", s.ns, "link", "set", "lo", "up")
	}
	return n
}

// vethProc is a process started in a namespace.
type vethProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
	wait   func() (string, error) // reads the rest of stdout, waits for the exit; once
}

// start runs argv in namespace ns with extra environment env; its stdin
// stays open until stop. The test's end kills it if still running.
func start(t *testing.T, ctx context.Context, ns string, env []string, argv ...string) *vethProc {
	t.Helper()
	p := &vethProc{}
	p.cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, argv...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = &p.stderr
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.stdout = bufio.NewReader(out)
	p.wait = sync.OnceValues(func() (string, error) {
		rest, _ := io.ReadAll(p.stdout)
		err := p.cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%v: %w; stderr: %s", p.cmd.Args, err, p.stderr.String())
		}
		return string(rest), err
	})
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		p.stdin.Close()
		p.cmd.Process.Kill()
		p.wait()
	})
	return p
}

// line returns the next line of p's stdout that starts with prefix, without
// the prefix.
func (p *vethProc) line(prefix string) (string, error) {
	for {
		l, err := p.stdout.ReadString('\n')
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(l, prefix)), nil
		}
		if err != nil {
			return "", fmt.Errorf("no %q line: %w; stderr: %s", prefix, err, p.stderr.String())
		}
	}
}

// helper starts a role of TestVethHelper in namespace ns.
func helper(t *testing.T, ctx context.Context, ns, role string, args ...string) *vethProc {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return start(t, ctx, ns, []string{vethHelperEnv + "=" + role, vethArgsEnv + "=" + strings.Join(args, " ")},
		exe, "-test.run=^TestVethHelper$", "-test.count=1")
}

// TestVethHelper is the other process of TestVethFigures's raw UDP
// baselines; it does nothing unless GOROCE_VETH_HELPER names a role:
//
//	recv ADDR SIZE      ReceiveBlast on ADDR until 300 ms without a datagram
//	pong ADDR           Pong on ADDR until stdin closes
//	blast LOCAL PEER SIZE SECONDS   Baseline blast to PEER
//	ping LOCAL PEER SIZE PINGS      Baseline ping-pong with PEER
//
// It prints VETH-READY once its socket is bound and VETH-RESULT and a
// JSON object at the end.
func TestVethHelper(t *testing.T) {
	role := os.Getenv(vethHelperEnv)
	if role == "" {
		t.Skip("a helper process of TestVethFigures")
	}
	args := strings.Fields(os.Getenv(vethArgsEnv))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() { // stdin closing is the stop signal
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	atoi := func(s string) int { n, err := strconv.Atoi(s); require.NoError(t, err); return n }
	var res any
	switch role {
	case "recv", "pong":
		l, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort(args[0])})
		require.NoError(t, err)
		fmt.Println(vethReady)
		if role == "pong" {
			require.NoError(t, Pong(ctx, l))
			return
		}
		b, err := ReceiveBlast(ctx, l, atoi(args[1]), udp.DefaultBatchSize, 300*time.Millisecond)
		require.NoError(t, err)
		res = b
	case "blast", "ping":
		cfg := BaselineConfig{Sender: udp.Config{Addr: netip.MustParseAddrPort(args[0])},
			Peer: netip.MustParseAddrPort(args[1])}
		if role == "blast" {
			cfg.NoPing, cfg.Size = true, atoi(args[2])
			sec, err := strconv.ParseFloat(args[3], 64)
			require.NoError(t, err)
			cfg.Duration = time.Duration(sec * float64(time.Second))
		} else {
			cfg.NoBlast, cfg.PingSize, cfg.Pings = true, atoi(args[2]), atoi(args[3])
		}
		b, err := Baseline(ctx, cfg)
		require.NoError(t, err)
		res = b
	default:
		t.Fatalf("unknown role %q", role)
	}
	js, err := json.Marshal(res)
	require.NoError(t, err)
	fmt.Println(vethResult + string(js))
}

// vethRun is one run's figures of one path.
type vethRun struct {
	gbps, udpGbps         float64 // WRITE 64 KiB goodput; raw UDP blast received
	p50, p99              float64 // WRITE 2 B one-way µs
	udpP50, udpP99        float64 // Go UDP ping-pong one-way µs
	retransmitted, udpTx  uint64
	udpLoss               float64
	segRatio, segLatRatio float64 // loopback: median ratio of the interleaved segments
}

// TestVethFigures measures goroce as users deploy it, two processes
// (goroce perf --server in one network namespace, goroce perf SERVER in
// another, across a veth pair), beside the in-process loopback, each
// against the raw UDP blast and Go UDP ping-pong of the same path, and
// prints the table. Without -figures it is a smoke test (one short run)
// that checks the two-process runs complete and report sane figures.
// Needs root (namespaces); skipped otherwise and with -short.
func TestVethFigures(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	if testing.Short() {
		t.Skip("builds goroce and moves traffic for seconds")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go tool to build goroce")
	}
	runs, secs, iters, seg, block, segs := 1, 0.3, 2000, 100*time.Millisecond, 1000, 2
	if *figures {
		runs, secs, iters, seg, block, segs = 3, 2, 20000, 500*time.Millisecond, 5000, 6
	}
	bin := filepath.Join(t.TempDir(), "goroce")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/goroce/goroce/cmd/goroce").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	n := newVethNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var loop, veth []vethRun
	for run := range runs {
		l := loopbackFigures(t, ctx, seg, block, segs)
		loop = append(loop, l)
		v := vethFigures(t, ctx, n, bin, secs, iters)
		veth = append(veth, v)
		t.Logf("run %d: loopback %+v", run+1, l)
		t.Logf("run %d: veth %+v", run+1, v)
	}
	writeVethTable(os.Stdout, loop, veth, seg, block, segs, secs, iters)

	for _, v := range veth {
		assert.Positive(t, v.gbps)
		assert.Less(t, v.gbps, 1000.0)
		assert.Positive(t, v.udpGbps)
		assert.Positive(t, v.p50)
		assert.LessOrEqual(t, v.p50, v.p99)
		assert.Less(t, v.p50, 10000.0) // 10 ms: something is badly wrong
		assert.Positive(t, v.udpP50)
		assert.LessOrEqual(t, v.udpP50, v.udpP99)
	}
}

// loopbackFigures measures the in-process loopback: Interleave's segments
// for bandwidth and latency (median of the pairs).
func loopbackFigures(t *testing.T, ctx context.Context, length time.Duration, block, segs int) vethRun {
	t.Helper()
	_, port := freePorts(t)
	tc := Config{Op: OpWrite, OpenLink: func(a netip.AddrPort) (link.Link, error) { return udp.Open(udp.Config{Addr: a}) },
		Addrs: [2]netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port),
			netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port)}}
	var r vethRun
	bw, err := Interleave(ctx, SegmentConfig{Test: tc, Segments: segs, Length: length,
		Baseline: BaselineConfig{Size: 4096 + 32}})
	require.NoError(t, err)
	med := func(s []Segment, f func(Segment) float64) float64 { return SpreadBy(s, f).Median }
	r.gbps = med(bw, func(s Segment) float64 { return s.Gbps })
	r.udpGbps = med(bw, func(s Segment) float64 { return s.BaselineGbps })
	r.segRatio = med(bw, func(s Segment) float64 { return s.Ratio })
	for _, s := range bw {
		r.retransmitted += s.Retransmitted
	}
	tc.Latency, tc.Size = true, 2
	lat, err := Interleave(ctx, SegmentConfig{Test: tc, Segments: segs, Block: block,
		Baseline: BaselineConfig{PingSize: 2 + 32}})
	require.NoError(t, err)
	r.p50 = med(lat, func(s Segment) float64 { return s.LatP50us })
	r.p99 = med(lat, func(s Segment) float64 { return s.LatP99us })
	r.udpP50 = med(lat, func(s Segment) float64 { return s.BaselineP50us })
	r.udpP99 = med(lat, func(s Segment) float64 { return s.BaselineP99us })
	r.segLatRatio = med(lat, func(s Segment) float64 { return s.Ratio })
	return r
}

// vethFigures measures across the veth pair, every figure from two
// processes: goroce perf write --server in namespace b and goroce perf
// write 10.77.15.2 in namespace a (bandwidth -D secs, then --lat -s 2 -n
// iters), then the raw UDP blast and ping-pong between two helper
// processes placed the same way.
func vethFigures(t *testing.T, ctx context.Context, n vethNet, bin string, secs float64, iters int) vethRun {
	t.Helper()
	var r vethRun
	perf := func(args ...string) Result {
		t.Helper()
		srv := start(t, ctx, n.b, nil, append([]string{bin, "perf", "write", "--server", "--json"}, args...)...)
		cli := start(t, ctx, n.a, nil, append([]string{bin, "perf", "write", vethB.String(), "--json"}, args...)...)
		out, err := cli.wait()
		require.NoError(t, err)
		_, err = srv.wait()
		require.NoError(t, err)
		var res Result
		require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &res), "%s", out)
		return res
	}
	bw := perf("-s", "65536", "-D", strconv.FormatFloat(secs, 'f', -1, 64))
	r.gbps, r.retransmitted = bw.Gbps, bw.Retransmitted
	lat := perf("--lat", "-s", "2", "-n", strconv.Itoa(iters))
	r.p50, r.p99 = lat.LatP50us, lat.LatP99us

	peer := netip.AddrPortFrom(vethB, 47915).String()
	local := netip.AddrPortFrom(vethA, 0).String()
	const size = 4096 + 32 // an RDMA WRITE packet at MTU 4096: BTH+RETH (28) + payload + ICRC
	recv := helper(t, ctx, n.b, "recv", peer, strconv.Itoa(size))
	_, err := recv.line(vethReady)
	require.NoError(t, err)
	snd := helper(t, ctx, n.a, "blast", local, peer, strconv.Itoa(size), strconv.FormatFloat(secs, 'f', -1, 64))
	var sent BaselineResult
	require.NoError(t, result(snd, &sent))
	var got Blast
	require.NoError(t, result(recv, &got))
	r.udpGbps, r.udpTx = got.Gbps, sent.Sent
	if sent.Sent > 0 {
		r.udpLoss = 1 - float64(got.Received)/float64(sent.Sent)
	}

	pong := helper(t, ctx, n.b, "pong", peer)
	_, err = pong.line(vethReady)
	require.NoError(t, err)
	ping := helper(t, ctx, n.a, "ping", local, peer, strconv.Itoa(2+32), strconv.Itoa(iters))
	var pr BaselineResult
	require.NoError(t, result(ping, &pr))
	pong.stdin.Close()
	_, err = pong.wait()
	require.NoError(t, err)
	r.udpP50, r.udpP99 = float64(pr.Latency.P50)/1e3, float64(pr.Latency.P99)/1e3
	return r
}

// result reads a helper's VETH-RESULT into v and waits for it to exit.
func result(p *vethProc, v any) error {
	js, err := p.line(vethResult)
	if err != nil {
		return err
	}
	if _, err := p.wait(); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(js), v); err != nil {
		return errors.Join(err, errors.New(js))
	}
	return nil
}

// writeVethTable prints the medians of the runs.
func writeVethTable(w io.Writer, loop, veth []vethRun, seg time.Duration, block, segs int, secs float64, iters int) {
	med := func(rs []vethRun, f func(vethRun) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return SpreadOf(xs).Median
	}
	span := func(rs []vethRun, f func(vethRun) float64) string {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return fmt.Sprintf("%.2f-%.2f", slices.Min(xs), slices.Max(xs))
	}
	fmt.Fprintf(w, "\nWRITE, RoCE MTU 4096; medians of %d runs (min-max of the ratio); loopback: %d interleaved pairs per run, "+
		"segments of %v / %d round trips (ratio: median of the pairs); veth: two processes per figure, %.2g s / %d round trips\n",
		len(loop), segs, seg, block, secs, iters)
	fmt.Fprintln(w, "| path | WRITE 64 KiB Gb/s | UDP blast Gb/s | ratio | 2 B p50 / p99 µs | UDP ping-pong p50 / p99 µs | p50 ratio | p99 ratio |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, p := range []struct {
		name string
		rs   []vethRun
	}{{"in-process loopback (lo)", loop}, {"two processes, veth, two netns", veth}} {
		ratio := func(r vethRun) float64 { return r.gbps / r.udpGbps }
		if p.rs[0].segRatio > 0 {
			ratio = func(r vethRun) float64 { return r.segRatio }
		}
		p50r := func(r vethRun) float64 { return r.p50 / r.udpP50 }
		if p.rs[0].segLatRatio > 0 {
			p50r = func(r vethRun) float64 { return r.segLatRatio }
		}
		p99r := func(r vethRun) float64 { return r.p99 / r.udpP99 }
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.2f (%s) | %.1f / %.1f | %.1f / %.1f | %.2f (%s) | %.2f (%s) |\n", p.name,
			med(p.rs, func(r vethRun) float64 { return r.gbps }), med(p.rs, func(r vethRun) float64 { return r.udpGbps }),
			med(p.rs, ratio), span(p.rs, ratio),
			med(p.rs, func(r vethRun) float64 { return r.p50 }), med(p.rs, func(r vethRun) float64 { return r.p99 }),
			med(p.rs, func(r vethRun) float64 { return r.udpP50 }), med(p.rs, func(r vethRun) float64 { return r.udpP99 }),
			med(p.rs, p50r), span(p.rs, p50r), med(p.rs, p99r), span(p.rs, p99r))
	}
	for i, r := range veth {
		fmt.Fprintf(w, "veth run %d: goroce retransmitted %d; UDP blast sent %d, loss %.1f%%\n", i+1, r.retransmitted, r.udpTx, 100*r.udpLoss)
	}
}
