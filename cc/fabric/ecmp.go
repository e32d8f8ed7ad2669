package fabric

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/rocev2"
)

// RoCEv2Port is the RoCEv2 UDP destination port (RoCEv2 Annex A17.3), and
// the source port of every goroce QP in PortFixed mode.
const RoCEv2Port = 4791

// PortMode says how each QP picks its UDP source port, the only field of
// the 5-tuple that differs between the QPs of one host pair.
type PortMode uint8

const (
	// PortFixed sends every QP from RoCEv2Port, as goroce did before its
	// per-QP ports (issue 14): all QPs of a host pair share one 5-tuple
	// and so one path.
	PortFixed PortMode = iota
	// PortKernel uses the Linux rule (rocev2.ConnSourcePort with no flow
	// label) on QPNs drawn as a device draws them: 24-bit random, seeded.
	PortKernel
	// PortExplicit sends QP j of every pair from ECMPConfig.Ports[j mod
	// len], as mlx5dv_modify_qp_udp_sport sets per QP.
	PortExplicit
)

var portModeNames = [...]string{"fixed", "kernel", "explicit"}

// String returns the mode's flag name.
func (m PortMode) String() string {
	if int(m) < len(portModeNames) {
		return portModeNames[m]
	}
	return fmt.Sprintf("PortMode(%d)", uint8(m))
}

