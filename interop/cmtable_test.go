//go:build rxe && linux

package interop

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/cmhostile"
	"github.com/goroce/goroce/link/udp"
)

// The hostile-CM table (issue 27, doc/cm.md §2): every scenario of
// internal/cmhostile against the guest's kernel CM and rdma_cm, so that
// the answers the table (and roce's TestCMHostileTable, which runs the
// same scenarios against goroce) asserts are the kernel's. The hostile
// side is a bare link on 10.77.0.1:4791 (no goroce device) that writes
// the MADs' RoCEv2 packets itself; the guest runs testdata/cmpeer.py, an
// rdma_cm program through librdmacm: for the listener-side scenarios an
// RC listener bound to 10.77.0.2:7471 (as rping -a binds) and a UD one on
// 7472, for the dialer-side ones rdma_connect to 10.77.0.1:7473. -cells
// cm-hostile runs them with the other hostile cells; -cells
// 'cm-hostile (req|rep)-' a part.
const (
	tableRCPort   = 7471
	tableUDPort   = 7472
	tableDialPort = 7473
)

func runCMHostileTable(t *testing.T, mtu int) {
	if mtu != 1024 {
		return
	}
	var listener, dialer []cmhostile.Scenario
	for _, sc := range cmhostile.Scenarios() {
		if !selected(tableCell(sc)) {
			continue
		}
		if sc.Side == cmhostile.Listener {
			listener = append(listener, sc)
		} else {
			dialer = append(dialer, sc)
		}
	}
	if len(listener) > 0 {
		h.tableSession(t, "cm_table_listener", listener, []string{"listen", guestIP,
			strconv.Itoa(tableRCPort), strconv.Itoa(tableUDPort)})
	}
	for _, sc := range dialer {
		h.tableSession(t, "cm_table_"+strings.ReplaceAll(sc.Name, "-", "_"), []cmhostile.Scenario{sc}, nil)
	}
}

func tableCell(sc cmhostile.Scenario) string {
	return fmt.Sprintf("cm-hostile %s mtu=1024", sc.Name)
}

// tableSession runs scenarios against the guest in one capture: with
// listen, one cmpeer listening for all of them; without, each dialer-side
// scenario starts its cmpeer in connect mode through Env.Dial.
func (h *harness) tableSession(t *testing.T, name string, scs []cmhostile.Scenario, listen []string) {
	script := filepath.Join(h.root, "interop", "testdata", "cmpeer.py")
	capt, err := h.startCapture(name)
	if err != nil {
		for _, sc := range scs {
			h.record(t, tableCell(sc), err, "")
		}
		return
	}
	var outs []string
	defer func() {
		capt.stop()
		writeLog(h.out, name+".log", strings.Join(outs, "\n"))
	}()
	started := false
	stop := func() {
		if started {
			outs = append(outs, "--- cmpeer\n"+h.guestKill("cmpeer"))
			started = false
		}
	}
	defer stop()
	if listen != nil {
		if err := h.guestBg("cmpeer", script, append([]string{"python3", "-"}, listen...)...); err != nil {
			for _, sc := range scs {
				h.record(t, tableCell(sc), err, "")
			}
			return
		}
		started = true
		time.Sleep(3 * time.Second) // rdma_listen under TCG
	}
	var peer *cmhostile.LinkPeer
	err = inNetns(netns, func() error {
		l, err := udp.Open(udp.Config{Addr: netip.AddrPortFrom(netip.MustParseAddr(hostIP), 4791)})
		if err != nil {
			return err
		}
		peer = cmhostile.NewLinkPeer(l, netip.AddrPortFrom(netip.MustParseAddr(guestIP), 4791))
		return nil
	})
	if err != nil {
		for _, sc := range scs {
			h.record(t, tableCell(sc), err, "")
		}
		return
	}
	defer peer.Close()
	env := cmhostile.Env{Self: netip.MustParseAddr(hostIP), Target: netip.MustParseAddr(guestIP),
		RCPort: tableRCPort, UDPort: tableUDPort, DialPort: tableDialPort, Wait: 5 * time.Second,
		Dial: func(n int) error {
			if err := h.guestBg("cmpeer", script, "python3", "-", "connect", hostIP, strconv.Itoa(tableDialPort), strconv.Itoa(n)); err != nil {
				return err
			}
			started = true
			return nil
		}}
	for i, sc := range scs {
		h.timed(t, "cm-hostile "+sc.Name, tableCell(sc), func() (string, error) {
			env.Seed = uint64(i + 1)
			s := cmhostile.NewSession(peer, env)
			err := sc.Run(s)
			outs = append(outs, fmt.Sprintf("--- %s\n%s\n%v", sc.Name, s.Transcript(), err))
			if err != nil {
				return "", fmt.Errorf("%v\n--- transcript:\n%s", err, s.Transcript())
			}
			return "the kernel: " + sc.Kernel, nil
		})
		if listen == nil {
			stop()
		}
	}
}
