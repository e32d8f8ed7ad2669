//go:build linux

package fabric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// InNetns runs fn on an OS thread moved into namespace ns (a name under
// /run/netns): sockets fn opens belong to ns and stay there, and files it
// opens under /proc/sys/net are ns's. The thread returns to its namespace
// afterwards; if that fails it is left locked, so the runtime ends it.
func InNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("fabric: namespace %s: %w", ns, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("fabric: setns %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("fabric: setns back from %s: %w", ns, err))
			return // still locked: the thread exits with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// sysctl writes key (dotted, e.g. net.ipv4.ip_forward) = value in ns.
func sysctl(ns, key, value string) error {
	return InNetns(ns, func() error { return writeSysctl(key, value) })
}

func writeSysctl(key, value string) error {
	p := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	if err := os.WriteFile(p, []byte(value), 0); err != nil {
		return fmt.Errorf("fabric: sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// readSysctl reads key in ns.
func readSysctl(ns, key string) (string, error) {
	var v string
	err := InNetns(ns, func() error {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

// run runs a command (ip, tc) and returns an error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("fabric: %s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// batch runs cmds through one "ip -batch -" or "tc -batch -" in ns
// ("-n NS"); it fails on the first command that fails, naming it.
func batch(tool, ns string, cmds []string) error {
	if len(cmds) == 0 {
		return nil
	}
	args := []string{"-batch", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	c := exec.Command(tool, args...)
	c.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("fabric: %s %s: %w: %s", tool, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Command returns a command that runs name with args in namespace ns
// (through "ip netns exec", which also gives it ns's /sys).
func Command(ctx context.Context, ns string, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Command returns a command that runs name with args in host h's
// namespace.
func (f *Fabric) Command(ctx context.Context, h Host, name string, args ...string) *exec.Cmd {
	return Command(ctx, h.NS, name, args...)
}

// RequireRoot returns nil if the process can build fabrics: root (or the
// capabilities to make namespaces, links and BPF programs) with
// iproute2's ip and tc. Otherwise the error says what is missing.
func RequireRoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: a fabric is built of network namespaces: run as root", ErrNotRoot)
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: no %s (iproute2)", ErrNotRoot, tool)
		}
	}
	return nil
}
