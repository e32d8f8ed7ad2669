package fabric

import (
	"encoding/json"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want Rate
		err  bool
	}{
		{"1gbit", Gbit, false},
		{"1G", Gbit, false},
		{"250mbit", 250 * Mbit, false},
		{"1.5gbit", 1500 * Mbit, false},
		{"100kbit", 100 * Kbit, false},
		{"125mbps", Gbit, false}, // bytes per second, as tc reads it
		{"1000000", Mbit, false},
		{"", 0, false},
		{"0", 0, false},
		{"unlimited", 0, false},
		{"fast", 0, true},
		{"-1gbit", 0, true},
		{"1e30gbit", 0, true},
		{"NaNgbit", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRate(tc.in)
			if tc.err {
				assert.True(t, errors.Is(err, ErrConfig), "got %v, %v", got, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, r := range []Rate{Gbit, 250 * Mbit, 100 * Kbit, 1234, 0} {
		back, err := ParseRate(r.String())
		require.NoError(t, err)
		assert.Equal(t, r, back, "%v round trip", r)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Name: "demo"}
	tests := []struct {
		name string
		edit func(c *Config)
	}{
		{"no name", func(c *Config) { c.Name = "" }},
		{"name too long", func(c *Config) { c.Name = "abcdefghijkl" }},
		{"dash in name", func(c *Config) { c.Name = "a-b" }},
		{"upper case", func(c *Config) { c.Name = "Demo" }},
		{"too many leaves", func(c *Config) { c.Leaves = MaxLeaves + 1 }},
		{"negative spines", func(c *Config) { c.Spines = -1 }},
		{"too many hosts", func(c *Config) { c.HostsPerLeaf = MaxHostsPerLeaf + 1 }},
		{"tiny MTU", func(c *Config) { c.MTU = 576 }},
		{"rate too low", func(c *Config) { c.Rate = 10 * Kbit }},
		{"buffer below two frames", func(c *Config) { c.Buffer = 9000 }},
		{"threshold above the buffer", func(c *Config) { c.ECN.Threshold = DefaultBuffer + 1 }},
		{"gamma above 1", func(c *Config) { c.ECN.Gamma = 1.5 }},
		{"attach without namespace", func(c *Config) { c.Attach = &Attach{} }},
		{"attach IPv6 prefix", func(c *Config) {
			c.Attach = &Attach{NS: "x", Prefixes: []netip.Prefix{netip.MustParsePrefix("fd00::/64")}}
		}},
	}
	_, err := Plan(ok)
	require.NoError(t, err)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			_, err := Plan(c)
			assert.True(t, errors.Is(err, ErrConfig), "got %v", err)
		})
	}
}

// TestPlan checks the address plan, names and marker slots of a fabric
// of 3 leaves × 2 hosts and 2 spines (doc/fabric.md "Addresses").
func TestPlan(t *testing.T) {
	f, err := Plan(Config{Name: "demo", Leaves: 3, HostsPerLeaf: 2, Spines: 2, Rate: Gbit, HostRate: 10 * Gbit})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"gfab-demo-l0", "gfab-demo-l1", "gfab-demo-l2", "gfab-demo-s0", "gfab-demo-s1",
		"gfab-demo-h0", "gfab-demo-h1", "gfab-demo-h2", "gfab-demo-h3", "gfab-demo-h4", "gfab-demo-h5",
	}, f.Namespaces())
	require.Len(t, f.Hosts, 6)
	h3 := f.Hosts[3]
	assert.Equal(t, Host{Name: "h3", Index: 3, Leaf: 1, NS: "gfab-demo-h3", Addr: netip.MustParseAddr("10.202.1.2"),
		Gateway: netip.MustParseAddr("10.202.1.1"), Dev: "eth0"}, h3)
	assert.True(t, HostPrefix(1).Contains(h3.Addr))
	assert.Equal(t, "10.203.0.0/16", HostPrefix(2).String())

	require.Len(t, f.Links, 3*2+6)
	u := f.Uplink(2, 1)
	assert.Equal(t, Link{Name: "l2-s1", Kind: Uplink, Leaf: 2, Spine: 1, Host: -1, Rate: Gbit,
		A: End{NS: "gfab-demo-l2", Dev: "sp1", Addr: netip.MustParsePrefix("10.212.1.1/24"), Slot: 10},
		B: End{NS: "gfab-demo-s1", Dev: "lf2", Addr: netip.MustParsePrefix("10.212.1.2/24"), Slot: 11}}, u)
	assert.Equal(t, 1, f.SpineOf(netip.MustParseAddr("10.212.1.2")))
	hl := f.HostLinkOf(3)
	assert.Equal(t, Link{Name: "l1-h3", Kind: HostLink, Leaf: 1, Spine: -1, Host: 3, Rate: 10 * Gbit,
		A: End{NS: "gfab-demo-l1", Dev: "h3", Addr: netip.MustParsePrefix("10.202.1.1/24"), Slot: 15},
		B: End{NS: "gfab-demo-h3", Dev: "eth0", Addr: netip.MustParsePrefix("10.202.1.2/24"), Slot: -1}}, hl)
	// Every switch egress with a rate has a slot of its own; the hosts'
	// NICs have none.
	assert.Equal(t, 3*2*2+6, f.MarkerSlots)
	seen := map[int]bool{}
	for _, l := range f.Links {
		for _, e := range []End{l.A, l.B} {
			if e.Slot >= 0 {
				assert.False(t, seen[e.Slot], "slot %d twice", e.Slot)
				seen[e.Slot] = true
			}
			assert.LessOrEqual(t, len(e.Dev), 15, "interface name %q", e.Dev)
		}
	}
	for _, name := range []string{"h5", "gfab-demo-h5", "10.203.1.2"} {
		h, ok := f.Host(name)
		assert.True(t, ok, name)
		assert.Equal(t, "h5", h.Name)
	}
	ns, ok := f.NS("s1")
	assert.True(t, ok)
	assert.Equal(t, "gfab-demo-s1", ns)
	assert.Len(t, f.LeafHosts(2), 2)

	// No rate, or ECN off: no markers.
	for _, c := range []Config{{Name: "x"}, {Name: "x", Rate: Gbit, ECN: ECNConfig{Off: true}}} {
		g, err := Plan(c)
		require.NoError(t, err)
		assert.Zero(t, g.MarkerSlots)
		for _, l := range g.Links {
			assert.Equal(t, -1, l.A.Slot)
			assert.Equal(t, -1, l.B.Slot)
		}
	}
	// Names derived from the longest name fit their limits.
	long, err := Plan(Config{Name: "abcdefghijk", Attach: &Attach{NS: "x"}})
	require.NoError(t, err)
	assert.Len(t, AttachDev(long.Name), 15)
	assert.Len(t, mapName(long.Name), 14)
	assert.Equal(t, AttachLink, long.Links[len(long.Links)-1].Kind)
}

