//go:build linux

package linktest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// helperEnv names the environment variable that turns a test binary into
// the unprivileged helper of RunUnprivileged.
const helperEnv = "GOROCE_LINKTEST_HELPER"

// IsHelper reports whether this process is the helper started by
// RunUnprivileged for the test named name.
func IsHelper(name string) bool { return os.Getenv(helperEnv) == name }

// RunUnprivileged re-runs the test binary's test name (which must call
// IsHelper first and print its verdict) without privileges: as user
// nobody when capsh is empty, else as root under capsh with the given
// capabilities dropped (e.g. "cap_bpf,cap_sys_admin,cap_net_admin"). It
// returns the helper's output.
func RunUnprivileged(t *testing.T, name, drop string) string {
	t.Helper()
	RequireRoot(t)
	args := []string{"-test.run=^" + name + "$", "-test.v"}
	var cmd *exec.Cmd
	if drop == "" {
		// The go test build directory is private to root: run a copy.
		dir, err := os.MkdirTemp("", "goroce-helper")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		bin, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(dir, "helper.test")
		if err := os.WriteFile(exe, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		cmd = exec.Command(exe, args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	} else {
		capsh, err := exec.LookPath("capsh")
		if err != nil {
			t.Skip("needs capsh to drop capabilities")
		}
		cmd = exec.Command(capsh, "--drop="+drop, "--", "-c", "exec "+os.Args[0]+" "+strings.Join(args, " "))
	}
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// HelperVerdict prints the helper's result for RunUnprivileged.
func HelperVerdict(err error, ok bool) {
	if ok {
		fmt.Printf("HELPER-OK %v\n", err)
		return
	}
	fmt.Printf("HELPER-FAIL %v\n", err)
}
