//go:build rxe && linux

package interop

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/internal/fabric/fabrictest"
)

// guestNet is the harness's bridge subnet, routed through the fabric.
var guestNet = netip.MustParsePrefix("10.77.0.0/24")

// runMultipath runs issue 14's rxe part on a real multipath fabric: netns
// roce0 (the guest's bridge) is attached to leaf A of a 4-spine fabric
// whose leaves hash the 5-tuple, goroce runs on a host behind leaf B, and
// ib_write_bw -q 8 runs from the guest to goroce perf --server and back.
// Each cell records the RoCE packets per spine link each way (captured on
// the spine links, so perftest's TCP exchange does not count) and checks,
// from the capture on the bridge, that every QP's source port is the
// kernel rule (rocev2.ConnSourcePort) on both sides. Every QP's data
// sticks to one spine, and each sender, with its per-QP ports, puts its 8
// QPs on more than one spine (all on one of 4 by chance: 4 × 0.25^8 ≈ 6e-5).
func runMultipath(t *testing.T, mtu int) {
	names := []string{
		fmt.Sprintf("multipath ib_write_bw -q 8 rxe→goroce mtu=%d", mtu),
		fmt.Sprintf("multipath ib_write_bw -q 8 goroce→rxe mtu=%d", mtu),
	}
	if !selected(names[0]) && !selected(names[1]) {
		return
	}
	t.Run(fmt.Sprintf("multipath_mtu%d", mtu), func(t *testing.T) {
		f := fabrictest.Up(t, fabric.Config{Spines: 4, MTU: map[int]int{1024: 1500, 4096: 9000}[mtu],
			Attach: &fabric.Attach{NS: netns, Prefixes: []netip.Prefix{guestNet}}})
		if out, err := h.guestExec(30*time.Second, "ip", "route", "replace", fabric.HostPrefix(1).String(), "via", hostIP); err != nil {
			t.Fatalf("guest route to %v: %v\n%s", fabric.HostPrefix(1), err, out)
		}
		t.Cleanup(func() { h.guestExec(30*time.Second, "ip", "route", "del", fabric.HostPrefix(1).String()) })
		for i, name := range names {
			if !selected(name) {
				continue
			}
			h.timed(t, shortName(name), name, func() (string, error) {
				return h.multipathCell(f, i == 0, name)
			})
		}
	})
}

