//go:build !linux

package fabric

import (
	"context"
	"fmt"
	"os/exec"
)

// Up needs Linux network namespaces.
func Up(cfg Config) (*Fabric, error) { return nil, fmt.Errorf("%w: Linux only", ErrNotRoot) }

// Down needs Linux network namespaces.
func Down(name string) ([]string, error) { return nil, fmt.Errorf("%w: Linux only", ErrNotRoot) }

// DownStale needs Linux network namespaces.
func DownStale() ([]string, error) { return nil, fmt.Errorf("%w: Linux only", ErrNotRoot) }

// RequireRoot reports that fabrics need Linux.
func RequireRoot() error { return fmt.Errorf("%w: Linux only", ErrNotRoot) }

// Stats needs Linux network namespaces.
func (f *Fabric) Stats() (*Stats, error) { return nil, fmt.Errorf("%w: Linux only", ErrNotRoot) }

// InNetns needs Linux network namespaces.
func InNetns(ns string, fn func() error) error { return fmt.Errorf("%w: Linux only", ErrNotRoot) }

// Command runs name in namespace ns (Linux only: the command fails).
func Command(ctx context.Context, ns string, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Command runs name in host h's namespace (Linux only).
func (f *Fabric) Command(ctx context.Context, h Host, name string, args ...string) *exec.Cmd {
	return Command(ctx, h.NS, name, args...)
}
