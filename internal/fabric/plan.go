package fabric

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Prefix starts the name of every namespace a fabric makes:
// "gfab-NAME-ROLE", ROLE being l0… (leaves), s0… (spines) or h0… (hosts).
const Prefix = "gfab-"

// ethHeaderLen is the Ethernet header a frame adds to an IP packet of MTU
// bytes: the length tbf and the marker count.
const ethHeaderLen = 14

// The address plan (doc/fabric.md "Addresses"). Leaf l's hosts are in
// HostPrefix(l) = 10.(201+l).0.0/16: host j of leaf l is 10.(201+l).j.2
// on the /24 of its link, the leaf 10.(201+l).j.1. The link from leaf l to
// spine k is 10.(210+l).k.0/24, the leaf .1 and the spine .2. An Attach
// link is 10.230.0.0/30, the attached namespace .1 and leaf 0 .2.
var (
	attachNS   = netip.MustParsePrefix("10.230.0.1/30")
	attachLeaf = netip.MustParsePrefix("10.230.0.2/30")
)

// HostPrefix returns the prefix of leaf l's hosts, 10.(201+l).0.0/16.
func HostPrefix(leaf int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(201 + leaf), 0, 0}), 16)
}

// hostAddrs returns the addresses of host j of leaf l's link: the host's
// and the leaf's.
func hostAddrs(leaf, j int) (host, gw netip.Prefix) {
	a := func(last byte) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(201 + leaf), byte(j), last}), 24)
	}
	return a(2), a(1)
}

// uplinkAddrs returns the addresses of the link from leaf l to spine k:
// the leaf's and the spine's.
func uplinkAddrs(leaf, spine int) (l, s netip.Prefix) {
	a := func(last byte) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(210 + leaf), byte(spine), last}), 24)
	}
	return a(1), a(2)
}

// NamespacePrefix returns the prefix of every namespace of fabric name.
func NamespacePrefix(name string) string { return Prefix + name + "-" }

// Fabric is a planned or running fabric, as its state file records it.
type Fabric struct {
	Name    string    `json:"name"`
	Config  Config    `json:"config"` // with the defaults set
	Created time.Time `json:"created"`
	Leaves  []Node    `json:"leaves"`
	Spines  []Node    `json:"spines"`
	Hosts   []Host    `json:"hosts"`
	// Links are the leaf–spine links (leaf-major: leaf 0's to spine 0,
	// 1, …), then the host links, then the attach link if any.
	Links []Link `json:"links"`
	// MarkerMapID is the kernel's ID of the marker's BPF map (0: no
	// marker); MarkerSlots is its number of entries.
	MarkerMapID uint32 `json:"marker_map_id,omitempty"`
	MarkerSlots int    `json:"marker_slots,omitempty"`
	// AttachForwarding is the attached namespace's net.ipv4.ip_forward
	// before Up set it, restored by Down.
	AttachForwarding string `json:"attach_forwarding,omitempty"`
	// Complete says Up finished; a state file without it is the trace of
	// an Up that failed or was killed (Down removes it).
	Complete bool `json:"complete"`
}

// Node is a leaf or spine router: a namespace that forwards.
type Node struct {
	Name string `json:"name"` // "l0", "s3"
	NS   string `json:"ns"`
}

// Host is an end host: a namespace with one interface, eth0, on a link to
// its leaf.
type Host struct {
	Name    string     `json:"name"`  // "h0", "h1", …: hosts are numbered leaf by leaf
	Index   int        `json:"index"` // the number in Name
	Leaf    int        `json:"leaf"`
	NS      string     `json:"ns"`
	Addr    netip.Addr `json:"addr"`
	Gateway netip.Addr `json:"gateway"` // the leaf's address on the link
	Dev     string     `json:"dev"`     // "eth0"
}

// LinkKind tells what a Link joins.
type LinkKind string

// The kinds of links.
const (
	Uplink     LinkKind = "uplink" // leaf–spine
	HostLink   LinkKind = "host"   // leaf–host
	AttachLink LinkKind = "attach" // leaf 0–an attached namespace
)

// Link is a veth pair. A is always the leaf's end; B is the spine's, the
// host's or the attached namespace's.
type Link struct {
	Name  string   `json:"name"` // "l0-s1", "l0-h3", "attach"
	Kind  LinkKind `json:"kind"`
	Leaf  int      `json:"leaf"`
	Spine int      `json:"spine"` // -1 unless an uplink
	Host  int      `json:"host"`  // -1 unless a host link
	Rate  Rate     `json:"rate"`  // each direction; 0: unlimited
	A, B  End
}

// End is one end of a link: an interface in a namespace. Its egress has a
// tbf at the link's rate if the link has one, and the ECN marker if Slot
// is not -1.
type End struct {
	NS   string       `json:"ns"`
	Dev  string       `json:"dev"`
	Addr netip.Prefix `json:"addr"`
	// Slot is the end's entry in the marker's map, -1 if it has no marker.
	Slot int `json:"marker_slot"`
}

