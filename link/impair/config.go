package impair

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Defaults applied to zero Config fields.
const (
	// DefaultHoldMax bounds how long a reordered packet is held when too
	// few packets follow it.
	DefaultHoldMax = 2 * time.Millisecond
	// DefaultReorderDepth is how many later packets pass a held one.
	DefaultReorderDepth = 2
	// DefaultHoldSlots is how many packets each direction holds at once;
	// a packet picked for reordering while they are all taken passes.
	DefaultHoldSlots = 16
	// DefaultMaxDatagram is the largest datagram the receive side buffers
	// (a jumbo frame's UDP payload, rounded up); larger ones are dropped
	// and counted.
	DefaultMaxDatagram = 9216
)

// ErrSpec is wrapped by every error of Parse.
var ErrSpec = errors.New("impair: bad spec")

// Direction is the impairment of one direction. The zero value passes
// every packet unchanged. Rates are probabilities in [0, 1].
//
// Each packet goes through: the loss knobs (Loss, GilbertElliott, Burst:
// each consulted for every packet, so one knob's pattern does not depend on
// the others'), then Corrupt, then Reorder, then Dup (the copy is sent
// right after the original, or right away if the original is held).
type Direction struct {
	// Loss drops each packet independently with this probability.
	Loss float64
	// GilbertElliott drops packets in bursts (two-state Markov chain).
	GilbertElliott GilbertElliott
	// Burst drops runs of consecutive packets.
	Burst Burst
	// Dup sends a second copy of a surviving packet with this probability.
	Dup float64
	// Reorder holds a surviving packet back with this probability, until
	// ReorderDepth later packets have passed (or Config.HoldMax).
	Reorder float64
	// ReorderDepth is how many later packets pass a held one (default
	// DefaultReorderDepth).
	ReorderDepth int
	// Corrupt flips one random bit of a surviving packet with this
	// probability: in the payload after the BTH (or, for a packet with
	// none, in the BTH's PSN), never in the destination QPN, so the packet
	// reaches its QP and fails the ICRC check there.
	Corrupt float64
}

// GilbertElliott is the two-state loss model: the chain starts good; for
// each packet loss is decided with the state's probability (0 when good,
// LossBad when bad), then the state moves good→bad with probability PGB or
// bad→good with PBG. The mean loss rate is PGB/(PGB+PBG)×LossBad and a bad
// period lasts 1/PBG packets on average. Enabled when PGB > 0.
type GilbertElliott struct {
	PGB, PBG float64
	LossBad  float64 // 0 means 1
}

// Burst drops Len consecutive packets, starting a burst at each packet
// outside one with probability Start. The mean loss rate is about
// Start×Len/(1+Start×(Len-1)). Enabled when Start > 0.
type Burst struct {
	Start float64
	Len   int // default 1
}

// Config configures a Link.
type Config struct {
	// Tx impairs what the link sends, Rx what it receives.
	Tx, Rx Direction
	// Seed seeds the two directions' generators (each its own stream):
	// the same seed gives the same decisions for the same packet sequence.
	Seed uint64
	// HoldMax is the longest a reordered packet is held (default
	// DefaultHoldMax).
	HoldMax time.Duration
	// HoldSlots is how many packets each direction holds at once (default
	// DefaultHoldSlots).
	HoldSlots int
	// MaxDatagram is the largest received datagram (default
	// DefaultMaxDatagram).
	MaxDatagram int
}

// enabled reports whether d changes anything.
func (d *Direction) enabled() bool {
	return d.Loss > 0 || d.GilbertElliott.PGB > 0 || d.Burst.Start > 0 || d.Dup > 0 || d.Reorder > 0 || d.Corrupt > 0
}

// Enabled reports whether c impairs either direction.
func (c *Config) Enabled() bool { return c.Tx.enabled() || c.Rx.enabled() }

func validRate(p float64) bool { return p >= 0 && p <= 1 } // also rejects NaN

