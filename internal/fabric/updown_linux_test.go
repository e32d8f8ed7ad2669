package fabric_test

import (
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/internal/fabric/fabrictest"
)

func netnsList(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func withPrefix(nss []string, p string) []string {
	var out []string
	for _, ns := range nss {
		if strings.HasPrefix(ns, p) {
			out = append(out, ns)
		}
	}
	return out
}

func tcOut(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("tc", append([]string{"-n", ns}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// TestLeafSpine builds 3 leaves × 2 hosts over 2 spines with rate-limited
// links (Up itself checks that every host reaches every leaf), and checks
// what it made: the state file Load reads back, a tbf at the link rate on
// both ends of every leaf–spine link and on host links, a direct-action
// marker on every switch egress and none on a host's NIC, and counters
// for every link.
func TestLeafSpine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric; skipped under -short")
	}
	f := fabrictest.Up(t, fabric.Config{Leaves: 3, HostsPerLeaf: 2, Spines: 2, Rate: 200 * fabric.Mbit, HostRate: fabric.Gbit, MTU: 1500})
	g, err := fabric.Load(f.Name)
	require.NoError(t, err)
	assert.True(t, g.Complete)
	assert.NotZero(t, g.MarkerMapID)
	assert.Equal(t, f.Hosts, g.Hosts)
	assert.ElementsMatch(t, f.Namespaces(), withPrefix(netnsList(t), fabric.NamespacePrefix(f.Name)))
	names, err := fabric.Names()
	require.NoError(t, err)
	assert.Contains(t, names, f.Name)

	u := f.Uplink(2, 1)
	for _, e := range []fabric.End{u.A, u.B} {
		q := tcOut(t, e.NS, "qdisc", "show", "dev", e.Dev)
		assert.Contains(t, q, "tbf 1: root", e.Dev)
		assert.Contains(t, q, "rate 200Mbit", e.Dev)
		assert.Contains(t, q, "clsact", e.Dev)
		fl := tcOut(t, e.NS, "filter", "show", "dev", e.Dev, "egress")
		assert.Contains(t, fl, "goroce-ecn-"+e.Dev, e.Dev)
		assert.Contains(t, fl, "direct-action", e.Dev)
	}
	h := f.HostLinkOf(5)
	assert.Contains(t, tcOut(t, h.A.NS, "filter", "show", "dev", h.A.Dev, "egress"), "goroce-ecn-h5", "the leaf's port to the host")
	q := tcOut(t, h.B.NS, "qdisc", "show", "dev", h.B.Dev)
	assert.Contains(t, q, "rate 1Gbit", "the host's NIC")
	assert.NotContains(t, q, "clsact", "no marker on a host's NIC")

	st, err := f.Stats()
	require.NoError(t, err)
	require.Len(t, st.Links, len(f.Links))
	require.Len(t, st.Spines, 2)
	var total uint64
	for _, l := range st.Links {
		assert.Equal(t, l.A.ECN != nil, l.Kind == fabric.Uplink || l.Kind == fabric.HostLink, "%s: marker at the leaf's end", l.Name)
		assert.Equal(t, l.B.ECN != nil, l.Kind == fabric.Uplink, "%s: marker at the far end", l.Name)
		if l.A.ECN != nil {
			total += l.A.ECN.Packets
		}
	}
	assert.Positive(t, total, "the markers saw Up's probes")
	var sb strings.Builder
	st.WriteTable(&sb)
	t.Logf("counters after Up's probes:\n%s", sb.String())
}

// TestDownLeftovers removes what a crashed Up leaves: namespaces with the
// fabric's prefix and no state file, and a state file of an Up that never
// finished. Up refuses the name while either is there.
func TestDownLeftovers(t *testing.T) {
	fabrictest.RequireRoot(t)
	name := fabrictest.Name()
	nss := []string{fabric.NamespacePrefix(name) + "l0", fabric.NamespacePrefix(name) + "h0"}
	t.Cleanup(func() {
		for _, ns := range nss {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	for _, ns := range nss {
		require.NoError(t, exec.Command("ip", "netns", "add", ns).Run())
	}
	_, err := fabric.Up(fabric.Config{Name: name})
	assert.True(t, errors.Is(err, fabric.ErrExists), "got %v", err)
	_, err = fabric.Load(name)
	assert.True(t, errors.Is(err, fabric.ErrNotFound), "got %v", err)
	names, err := fabric.Names()
	require.NoError(t, err)
	assert.Contains(t, names, name, "found by its namespaces")
	removed, err := fabric.Down(name)
	require.NoError(t, err)
	assert.ElementsMatch(t, nss, removed)
	assert.Empty(t, withPrefix(netnsList(t), fabric.NamespacePrefix(name)))

	// A state file of an Up that never finished.
	p, err := fabric.Plan(fabric.Config{Name: name})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(fabric.StateDir, 0o755))
	path := fabric.StateDir + "/" + name + ".json"
	require.NoError(t, os.WriteFile(path, []byte(`{"name":"`+p.Name+`"}`), 0o644))
	t.Cleanup(func() { os.Remove(path) })
	_, err = fabric.Up(fabric.Config{Name: name})
	assert.True(t, errors.Is(err, fabric.ErrExists), "got %v", err)
	_, err = fabric.Down(name)
	assert.Error(t, err, "the bad state file is reported")
	_, err = os.Stat(path)
	assert.True(t, errors.Is(err, os.ErrNotExist), "and removed")
	removed, err = fabric.Down(name)
	assert.NoError(t, err, "nothing left is no error")
	assert.Empty(t, removed)
}

// TestUpFailsClean makes Up fail half-way (an attach to a namespace that
// does not exist): it returns the error and leaves nothing behind.
func TestUpFailsClean(t *testing.T) {
	fabrictest.RequireRoot(t)
	name := fabrictest.Name()
	_, err := fabric.Up(fabric.Config{Name: name, Attach: &fabric.Attach{NS: "fabric-nonexistent"}})
	require.Error(t, err)
	assert.Empty(t, withPrefix(netnsList(t), fabric.NamespacePrefix(name)))
	_, err = fabric.Load(name)
	assert.True(t, errors.Is(err, fabric.ErrNotFound), "got %v", err)
}

// TestAttach joins a namespace of the test's own to leaf 0, as the rxe
// harness's roce0 is joined in the interop suite: the attached namespace
// reaches a host of leaf 1 across the spines, the fabric reaches an
// address behind it, and Down deletes the link and restores its
// forwarding setting.
func TestAttach(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric; skipped under -short")
	}
	fabrictest.RequireRoot(t)
	outside := "fabric-att-" + fabrictest.Name()
	require.NoError(t, exec.Command("ip", "netns", "add", outside).Run())
	t.Cleanup(func() { exec.Command("ip", "netns", "del", outside).Run() })
	require.NoError(t, exec.Command("ip", "-n", outside, "link", "set", "lo", "up").Run())
	// An address "behind" the namespace: on its loopback.
	require.NoError(t, exec.Command("ip", "-n", outside, "addr", "add", "10.77.0.1/32", "dev", "lo").Run())
	fwd := func() string {
		out, err := exec.Command("ip", "netns", "exec", outside, "sysctl", "-n", "net.ipv4.ip_forward").Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	require.Equal(t, "0", fwd())

	name := fabrictest.Name()
	f, err := fabric.Up(fabric.Config{Name: name, Spines: 2, OwnerPID: os.Getpid(),
		Attach: &fabric.Attach{NS: outside, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}}})
	require.NoError(t, err)
	t.Cleanup(func() { fabric.Down(name) })
	assert.Equal(t, "1", fwd())
	far := f.LeafHosts(1)[0]
	require.NoError(t, fabric.ProbeNS(outside, far.NS, far.Addr, 8), "outside → leaf 1's host")
	require.NoError(t, fabric.ProbeNS(far.NS, outside, netip.MustParseAddr("10.77.0.1"), 8), "leaf 1's host → behind outside")

	_, err = fabric.Down(name)
	require.NoError(t, err)
	assert.Equal(t, "0", fwd(), "forwarding restored")
	out, err := exec.Command("ip", "-n", outside, "-o", "link").Output()
	require.NoError(t, err)
	assert.False(t, slices.ContainsFunc(strings.Split(string(out), "\n"), func(l string) bool {
		return strings.Contains(l, fabric.AttachDev(name))
	}), "the attach link is gone: %s", out)
}
