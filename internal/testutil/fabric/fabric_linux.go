//go:build linux

package fabric

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/testutil/linktest"
)

// Prefix starts the name of every namespace Build creates:
// "gfab-<pid>-<random>-<role>".
const Prefix = "gfab-"

// Config describes a fabric. Zero fields take the defaults.
type Config struct {
	Spines       int // default 4
	HostsPerLeaf int // default 1
	MTU          int // of every link; default 9000
	// Attach, if set, joins a namespace the caller owns to leaf A, as if
	// it were one more host: its traffic to SideB crosses the spines.
	Attach *Attach
}

// Attach joins an existing namespace to leaf A. Build adds a veth pair
// (10.230.0.1 in NS, 10.230.0.2 in leaf A), a route in NS to SideB via
// leaf A, routes to Prefixes in the fabric, and turns IPv4 forwarding on
// in NS. Cleanup deletes the pair (with its routes) and restores NS's
// forwarding setting. Hosts behind NS need their own route to SideB via
// NS.
type Attach struct {
	NS       string
	Prefixes []netip.Prefix // addresses behind NS, e.g. 10.77.0.0/24
}

// Fabric is a built fabric. Namespaces and interfaces are as named here.
type Fabric struct {
	ID             string
	LeafA, LeafB   string
	Spines         []string // namespaces
	HostsA, HostsB []Host
	// SpineDevA[k] and SpineDevB[k] are the interfaces of leaf A and
	// leaf B towards spine k.
	SpineDevA, SpineDevB []string
	// AttachDev is the attached namespace's end of its link to leaf A.
	AttachDev string
}

// Host is a namespace with one address behind a leaf.
type Host struct {
	NS   string
	Addr netip.Addr
}

// run runs a command and fails the test with its output on error.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// RequireRoot skips the test unless it runs as root with iproute2's ip.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the multipath fabric is built of network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip command")
	}
}

// Clean deletes the namespaces of fabrics whose creating process no
// longer runs (a test killed before its cleanup).
func Clean() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], Prefix) {
			continue
		}
		parts := strings.SplitN(strings.TrimPrefix(f[0], Prefix), "-", 2)
		pid, err := strconv.Atoi(parts[0])
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
}

