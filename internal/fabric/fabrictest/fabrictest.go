// Package fabrictest builds fabrics (package internal/fabric) for tests:
// each with a unique name, owned by the test process, and removed at
// t.Cleanup whatever the outcome; a fabric whose test process was killed
// is removed by the next Up (fabric.DownStale). It is imported by _test.go
// files only.
package fabrictest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/goroce/goroce/internal/fabric"
)

// RequireRoot skips the test, saying why, unless the process can build
// fabrics (root, iproute2's ip and tc, Linux).
func RequireRoot(t testing.TB) {
	t.Helper()
	if err := fabric.RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
}

// Name returns a fresh fabric name for a test: "t" and six hex digits.
func Name() string {
	var b [3]byte
	rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// Up builds the fabric cfg describes under a fresh name (unless cfg names
// one) and registers its removal with t.Cleanup. It skips the test when
// not root and fails it if the fabric cannot be built.
func Up(t testing.TB, cfg fabric.Config) *fabric.Fabric {
	t.Helper()
	RequireRoot(t)
	if gone, err := fabric.DownStale(); err != nil {
		t.Logf("removing the fabrics %v of killed tests: %v", gone, err)
	}
	if cfg.Name == "" {
		cfg.Name = Name()
	}
	cfg.OwnerPID = os.Getpid()
	f, err := fabric.Up(cfg)
	if err != nil {
		t.Fatalf("fabric up: %v", err)
	}
	t.Cleanup(func() {
		if _, err := fabric.Down(f.Name); err != nil {
			t.Errorf("fabric down %s: %v", f.Name, err)
		}
	})
	return f
}

// Spines counts, for a fabric of two leaves, the packets leaf 0 sent to
// each spine (AB[k]: from leaf 0's hosts through spine k) and leaf 1 sent
// to each spine (BA[k]), from the interface counters.
type Spines struct {
	AB, BA []uint64
}

// SpineCounters reads the counters now.
func SpineCounters(f *fabric.Fabric) (Spines, error) {
	st, err := f.Stats()
	if err != nil {
		return Spines{}, err
	}
	ab, _ := st.LeafToSpine(0)
	ba, _ := st.LeafToSpine(1)
	return Spines{AB: ab, BA: ba}, nil
}

// Sub returns s - o, link by link.
func (s Spines) Sub(o Spines) Spines {
	d := Spines{AB: make([]uint64, len(s.AB)), BA: make([]uint64, len(s.BA))}
	for k := range s.AB {
		d.AB[k] = s.AB[k] - o.AB[k]
		d.BA[k] = s.BA[k] - o.BA[k]
	}
	return d
}
