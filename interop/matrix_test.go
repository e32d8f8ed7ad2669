//go:build rxe && linux

package interop

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/perftest"
)

// tool is one row of the matrix: a guest program and the goroce command
// that plays its peer.
type tool struct {
	name   string   // as printed: ib_write_bw, ib_atomic_bw/CMP_AND_SWAP, ibv_rc_pingpong
	guest  []string // the guest's command, without the server address
	goroce []string // goroce's subcommand and arguments, without --server or the address
	kind   string   // "bw", "lat" or "pingpong"
	// bigMsgs: the messages span several packets, so the largest payload
	// on the wire must be exactly the path MTU.
	bigMsgs bool
	// rdmaCM: perftest's -R: no TCP port to watch for the goroce server
	// (the guest's rdma_cm client connects through the CM).
	rdmaCM bool
}

// Sizes: TCG makes rxe slow (≈ 0.01–0.3 Gb/s here), so the cells move a few
// MB each. 64 KiB messages are 64 packets at MTU 1024, rxe's AckReq period.
//
// -u 17 (ACK timeout 0.5 s, 3.7 s with the 7 retries) on both sides: on a
// loaded host the TCG guest stalls for more than the default 67 ms × 7; a
// requester then exhausts its retries against a peer that is only late
// (seen: goroce's ib_send_bw client at MTU 4096, rxe silent 0.63 s, then
// acknowledging everything).
func tools(mtu int) []tool {
	p := []string{"-d", "rxe0", "-x", "1", "-F", "--report_gbits", "-u", "17"}
	g := []string{"-x", "1", "-F", "--report_gbits", "-u", "17", "--timeout", "60s", "--stats"}
	cat := func(a ...[]string) []string {
		var o []string
		for _, x := range a {
			o = append(o, x...)
		}
		return o
	}
	bw := []string{"-s", "65536", "-n", "100"}
	at := []string{"-n", "200"}
	lat := []string{"-n", "100"}
	m := strconv.Itoa(mtu)
	return []tool{
		{"ib_write_bw", cat([]string{"ib_write_bw"}, p, bw), cat([]string{"perf", "write"}, g, bw), "bw", true, false},
		{"ib_read_bw", cat([]string{"ib_read_bw"}, p, bw), cat([]string{"perf", "read"}, g, bw), "bw", true, false},
		{"ib_send_bw", cat([]string{"ib_send_bw"}, p, bw), cat([]string{"perf", "send"}, g, bw), "bw", true, false},
		{"ib_atomic_bw/FETCH_AND_ADD", cat([]string{"ib_atomic_bw", "-A", "FETCH_AND_ADD"}, p, at),
			cat([]string{"perf", "atomic", "-A", "FETCH_AND_ADD"}, g, at), "bw", false, false},
		{"ib_atomic_bw/CMP_AND_SWAP", cat([]string{"ib_atomic_bw", "-A", "CMP_AND_SWAP"}, p, at),
			cat([]string{"perf", "atomic", "-A", "CMP_AND_SWAP"}, g, at), "bw", false, false},
		{"ib_write_lat", cat([]string{"ib_write_lat", "-d", "rxe0", "-x", "1", "-F", "-u", "17"}, lat), cat([]string{"perf", "write", "--lat"}, g, lat), "lat", false, false},
		{"ib_read_lat", cat([]string{"ib_read_lat", "-d", "rxe0", "-x", "1", "-F", "-u", "17"}, lat), cat([]string{"perf", "read", "--lat"}, g, lat), "lat", false, false},
		{"ib_send_lat", cat([]string{"ib_send_lat", "-d", "rxe0", "-x", "1", "-F", "-u", "17"}, lat), cat([]string{"perf", "send", "--lat"}, g, lat), "lat", false, false},
		{"ibv_rc_pingpong", []string{"ibv_rc_pingpong", "-d", "rxe0", "-g", "1", "-s", "4096", "-n", "100", "-m", m},
			[]string{"pingpong", "-g", "1", "-s", "4096", "-n", "100", "-m", m, "--timeout", "60s", "--stats"}, "pingpong", true, false},
		{"ibv_uc_pingpong", []string{"ibv_uc_pingpong", "-d", "rxe0", "-g", "1", "-s", "4096", "-n", "100", "-m", m},
			[]string{"pingpong", "--transport", "uc", "-g", "1", "-s", "4096", "-n", "100", "-m", m, "--timeout", "60s", "--stats"}, "pingpong", true, false},
		// ud_pingpong has no -m: its messages are at most the port MTU,
		// so -s is the MTU (one full packet each).
		{"ibv_ud_pingpong", []string{"ibv_ud_pingpong", "-d", "rxe0", "-g", "1", "-s", m, "-n", "100"},
			[]string{"pingpong", "--transport", "ud", "-g", "1", "-s", m, "-n", "100", "-m", m, "--timeout", "60s", "--stats"}, "pingpong", true, false},
	}
}

