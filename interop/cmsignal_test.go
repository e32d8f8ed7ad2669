//go:build rxe && linux

package interop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/roce"
)

// runCMGUIDAndSignals runs the issue-27 cells of parts 1 and 3 (-cells
// cm-hostile selects them with the others):
//
//   - cm-hostile ca-guid: the guest's node_guid (ibv_devinfo) is the
//     modified EUI-64 of its eth0 MAC, as cm.GUIDFromMAC computes it; the
//     guest's REP carries it as Local CA GUID, and goroce's REQ carries
//     goroce's node GUID, the EUI-64 of the MAC of rxebr0, the interface
//     that owns 10.77.0.1;
//   - cm-hostile sigint rping goroce-server / sigterm rping goroce-client:
//     goroce rping in mid-run against the guest's rping, ended by SIGINT
//     (SIGTERM): the guest's rping reports the disconnect (its
//     DISCONNECTED event, the DREQ) and ends, instead of waiting for its
//     QP's retries to run out; goroce exits with 130 (143).
func runCMGUIDAndSignals(t *testing.T, mtu int) {
	if mtu != 1024 {
		return
	}
	cells := []struct {
		name string
		run  func() (string, error)
	}{
		{"cm-hostile ca-guid mtu=1024", h.cmCAGUID},
		{"cm-hostile sigint rping goroce-server mtu=1024", func() (string, error) { return h.rpingSignal(true, os.Interrupt) }},
		{"cm-hostile sigterm rping goroce-client mtu=1024", func() (string, error) { return h.rpingSignal(false, syscall.SIGTERM) }},
	}
	for _, c := range cells {
		if !selected(c.name) {
			continue
		}
		h.timed(t, shortName(c.name), c.name, c.run)
	}
}

var nodeGUIDLine = regexp.MustCompile(`node_guid:\s+([0-9a-f]{4}):([0-9a-f]{4}):([0-9a-f]{4}):([0-9a-f]{4})`)

func (h *harness) cmCAGUID() (string, error) {
	macOut, err := h.guestExec(30*time.Second, "cat", "/sys/class/net/eth0/address")
	if err != nil {
		return "", fmt.Errorf("guest MAC: %v: %s", err, macOut)
	}
	mac, err := net.ParseMAC(strings.TrimSpace(finalLine(macOut)))
	if err != nil {
		return "", fmt.Errorf("guest MAC %q: %v", macOut, err)
	}
	info, err := h.guestExec(30*time.Second, "ibv_devinfo", "-d", "rxe0")
	if err != nil {
		return "", fmt.Errorf("ibv_devinfo: %v: %s", err, info)
	}
	m := nodeGUIDLine.FindStringSubmatch(info)
	if m == nil {
		return "", fmt.Errorf("no node_guid in ibv_devinfo:\n%s", info)
	}
	g, _ := strconv.ParseUint(m[1]+m[2]+m[3]+m[4], 16, 64)
	guestGUID := cm.GUID(g)
	if want, ok := cm.GUIDFromMAC(mac); !ok || want != guestGUID {
		return "", fmt.Errorf("the guest's node_guid %v is not cm.GUIDFromMAC(%v) = %v", guestGUID, mac, want)
	}
	brOut, err := exec.Command("ip", "netns", "exec", netns, "cat", "/sys/class/net/"+bridge+"/address").Output()
	if err != nil {
		return "", fmt.Errorf("%s MAC: %v", bridge, err)
	}
	brMAC, err := net.ParseMAC(strings.TrimSpace(string(brOut)))
	if err != nil {
		return "", err
	}
	hostGUID, _ := cm.GUIDFromMAC(brMAC)

	var reqGUID, repGUID uint64
	var devGUID cm.GUID
	tap := &tapLink{
		out: func(m cm.MAD) bool {
			if m.AttrID() == cm.AttrREQ {
				reqGUID = cm.REQ(m).LocalCAGUID()
			}
			return false
		},
		in: func(m cm.MAD) bool {
			if m.AttrID() == cm.AttrREP {
				repGUID = cm.REP(m).LocalCAGUID()
			}
			return false
		},
	}
	fig, seen, out, err := h.hostileSession("cm_hostile_ca_guid", tap, func(dev *roce.Device) (string, error) {
		devGUID = dev.NodeGUID()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := dev.Dial(ctx, netip.AddrPortFrom(netip.MustParseAddr(guestIP), cmPort), roce.DialConfig{})
		if err != nil {
			return "", fmt.Errorf("Dial: %w", err)
		}
		return "connected", c.Close()
	})
	if err != nil {
		return "", fmt.Errorf("%v\n--- CM MADs: %s\n--- ucmatose:\n%s", err, seenList(seen), tail(out, 6))
	}
	switch {
	case cm.GUID(repGUID) != guestGUID:
		return "", fmt.Errorf("the guest's REP carries Local CA GUID %v, its node_guid is %v", cm.GUID(repGUID), guestGUID)
	case devGUID != hostGUID || cm.GUID(reqGUID) != hostGUID:
		return "", fmt.Errorf("goroce's node GUID %v, its REQ's %v; want the EUI-64 of %s's MAC %v: %v",
			devGUID, cm.GUID(reqGUID), bridge, brMAC, hostGUID)
	}
	return fmt.Sprintf("%s; the guest: MAC %v, node_guid %v = its REP's Local CA GUID; goroce on %s (MAC %v): REQ's Local CA GUID %v",
		fig, mac, guestGUID, bridge, brMAC, hostGUID), nil
}

