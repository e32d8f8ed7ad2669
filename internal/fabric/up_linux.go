//go:build linux

package fabric

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Up builds the fabric cfg describes and records its state in StateDir:
// the namespaces, veth pairs, addresses, routes (ECMP over the spines with
// the L4 hash), tbf rate limits and ECN markers, then checks that every
// host reaches every leaf's hosts over the spines. It refuses a name that
// is taken (ErrExists: a state file, or namespaces a crashed Up left); if
// it fails half-way, it removes what it made (Down) and returns the error.
// It needs root (RequireRoot).
func Up(cfg Config) (*Fabric, error) {
	if err := RequireRoot(); err != nil {
		return nil, err
	}
	f, err := Plan(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkFree(f.Name); err != nil {
		return nil, err
	}
	f.Created = time.Now().UTC().Truncate(time.Second)
	// The state goes first, so that a crash from here on leaves a file
	// that names what to remove.
	if err := f.save(); err != nil {
		return nil, err
	}
	if err := f.build(); err != nil {
		if _, derr := Down(f.Name); derr != nil {
			return nil, errors.Join(err, fmt.Errorf("fabric: removing what was built: %w", derr))
		}
		return nil, err
	}
	f.Complete = true
	if err := f.save(); err != nil {
		Down(f.Name)
		return nil, err
	}
	return f, nil
}

// checkFree returns ErrExists if name has a state file or namespaces.
func checkFree(name string) error {
	if _, err := os.Stat(statePath(name)); err == nil {
		return fmt.Errorf("%w: %s has a state file (%s); remove it with goroce fabric down %s", ErrExists, name, statePath(name), name)
	}
	nss, err := listNetns()
	if err != nil {
		return err
	}
	for _, ns := range nss {
		if strings.HasPrefix(ns, NamespacePrefix(name)) {
			return fmt.Errorf("%w: namespace %s is left from an earlier fabric %s; remove it with goroce fabric down %s", ErrExists, ns, name, name)
		}
	}
	return nil
}

// build makes everything f's plan names.
func (f *Fabric) build() error {
	c := f.Config
	routers := map[string]bool{}
	var cmds []string
	for _, n := range slices.Concat(f.Leaves, f.Spines) {
		routers[n.NS] = true
	}
	for _, ns := range f.Namespaces() {
		cmds = append(cmds, "netns add "+ns)
	}
	if err := batch("ip", "", cmds); err != nil {
		return err
	}
	rps := rpsMask()
	for _, ns := range f.Namespaces() {
		keys := [][2]string{
			// No IPv6: router solicitations and MLD would add to the
			// counters. Interfaces made later inherit "default".
			{"net.ipv6.conf.all.disable_ipv6", "1"},
			{"net.ipv6.conf.default.disable_ipv6", "1"},
			// RPS on every interface made later, so that a flow's
			// packets keep their order (doc/fabric.md "Packet order").
			{"net.core.rps_default_mask", rps},
		}
		if routers[ns] {
			keys = append(keys,
				[2]string{"net.ipv4.ip_forward", "1"},
				// ECMP spreads the two directions of a flow over
				// different spines: no reverse-path filtering.
				[2]string{"net.ipv4.conf.all.rp_filter", "0"},
				[2]string{"net.ipv4.conf.default.rp_filter", "0"},
				// The L4 hash of the 5-tuple, as switches hash RoCEv2:
				// a flow's UDP source port picks its spine.
				[2]string{"net.ipv4.fib_multipath_hash_policy", "1"})
		}
		if err := InNetns(ns, func() error {
			for _, kv := range keys {
				optional := strings.HasPrefix(kv[0], "net.ipv6") || kv[0] == "net.core.rps_default_mask" // no IPv6, or a kernel before 6.1
				if err := writeSysctl(kv[0], kv[1]); err != nil && !(optional && errors.Is(err, fs.ErrNotExist)) {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if a := c.Attach; a != nil {
		// What Down restores, recorded before anything changes there.
		old, err := readSysctl(a.NS, "net.ipv4.ip_forward")
		if err != nil {
			return fmt.Errorf("fabric: attach to %s: %w", a.NS, err)
		}
		f.AttachForwarding = old
		if err := f.save(); err != nil {
			return err
		}
	}
	// The veth pairs, each end made directly in its namespace.
	cmds = nil
	mtu := strconv.Itoa(c.MTU)
	for _, l := range f.Links {
		cmds = append(cmds, fmt.Sprintf("link add %s netns %s mtu %s type veth peer name %s netns %s mtu %s",
			l.A.Dev, l.A.NS, mtu, l.B.Dev, l.B.NS, mtu))
	}
	if err := batch("ip", "", cmds); err != nil {
		return err
	}
	// Addresses, routes, qdiscs: one ip batch and one tc batch per
	// namespace.
	ipCmds, tcCmds := map[string][]string{}, map[string][]string{}
	ours := map[string]bool{}
	for _, ns := range f.Namespaces() {
		ipCmds[ns] = []string{"link set lo up"}
		ours[ns] = true
	}
	for _, l := range f.Links {
		for _, e := range []End{l.A, l.B} {
			if !ours[e.NS] {
				continue // the attached namespace: attach
			}
			ipCmds[e.NS] = append(ipCmds[e.NS], "addr add "+e.Addr.String()+" dev "+e.Dev, "link set "+e.Dev+" up")
			if l.Rate > 0 {
				tcCmds[e.NS] = append(tcCmds[e.NS], fmt.Sprintf("qdisc add dev %s root handle 1: tbf rate %dbit burst %d limit %d",
					e.Dev, uint64(l.Rate), tbfBurst(c), c.Buffer))
			}
			if e.Slot >= 0 {
				tcCmds[e.NS] = append(tcCmds[e.NS], "qdisc add dev "+e.Dev+" clsact")
			}
		}
	}
	routes := f.routes()
	for _, ns := range f.Namespaces() {
		ipCmds[ns] = append(ipCmds[ns], routes[ns]...)
	}
	for _, ns := range f.Namespaces() {
		if err := batch("ip", ns, ipCmds[ns]); err != nil {
			return err
		}
		if err := batch("tc", ns, tcCmds[ns]); err != nil {
			return err
		}
	}
	if err := f.attachMarkers(); err != nil {
		return err
	}
	if err := f.attach(); err != nil {
		return err
	}
	return f.probeAll()
}

// rpsMask returns the CPUs this process may run on as a kernel CPU
// mask (hex words of 32 bits, most significant first, comma-separated):
// the RPS mask of every interface of a fabric.
//
// Without RPS a veth hands each packet to the backlog of the CPU that
// sends it, and each CPU drains its own backlog: when the sender moves
// between CPUs, or a tbf's watchdog releases its queue on another CPU
// than the last time, two CPUs forward one flow's packets at once and
// the next hop receives them out of order. An RC QP takes that for a
// loss (a NAK sequence error, Go-Back-N). With RPS every packet of a flow
// is queued to the CPU its 5-tuple hashes to, in order.
func rpsMask() string {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() == 0 {
		n := runtime.NumCPU()
		set.Zero()
		for i := range n {
			set.Set(i)
		}
	}
	return cpuMask(func(i int) bool { return set.IsSet(i) }, len(set)*64)
}

// cpuMask formats the CPUs 0 … n-1 for which in is true as the kernel's
// cpumask text: 32-bit hex words, comma-separated, most significant first,
// leading zero words left out.
func cpuMask(in func(int) bool, n int) string {
	words := make([]uint32, (n+31)/32)
	for i := range n {
		if in(i) {
			words[i/32] |= 1 << (i % 32)
		}
	}
	for len(words) > 1 && words[len(words)-1] == 0 {
		words = words[:len(words)-1]
	}
	parts := make([]string, len(words))
	for i, w := range words {
		f := "%08x"
		if i == len(words)-1 {
			f = "%x"
		}
		parts[len(words)-1-i] = fmt.Sprintf(f, w)
	}
	return strings.Join(parts, ",")
}

// tbfBurst is the tbf bucket of every rate-limited egress: two full
// frames or 16 KiB, whichever is more. The bucket is the most a port
// sends back to back at line speed after an idle spell, so it is kept
// under the marker's default threshold: a burst that a port lets out
// must not make the next port's virtual queue mark.
func tbfBurst(c Config) int { return max(2*(c.MTU+ethHeaderLen), 16<<10) }

// routes returns the route commands of each namespace.
func (f *Fabric) routes() map[string][]string {
	c := f.Config
	out := map[string][]string{}
	// The attached namespace's prefixes, and its link's own subnet (so
	// that the namespace itself reaches the hosts); leaf 0 has the
	// subnet as a connected route.
	var attach, behind []string
	if c.Attach != nil {
		attach = []string{attachNS.Masked().String()}
		for _, p := range c.Attach.Prefixes {
			behind = append(behind, p.String())
		}
		attach = append(attach, behind...)
	}
	for _, h := range f.Hosts {
		out[h.NS] = append(out[h.NS], "route add default via "+h.Gateway.String()+" dev "+h.Dev)
	}
	for l, leaf := range f.Leaves {
		// ECMP over every spine, one next hop per spine, to the other
		// leaves' hosts and (from leaves other than 0) to Attach's
		// prefixes.
		var hops []string
		for k := range f.Spines {
			u := f.Uplink(l, k)
			hops = append(hops, "nexthop via "+u.B.Addr.Addr().String()+" dev "+u.A.Dev)
		}
		var dsts []string
		for m := range f.Leaves {
			if m != l {
				dsts = append(dsts, HostPrefix(m).String())
			}
		}
		if l != 0 {
			dsts = append(dsts, attach...)
		} else {
			for _, p := range behind {
				out[leaf.NS] = append(out[leaf.NS], "route add "+p+" via "+attachNS.Addr().String()+" dev x0")
			}
		}
		for _, d := range dsts {
			out[leaf.NS] = append(out[leaf.NS], "route add "+d+" "+strings.Join(hops, " "))
		}
	}
	if a := c.Attach; a != nil {
		l := f.Links[len(f.Links)-1]
		for m := range f.Leaves {
			out[a.NS] = append(out[a.NS], "route add "+HostPrefix(m).String()+" via "+l.A.Addr.Addr().String()+" dev "+l.B.Dev)
		}
	}
	for k, sp := range f.Spines {
		for l := range f.Leaves {
			u := f.Uplink(l, k)
			out[sp.NS] = append(out[sp.NS], "route add "+HostPrefix(l).String()+" via "+u.A.Addr.Addr().String()+" dev "+u.B.Dev)
		}
		for _, p := range attach {
			u := f.Uplink(0, k)
			out[sp.NS] = append(out[sp.NS], "route add "+p+" via "+u.A.Addr.Addr().String()+" dev "+u.B.Dev)
		}
	}
	return out
}

// attach finishes joining Config.Attach's namespace to leaf 0 (build
// made the link and leaf 0's end): the address there, forwarding, and
// routes to every leaf's hosts.
func (f *Fabric) attach() error {
	a := f.Config.Attach
	if a == nil {
		return nil
	}
	l := f.Links[len(f.Links)-1]
	cmds := []string{"addr add " + l.B.Addr.String() + " dev " + l.B.Dev, "link set " + l.B.Dev + " up"}
	if err := batch("ip", a.NS, cmds); err != nil {
		return err
	}
	if err := sysctl(a.NS, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	return batch("ip", a.NS, f.routes()[a.NS])
}

// Down removes the fabric called name: its namespaces (those its state
// names and every namespace whose name starts with NamespacePrefix(name),
// so that a crashed Up's leftovers go too), the attach link and the
// attached namespace's forwarding setting, and the state file. Deleting a
// namespace deletes its veth pairs, qdiscs and marker programs; the
// marker's map goes with its last program. It returns the namespaces it
// deleted; a fabric with nothing left is no error.
func Down(name string) ([]string, error) {
	if err := RequireRoot(); err != nil {
		return nil, err
	}
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: %q is not a fabric name", ErrConfig, name)
	}
	var errs []error
	f, err := Load(name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		errs = append(errs, err) // a bad state file: still remove by name
		f = nil
	}
	nss := map[string]bool{}
	if f != nil {
		for _, ns := range f.Namespaces() {
			nss[ns] = true
		}
		if a := f.Config.Attach; a != nil {
			if _, err := os.Stat("/run/netns/" + a.NS); err == nil {
				if devExists(a.NS, AttachDev(name)) {
					if err := run("ip", "-n", a.NS, "link", "del", AttachDev(name)); err != nil {
						errs = append(errs, err)
					}
				}
				if f.AttachForwarding != "" {
					if err := sysctl(a.NS, "net.ipv4.ip_forward", f.AttachForwarding); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
	}
	all, err := listNetns()
	if err != nil {
		errs = append(errs, err)
	}
	var removed []string
	for _, ns := range all {
		if nss[ns] || strings.HasPrefix(ns, NamespacePrefix(name)) {
			if err := run("ip", "netns", "del", ns); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, ns)
		}
	}
	if err := os.Remove(statePath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	os.Remove(statePath(name) + ".tmp")
	// The directories go with the last fabric (Remove fails on a
	// directory that is not empty).
	if os.Remove(StateDir) == nil {
		os.Remove(filepath.Dir(StateDir))
	}
	return removed, errors.Join(errs...)
}

// DownStale removes every fabric whose Config.OwnerPID names a process
// that no longer runs, and returns their names.
func DownStale() ([]string, error) {
	names, err := Names()
	if err != nil {
		return nil, err
	}
	var gone []string
	var errs []error
	for _, n := range names {
		f, err := Load(n)
		if err != nil || f.Config.OwnerPID == 0 {
			continue
		}
		if err := syscall.Kill(f.Config.OwnerPID, 0); !errors.Is(err, syscall.ESRCH) {
			continue
		}
		if _, err := Down(n); err != nil {
			errs = append(errs, err)
		}
		gone = append(gone, n)
	}
	return gone, errors.Join(errs...)
}

// devExists reports whether namespace ns has an interface called dev.
func devExists(ns, dev string) bool {
	found := false
	InNetns(ns, func() error {
		c, err := nlOpen()
		if err != nil {
			return err
		}
		defer c.close()
		links, err := c.links()
		_, found = links[dev]
		return err
	})
	return found
}
