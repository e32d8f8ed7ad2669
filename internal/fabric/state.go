package fabric

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// StateDir holds one state file per fabric, NAME.json. It is under /run,
// which a reboot clears along with the namespaces.
const StateDir = "/run/goroce/fabric"

// ErrNotFound reports a fabric that has no state file.
var ErrNotFound = errors.New("fabric: no such fabric")

// ErrExists reports an Up of a fabric whose name is taken: by a state
// file, or by namespaces a crashed Up left.
var ErrExists = errors.New("fabric: exists")

func statePath(name string) string { return filepath.Join(StateDir, name+".json") }

// save writes f's state file atomically (a temporary file renamed over it).
func (f *Fabric) save() error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("fabric: state: %w", err)
	}
	tmp := statePath(f.Name) + ".tmp"
	// Another process's Down removes StateDir when it holds no other
	// fabric; if it does so between MkdirAll and the write, try again.
	for try := 0; ; try++ {
		if err = os.MkdirAll(StateDir, 0o755); err == nil {
			if err = os.WriteFile(tmp, append(b, '\n'), 0o644); err == nil {
				if err = os.Rename(tmp, statePath(f.Name)); err == nil {
					return nil
				}
				os.Remove(tmp)
			}
		}
		if !errors.Is(err, fs.ErrNotExist) || try == 3 {
			return fmt.Errorf("fabric: state: %w", err)
		}
	}
}

// decodeState reads a state file's contents.
func decodeState(b []byte) (*Fabric, error) {
	var f Fabric
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	if !ValidName(f.Name) || f.Config.Name != f.Name {
		return nil, fmt.Errorf("bad name %q", f.Name)
	}
	// The state must be the plan of its own config: a file edited by
	// hand, or written by another version, is refused rather than
	// half-trusted.
	p, err := Plan(f.Config)
	if err != nil {
		return nil, err
	}
	if len(p.Leaves) != len(f.Leaves) || len(p.Spines) != len(f.Spines) || len(p.Hosts) != len(f.Hosts) || len(p.Links) != len(f.Links) {
		return nil, fmt.Errorf("the state does not match its configuration")
	}
	return &f, nil
}

// Load reads the state of the fabric called name.
func Load(name string) (*Fabric, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: %q is not a fabric name", ErrNotFound, name)
	}
	b, err := os.ReadFile(statePath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s (no %s)", ErrNotFound, name, statePath(name))
	}
	if err != nil {
		return nil, fmt.Errorf("fabric: %w", err)
	}
	f, err := decodeState(b)
	if err != nil {
		return nil, fmt.Errorf("fabric: %s: %w", statePath(name), err)
	}
	return f, nil
}

// Names returns the names of the fabrics that have a state file or
// namespaces, sorted.
func Names() ([]string, error) {
	seen := map[string]bool{}
	ents, err := os.ReadDir(StateDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("fabric: %w", err)
	}
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && ValidName(n) {
			seen[n] = true
		}
	}
	nss, err := listNetns()
	if err != nil {
		return nil, err
	}
	for _, ns := range nss {
		if rest, ok := strings.CutPrefix(ns, Prefix); ok {
			if n, _, ok := strings.Cut(rest, "-"); ok && ValidName(n) {
				seen[n] = true
			}
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// listNetns returns the names of the namespaces in /run/netns (where
// iproute2's ip netns add puts them).
func listNetns() ([]string, error) {
	ents, err := os.ReadDir("/run/netns")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fabric: %w", err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, nil
}

// ErrNotRoot reports a process that cannot build or inspect fabrics: not
// root, or without iproute2's ip and tc.
var ErrNotRoot = errors.New("fabric: needs root")
