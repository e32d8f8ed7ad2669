//go:build rxe && linux

package interop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/perftest"
)

var (
	flagRxe   = flag.String("rxe", "", "the rxe harness (default: $RXE, else ../../shared/rxe/rxe)")
	flagCells = flag.String("cells", "", "run only the tests whose name matches this regexp (e.g. 'ib_read_bw|pingpong')")
	flagMTUs  = flag.String("mtus", "1024,4096", "RoCE MTUs to run at")
	flagKeep  = flag.Bool("keep", false, "leave the guests running at the end")
	flagOut   = flag.String("out", "", "directory for captures and logs, kept (default: a new one in $TMPDIR, removed when every test passed)")
)

// The harness's network (../shared/rxe/README.md): goroce is 10.77.0.1 in
// netns roce0, guest 1 is 10.77.0.2.
const (
	netns   = "roce0"
	bridge  = "rxebr0"
	hostIP  = "10.77.0.1"
	guestIP = "10.77.0.2"
)

// harness runs the guests and the tools, and keeps the suite's tally.
type harness struct {
	rxe    string // the rxe tool
	lib    string // its lib directory (icrc_check.py)
	root   string // the module root
	out    string // captures and logs
	goroce string // the goroce binary under test
	fields []string

	once  sync.Once
	upErr error
	mtu   int

	mu             sync.Mutex
	passed, failed int
	lines          []string
}

var (
	h          *harness
	skipReason string
)

func TestMain(m *testing.M) {
	flag.Parse()
	h, skipReason = newHarness()
	stop := sync.OnceFunc(func() {
		if h != nil && !*flagKeep {
			h.stopGuests()
		}
	})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "interop: %v: stopping the guests\n", s)
		stop()
		os.Exit(1)
	}()
	// go test's own -timeout panics without running any cleanup: stop the
	// guests a little before it.
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 3*time.Minute {
			time.AfterFunc(d-90*time.Second, func() {
				fmt.Fprintf(os.Stderr, "interop: -timeout %v is near: stopping the guests\n", d)
				stop()
				os.Exit(1)
			})
		}
	}
	start := time.Now()
	code := m.Run()
	stop()
	if h != nil && h.passed+h.failed > 0 {
		fmt.Printf("\ninterop: %d tests in %.0f s (captures and logs in %s)\n", h.passed+h.failed, time.Since(start).Seconds(), h.out)
		for _, l := range h.lines {
			fmt.Println(l)
		}
		fmt.Printf("%d passed, %d failed\n", h.passed, h.failed)
	}
	// A green run's captures and logs (some 340 MB for the whole suite)
	// would only pile up in $TMPDIR, run after run; a run with a failure
	// keeps them for a look, and -out keeps them always.
	if h != nil && *flagOut == "" && code == 0 && h.failed == 0 {
		if err := os.RemoveAll(h.out); err != nil {
			fmt.Fprintf(os.Stderr, "interop: %v\n", err)
		} else if h.passed > 0 {
			fmt.Printf("interop: every test passed: %s removed (-out DIR keeps the captures and logs)\n", h.out)
		}
	}
	os.Exit(code)
}

// TestInterop runs, at each MTU, the 18 matrix cells, the data test, the
// impaired data cells, the bad-input cases, the raw bindings' cells, the
// multipath cells, the rdma_cm cells (ucmatose, rping, udaddy,
// rdma_server/rdma_client), the pyverbs UD/UC/CM cells, the hostile CM
// cells, perftest -R and the collective with an rxe rank; one guest, one
// MTU switch.
func TestInterop(t *testing.T) {
	need(t)
	for _, mtu := range mtus(t) {
		t.Run(fmt.Sprintf("mtu%d", mtu), func(t *testing.T) {
			h.setMTU(t, mtu)
			runMatrix(t, mtu)
			runData(t, mtu)
			runImpaired(t, mtu)
			runBadInput(t, mtu)
			runRaw(t, mtu)
			runMultipath(t, mtu)
			runCM(t, mtu)
			runRping(t, mtu)
			runCMExamples(t, mtu)
			runVerbs(t, mtu)
			runCMHostile(t, mtu)
			runPerftestR(t, mtu)
			runColl(t, mtu)
		})
	}
}

