//go:build rxe && linux

package interop

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/perftest"
)

// badCase is a test of goroce against a peer that misbehaves or is
// misconfigured: goroce must exit non-zero within its timeout, with an
// error naming the cause.
type badCase struct {
	name string
	mtu  int // the RoCE MTU the case runs at
	run  func(h *harness) (stderr string, took time.Duration, err error)
	want *regexp.Regexp // in goroce's stderr
	max  time.Duration  // goroce must have exited within this
}

func badCases() []badCase {
	g := []string{"-x", "1", "-F", "--report_gbits", "--timeout", "10s"}
	return []badCase{
		{name: "unreachable guest", mtu: 1024, max: 30 * time.Second,
			want: regexp.MustCompile(`cannot (reach|connect to) 10\.77\.0\.9`),
			run: func(h *harness) (string, time.Duration, error) {
				return h.goroceAlone(append([]string{"perf", "write", "-n", "5"}, append(g, "10.77.0.9")...)...)
			}},
		{name: "peer dies mid-test (goroce client)", mtu: 1024, max: 40 * time.Second,
			want: regexp.MustCompile(`RETRY_EXC_ERR|peer closed|stopped answering`),
			run: func(h *harness) (string, time.Duration, error) {
				return h.killMidTest(false, []string{"ib_write_bw", "-d", "rxe0", "-x", "1", "-F", "-s", "65536", "-D", "60"},
					append([]string{"perf", "write", "-s", "65536", "-D", "60"}, g...))
			}},
		{name: "peer dies mid-test (goroce server)", mtu: 1024, max: 40 * time.Second,
			want: regexp.MustCompile(`peer closed the connection|did not answer`),
			run: func(h *harness) (string, time.Duration, error) {
				return h.killMidTest(true, []string{"ib_write_bw", "-d", "rxe0", "-x", "1", "-F", "-s", "65536", "-D", "60"},
					append([]string{"perf", "write", "-s", "65536", "-D", "60"}, g...))
			}},
		{name: "different tools (ib_send_bw against goroce's write server)", mtu: 1024, max: 60 * time.Second,
			want: regexp.MustCompile(`out of step|(?s)waited.*RNR NAKs: does it run ib_write_bw too`),
			run: func(h *harness) (string, time.Duration, error) {
				return h.pair(true, []string{"ib_send_bw", "-d", "rxe0", "-x", "1", "-F", "-n", "20"},
					append([]string{"perf", "write", "-n", "20"}, g...))
			}},
		{name: "wrong GID index (-x 0 on rxe, goroce server)", mtu: 1024, max: 40 * time.Second,
			want: regexp.MustCompile(`link-local GID \(rxe GID index 0\): run it with -x 1|rejects its own GID.*-x 1 on rxe`),
			run: func(h *harness) (string, time.Duration, error) {
				return h.pair(true, []string{"ib_write_bw", "-d", "rxe0", "-x", "0", "-F", "-n", "20"},
					append([]string{"perf", "write", "-n", "20"}, g...))
			}},
		{name: "wrong GID index (-x 0 on rxe, goroce client)", mtu: 1024, max: 40 * time.Second,
			want: regexp.MustCompile(`link-local GID \(rxe GID index 0\): run it with -x 1|rejects its own GID.*-x 1 on rxe`),
			run: func(h *harness) (string, time.Duration, error) {
				return h.pair(false, []string{"ib_write_bw", "-d", "rxe0", "-x", "0", "-F", "-n", "20"},
					append([]string{"perf", "write", "-n", "20"}, g...))
			}},
		{name: "goroce -x 0", mtu: 1024, max: 10 * time.Second,
			want: regexp.MustCompile(`GID index 0 is the IPv6 link-local GID.*use -x 1`),
			run: func(h *harness) (string, time.Duration, error) {
				return h.goroceAlone("perf", "write", "-x", "0", "10.77.0.2")
			}},
		{name: "path MTU above the interface's (pingpong -m 4096 at netdev MTU 1500)", mtu: 1024, max: 40 * time.Second,
			want: regexp.MustCompile(`-m 4096 is above the active MTU 1024 of rxebr0 \(interface MTU 1500\)`),
			run: func(h *harness) (string, time.Duration, error) {
				return h.pair(false, []string{"ibv_rc_pingpong", "-d", "rxe0", "-g", "1", "-n", "10"},
					[]string{"pingpong", "-g", "1", "-n", "10", "-m", "4096", "--timeout", "10s"})
			}},
		{name: "path MTU mismatch (rxe -m 4096, goroce -m 1024)", mtu: 4096, max: 60 * time.Second,
			want: regexp.MustCompile(`path MTU`),
			run: func(h *harness) (string, time.Duration, error) {
				return h.pair(false, []string{"ibv_rc_pingpong", "-d", "rxe0", "-g", "1", "-n", "10", "-m", "4096"},
					[]string{"pingpong", "-g", "1", "-n", "10", "-m", "1024", "--timeout", "10s"})
			}},
	}
}

