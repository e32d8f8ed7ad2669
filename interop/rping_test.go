//go:build rxe

package interop

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runRping runs goroce rping against librdmacm's rping in the guest, both
// ways: 10 pings of rping's default 64 bytes, each an RDMA READ of the
// client's source buffer and an RDMA WRITE into its sink, with the
// client's -V check; both sides' -v lines must show the same data.
func runRping(t *testing.T, mtu int) {
	cells := []struct {
		name string
		run  func(mtu int, d *cmDevice) (string, error)
	}{
		{fmt.Sprintf("rdma_cm rping goroce-server mtu=%d", mtu), h.rpingGoroceServer},
		{fmt.Sprintf("rdma_cm rping goroce-client mtu=%d", mtu), h.rpingGoroceClient},
	}
	for _, c := range cells {
		if !selected(c.name) {
			continue
		}
		h.timed(t, shortName(c.name), c.name, func() (string, error) {
			return h.wireCell(c.name, func() (cmDevice, string, error) {
				var d cmDevice
				fig, err := c.run(mtu, &d)
				d.fig = fig
				return d, "", err
			})
		})
	}
}

// rpingCount is the cells' -C.
const rpingCount = 10

var rpingData = regexp.MustCompile(`(?m)^(server )?ping data: (rdma-ping-\d+: .*)$`)

// rpingLines returns the ping data of out's "ping data:" lines (server
// true) or "server ping data:" lines.
func rpingLines(out string, server bool) []string {
	var d []string
	for _, m := range rpingData.FindAllStringSubmatch(out, -1) {
		if (m[1] != "") == server {
			d = append(d, m[2])
		}
	}
	return d
}

// rpingStats reads goroce rping's --stats line into d: what the device
// sent, for the capture check; a bad ICRC fails the cell.
func rpingStats(stderr string, d *cmDevice) error {
	st := statsLine.FindStringSubmatch(stderr)
	if st == nil || st[2] != "0" {
		return fmt.Errorf("goroce counted bad ICRCs or printed no stats: %v", st)
	}
	tx, err := strconv.ParseUint(st[1], 10, 64)
	d.tx = tx
	return err
}

// rpingCheck compares the client's and the server's ping data.
func rpingCheck(client, server []string) error {
	if len(client) != rpingCount || len(server) != rpingCount {
		return fmt.Errorf("%d client and %d server ping data lines, want %d each", len(client), len(server), rpingCount)
	}
	for i := range client {
		if !strings.HasPrefix(client[i], "rdma-ping-"+strconv.Itoa(i)+": ") || client[i] != server[i] {
			return fmt.Errorf("ping %d: client %q, server %q", i, client[i], server[i])
		}
	}
	return nil
}

// rpingGoroceServer: goroce rping -s, the guest's rping -c connects.
func (h *harness) rpingGoroceServer(mtu int, d *cmDevice) (string, error) {
	p, err := h.startGoroce("rping", "-s", "-v", "-a", hostIP, "-timeout", "60s", "-stats")
	if err != nil {
		return "", err
	}
	time.Sleep(time.Second) // no TCP port to watch: give it time to listen
	if err, ok := p.exited(); ok {
		return "", fmt.Errorf("goroce exited before the client came (%v): %s", err, p.stderr.String())
	}
	rout, rerr := h.guestExec(2*time.Minute, "timeout", "90", "rping", "-c", "-v", "-V",
		"-C", strconv.Itoa(rpingCount), "-a", hostIP)
	werr := p.wait(60 * time.Second)
	writeLog(h.out, fmt.Sprintf("rping_goroce_server_mtu%d.log", mtu), fmt.Sprintf("--- goroce\n%s%s%v\n--- rping\n%s%v",
		p.stdout.String(), p.stderr.String(), werr, rout, rerr))
	switch {
	case werr != nil:
		return "", fmt.Errorf("goroce: %v\n%s\n--- rping:\n%s", werr, p.stderr.String(), tail(rout, 10))
	case rerr != nil:
		return "", fmt.Errorf("rping: %v\n%s\n--- goroce:\n%s", rerr, tail(rout, 10), p.stderr.String())
	}
	if err := rpingCheck(rpingLines(rout, false), rpingLines(p.stdout.String(), true)); err != nil {
		return "", err
	}
	if err := rpingStats(p.stderr.String(), d); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d pings, rping -V ok, last %q", rpingCount, rpingLines(rout, false)[rpingCount-1][:16]), nil
}

// rpingGoroceClient: the guest's rping -s listens, goroce rping -c
// connects.
func (h *harness) rpingGoroceClient(mtu int, d *cmDevice) (string, error) {
	if err := h.guestBg("rpings", "", "timeout", "90", "rping", "-s", "-v", "-C", strconv.Itoa(rpingCount),
		"-a", guestIP); err != nil {
		return "", err
	}
	time.Sleep(3 * time.Second) // rdma_listen under TCG
	p, err := h.startGoroce("rping", "-c", "-v", "-V", "-C", strconv.Itoa(rpingCount), "-a", guestIP,
		"-m", strconv.Itoa(mtu), "-timeout", "60s", "-stats")
	if err != nil {
		h.guestKill("rpings")
		return "", err
	}
	werr := p.wait(2 * time.Minute)
	if werr != nil {
		h.guestKill("rpings")
	}
	rout, rerr := h.guestWait("rpings", 60*time.Second)
	writeLog(h.out, fmt.Sprintf("rping_goroce_client_mtu%d.log", mtu), fmt.Sprintf("--- goroce\n%s%s%v\n--- rping\n%s%v",
		p.stdout.String(), p.stderr.String(), werr, rout, rerr))
	switch {
	case werr != nil:
		return "", fmt.Errorf("goroce: %v\n%s\n--- rping:\n%s", werr, p.stderr.String(), tail(rout, 10))
	case rerr != nil:
		return "", fmt.Errorf("rping: %v\n%s\n--- goroce:\n%s", rerr, tail(rout, 10), p.stderr.String())
	}
	if err := rpingCheck(rpingLines(p.stdout.String(), false), rpingLines(rout, true)); err != nil {
		return "", err
	}
	if err := rpingStats(p.stderr.String(), d); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d pings, goroce -V ok, last %q", rpingCount, rpingLines(p.stdout.String(), false)[rpingCount-1][:16]), nil
}