// Build creates the fabric and registers its deletion with t.Cleanup. It
// skips the test when not root.
func Build(t testing.TB, cfg Config) *Fabric {
	t.Helper()
	RequireRoot(t)
	Clean()
	if cfg.Spines == 0 {
		cfg.Spines = 4
	}
	if cfg.HostsPerLeaf == 0 {
		cfg.HostsPerLeaf = 1
	}
	if cfg.MTU == 0 {
		cfg.MTU = 9000
	}
	if cfg.Spines > 64 || cfg.HostsPerLeaf > 64 {
		t.Fatalf("fabric: at most 64 spines and 64 hosts per leaf")
	}
	var rnd [3]byte
	rand.Read(rnd[:])
	f := &Fabric{ID: fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(rnd[:]))}
	ns := func(role string) string { return Prefix + f.ID + "-" + role }
	var all []string
	t.Cleanup(func() {
		for _, n := range all {
			exec.Command("ip", "netns", "del", n).Run()
		}
	})
	add := func(n string) {
		all = append(all, n)
		run(t, "ip", "netns", "add", n)
		run(t, "ip", "-n", n, "link", "set", "lo", "up")
		// No IPv6: router solicitations and MLD would add to the counters.
		sysctl(t, n, "net.ipv6.conf.all.disable_ipv6", "1")
		sysctl(t, n, "net.ipv6.conf.default.disable_ipv6", "1")
	}
	mtu := strconv.Itoa(cfg.MTU)
	// link joins devA in nsA (address a) to devB in nsB (address b).
	link := func(nsA, devA, a, nsB, devB, b string) {
		run(t, "ip", "link", "add", devA, "netns", nsA, "mtu", mtu, "type", "veth", "peer", "name", devB, "netns", nsB, "mtu", mtu)
		for _, e := range [][3]string{{nsA, devA, a}, {nsB, devB, b}} {
			run(t, "ip", "-n", e[0], "addr", "add", e[2], "dev", e[1])
			run(t, "ip", "-n", e[0], "link", "set", "dev", e[1], "up")
		}
	}
	f.LeafA, f.LeafB = ns("la"), ns("lb")
	for _, n := range []string{f.LeafA, f.LeafB} {
		add(n)
		sysctl(t, n, "net.ipv4.ip_forward", "1")
		sysctl(t, n, "net.ipv4.fib_multipath_hash_policy", "1")
		sysctl(t, n, "net.ipv4.conf.all.rp_filter", "0")
		sysctl(t, n, "net.ipv4.conf.default.rp_filter", "0")
	}
	aSide := append([]netip.Prefix{SideA()}, attachPrefixes(cfg.Attach)...)
	var hopsA, hopsB []string
	for k := range cfg.Spines {
		s := ns(fmt.Sprintf("s%d", k))
		f.Spines = append(f.Spines, s)
		add(s)
		sysctl(t, s, "net.ipv4.ip_forward", "1")
		dev := fmt.Sprintf("s%d", k)
		f.SpineDevA, f.SpineDevB = append(f.SpineDevA, dev), append(f.SpineDevB, dev)
		link(f.LeafA, dev, fmt.Sprintf("10.210.%d.1/24", k), s, "toa", fmt.Sprintf("10.210.%d.2/24", k))
		link(s, "tob", fmt.Sprintf("10.220.%d.1/24", k), f.LeafB, dev, fmt.Sprintf("10.220.%d.2/24", k))
		for _, p := range aSide {
			run(t, "ip", "-n", s, "route", "add", p.String(), "via", fmt.Sprintf("10.210.%d.1", k))
		}
		run(t, "ip", "-n", s, "route", "add", SideB().String(), "via", fmt.Sprintf("10.220.%d.2", k))
		hopsA = append(hopsA, "nexthop", "via", fmt.Sprintf("10.210.%d.2", k), "dev", dev)
		hopsB = append(hopsB, "nexthop", "via", fmt.Sprintf("10.220.%d.1", k), "dev", dev)
	}
	// The equal-cost routes across the spines, hashed on the 5-tuple.
	run(t, "ip", append([]string{"-n", f.LeafA, "route", "add", SideB().String()}, hopsA...)...)
	for _, p := range aSide {
		run(t, "ip", append([]string{"-n", f.LeafB, "route", "add", p.String()}, hopsB...)...)
	}
	for i := range cfg.HostsPerLeaf {
		for _, side := range []struct {
			leaf, role string
			net        int
			hosts      *[]Host
		}{{f.LeafA, "a", 201, &f.HostsA}, {f.LeafB, "b", 202, &f.HostsB}} {
			h := Host{NS: ns(fmt.Sprintf("h%s%d", side.role, i)), Addr: netip.MustParseAddr(fmt.Sprintf("10.%d.%d.2", side.net, i))}
			add(h.NS)
			link(h.NS, "eth0", h.Addr.String()+"/24", side.leaf, fmt.Sprintf("h%d", i), fmt.Sprintf("10.%d.%d.1/24", side.net, i))
			run(t, "ip", "-n", h.NS, "route", "add", "default", "via", fmt.Sprintf("10.%d.%d.1", side.net, i))
			*side.hosts = append(*side.hosts, h)
		}
	}
	if a := cfg.Attach; a != nil {
		f.AttachDev = "gf" + hex.EncodeToString(rnd[:])
		old := strings.TrimSpace(run(t, "ip", "netns", "exec", a.NS, "sysctl", "-n", "net.ipv4.ip_forward"))
		t.Cleanup(func() {
			// Deleting leaf A (above, registered earlier, runs later)
			// would delete the pair too; do it first so that a.NS is
			// back as it was before its forwarding setting is.
			exec.Command("ip", "-n", a.NS, "link", "del", f.AttachDev).Run()
			exec.Command("ip", "netns", "exec", a.NS, "sysctl", "-qw", "net.ipv4.ip_forward="+old).Run()
		})
		link(a.NS, f.AttachDev, "10.230.0.1/30", f.LeafA, "x0", "10.230.0.2/30")
		sysctl(t, a.NS, "net.ipv4.ip_forward", "1")
		run(t, "ip", "-n", a.NS, "route", "add", SideB().String(), "via", "10.230.0.2", "dev", f.AttachDev)
		for _, p := range a.Prefixes {
			run(t, "ip", "-n", f.LeafA, "route", "add", p.String(), "via", "10.230.0.1", "dev", "x0")
		}
	}
	// Every host reaches every far host, over every spine with high
	// probability, which also resolves the neighbours so that ARP does
	// not count in the measurements.
	for _, a := range f.HostsA {
		for _, b := range f.HostsB {
			if err := f.Probe(a, b, 32); err != nil {
				t.Fatalf("fabric: %s cannot reach %s: %v", a.NS, b.Addr, err)
			}
		}
	}
	return f
}

func attachPrefixes(a *Attach) []netip.Prefix {
	if a == nil {
		return nil
	}
	return a.Prefixes
}

// sysctl sets key=value inside namespace ns.
func sysctl(t testing.TB, ns, key, value string) {
	t.Helper()
	run(t, "ip", "netns", "exec", ns, "sysctl", "-qw", key+"="+value)
}

// Probe sends one UDP datagram from each of n source ports of host from
// to an echo socket on host to, and waits for every echo (each datagram is
// retried up to 5 times, 500 ms apart).
func (f *Fabric) Probe(from, to Host, n int) error {
	return probe(from.NS, to.NS, to.Addr, n)
}

func probe(from, toNS string, to netip.Addr, n int) error {
	var srv *net.UDPConn
	if err := linktest.InNetns(toNS, func() (err error) {
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, 0)))
		return err
	}); err != nil {
		return err
	}
	defer srv.Close()
	dst := srv.LocalAddr().(*net.UDPAddr).AddrPort()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 64)
		for {
			k, src, err := srv.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(b[:k], src)
		}
	}()
	defer func() { srv.Close(); <-done }()
	var cs []*net.UDPConn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	if err := linktest.InNetns(from, func() error {
		for range n {
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
			if err != nil {
				return err
			}
			cs = append(cs, c)
		}
		return nil
	}); err != nil {
		return err
	}
	b := make([]byte, 64)
	for _, c := range cs {
		var err error
		for try := 0; try < 5; try++ {
			c.Write([]byte("goroce fabric probe"))
			c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err = c.Read(b); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("no echo from %v to %v: %w", c.LocalAddr(), dst, err)
		}
	}
	return nil
}

// InNetns runs f on an OS thread inside namespace ns (linktest.InNetns):
// sockets f opens stay in ns.
func InNetns(ns string, f func() error) error { return linktest.InNetns(ns, f) }
