package fabric

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Defaults and limits of a Config (doc/fabric.md "Topology", "Rates and
// buffers", "The marker").
const (
	DefaultLeaves       = 2
	DefaultHostsPerLeaf = 1
	DefaultSpines       = 4
	DefaultMTU          = 9000
	// DefaultBuffer is each rate-limited egress's queue (the tbf limit), in
	// bytes: a shallow switch port's share of buffer, 512 KiB.
	DefaultBuffer = 512 << 10
	// DefaultECNThreshold is the marker's threshold on the virtual queue,
	// in bytes: the DCTCP-style step (DCQCN's Kmin = Kmax) at 40 KB.
	DefaultECNThreshold = 40_000
	// DefaultECNGamma is the share of the link rate that drains the
	// virtual queue (HULL's γ).
	DefaultECNGamma = 0.95

	MaxLeaves       = 8
	MaxHostsPerLeaf = 64
	MaxSpines       = 64
	// MaxNameLen bounds a fabric's name so that every name derived from
	// it fits: the attached namespace's interface "gfx-NAME" (15 bytes,
	// IFNAMSIZ − 1) and the marker map "gf_NAME" (15 bytes,
	// BPF_OBJ_NAME_LEN − 1).
	MaxNameLen = 11
)

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("fabric: invalid configuration")

// Rate is a link rate in bits per second; 0 means unlimited.
type Rate uint64

// Common rates.
const (
	Kbit Rate = 1000
	Mbit Rate = 1000 * Kbit
	Gbit Rate = 1000 * Mbit
)

// String formats r as tc does, e.g. "1gbit", "250mbit", "unlimited".
func (r Rate) String() string {
	switch {
	case r == 0:
		return "unlimited"
	case r%Gbit == 0:
		return strconv.FormatUint(uint64(r/Gbit), 10) + "gbit"
	case r%Mbit == 0:
		return strconv.FormatUint(uint64(r/Mbit), 10) + "mbit"
	case r%Kbit == 0:
		return strconv.FormatUint(uint64(r/Kbit), 10) + "kbit"
	}
	return strconv.FormatUint(uint64(r), 10) + "bit"
}

// ParseRate reads a rate as tc writes one: a number with an optional
// suffix bit, kbit, mbit, gbit (or k, m, g, also with "bps" meaning bytes
// per second: kbps, mbps, gbps), case-insensitive; "0", "" and
// "unlimited" mean unlimited.
func ParseRate(s string) (Rate, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" || t == "0" || t == "unlimited" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{
		{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1},
		{"gbps", 8e9}, {"mbps", 8e6}, {"kbps", 8e3}, {"bps", 8},
		{"g", 1e9}, {"m", 1e6}, {"k", 1e3},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v*mult >= 1<<63 {
		return 0, fmt.Errorf("%w: rate %q (want e.g. 1gbit, 250mbit)", ErrConfig, s)
	}
	return Rate(math.Round(v * mult)), nil
}

// ECNConfig configures the ECN marker on the fabric's rate-limited switch
// egresses (doc/fabric.md "The marker"). The zero value marks with the
// defaults.
type ECNConfig struct {
	// Off attaches no marker.
	Off bool `json:"off,omitempty"`
	// Threshold is the virtual queue, in bytes, above which an
	// ECN-capable packet is marked CE; 0 means DefaultECNThreshold.
	Threshold int `json:"threshold,omitempty"`
	// Gamma is the share of the link's rate that drains the virtual
	// queue, in (0, 1]; 0 means DefaultECNGamma.
	Gamma float64 `json:"gamma,omitempty"`
}

// Config describes a leaf-spine fabric. Zero fields take the defaults.
type Config struct {
	// Name names the fabric: 1 to MaxNameLen lower-case letters and
	// digits. Every namespace the fabric makes is "gfab-NAME-ROLE".
	Name         string `json:"name"`
	Leaves       int    `json:"leaves"`         // default 2, at most MaxLeaves
	HostsPerLeaf int    `json:"hosts_per_leaf"` // default 1, at most MaxHostsPerLeaf
	Spines       int    `json:"spines"`         // default 4, at most MaxSpines
	// Rate limits each leaf–spine link in each direction (a tbf on both
	// ends); 0 leaves the links unlimited.
	Rate Rate `json:"rate"`
	// HostRate limits each host link in each direction; 0: unlimited.
	HostRate Rate `json:"host_rate"`
	MTU      int  `json:"mtu"` // of every link; default 9000
	// Buffer is the queue of each rate-limited egress in bytes (the tbf
	// limit); 0 means DefaultBuffer.
	Buffer int       `json:"buffer"`
	ECN    ECNConfig `json:"ecn"`
	// Attach joins a namespace the caller owns to leaf 0 as if it were one
	// more host.
	Attach *Attach `json:"attach,omitempty"`
	// OwnerPID, if set, is a process whose fabric this is: DownStale
	// removes the fabric once that process no longer runs (a test killed
	// before its cleanup).
	OwnerPID int `json:"owner_pid,omitempty"`
}

// Attach joins an existing namespace to leaf 0. Up adds a veth pair
// (10.230.0.1/30 in NS, named "gfx-NAME", and 10.230.0.2/30 in leaf 0),
// routes in NS to every leaf's hosts via leaf 0, routes in the fabric to
// Prefixes via NS, and turns IPv4 forwarding on in NS; Down deletes the
// pair (with its routes) and restores NS's forwarding setting. Hosts
// behind NS need their own routes to the fabric via NS.
type Attach struct {
	NS       string         `json:"ns"`
	Prefixes []netip.Prefix `json:"prefixes"` // addresses behind NS, e.g. 10.77.0.0/24
}

var nameRE = regexp.MustCompile(`^[a-z0-9]{1,11}$`)

// ValidName reports whether name can name a fabric.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if c.Leaves == 0 {
		c.Leaves = DefaultLeaves
	}
	if c.HostsPerLeaf == 0 {
		c.HostsPerLeaf = DefaultHostsPerLeaf
	}
	if c.Spines == 0 {
		c.Spines = DefaultSpines
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.Buffer == 0 {
		c.Buffer = DefaultBuffer
	}
	if c.ECN.Threshold == 0 {
		c.ECN.Threshold = DefaultECNThreshold
	}
	if c.ECN.Gamma == 0 {
		c.ECN.Gamma = DefaultECNGamma
	}
	return c
}