// newHarness finds the tools, or returns why the suite cannot run here.
func newHarness() (*harness, string) {
	if os.Geteuid() != 0 {
		return nil, "not root: the rxe guests need root (network namespace, taps, QEMU); run as root: go test -tags rxe ./interop -v"
	}
	for _, c := range []string{"qemu-system-x86_64", "tcpdump", "tshark", "python3", "ip", "ss", "go"} {
		if _, err := exec.LookPath(c); err != nil {
			return nil, fmt.Sprintf("%s not found: install the harness's prerequisites with ../shared/rxe/rxe deps", c)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err.Error()
	}
	root := filepath.Dir(wd)
	rxe := *flagRxe
	if rxe == "" {
		rxe = os.Getenv("RXE")
	}
	if rxe == "" {
		rxe = filepath.Join(root, "..", "shared", "rxe", "rxe")
	}
	if _, err := os.Stat(rxe); err != nil {
		return nil, fmt.Sprintf("the rxe harness %s is missing (set RXE or -rxe)", rxe)
	}
	out := *flagOut
	if out == "" {
		if out, err = os.MkdirTemp("", "goroce-interop-"); err != nil {
			return nil, err.Error()
		}
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err.Error()
	}
	fb, err := os.ReadFile(filepath.Join(root, "testdata", "tshark", "FIELDS"))
	if err != nil {
		return nil, err.Error()
	}
	return &harness{rxe: rxe, lib: filepath.Join(filepath.Dir(rxe), "lib"), root: root, out: out,
		fields: strings.Fields(string(fb))}, ""
}

// need skips t when the suite cannot run, and brings the guest up once.
func need(t *testing.T) {
	t.Helper()
	if h == nil {
		t.Skip(skipReason)
	}
	h.once.Do(func() { h.upErr = h.up() })
	if h.upErr != nil {
		t.Fatalf("harness: %v", h.upErr)
	}
}

// selected reports whether the test name passes -cells.
func selected(name string) bool {
	if *flagCells == "" {
		return true
	}
	ok, err := regexp.MatchString(*flagCells, name)
	return err == nil && ok
}

func mtus(t *testing.T) []int {
	var out []int
	for _, s := range strings.Split(*flagMTUs, ",") {
		m, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || (m != 1024 && m != 4096) {
			t.Fatalf("-mtus: %q (1024 and/or 4096)", s)
		}
		out = append(out, m)
	}
	return out
}

// up builds goroce and the guest image (cached) and boots one guest.
func (h *harness) up() error {
	t0 := time.Now()
	h.goroce = filepath.Join(h.out, "goroce")
	b := exec.Command("go", "build", "-o", h.goroce, "./cmd/goroce")
	b.Dir = h.root
	if out, err := b.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/goroce: %v\n%s", err, out)
	}
	if out, err := h.rxeRun(20*time.Minute, "build-image"); err != nil {
		return fmt.Errorf("rxe build-image: %v\n%s", err, out)
	}
	h.rxeRun(time.Minute, "stop") // a clean state
	if out, err := h.rxeRun(5*time.Minute, "start", "--guests", "1"); err != nil {
		return fmt.Errorf("rxe start: %v\n%s", err, out)
	}
	h.mtu = 1024
	fmt.Printf("interop: goroce built, guest up in %.0f s; captures in %s\n", time.Since(t0).Seconds(), h.out)
	return nil
}

func (h *harness) stopGuests() {
	if out, err := h.rxeRun(2*time.Minute, "stop"); err != nil {
		fmt.Fprintf(os.Stderr, "interop: rxe stop: %v\n%s", err, out)
	}
}

// setMTU switches the bridge, tap and guest netdev MTU so that the RoCE
// MTU is mtu (1500 → 1024, 9000 → 4096).
func (h *harness) setMTU(t *testing.T, mtu int) {
	t.Helper()
	if h.mtu == mtu {
		return
	}
	dev := map[int]string{1024: "1500", 4096: "9000"}[mtu]
	if out, err := h.rxeRun(2*time.Minute, "mtu", dev); err != nil {
		t.Fatalf("rxe mtu %s: %v\n%s", dev, err, out)
	}
	h.mtu = mtu
}

// rxeRun runs an rxe subcommand.
func (h *harness) rxeRun(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.rxe, args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("rxe %s: timed out after %v", strings.Join(args, " "), timeout)
	}
	return string(out), err
}

// guestExec runs a command in guest 1 and returns its output.
func (h *harness) guestExec(timeout time.Duration, args ...string) (string, error) {
	a := append([]string{"exec", "-g", "1", "-t", strconv.Itoa(int(timeout.Seconds())), "--"}, args...)
	return h.rxeRun(timeout+30*time.Second, a...)
}

// guestBg starts a background command in guest 1 (rxe bg); input, if set,
// is fed on its stdin.
func (h *harness) guestBg(name, input string, args ...string) error {
	a := []string{"bg", "-g", "1"}
	if input != "" {
		a = append(a, "-i", input)
	}
	a = append(append(a, name, "--"), args...)
	out, err := h.rxeRun(time.Minute, a...)
	if err != nil {
		return fmt.Errorf("rxe bg %s: %v\n%s", name, err, out)
	}
	return nil
}

// guestWait waits for a background command and returns its output.
func (h *harness) guestWait(name string, timeout time.Duration) (string, error) {
	return h.rxeRun(timeout+30*time.Second, "wait", "-g", "1", "-t", strconv.Itoa(int(timeout.Seconds())), name)
}