// multipathCell runs one direction: rxeSends has the guest's ib_write_bw
// as the client (the requester) and goroce as the server.
func (h *harness) multipathCell(f *fabric.Fabric, rxeSends bool, name string) (string, error) {
	size := []string{"-q", "8", "-s", "16384", "-n", "64"}
	tl := tool{name: "ib_write_bw", kind: "bw",
		guest:  append([]string{"ib_write_bw", "-d", "rxe0", "-x", "1", "-F", "--report_gbits", "-u", "17"}, size...),
		goroce: append([]string{"perf", "write", "-x", "1", "-F", "--report_gbits", "-u", "17", "--timeout", "60s", "--stats"}, size...)}
	host := f.LeafHosts(1)[0]
	rxeAddr := netip.MustParseAddr(guestIP)
	file := strings.NewReplacer(" ", "_", "/", "_", "=", "", "→", "-to-").Replace(name)
	spines, err := f.CaptureSpines(1, 1<<20)
	if err != nil {
		return "", err
	}
	capt, err := h.startCapture(file)
	if err != nil {
		spines.Stop()
		return "", err
	}
	var gout, gerr, rout, role string
	var runErr error
	if rxeSends {
		role = "goroce-server"
		gout, gerr, rout, runErr = h.cellGoroceServerIn(host.NS, host.Addr.String(), tl)
	} else {
		role = "goroce-client"
		gout, gerr, rout, runErr = h.cellGoroceClientIn(host.NS, tl)
	}
	if err := capt.stop(); err != nil && runErr == nil {
		runErr = err
	}
	perSpine, drops := spines.Stop()
	if drops > 0 && runErr == nil {
		runErr = fmt.Errorf("the spine captures dropped %d packets", drops)
	}
	logs := fmt.Sprintf("--- goroce stdout\n%s--- goroce stderr\n%s--- guest\n%s\n--- tcpdump\n%s", gout, gerr, rout, capt.stderr())
	writeLog(h.out, file+".log", logs)
	if runErr != nil {
		return "", fmt.Errorf("%v\n%s", runErr, tail(logs, 25))
	}
	bw, err := figure(tl, role, gout, rout)
	if err != nil {
		return "", fmt.Errorf("%v\n%s", err, tail(logs, 25))
	}
	pkts, err := readRoCE(capt.path)
	if err != nil {
		return "", err
	}
	conns := fabric.Conns(pkts)
	if len(conns) != 8 {
		return "", fmt.Errorf("the capture shows %d connections, want 8 (%d RoCE packets)", len(conns), len(pkts))
	}
	var errs []error
	for _, c := range conns {
		rxePorts, goroPorts := c.ReqPorts, c.RespPorts
		if c.Requester != rxeAddr {
			rxePorts, goroPorts = goroPorts, rxePorts
		}
		want := c.KernelPort()
		if len(rxePorts) != 1 || rxePorts[0] != want {
			errs = append(errs, fmt.Errorf("QP %#x ↔ %#x: rxe sent from %v, want the kernel rule's %d", c.ReqQPN, c.RespQPN, rxePorts, want))
		}
		if len(goroPorts) != 1 || goroPorts[0] != want {
			errs = append(errs, fmt.Errorf("QP %#x ↔ %#x: goroce sent from %v, want the kernel rule's %d", c.ReqQPN, c.RespQPN, goroPorts, want))
		}
	}
	// RoCE packets per spine each way, from the spine captures (the
	// interface counters would count perftest's TCP exchange too).
	fromB := func(p fabric.Packet) bool { return fabric.HostPrefix(1).Contains(p.Src.Addr()) }
	ab := fabric.PerSpine(perSpine, func(p fabric.Packet) bool { return !fromB(p) })
	ba := fabric.PerSpine(perSpine, fromB)
	data, dir, sender := ab, "A→B", "rxe"
	if !rxeSends {
		data, dir, sender = ba, "B→A", "goroce"
	}
	// Each QP's data sticks to one spine; count the QPs per spine.
	qpsPerSpine := make([]int, len(perSpine))
	for _, c := range conns {
		sp := c.Spines(perSpine)
		if len(sp) != 1 {
			errs = append(errs, fmt.Errorf("QP %#x ↔ %#x: requests on spines %v, want one", c.ReqQPN, c.RespQPN, sp))
			continue
		}
		qpsPerSpine[sp[0]]++
	}
	busy := 0
	for _, n := range qpsPerSpine {
		if n > 0 {
			busy++
		}
	}
	_, _, _, ratio, _ := fabric.Balance(data, 0)
	if busy < 2 {
		errs = append(errs, fmt.Errorf("%s's 8 QPs (%s) took one spine: packets %v", sender, dir, data))
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	note := "goroce's ports = kernel rule"
	_, _, _, rab, _ := fabric.Balance(ab, 0)
	_, _, _, rba, _ := fabric.Balance(ba, 0)
	return fmt.Sprintf("%s; %s's data %s: QPs per spine %v, max/mean %.2f; RoCE packets per spine A→B %v (max/mean %.2f), B→A %v (max/mean %.2f); rxe's ports = kernel rule; %s",
		bw, sender, dir, qpsPerSpine, ratio, ab, rab, ba, rba, note), nil
}

// readRoCE returns the RoCEv2 packets of a tcpdump capture.
func readRoCE(path string) ([]fabric.Packet, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []fabric.Packet
	for {
		b, _, err := r.ReadPacketData()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if p, ok := fabric.ParseFrame(b); ok {
			out = append(out, p)
		}
	}
}
