//go:build rxe

package interop

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runRaw runs the raw bindings' rxe tests (link/afpacket and link/afxdp
// TestRxeInterop: an RC WRITE/SEND with immediate exchange with rc_imm.py
// in guest 1, on the harness's bridge) against the guest the suite booted,
// one cell per binding and MTU. They are go test runs of their own
// packages, which need the guest up and skip otherwise; here a skip is a
// failure, since the guest is up.
func runRaw(t *testing.T, mtu int) {
	for _, pkg := range []string{"afpacket", "afxdp"} {
		name := fmt.Sprintf("rc_imm %s mtu=%d", pkg, mtu)
		if !selected(name) {
			continue
		}
		h.timed(t, shortName(name), name, func() (string, error) {
			return h.rawCell(pkg)
		})
	}
}

var rawPass = regexp.MustCompile(`(?m)^\s*--- PASS: (TestRxeInterop\S*)`)

// rawCell runs one raw binding's TestRxeInterop and returns the subtests
// that passed.
func (h *harness) rawCell(pkg string) (string, error) {
	cmd := exec.Command("go", "test", "-count=1", "-v", "-run", "TestRxeInterop", "./link/"+pkg, "-rxe")
	cmd.Dir = h.root
	cmd.Env = append(os.Environ(), "RXE="+h.rxe)
	done := make(chan struct{})
	timer := time.AfterFunc(5*time.Minute, func() {
		select {
		case <-done:
		default:
			if cmd.Process != nil {
				cmd.Process.Kill()
			}
		}
	})
	out, err := cmd.CombinedOutput()
	close(done)
	timer.Stop()
	writeLog(h.out, "raw-"+pkg, string(out))
	s := string(out)
	switch {
	case err != nil:
		return "", fmt.Errorf("go test ./link/%s -rxe: %v\n%s", pkg, err, tail(s, 30))
	case strings.Contains(s, "--- SKIP"):
		return "", fmt.Errorf("go test ./link/%s -rxe skipped with the guest up:\n%s", pkg, tail(s, 10))
	}
	var passed []string
	for _, m := range rawPass.FindAllStringSubmatch(s, -1) {
		passed = append(passed, m[1])
	}
	if len(passed) == 0 {
		return "", fmt.Errorf("go test ./link/%s -rxe ran no test:\n%s", pkg, tail(s, 10))
	}
	return strings.Join(passed, ", "), nil
}