// guestKill stops a background command (rxe kill: by its pid in the guest).
func (h *harness) guestKill(name string) string {
	out, _ := h.rxeRun(time.Minute, "kill", "-g", "1", name)
	return out
}

// hostProc is a goroce process in netns roce0.
type hostProc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan error
	started        time.Time
}

// startGoroce starts the goroce binary in netns roce0.
func (h *harness) startGoroce(args ...string) (*hostProc, error) {
	return h.startGoroceIn(netns, args...)
}

// startGoroceIn starts the goroce binary in namespace ns.
func (h *harness) startGoroceIn(ns string, args ...string) (*hostProc, error) {
	p := &hostProc{done: make(chan error, 1)}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", ns, h.goroce}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p, nil
}

// wait waits for the process, killing it (by its pid) after timeout.
func (p *hostProc) wait(timeout time.Duration) error {
	select {
	case err := <-p.done:
		return err
	case <-time.After(timeout):
		p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		return fmt.Errorf("goroce did not exit within %v (killed)", timeout)
	}
}

// exited reports whether the process has ended, without waiting.
func (p *hostProc) exited() (error, bool) {
	select {
	case err := <-p.done:
		p.done <- err
		return err, true
	default:
		return nil, false
	}
}

// waitListening waits until something in netns roce0 listens on port, or
// p exits.
func (h *harness) waitListening(p *hostProc, port int, timeout time.Duration) error {
	return h.waitListeningIn(netns, p, port, timeout)
}

// waitListeningIn is waitListening in namespace ns.
func (h *harness) waitListeningIn(ns string, p *hostProc, port int, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if err, ok := p.exited(); ok {
			return fmt.Errorf("goroce exited before listening (%v): %s", err, p.stderr.String())
		}
		out, _ := exec.Command("ip", "netns", "exec", ns, "ss", "-Hltn", fmt.Sprintf("sport = :%d", port)).Output()
		if len(bytes.TrimSpace(out)) > 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("goroce not listening on %d after %v", port, timeout)
}

// capture is tcpdump on the bridge in netns roce0.
type capture struct {
	cmd  *exec.Cmd
	path string
	done chan error
	mu   sync.Mutex
	log  bytes.Buffer
}

// startCapture records RoCE and the TCP exchanges on the bridge.
func (h *harness) startCapture(name string) (*capture, error) {
	c := &capture{path: filepath.Join(h.out, name+".pcap"), done: make(chan error, 1)}
	// --immediate-mode: TPACKET_V3's blocks would keep the last packets from
	// the file when tcpdump is stopped. The ring's slots are snaplen bytes:
	// 4400 holds any RoCE frame at MTU 4096, and 32 MiB then hold a burst
	// of 7000 frames.
	c.cmd = exec.Command("ip", "netns", "exec", netns, "tcpdump", "-i", bridge, "-n", "-U", "--immediate-mode", "-B", "32768", "-s", "4400", "-Z", "root",
		"-w", c.path, fmt.Sprintf("udp port 4791 or tcp port %d or tcp port %d", perftest.Port, dataPort))
	errp, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(errp)
		once := sync.OnceFunc(func() { close(ready) })
		for sc.Scan() {
			c.mu.Lock()
			c.log.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			if strings.Contains(sc.Text(), "listening on") {
				once()
			}
		}
		once()
		c.done <- c.cmd.Wait()
	}()
	select {
	case <-ready:
		return c, nil
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill()
		return nil, errors.New("tcpdump did not start in 15 s")
	}
}

// stderr returns what tcpdump printed (its final packet counts).
func (c *capture) stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// stop ends the capture and flushes the file.
func (c *capture) stop() error {
	time.Sleep(200 * time.Millisecond) // the last packets reach the socket
	c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
		return nil
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
		return errors.New("tcpdump did not stop")
	}
}

// record adds one result line to the tally and prints it.
func (h *harness) record(t *testing.T, name string, err error, figure string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var line string
	if err != nil {
		h.failed++
		line = fmt.Sprintf("FAIL %s: %v", name, firstLine(err.Error()))
		t.Errorf("%s: %v", name, err)
	} else {
		h.passed++
		line = fmt.Sprintf("PASS %s: %s", name, figure)
	}
	h.lines = append(h.lines, line)
	fmt.Println(line)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// tail returns the last n lines of s, for error messages.
func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// writeLog saves a test's output next to its capture.
func writeLog(dir, name, s string) {
	os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644)
}

// timed runs one cell as the subtest sub and records it as name, with the
// time it took after its figure.
func (h *harness) timed(t *testing.T, sub, name string, run func() (string, error)) {
	t.Run(sub, func(t *testing.T) {
		start := time.Now()
		fig, err := run()
		if err == nil {
			fig += fmt.Sprintf(" (%.0f s)", time.Since(start).Seconds())
		}
		h.record(t, name, err, fig)
	})
}