// validate checks a Config with its defaults set.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !ValidName(c.Name) {
		bad("name %q: want 1 to %d lower-case letters and digits", c.Name, MaxNameLen)
	}
	if c.Leaves < 1 || c.Leaves > MaxLeaves {
		bad("leaves %d outside [1, %d]", c.Leaves, MaxLeaves)
	}
	if c.HostsPerLeaf < 1 || c.HostsPerLeaf > MaxHostsPerLeaf {
		bad("hosts per leaf %d outside [1, %d]", c.HostsPerLeaf, MaxHostsPerLeaf)
	}
	if c.Spines < 1 || c.Spines > MaxSpines {
		bad("spines %d outside [1, %d]", c.Spines, MaxSpines)
	}
	if c.MTU < 1280 || c.MTU > 65000 {
		bad("MTU %d outside [1280, 65000]", c.MTU)
	}
	if c.Buffer < 2*(c.MTU+ethHeaderLen) || c.Buffer > 1<<30 {
		bad("buffer %d bytes: want two frames (%d) to 1 GiB", c.Buffer, 2*(c.MTU+ethHeaderLen))
	}
	for _, r := range []Rate{c.Rate, c.HostRate} {
		if r != 0 && (r < 100*Kbit || r > 400*Gbit) {
			bad("rate %v outside [100kbit, 400gbit]", r)
		}
	}
	if c.ECN.Threshold < 0 || c.ECN.Threshold > c.Buffer {
		bad("ECN threshold %d bytes outside [0, buffer %d]", c.ECN.Threshold, c.Buffer)
	}
	if !(c.ECN.Gamma > 0 && c.ECN.Gamma <= 1) {
		bad("ECN gamma %v outside (0, 1]", c.ECN.Gamma)
	}
	if a := c.Attach; a != nil {
		if a.NS == "" {
			bad("attach: no namespace")
		}
		for _, p := range a.Prefixes {
			if !p.IsValid() || !p.Addr().Is4() {
				bad("attach: prefix %v is not IPv4", p)
			}
		}
	}
	if c.OwnerPID < 0 {
		bad("owner pid %d", c.OwnerPID)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}