// finalLine is the last non-empty line of s (rxe exec may print before).
func finalLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// rpingSignal runs goroce rping against the guest's rping, endless pings,
// and ends goroce with sig after 3 s.
func (h *harness) rpingSignal(goroceServer bool, sig os.Signal) (string, error) {
	name := "rping_sigint_goroce_server"
	if !goroceServer {
		name = "rping_sigterm_goroce_client"
	}
	capt, err := h.startCapture(name)
	if err != nil {
		return "", err
	}
	stopped := false
	defer func() {
		if !stopped {
			capt.stop()
		}
	}()
	var p *hostProc
	if goroceServer {
		if p, err = h.startGoroce("rping", "-s", "-a", hostIP, "-timeout", "60s"); err != nil {
			return "", err
		}
		time.Sleep(time.Second)
		if err := h.guestBg("rpingx", "", "timeout", "60", "rping", "-c", "-v", "-a", hostIP); err != nil {
			p.cmd.Process.Kill()
			return "", err
		}
	} else {
		if err := h.guestBg("rpingx", "", "timeout", "60", "rping", "-s", "-v", "-a", guestIP); err != nil {
			return "", err
		}
		time.Sleep(3 * time.Second)
		if p, err = h.startGoroce("rping", "-c", "-a", guestIP, "-timeout", "60s"); err != nil {
			h.guestKill("rpingx")
			return "", err
		}
	}
	time.Sleep(5 * time.Second) // pings under way
	if err, ok := p.exited(); ok {
		h.guestKill("rpingx")
		return "", fmt.Errorf("goroce exited before the signal (%v): %s", err, p.stderr.String())
	}
	t0 := time.Now()
	p.cmd.Process.Signal(sig)
	werr := p.wait(10 * time.Second)
	goroceTook := time.Since(t0)
	rout, rerr := h.guestWait("rpingx", 20*time.Second)
	guestTook := time.Since(t0)
	writeLog(h.out, name+".log", fmt.Sprintf("--- goroce\n%s%s%v\n--- rping\n%s%v", p.stdout.String(), p.stderr.String(), werr, rout, rerr))
	want := 128 + int(sig.(syscall.Signal))
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != want {
		return "", fmt.Errorf("goroce exited with %v, want status %d\n%s", werr, want, p.stderr.String())
	}
	side := "client"
	if !goroceServer {
		side = "server"
	}
	if !strings.Contains(rout, side+" DISCONNECT EVENT") {
		return "", fmt.Errorf("the guest's rping did not report the disconnect (%v):\n%s", rerr, tail(rout, 8))
	}
	if guestTook > 15*time.Second {
		return "", fmt.Errorf("the guest's rping took %v to end", guestTook)
	}
	stopped = true
	capt.stop()
	if _, err := h.checkWire(capt.path); err != nil {
		return "", err
	}
	return fmt.Sprintf("goroce exited %d %v after %v; the guest's rping: %q, ended within %v",
		want, goroceTook.Round(time.Millisecond), sig, side+" DISCONNECT EVENT...", guestTook.Round(time.Second)), nil
}
