package fabric

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Placement says which host each rank of a job runs on (goroce coll
// --fabric NAME --placement …).
type Placement uint8

const (
	// PlaceBlock puts rank i on host i: the ranks fill leaf 0's hosts,
	// then leaf 1's, so that ring neighbours share a leaf and only the
	// pairs at a leaf boundary cross the spines.
	PlaceBlock Placement = iota
	// PlaceInterleaved puts rank i on leaf i mod Leaves, on that leaf's
	// host i / Leaves: ring neighbours are on different leaves, so every
	// ring step crosses the spines (the shape that loads them most).
	PlaceInterleaved
	// PlaceRandom puts the ranks on hosts drawn from a seeded
	// permutation of all hosts.
	PlaceRandom
)

var placementNames = [...]string{"block", "interleaved", "random"}

// String returns the placement's flag spelling.
func (p Placement) String() string {
	if int(p) < len(placementNames) {
		return placementNames[p]
	}
	return "Placement(" + strconv.Itoa(int(p)) + ")"
}

// ParsePlacement parses block, interleaved or random; random may carry its
// seed, "random:42" (seed 0 without one).
func ParsePlacement(s string) (Placement, uint64, error) {
	name, seedStr, hasSeed := strings.Cut(s, ":")
	for i, n := range placementNames {
		if name != n {
			continue
		}
		if !hasSeed {
			return Placement(i), 0, nil
		}
		seed, err := strconv.ParseUint(seedStr, 10, 64)
		if Placement(i) != PlaceRandom || err != nil {
			break
		}
		return PlaceRandom, seed, nil
	}
	return 0, 0, fmt.Errorf("%w: placement %q (block, interleaved, random or random:SEED)", ErrConfig, s)
}

// Place returns the host of each of n ranks under p (seed draws
// PlaceRandom's permutation). Every rank has a host of its own; n may be
// at most the number of hosts.
func (f *Fabric) Place(n int, p Placement, seed uint64) ([]Host, error) {
	if n < 1 || n > len(f.Hosts) {
		return nil, fmt.Errorf("%w: %d ranks on fabric %s's %d hosts (one rank per host)", ErrConfig, n, f.Name, len(f.Hosts))
	}
	L, H := f.Config.Leaves, f.Config.HostsPerLeaf
	out := make([]Host, n)
	switch p {
	case PlaceBlock:
		copy(out, f.Hosts)
	case PlaceInterleaved:
		for i := range out {
			out[i] = f.Hosts[(i%L)*H+i/L]
		}
	case PlaceRandom:
		perm := rand.New(rand.NewPCG(seed, 0x91ACE)).Perm(len(f.Hosts))
		for i := range out {
			out[i] = f.Hosts[perm[i]]
		}
	default:
		return nil, fmt.Errorf("%w: placement %v", ErrConfig, p)
	}
	return out, nil
}