// runMatrix runs the 11 tools × {goroce server, goroce client} cells of
// one MTU.
func runMatrix(t *testing.T, mtu int) { runTools(t, mtu, tools(mtu)) }

// runTools runs each tool with goroce as server and as client.
func runTools(t *testing.T, mtu int, tls []tool) {
	for _, tl := range tls {
		for _, role := range []string{"goroce-server", "goroce-client"} {
			name := fmt.Sprintf("%s %s mtu=%d", tl.name, role, mtu)
			if !selected(name) {
				continue
			}
			h.timed(t, shortName(name), name, func() (string, error) {
				return h.cell(tl, role, mtu, name)
			})
		}
	}
}

// shortName turns a result name into a subtest name.
func shortName(name string) string {
	return strings.NewReplacer(" ", "_", "=", "", "(", "", ")", "", ",", "", ":", "").Replace(name)
}

// cell runs one matrix cell and returns its figure.
func (h *harness) cell(tl tool, role string, mtu int, name string) (string, error) {
	file := strings.NewReplacer(" ", "_", "/", "_", "=", "").Replace(name)
	capt, err := h.startCapture(file)
	if err != nil {
		return "", err
	}
	var gout, gerr, rout string
	var runErr error
	if role == "goroce-server" {
		gout, gerr, rout, runErr = h.cellGoroceServer(tl)
	} else {
		gout, gerr, rout, runErr = h.cellGoroceClient(tl)
	}
	if err := capt.stop(); err != nil && runErr == nil {
		runErr = err
	}
	logs := fmt.Sprintf("--- goroce stdout\n%s--- goroce stderr\n%s--- guest\n%s\n--- tcpdump\n%s", gout, gerr, rout, capt.stderr())
	writeLog(h.out, file+".log", logs)
	if runErr != nil {
		return "", fmt.Errorf("%v\n%s", runErr, tail(logs, 25))
	}
	// The test ran at the MTU the cell claims.
	if tl.kind != "pingpong" {
		if got := mtuLine.FindStringSubmatch(gout); got == nil || got[1] != strconv.Itoa(mtu) {
			return "", fmt.Errorf("goroce ran at MTU %v, not %d\n%s", got, mtu, tail(logs, 25))
		}
	}
	st := statsLine.FindStringSubmatch(gerr)
	if st == nil || st[2] != "0" {
		return "", fmt.Errorf("goroce counted bad ICRCs: %v", st)
	}
	fig, err := figure(tl, role, gout, rout)
	if err != nil {
		return "", fmt.Errorf("%v\n%s", err, tail(logs, 25))
	}
	w, err := h.checkWire(capt.path)
	if err != nil {
		return "", err
	}
	// The capture holds everything goroce sent (tcpdump dropped nothing).
	if tx, _ := strconv.Atoi(st[1]); tx != w.goroce {
		return "", fmt.Errorf("goroce sent %d RoCE packets but the capture holds %d (tcpdump: %s)", tx, w.goroce, strings.TrimSpace(capt.stderr()))
	}
	if tl.bigMsgs && w.maxPayload != mtu {
		return "", fmt.Errorf("the largest RoCE payload on the wire is %d bytes, not the path MTU %d", w.maxPayload, mtu)
	}
	return fmt.Sprintf("%s [%d RoCE packets, %d from goroce, ICRC ok, tshark ok%s, goroce cap = tshark]",
		fig, w.roce, w.goroce, rpcNote(w)), nil
}

func rpcNote(w wire) string {
	var n []string
	if w.rpcordma > 0 {
		n = append(n, fmt.Sprintf("%d short SENDs with tshark's RPCoRDMA quirk", w.rpcordma))
	}
	if w.ethertype > 0 {
		n = append(n, fmt.Sprintf("%d payloads with tshark's EtherType quirk", w.ethertype))
	}
	if w.smc > 0 {
		n = append(n, fmt.Sprintf("%d payloads with tshark's SMC-R quirk", w.smc))
	}
	if w.eoib > 0 {
		n = append(n, fmt.Sprintf("%d UD payloads with tshark's EoIB quirk", w.eoib))
	}
	if len(n) == 0 {
		return ""
	}
	return " (" + strings.Join(n, ", ") + ")"
}

var (
	mtuLine   = regexp.MustCompile(`(?m)^ Mtu +: (\d+)\[B\]`)
	statsLine = regexp.MustCompile(`goroce: stats rx=\d+ tx=(\d+) bad_icrc=(\d+) icrc_id_fixups=(\d+)`)
	ppLine    = regexp.MustCompile(`(?m)^(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec\n(\d+) iters in [\d.]+ seconds = ([\d.]+) usec/iter`)
)

// cellGoroceServer: goroce waits, the guest tool connects to it.
func (h *harness) cellGoroceServer(tl tool) (gout, gerr, rout string, err error) {
	return h.cellGoroceServerIn(netns, hostIP, tl)
}