// ParsePortMode returns the mode named "fixed", "kernel" or "explicit".
func ParsePortMode(s string) (PortMode, error) {
	for i, n := range portModeNames {
		if s == n {
			return PortMode(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown port mode %q (want fixed, kernel or explicit)", ErrInvalidConfig, s)
}

// Placement says which leaf each member of the ring sits under.
type Placement uint8

const (
	// PlaceBlock puts ring members 0…HostsPerLeaf−1 under leaf 0, the next
	// HostsPerLeaf under leaf 1, and so on: only the neighbour pairs at a
	// leaf boundary cross the spines, one pair per leaf and direction.
	PlaceBlock Placement = iota
	// PlaceInterleaved puts ring member i under leaf i mod Leaves: with two
	// leaves every neighbour pair crosses the spines, and all hosts load
	// the leaf uplinks at once.
	PlaceInterleaved
)

var placementNames = [...]string{"block", "interleaved"}

// String returns the placement's flag name.
func (p Placement) String() string {
	if int(p) < len(placementNames) {
		return placementNames[p]
	}
	return fmt.Sprintf("Placement(%d)", uint8(p))
}

// ParsePlacement returns the placement named "block" or "interleaved".
func ParsePlacement(s string) (Placement, error) {
	for i, n := range placementNames {
		if s == n {
			return Placement(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown placement %q (want block or interleaved)", ErrInvalidConfig, s)
}

// FiveTuple is what a switch hashes to pick an equal-cost path for a
// RoCEv2 packet: the protocol is always UDP.
type FiveTuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

// Hash returns the switch hash of t under seed: xxhash64 with the seed over
// source and destination address (4 bytes each for IPv4, else 16), the
// protocol (17) and both ports in network order. A per-switch seed makes
// each switch pick its path independently of the others, as ECMP hash
// seeds do in real switches to avoid polarisation.
func (t FiveTuple) Hash(seed uint64) uint64 {
	var b [16 + 16 + 1 + 2 + 2]byte
	n := 0
	for _, a := range [2]netip.Addr{t.Src, t.Dst} {
		if a.Is4() {
			v := a.As4()
			n += copy(b[n:], v[:])
		} else {
			v := a.As16()
			n += copy(b[n:], v[:])
		}
	}
	b[n] = 17
	n++
	binary.BigEndian.PutUint16(b[n:], t.SrcPort)
	binary.BigEndian.PutUint16(b[n+2:], t.DstPort)
	n += 4
	d := xxhash.NewWithSeed(seed)
	d.Write(b[:n])
	return d.Sum64()
}

// ECMPConfig describes one ring all-reduce on a two-tier leaf-spine
// fabric. Zero fields take the defaults named on each.
type ECMPConfig struct {
	// Seed seeds the leaves' hash seeds and the QPNs drawn in PortKernel
	// mode. Runs with equal configs are identical.
	Seed uint64
	// Leaves, HostsPerLeaf and Spines shape the fabric (defaults 2, 8,
	// 8). Every leaf links to every spine.
	Leaves, HostsPerLeaf, Spines int
	// QPs is the number of QPs per neighbour pair (default 1); each
	// step's chunk is split evenly over them.
	QPs int
	// Mode picks the QPs' UDP source ports.
	Mode PortMode
	// Ports is PortExplicit's port set (default SourcePortMin + j for j <
	// QPs).
	Ports []uint16
	// Placement maps ring members to leaves (default PlaceBlock).
	Placement Placement
	// HostRate is every host link's rate (default 100 Gb/s); SpineRate
	// every leaf–spine link's (default 50 Gb/s: with the defaults a leaf
	// has 800 Gb/s of hosts and 400 Gb/s of uplinks, 2:1
	// oversubscription).
	HostRate, SpineRate cc.Bitrate
	// Data is the bytes each host all-reduces (default 32 MB); each of
	// the 2(N−1) steps moves Data/N per host.
	Data int64
	// Profile sets DCQCN's parameters for the packet-level runs of
	// overloaded spine links.
	Profile cc.Profile
	// NoDCQCN skips those runs: overloaded links then deliver their full
	// rate, as pure max-min sharing says.
	NoDCQCN bool

	// LeafOf, if set, places ring member i under leaf LeafOf[i] instead of
	// Placement, and the ring has len(LeafOf) members (any number from 2
	// up, not only Leaves × HostsPerLeaf): the placement of a real job.
	LeafOf []int
	// SpineOf, if set, gives the spine each cross-leaf flow takes instead
	// of the hash: SpineOf[i][j] for QP j of ring member i (towards member
	// i+1), as observed on a real fabric (goroce coll --fabric); a
	// negative entry, or a missing one, falls back to the hash.
	SpineOf [][]int
}

func (c *ECMPConfig) withDefaults() ECMPConfig {
	d := *c
	def := func(v *int, x int) {
		if *v == 0 {
			*v = x
		}
	}
	def(&d.Leaves, 2)
	def(&d.HostsPerLeaf, 8)
	def(&d.Spines, 8)
	def(&d.QPs, 1)
	if d.HostRate == 0 {
		d.HostRate = 100 * cc.Gbps
	}
	if d.SpineRate == 0 {
		d.SpineRate = 50 * cc.Gbps
	}
	if d.Data == 0 {
		d.Data = 32 << 20
	}
	if d.Mode == PortExplicit && len(d.Ports) == 0 {
		for j := range d.QPs {
			d.Ports = append(d.Ports, uint16(rocev2.SourcePortMin+j%(1<<14)))
		}
	}
	d.Ports = slices.Clone(d.Ports)
	d.LeafOf = slices.Clone(d.LeafOf)
	d.SpineOf = slices.Clone(d.SpineOf)
	return d
}

// members returns the number of ring members: len(LeafOf) if set, else
// every host.
func (c *ECMPConfig) members() int {
	if c.LeafOf != nil {
		return len(c.LeafOf)
	}
	return c.Leaves * c.HostsPerLeaf
}

func (c *ECMPConfig) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Leaves < 1 || c.HostsPerLeaf < 1 || c.Spines < 1 || c.Leaves*c.HostsPerLeaf < 2 ||
		c.Leaves > 256 || c.HostsPerLeaf > 254 || c.Spines > 1024 {
		bad("%d leaves × %d hosts, %d spines: want ≥ 2 hosts, ≤ 256 leaves, ≤ 254 hosts per leaf, ≤ 1024 spines",
			c.Leaves, c.HostsPerLeaf, c.Spines)
	}
	if c.QPs < 1 || c.QPs > 1024 {
		bad("QPs = %d, want 1..1024", c.QPs)
	}
	if c.Mode > PortExplicit || c.Placement > PlaceInterleaved {
		bad("Mode %v, Placement %v", c.Mode, c.Placement)
	}
	if !(c.HostRate > 0) || !(c.SpineRate > 0) || float64(c.HostRate) > 1e15 || float64(c.SpineRate) > 1e15 {
		bad("HostRate %v, SpineRate %v: want positive rates", float64(c.HostRate), float64(c.SpineRate))
	}
	if c.LeafOf != nil {
		if len(c.LeafOf) < 2 || len(c.LeafOf) > 1<<16 {
			bad("%d ring members: want 2..65536", len(c.LeafOf))
		}
		if slices.ContainsFunc(c.LeafOf, func(l int) bool { return l < 0 || l >= c.Leaves }) {
			bad("LeafOf %v: leaves are 0..%d", c.LeafOf, c.Leaves-1)
		}
	}
	if len(c.SpineOf) > c.members() || slices.ContainsFunc(c.SpineOf, func(s []int) bool {
		return len(s) > c.QPs || slices.ContainsFunc(s, func(k int) bool { return k >= c.Spines })
	}) {
		bad("SpineOf %v: at most %d members × %d QPs, spines below %d", c.SpineOf, c.members(), c.QPs, c.Spines)
	}
	if c.Data < int64(c.members()) || c.Data > 1<<40 {
		bad("Data = %d B", c.Data)
	}
	if c.Profile > cc.ProfileM {
		bad("Profile %v", c.Profile)
	}
	return errors.Join(errs...)
}

// ECMPFlow is one QP's flow of the ring: the same in every step.
type ECMPFlow struct {
	// Src and Dst are the ring members (host numbers) at either end; QP
	// is the flow's index among its pair's QPs.
	Src, Dst, QP int
	// LQPN and RQPN are the sender's and receiver's QPNs (PortKernel
	// only, else 0).
	LQPN, RQPN bth.QPN
	// Tuple is the flow's 5-tuple.
	Tuple FiveTuple
	// Spine is the spine the source leaf hashed it to, or −1 for a pair
	// under one leaf.
	Spine int
	// Bytes is what the flow carries in each step.
	Bytes float64
	// Finish is when it finishes within a step.
	Finish time.Duration
}

// ECMPResult is one run of [ECMPSim.Run].
type ECMPResult struct {
	// Config is the run's config with defaults filled in.
	Config ECMPConfig
	// Flows lists every QP's flow.
	Flows []ECMPFlow
	// SpineLoad is the bytes through each spine over the whole
	// collective, both directions.
	SpineLoad []float64
	// LoadMaxMean is max/mean of SpineLoad (NaN with no cross-leaf
	// traffic): 1 when perfectly balanced, Spines when one spine carries
	// everything.
	LoadMaxMean float64
	// Step and IdealStep are one step's time as hashed and with every
	// cross-leaf flow spread evenly over all spines.
	Step, IdealStep time.Duration
	// Completion and Ideal are the collective's: 2(N−1) steps.
	Completion, Ideal time.Duration
	// Ratio is Completion/Ideal.
	Ratio float64
	// Overloaded counts the spine links (leaf→spine and spine→leaf)
	// offered more than their rate at the start of a step: those build a
	// queue and run DCQCN.
	Overloaded int
}

// Calibration is one packet-level run of the [Run] simulator standing for
// an overloaded spine link: Flows always-backlogged QPs whose NICs run at
// LineRate share one egress port of Rate, under DCQCN.
type Calibration struct {
	Flows          int
	Rate, LineRate cc.Bitrate
	Duration       time.Duration
	// U is the link's utilisation over the run: the share of its rate
	// that DCQCN lets through; the fluid model scales the link by it.
	U float64
	// Qpeak, CNPs and Drops are the run's peak queue, CNPs sent and
	// packets dropped.
	Qpeak int
	CNPs  int64
	Drops uint64
}

type calKey struct {
	k              int
	rate, lineRate cc.Bitrate
	dur            time.Duration
	p              cc.Profile
}

// ECMPSim runs ring all-reduce collectives over ECMP. It keeps the
// packet-level DCQCN calibrations, which depend only on the number of
// colliding QPs and the rates, across runs. The zero value is ready; an
// ECMPSim is not safe for concurrent use.
type ECMPSim struct {
	cal map[calKey]Calibration
}

// Calibrations returns the packet-level runs made so far, by rate and
// number of flows.
func (e *ECMPSim) Calibrations() []Calibration {
	var cs []Calibration
	for _, c := range e.cal {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b Calibration) int {
		switch {
		case a.Rate != b.Rate:
			return cmpFloat(float64(a.Rate), float64(b.Rate))
		case a.Duration != b.Duration:
			return int(a.Duration - b.Duration)
		}
		return a.Flows - b.Flows
	})
	return cs
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// calibrate returns the DCQCN efficiency of k QPs sharing a spine link,
// running the packet-level simulator once per key: k flows starting
// within 1 µs at their line rate into one egress of SpineRate, for dur.
// The line rate is each QP's share of its NIC (HostRate over the QPs the
// host has busy), since a NIC serving Q busy QPs sends each at most at
// 1/Q of its rate whatever DCQCN allows.
func (e *ECMPSim) calibrate(c *ECMPConfig, k int, line cc.Bitrate, dur time.Duration) (Calibration, error) {
	key := calKey{k: k, rate: c.SpineRate, lineRate: line, dur: dur, p: c.Profile}
	if cal, ok := e.cal[key]; ok {
		return cal, nil
	}
	rc := base(c.Profile, uint64(k), k, c.SpineRate, dur, [2]time.Duration{0, dur})
	rc.RP.LineRate = line
	rc.RP.MinRate = min(rc.RP.MinRate, line)
	rc.RP.HAI = min(rc.RP.HAI, line)
	rc.RP.AI = min(rc.RP.AI, rc.RP.HAI)
	rc.Sample = dur / 200
	r, err := Run(rc)
	if err != nil {
		return Calibration{}, err
	}
	cal := Calibration{
		Flows: k, Rate: c.SpineRate, LineRate: line, Duration: dur,
		U: min(r.Utilization(0, dur), 1), Qpeak: r.Qpeak, CNPs: r.TotalCNPs(), Drops: r.Drops,
	}
	if e.cal == nil {
		e.cal = make(map[calKey]Calibration)
	}
	e.cal[key] = cal
	return cal, nil
}

// fluid is the max-min fair flow model of one step: links with
// capacities in bytes per second and flows with a path of link indices.
type fluid struct {
	capacity []float64
	paths    [][]int
}

// maxMin returns max-min fair rates for the flows marked active, by
// progressive filling: repeatedly the link with the smallest fair share
// among its unfrozen flows freezes them at that share.
func (m *fluid) maxMin(active []bool, capacity []float64) []float64 {
	rem := slices.Clone(capacity)
	n := make([]int, len(capacity))
	rate := make([]float64, len(m.paths))
	frozen := make([]bool, len(m.paths))
	left := 0
	for f, p := range m.paths {
		if !active[f] {
			frozen[f] = true
			continue
		}
		left++
		for _, l := range p {
			n[l]++
		}
	}
	for left > 0 {
		best, share := -1, math.Inf(1)
		for l := range rem {
			if n[l] > 0 {
				if s := rem[l] / float64(n[l]); s < share {
					best, share = l, s
				}
			}
		}
		for f, p := range m.paths {
			if frozen[f] || !slices.Contains(p, best) {
				continue
			}
			frozen[f], rate[f] = true, max(share, 0)
			left--
			for _, l := range p {
				rem[l] -= share
				n[l]--
			}
		}
	}
	return rate
}

// step returns when each flow finishes if all start together carrying
// bytes; eff, if not nil, gives the capacity factor of a link that is
// offered more than its rate by k flows of offered bytes per second each
// (the links from index spineFrom on).
func (m *fluid) step(bytes []float64, spineFrom int, hostOf func(f int) (src, dst int), hostRate float64,
	eff func(k int, offered float64) float64, overloaded *int) []float64 {
	left := slices.Clone(bytes)
	active := make([]bool, len(bytes))
	finish := make([]float64, len(bytes))
	nActive := 0
	for f, b := range bytes {
		if b > 0 {
			active[f] = true
			nActive++
		}
	}
	t, first := 0.0, true
	factor := make([]float64, len(m.capacity))
	for l := range factor {
		factor[l] = 1
	}
	for nActive > 0 {
		rate := m.maxMin(active, m.capacity)
		{
			// A spine link offered more than its rate (each flow asking
			// its hosts' fair share) builds a queue and runs DCQCN.
			srcN, dstN := map[int]int{}, map[int]int{}
			for f := range active {
				if active[f] {
					s, d := hostOf(f)
					srcN[s]++
					dstN[d]++
				}
			}
			offered := make([]float64, len(m.capacity))
			k := make([]int, len(m.capacity))
			for f, p := range m.paths {
				if !active[f] {
					continue
				}
				s, d := hostOf(f)
				o := min(hostRate/float64(srcN[s]), hostRate/float64(dstN[d]))
				for _, l := range p {
					offered[l] += o
					k[l]++
				}
			}
			// The factor is found once, for the offered load at the start
			// of the step, and kept while the link stays overloaded: DCQCN's
			// rates do not reset when some of the link's flows finish.
			capacity, changed := slices.Clone(m.capacity), false
			for l := spineFrom; l < len(capacity); l++ {
				if offered[l] <= capacity[l]*(1+1e-9) {
					continue
				}
				if first {
					*overloaded++
					if eff != nil {
						factor[l] = eff(k[l], offered[l]/float64(k[l]))
					}
				}
				capacity[l] *= factor[l]
				changed = changed || factor[l] != 1
			}
			if changed {
				rate = m.maxMin(active, capacity)
			}
		}
		first = false
		dt := math.Inf(1)
		for f := range active {
			if active[f] && rate[f] > 0 {
				dt = min(dt, left[f]/rate[f])
			}
		}
		if math.IsInf(dt, 1) {
			panic("fabric: fluid step with no progress") // every link has a positive capacity
		}
		t += dt
		for f := range active {
			if !active[f] {
				continue
			}
			left[f] -= rate[f] * dt
			if left[f] <= bytes[f]*1e-9 {
				active[f], finish[f] = false, t
				nActive--
			}
		}
	}
	return finish
}

// Run simulates one ring all-reduce of cfg: it draws the QPs' source
// ports, hashes every flow at its source leaf, times one step in the
// fluid model with DCQCN's efficiency on overloaded spine links, and
// compares with the perfectly balanced step. It fails only for an invalid
// config.
func (e *ECMPSim) Run(cfg ECMPConfig) (*ECMPResult, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	n := c.members()
	leafOf := func(h int) int {
		if c.LeafOf != nil {
			return c.LeafOf[h]
		}
		if c.Placement == PlaceInterleaved {
			return h % c.Leaves
		}
		return h / c.HostsPerLeaf
	}
	addr := func(h int) netip.Addr {
		l := leafOf(h)
		return netip.AddrFrom4([4]byte{10, byte(l), byte(h >> 8), byte(h&0xFF) + 1})
	}
	hashRNG := rand.New(rand.NewPCG(c.Seed, 0xEC3A))
	leafSeed := make([]uint64, c.Leaves)
	for l := range leafSeed {
		leafSeed[l] = hashRNG.Uint64()
	}
	qpnRNG := rand.New(rand.NewPCG(c.Seed, 0x9B2))
	qpn := func() bth.QPN { return bth.QPN(2 + qpnRNG.Uint32N(1<<24-2)) } // QP0, QP1 are special

	// Links: host uplinks [0,n), host downlinks [n,2n), leaf→spine
	// [2n, 2n+L·S), spine→leaf after.
	hostRate := float64(c.HostRate) / 8
	spineRate := float64(c.SpineRate) / 8
	up := func(l, s int) int { return 2*n + l*c.Spines + s }
	down := func(s, l int) int { return 2*n + c.Leaves*c.Spines + s*c.Leaves + l }
	nLinks := 2*n + 2*c.Leaves*c.Spines
	capacity := make([]float64, nLinks)
	for l := range capacity {
		capacity[l] = hostRate
		if l >= 2*n {
			capacity[l] = spineRate
		}
	}

	chunk := float64(c.Data) / float64(n)
	steps := 2 * (n - 1)
	res := &ECMPResult{Config: c, SpineLoad: make([]float64, c.Spines)}
	hashed := &fluid{capacity: capacity}
	ideal := &fluid{capacity: capacity}
	var hashedBytes, idealBytes []float64
	var idealPair []int // ideal flow → index of the hashed flow of its pair
	for src := range n {
		dst := (src + 1) % n
		ls, ld := leafOf(src), leafOf(dst)
		for j := range c.QPs {
			fl := ECMPFlow{Src: src, Dst: dst, QP: j, Spine: -1, Bytes: chunk / float64(c.QPs)}
			sport := uint16(RoCEv2Port)
			switch c.Mode {
			case PortKernel:
				fl.LQPN, fl.RQPN = qpn(), qpn()
				sport = rocev2.ConnSourcePort(0, fl.LQPN, fl.RQPN)
			case PortExplicit:
				sport = c.Ports[j%len(c.Ports)]
			}
			fl.Tuple = FiveTuple{Src: addr(src), Dst: addr(dst), SrcPort: sport, DstPort: RoCEv2Port}
			path := []int{src, n + dst}
			if ls != ld {
				fl.Spine = int(fl.Tuple.Hash(leafSeed[ls]) % uint64(c.Spines))
				if src < len(c.SpineOf) && j < len(c.SpineOf[src]) && c.SpineOf[src][j] >= 0 {
					fl.Spine = c.SpineOf[src][j]
				}
				path = []int{src, up(ls, fl.Spine), down(fl.Spine, ld), n + dst}
				res.SpineLoad[fl.Spine] += fl.Bytes * float64(steps)
			}
			res.Flows = append(res.Flows, fl)
			hashed.paths = append(hashed.paths, path)
			hashedBytes = append(hashedBytes, fl.Bytes)
		}
		// The ideal: the pair's chunk spread evenly over every spine.
		if ls == ld {
			ideal.paths = append(ideal.paths, []int{src, n + dst})
			idealBytes = append(idealBytes, chunk)
			idealPair = append(idealPair, src)
			continue
		}
		for s := range c.Spines {
			ideal.paths = append(ideal.paths, []int{src, up(ls, s), down(s, ld), n + dst})
			idealBytes = append(idealBytes, chunk/float64(c.Spines))
			idealPair = append(idealPair, src)
		}
	}
	var total float64
	for _, b := range res.SpineLoad {
		total += b
	}
	res.LoadMaxMean = math.NaN()
	if total > 0 {
		res.LoadMaxMean = slices.Max(res.SpineLoad) / (total / float64(c.Spines))
	}

	hostOfHashed := func(f int) (int, int) { return res.Flows[f].Src, res.Flows[f].Dst }
	hostOfIdeal := func(f int) (int, int) { return idealPair[f], (idealPair[f] + 1) % n }
	var dummy int
	idealFinish := ideal.step(idealBytes, 2*n, hostOfIdeal, hostRate, nil, &dummy)
	res.IdealStep = seconds(slices.Max(idealFinish))
	res.Ideal = res.IdealStep * time.Duration(steps)

	var eff func(k int, offered float64) float64
	var calErr error
	if !c.NoDCQCN {
		// The packet-level runs last the collective's ideal time, rounded
		// up to a millisecond (at least 1 ms), so that they see DCQCN's
		// onset and its steady state in the proportion the collective does.
		dur := max(time.Millisecond, (res.Ideal + time.Millisecond - 1).Truncate(time.Millisecond))
		eff = func(k int, offered float64) float64 {
			line := cc.Bitrate(math.Round(offered*8/1e6) * 1e6) // to 1 Mb/s, so runs share calibrations
			cal, err := e.calibrate(&c, k, line, dur)
			if err != nil {
				calErr = err
				return 1
			}
			return cal.U
		}
	}
	finish := hashed.step(hashedBytes, 2*n, hostOfHashed, hostRate, eff, &res.Overloaded)
	if calErr != nil {
		return nil, calErr
	}
	for f := range res.Flows {
		res.Flows[f].Finish = seconds(finish[f])
	}
	res.Step = seconds(slices.Max(finish))
	res.Completion = res.Step * time.Duration(steps)
	res.Ratio = float64(res.Step) / float64(res.IdealStep)
	return res, nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// ECMPStats summarises one config over several seeds.
type ECMPStats struct {
	// Mode and QPs repeat the config's.
	Mode PortMode
	QPs  int
	// Runs holds one result per seed, in seed order.
	Runs []*ECMPResult
	// LoadMedian and LoadWorst are the median and largest LoadMaxMean;
	// RatioMedian and RatioWorst the median and largest Ratio.
	LoadMedian, LoadWorst   float64
	RatioMedian, RatioWorst float64
}

// Sweep runs cfg once per seed (cfg.Seed is replaced) and summarises.
func (e *ECMPSim) Sweep(cfg ECMPConfig, seeds []uint64) (ECMPStats, error) {
	st := ECMPStats{Mode: cfg.Mode, QPs: max(cfg.QPs, 1)}
	var loads, ratios []float64
	for _, s := range seeds {
		cfg.Seed = s
		r, err := e.Run(cfg)
		if err != nil {
			return ECMPStats{}, err
		}
		st.Runs = append(st.Runs, r)
		loads = append(loads, r.LoadMaxMean)
		ratios = append(ratios, r.Ratio)
	}
	st.LoadMedian, st.RatioMedian = Median(loads), Median(ratios)
	st.LoadWorst, st.RatioWorst = worst(loads), worst(ratios)
	return st, nil
}

func worst(xs []float64) float64 {
	w := math.NaN()
	for _, x := range xs {
		if math.IsNaN(w) || x > w {
			w = x
		}
	}
	return w
}