// validate checks the rates and counts.
func (d *Direction) validate(name string) error {
	for _, r := range []struct {
		n string
		p float64
	}{{"loss", d.Loss}, {"ge PGB", d.GilbertElliott.PGB}, {"ge PBG", d.GilbertElliott.PBG},
		{"ge LossBad", d.GilbertElliott.LossBad}, {"burst start", d.Burst.Start}, {"dup", d.Dup},
		{"reorder", d.Reorder}, {"corrupt", d.Corrupt}} {
		if !validRate(r.p) {
			return fmt.Errorf("%w: %s %s = %v, want a probability in [0, 1]", ErrSpec, name, r.n, r.p)
		}
	}
	if d.Burst.Len < 0 || d.ReorderDepth < 0 {
		return fmt.Errorf("%w: %s: negative burst length or reorder depth", ErrSpec, name)
	}
	if d.GilbertElliott.PGB > 0 && d.GilbertElliott.PBG == 0 {
		return fmt.Errorf("%w: %s ge: PBG 0 would never leave the bad state", ErrSpec, name)
	}
	return nil
}

// normalize validates c and fills in the defaults.
func (c *Config) normalize() (Config, error) {
	n := *c
	if err := n.Tx.validate("tx"); err != nil {
		return n, err
	}
	if err := n.Rx.validate("rx"); err != nil {
		return n, err
	}
	if n.HoldMax < 0 || n.HoldSlots < 0 || n.MaxDatagram < 0 {
		return n, fmt.Errorf("%w: negative hold time, hold slots or datagram size", ErrSpec)
	}
	if n.HoldMax == 0 {
		n.HoldMax = DefaultHoldMax
	}
	if n.HoldSlots == 0 {
		n.HoldSlots = DefaultHoldSlots
	}
	if n.MaxDatagram == 0 {
		n.MaxDatagram = DefaultMaxDatagram
	}
	for _, d := range []*Direction{&n.Tx, &n.Rx} {
		if d.ReorderDepth == 0 {
			d.ReorderDepth = DefaultReorderDepth
		}
		if d.Burst.Len == 0 {
			d.Burst.Len = 1
		}
		if d.GilbertElliott.LossBad == 0 {
			d.GilbertElliott.LossBad = 1
		}
	}
	return n, nil
}

// SpecSyntax describes what Parse accepts, for usage messages.
const SpecSyntax = "loss=P,dup=P,reorder=P[:DEPTH],corrupt=P,ge=PGB:PBG[:LOSSBAD],burst=P:LEN,seed=N,dir=tx|rx|both,hold=DURATION (P: 1% or 0.01)"