// Plan lays out the fabric cfg describes, without creating anything: the
// namespaces, addresses, links and marker slots Up will make.
func Plan(cfg Config) (*Fabric, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ns := func(role string) string { return NamespacePrefix(cfg.Name) + role }
	f := &Fabric{Name: cfg.Name, Config: cfg}
	for l := range cfg.Leaves {
		f.Leaves = append(f.Leaves, Node{Name: fmt.Sprintf("l%d", l), NS: ns(fmt.Sprintf("l%d", l))})
	}
	for k := range cfg.Spines {
		f.Spines = append(f.Spines, Node{Name: fmt.Sprintf("s%d", k), NS: ns(fmt.Sprintf("s%d", k))})
	}
	marked := func(r Rate) bool { return r > 0 && !cfg.ECN.Off }
	slot := 0
	next := func(on bool) int {
		if !on {
			return -1
		}
		slot++
		return slot - 1
	}
	for l := range cfg.Leaves {
		for k := range cfg.Spines {
			la, sa := uplinkAddrs(l, k)
			f.Links = append(f.Links, Link{
				Name: fmt.Sprintf("l%d-s%d", l, k), Kind: Uplink, Leaf: l, Spine: k, Host: -1, Rate: cfg.Rate,
				A: End{NS: f.Leaves[l].NS, Dev: fmt.Sprintf("sp%d", k), Addr: la, Slot: next(marked(cfg.Rate))},
				B: End{NS: f.Spines[k].NS, Dev: fmt.Sprintf("lf%d", l), Addr: sa, Slot: next(marked(cfg.Rate))},
			})
		}
	}
	for l := range cfg.Leaves {
		for j := range cfg.HostsPerLeaf {
			i := l*cfg.HostsPerLeaf + j
			ha, gw := hostAddrs(l, j)
			h := Host{Name: fmt.Sprintf("h%d", i), Index: i, Leaf: l, NS: ns(fmt.Sprintf("h%d", i)),
				Addr: ha.Addr(), Gateway: gw.Addr(), Dev: "eth0"}
			f.Hosts = append(f.Hosts, h)
			// Only the leaf's end is a switch port: the host's end is
			// its NIC, which a switch does not mark at.
			f.Links = append(f.Links, Link{
				Name: fmt.Sprintf("l%d-%s", l, h.Name), Kind: HostLink, Leaf: l, Spine: -1, Host: i, Rate: cfg.HostRate,
				A: End{NS: f.Leaves[l].NS, Dev: h.Name, Addr: gw, Slot: next(marked(cfg.HostRate))},
				B: End{NS: h.NS, Dev: h.Dev, Addr: ha, Slot: -1},
			})
		}
	}
	if a := cfg.Attach; a != nil {
		f.Links = append(f.Links, Link{
			Name: "attach", Kind: AttachLink, Leaf: 0, Spine: -1, Host: -1,
			A: End{NS: f.Leaves[0].NS, Dev: "x0", Addr: attachLeaf, Slot: -1},
			B: End{NS: a.NS, Dev: AttachDev(cfg.Name), Addr: attachNS, Slot: -1},
		})
	}
	f.MarkerSlots = slot
	return f, nil
}

// AttachDev returns the name of the attach link's interface in the
// attached namespace.
func AttachDev(name string) string { return "gfx-" + name }

// Namespaces returns the fabric's own namespaces: leaves, spines, hosts.
func (f *Fabric) Namespaces() []string {
	var out []string
	for _, n := range f.Leaves {
		out = append(out, n.NS)
	}
	for _, n := range f.Spines {
		out = append(out, n.NS)
	}
	for _, h := range f.Hosts {
		out = append(out, h.NS)
	}
	return out
}

// Host returns the host named name ("h3") or, failing that, whose
// namespace or address is name.
func (f *Fabric) Host(name string) (Host, bool) {
	for _, h := range f.Hosts {
		if h.Name == name || h.NS == name || h.Addr.String() == name {
			return h, true
		}
	}
	return Host{}, false
}

// NS returns the namespace of the node or host named name ("l0", "s1",
// "h3"), or name itself if it is one of the fabric's namespaces.
func (f *Fabric) NS(name string) (string, bool) {
	for _, n := range append(append([]Node(nil), f.Leaves...), f.Spines...) {
		if n.Name == name || n.NS == name {
			return n.NS, true
		}
	}
	if h, ok := f.Host(name); ok {
		return h.NS, true
	}
	return "", false
}

// LeafHosts returns leaf l's hosts in order.
func (f *Fabric) LeafHosts(l int) []Host {
	var out []Host
	for _, h := range f.Hosts {
		if h.Leaf == l {
			out = append(out, h)
		}
	}
	return out
}

// Uplink returns the link from leaf l to spine k.
func (f *Fabric) Uplink(l, k int) Link { return f.Links[l*f.Config.Spines+k] }

// HostLinkOf returns host i's link to its leaf.
func (f *Fabric) HostLinkOf(i int) Link { return f.Links[f.Config.Leaves*f.Config.Spines+i] }

// SpineOf returns the spine whose leaf–spine link holds addr (an address
// of the uplink subnets), or -1.
func (f *Fabric) SpineOf(addr netip.Addr) int {
	for _, l := range f.Links {
		if l.Kind == Uplink && l.A.Addr.Masked().Contains(addr) {
			return l.Spine
		}
	}
	return -1
}

// String summarises the fabric in one line.
func (f *Fabric) String() string {
	c := f.Config
	var sb strings.Builder
	fmt.Fprintf(&sb, "fabric %s: %d leaves × %d hosts, %d spines, links %v, hosts %v, MTU %d, buffer %d B",
		f.Name, c.Leaves, c.HostsPerLeaf, c.Spines, c.Rate, c.HostRate, c.MTU, c.Buffer)
	if f.MarkerSlots > 0 {
		fmt.Fprintf(&sb, ", ECN at %d B (γ %.2f) on %d egresses", c.ECN.Threshold, c.ECN.Gamma, f.MarkerSlots)
	} else {
		sb.WriteString(", no ECN marker")
	}
	return sb.String()
}