// TestRoutes checks the routes of leaf 0 and a spine of a two-leaf,
// two-spine fabric with an attached namespace.
func TestRoutes(t *testing.T) {
	f, err := Plan(Config{Name: "demo", Spines: 2, Attach: &Attach{NS: "outside", Prefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}}})
	require.NoError(t, err)
	r := f.routes()
	assert.Equal(t, []string{
		"route add 10.77.0.0/24 via 10.230.0.1 dev x0",
		"route add 10.202.0.0/16 nexthop via 10.210.0.2 dev sp0 nexthop via 10.210.1.2 dev sp1",
	}, r["gfab-demo-l0"])
	assert.Equal(t, []string{
		"route add 10.201.0.0/16 nexthop via 10.211.0.2 dev sp0 nexthop via 10.211.1.2 dev sp1",
		"route add 10.230.0.0/30 nexthop via 10.211.0.2 dev sp0 nexthop via 10.211.1.2 dev sp1",
		"route add 10.77.0.0/24 nexthop via 10.211.0.2 dev sp0 nexthop via 10.211.1.2 dev sp1",
	}, r["gfab-demo-l1"])
	assert.Equal(t, []string{
		"route add 10.201.0.0/16 via 10.210.1.1 dev lf0",
		"route add 10.202.0.0/16 via 10.211.1.1 dev lf1",
		"route add 10.230.0.0/30 via 10.210.1.1 dev lf0",
		"route add 10.77.0.0/24 via 10.210.1.1 dev lf0",
	}, r["gfab-demo-s1"])
	assert.Equal(t, []string{
		"route add 10.201.0.0/16 via 10.230.0.2 dev gfx-demo",
		"route add 10.202.0.0/16 via 10.230.0.2 dev gfx-demo",
	}, r["outside"])
	assert.Equal(t, []string{"route add default via 10.202.0.1 dev eth0"}, r["gfab-demo-h1"])
}

// TestStateRoundTrip encodes a plan as Up saves it and decodes it, and
// refuses state that does not match its own configuration.
func TestStateRoundTrip(t *testing.T) {
	f, err := Plan(Config{Name: "demo", Leaves: 2, HostsPerLeaf: 4, Spines: 4, Rate: Gbit})
	require.NoError(t, err)
	f.MarkerMapID, f.Complete = 42, true
	b, err := json.Marshal(f)
	require.NoError(t, err)
	g, err := decodeState(b)
	require.NoError(t, err)
	assert.Equal(t, f, g)

	f.Hosts = f.Hosts[:3]
	b, _ = json.Marshal(f)
	_, err = decodeState(b)
	assert.Error(t, err, "three hosts for a plan of eight")
	_, err = decodeState([]byte(`{"name":"../etc"}`))
	assert.Error(t, err)
	_, err = decodeState([]byte(`not json`))
	assert.Error(t, err)
}

func TestMarkerParams(t *testing.T) {
	// 1 Gbit/s at γ = 0.95: 0.11875 bytes per ns, a 40 kB threshold is
	// 336 842 ns of service, a 1000-byte packet 8421 ns.
	p := newMarkerParams(3, Gbit, 0.95, 40_000, 512<<10)
	assert.Equal(t, uint32(3), p.slot)
	assert.InDelta(t, 336_842, p.thresholdNS, 1)
	assert.InDelta(t, 8421, float64(1000*p.nsPerByteQ20>>q20), 1)
	assert.InDelta(t, float64(512<<10)/0.11875, float64(p.capNS), 1)
	prog, err := markerProgram(7, p)
	require.NoError(t, err)
	assert.Less(t, len(prog), 80, "a short program")
}