// runBadInput runs the cases of one MTU.
func runBadInput(t *testing.T, mtu int) {
	for _, bc := range badCases() {
		if bc.mtu != mtu {
			continue
		}
		name := fmt.Sprintf("bad input: %s mtu=%d", bc.name, mtu)
		if !selected(name) {
			continue
		}
		t.Run(shortName(name), func(t *testing.T) {
			stderr, took, err := bc.run(h)
			switch {
			case err == nil:
				err = fmt.Errorf("goroce exited 0; stderr:\n%s", stderr)
			case !bc.want.MatchString(stderr):
				err = fmt.Errorf("goroce's error does not name the cause (want /%v/):\n%s", bc.want, tail(stderr, 6))
			case took > bc.max:
				err = fmt.Errorf("goroce took %v to fail, more than %v", took.Round(time.Second), bc.max)
			default:
				err = nil
			}
			h.record(t, name, err, fmt.Sprintf("goroce failed in %.1f s: %s", took.Seconds(), lastLine(stderr)))
		})
	}
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(l) - 1; i >= 0; i-- {
		if strings.HasPrefix(l[i], "goroce ") {
			return l[i]
		}
	}
	return l[len(l)-1]
}

// goroceAlone runs goroce with no peer and returns its stderr, its run
// time and its exit error.
func (h *harness) goroceAlone(args ...string) (string, time.Duration, error) {
	p, err := h.startGoroce(args...)
	if err != nil {
		return "", 0, err
	}
	err = p.wait(2 * time.Minute)
	return p.stderr.String(), time.Since(p.started), err
}

// pair runs a guest tool against goroce (goroce as server when server is
// set) and returns goroce's stderr, run time and exit error. The guest side
// may fail too; it is killed if still running.
func (h *harness) pair(server bool, guest, goroce []string) (string, time.Duration, error) {
	if server {
		p, err := h.startGoroce(append(goroce, "--server")...)
		if err != nil {
			return "", 0, err
		}
		if err := h.waitListening(p, perftest.Port, 20*time.Second); err != nil {
			p.wait(time.Second)
			return p.stderr.String(), 0, err
		}
		if err := h.guestBg("bad", "", append(guest, hostIP)...); err != nil {
			p.wait(time.Second)
			return p.stderr.String(), 0, err
		}
		err = p.wait(2 * time.Minute)
		h.guestKill("bad")
		h.guestWait("bad", 10*time.Second)
		return p.stderr.String(), time.Since(p.started), err
	}
	if err := h.guestBg("bad", "", guest...); err != nil {
		return "", 0, err
	}
	p, err := h.startGoroce(append(goroce, guestIP)...)
	if err != nil {
		h.guestKill("bad")
		return "", 0, err
	}
	err = p.wait(2 * time.Minute)
	h.guestKill("bad")
	h.guestWait("bad", 10*time.Second)
	return p.stderr.String(), time.Since(p.started), err
}

// killMidTest starts a long test, kills the guest's tool once traffic
// flows, and returns goroce's stderr, the time from the kill to goroce's
// exit, and goroce's exit error.
func (h *harness) killMidTest(server bool, guest, goroce []string) (string, time.Duration, error) {
	var p *hostProc
	var err error
	if server {
		if p, err = h.startGoroce(append(goroce, "--server")...); err != nil {
			return "", 0, err
		}
		if err := h.waitListening(p, perftest.Port, 20*time.Second); err != nil {
			p.wait(time.Second)
			return p.stderr.String(), 0, err
		}
		if err := h.guestBg("bad", "", append(guest, hostIP)...); err != nil {
			p.wait(time.Second)
			return p.stderr.String(), 0, err
		}
	} else {
		if err := h.guestBg("bad", "", guest...); err != nil {
			return "", 0, err
		}
		if p, err = h.startGoroce(append(goroce, guestIP)...); err != nil {
			h.guestKill("bad")
			return "", 0, err
		}
	}
	time.Sleep(6 * time.Second) // the exchange is done, RDMA traffic flows
	if _, ok := p.exited(); ok {
		h.guestKill("bad")
		return p.stderr.String(), 0, fmt.Errorf("goroce exited before the peer was killed:\n%s", p.stderr.String())
	}
	h.guestKill("bad")
	killed := time.Now()
	err = p.wait(2 * time.Minute)
	took := time.Since(killed)
	h.guestWait("bad", 10*time.Second)
	return p.stderr.String(), took, err
}