// Parse parses an --impair spec: comma-separated key=value items,
//
//	loss=1%              independent loss
//	dup=0.5%             duplication
//	reorder=1%[:DEPTH]   hold a packet until DEPTH later ones passed (default 2)
//	corrupt=0.1%         flip a bit after the ICRC was computed
//	ge=PGB:PBG[:LOSSBAD] Gilbert–Elliott loss (LOSSBAD default 100%)
//	burst=P:LEN          start a burst of LEN drops with probability P
//	seed=N               the generators' seed (default 0)
//	dir=tx|rx|both       the directions impaired (default both)
//	hold=2ms             the longest a reordered packet is held
//
// A probability is a percentage ("1%", "0.5%") or a fraction ("0.01").
// The same knobs apply to each impaired direction, each with its own
// random stream.
func Parse(spec string) (Config, error) {
	var c Config
	var d Direction
	dir := "both"
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, ok := strings.Cut(item, "=")
		if !ok || val == "" {
			return Config{}, fmt.Errorf("%w: %q is not key=value (%s)", ErrSpec, item, SpecSyntax)
		}
		if seen[key] {
			return Config{}, fmt.Errorf("%w: %q given twice", ErrSpec, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "loss":
			d.Loss, err = parseRate(val)
		case "dup":
			d.Dup, err = parseRate(val)
		case "corrupt":
			d.Corrupt, err = parseRate(val)
		case "reorder":
			p, k, has := strings.Cut(val, ":")
			if d.Reorder, err = parseRate(p); err == nil && has {
				d.ReorderDepth, err = parseCount(k, "reorder depth")
			}
		case "ge":
			parts := strings.Split(val, ":")
			if len(parts) < 2 || len(parts) > 3 {
				err = errors.New("want PGB:PBG[:LOSSBAD]")
				break
			}
			ge := &d.GilbertElliott
			if ge.PGB, err = parseRate(parts[0]); err != nil {
				break
			}
			if ge.PBG, err = parseRate(parts[1]); err != nil {
				break
			}
			if ge.PGB == 0 || ge.PBG == 0 {
				err = errors.New("PGB and PBG must be above 0")
				break
			}
			if len(parts) == 3 {
				ge.LossBad, err = parseRate(parts[2])
			}
		case "burst":
			p, n, has := strings.Cut(val, ":")
			if !has {
				err = errors.New("want P:LEN")
				break
			}
			if d.Burst.Start, err = parseRate(p); err == nil {
				d.Burst.Len, err = parseCount(n, "burst length")
			}
		case "seed":
			c.Seed, err = strconv.ParseUint(val, 0, 64)
		case "dir":
			switch val {
			case "tx", "rx", "both":
				dir = val
			default:
				err = errors.New("want tx, rx or both")
			}
		case "hold":
			c.HoldMax, err = time.ParseDuration(val)
			if err == nil && (c.HoldMax <= 0 || c.HoldMax > time.Second) {
				err = errors.New("want a duration above 0 and at most 1s")
			}
		default:
			return Config{}, fmt.Errorf("%w: unknown key %q (%s)", ErrSpec, key, SpecSyntax)
		}
		if err != nil {
			return Config{}, fmt.Errorf("%w: %s: %v", ErrSpec, item, err)
		}
	}
	if dir != "rx" {
		c.Tx = d
	}
	if dir != "tx" {
		c.Rx = d
	}
	if _, err := c.normalize(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// parseRate parses "1%", "0.5%" or "0.01" as a probability.
func parseRate(s string) (float64, error) {
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a probability (e.g. 1%% or 0.01)", s)
	}
	if pct {
		v /= 100
	}
	if !validRate(v) {
		return 0, fmt.Errorf("%q is not in [0, 1] (0%% to 100%%)", s)
	}
	return v, nil
}

// parseCount parses a count from 1 to 1000.
func parseCount(s, what string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1000 {
		return 0, fmt.Errorf("%s %q: want 1 to 1000", what, s)
	}
	return n, nil
}

// String formats d in Parse's syntax (only the knobs that are on).
func (d Direction) String() string {
	var b []string
	pct := func(p float64) string { return strconv.FormatFloat(p*100, 'g', -1, 64) + "%" }
	if d.Loss > 0 {
		b = append(b, "loss="+pct(d.Loss))
	}
	if ge := d.GilbertElliott; ge.PGB > 0 {
		s := "ge=" + pct(ge.PGB) + ":" + pct(ge.PBG)
		if ge.LossBad != 0 && ge.LossBad != 1 {
			s += ":" + pct(ge.LossBad)
		}
		b = append(b, s)
	}
	if d.Burst.Start > 0 {
		b = append(b, fmt.Sprintf("burst=%s:%d", pct(d.Burst.Start), max(d.Burst.Len, 1)))
	}
	if d.Dup > 0 {
		b = append(b, "dup="+pct(d.Dup))
	}
	if d.Reorder > 0 {
		s := "reorder=" + pct(d.Reorder)
		if d.ReorderDepth != 0 && d.ReorderDepth != DefaultReorderDepth {
			s += ":" + strconv.Itoa(d.ReorderDepth)
		}
		b = append(b, s)
	}
	if d.Corrupt > 0 {
		b = append(b, "corrupt="+pct(d.Corrupt))
	}
	if len(b) == 0 {
		return "none"
	}
	return strings.Join(b, ",")
}

// String formats c for reports: "tx loss=1%,… rx … seed=N".
func (c Config) String() string {
	s := fmt.Sprintf("tx %v; rx %v; seed=%d", c.Tx, c.Rx, c.Seed)
	if c.HoldMax != 0 {
		s += "; hold=" + c.HoldMax.String()
	}
	return s
}