// cellGoroceServerIn is cellGoroceServer with goroce in namespace ns at
// address addr.
func (h *harness) cellGoroceServerIn(ns, addr string, tl tool) (gout, gerr, rout string, err error) {
	args := append([]string(nil), tl.goroce...)
	if tl.kind != "pingpong" {
		args = append(args, "--server")
	}
	p, err := h.startGoroceIn(ns, args...)
	if err != nil {
		return "", "", "", err
	}
	if tl.rdmaCM {
		// No TCP port to watch: give it time to listen, as for rping (the
		// guest's rdma_cm client does not retry a rejected control
		// connection).
		time.Sleep(time.Second)
		if err, ok := p.exited(); ok {
			return p.stdout.String(), p.stderr.String(), "", fmt.Errorf("goroce exited before the client came (%v)", err)
		}
	} else if err := h.waitListeningIn(ns, p, perftest.Port, 20*time.Second); err != nil {
		p.wait(time.Second)
		return p.stdout.String(), p.stderr.String(), "", err
	}
	rout, rerr := h.guestExec(3*time.Minute, append(tl.guest, addr)...)
	werr := p.wait(90 * time.Second)
	switch {
	case werr != nil:
		err = fmt.Errorf("goroce: %v", werr)
	case rerr != nil:
		err = fmt.Errorf("%s: %v", tl.guest[0], rerr)
	}
	return p.stdout.String(), p.stderr.String(), rout, err
}

// cellGoroceClient: the guest tool waits, goroce connects to it.
func (h *harness) cellGoroceClient(tl tool) (gout, gerr, rout string, err error) {
	return h.cellGoroceClientIn(netns, tl)
}

// cellGoroceClientIn is cellGoroceClient with goroce in namespace ns.
func (h *harness) cellGoroceClientIn(ns string, tl tool) (gout, gerr, rout string, err error) {
	if err := h.guestBg("srv", "", tl.guest...); err != nil {
		return "", "", "", err
	}
	p, err := h.startGoroceIn(ns, append(append([]string(nil), tl.goroce...), guestIP)...)
	if err != nil {
		h.guestKill("srv")
		return "", "", "", err
	}
	werr := p.wait(3 * time.Minute)
	if werr != nil {
		rout = h.guestKill("srv")
		h.guestWait("srv", 10*time.Second)
		return p.stdout.String(), p.stderr.String(), rout, fmt.Errorf("goroce: %v", werr)
	}
	rout, rerr := h.guestWait("srv", 90*time.Second)
	if rerr != nil {
		err = fmt.Errorf("%s: %v", tl.guest[0], rerr)
	}
	return p.stdout.String(), p.stderr.String(), rout, err
}

// figure extracts the cell's result: the bandwidth (Gb/s) or the typical
// latency (usec) from the row goroce printed (for ib_read_lat's goroce
// server, which prints none, the guest's row), or rc_pingpong's rate.
func figure(tl tool, role, gout, rout string) (string, error) {
	switch tl.kind {
	case "pingpong":
		m := ppLine.FindStringSubmatch(gout)
		if m == nil {
			return "", fmt.Errorf("no rc_pingpong result from goroce")
		}
		if ppLine.FindStringSubmatch(rout) == nil {
			return "", fmt.Errorf("no result from ibv_rc_pingpong")
		}
		mbps, _ := strconv.ParseFloat(m[3], 64)
		return fmt.Sprintf("%.3f Gb/s, %s usec/iter", mbps/1000, m[5]), nil
	case "lat":
		// ib_read_lat's server prints no row (the -R cells' names have a
		// prefix).
		readLat := strings.TrimPrefix(tl.name, "perftest-R ") == "ib_read_lat"
		src := gout
		if role == "goroce-server" && readLat {
			src = rout
		}
		f := resultRow(src, 9)
		if f == nil {
			return "", fmt.Errorf("no latency row")
		}
		if resultRow(rout, 9) == nil && !readLat {
			return "", fmt.Errorf("no latency row from the guest")
		}
		return fmt.Sprintf("%s usec typical", f[4]), nil
	}
	f := resultRow(gout, 5)
	if f == nil {
		return "", fmt.Errorf("no bandwidth row from goroce")
	}
	if role == "goroce-server" && resultRow(rout, 5) == nil {
		return "", fmt.Errorf("no bandwidth row from the guest")
	}
	v, _ := strconv.ParseFloat(f[3], 64)
	return fmt.Sprintf("%.3f Gb/s", v), nil
}

// resultRow returns the fields of the first perftest result row (a line
// starting with a size and an iteration count) with at least n fields.
func resultRow(out string, n int) []string {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < n {
			continue
		}
		if _, err := strconv.Atoi(f[0]); err != nil {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		return f
	}
	return nil
}
