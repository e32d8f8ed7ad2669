package testutil

import (
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// SeedEnv is the environment variable that Seed reads.
const SeedEnv = "GOROCE_SEED"

// Seed returns the seed for a randomized test and makes the run
// reproducible. If GOROCE_SEED is a number (decimal, or 0x hex), that is
// the seed; if it is "random", the seed is drawn at random; if it is
// unset, the seed is a hash of the test's name, so every run of a test sees
// the same seed and different tests see different ones. Seed logs the seed,
// and if the test fails, logs it again at the end with the command line to
// reproduce it.
func Seed(t testing.TB) uint64 {
	t.Helper()
	var seed uint64
	src := "default, from the test name"
	switch v := os.Getenv(SeedEnv); v {
	case "":
		h := fnv.New64a()
		h.Write([]byte(t.Name()))
		seed = h.Sum64()
	case "random":
		seed = rand.Uint64()
		src = SeedEnv + "=random"
	default:
		s, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, v, err)
		}
		seed = s
		src = SeedEnv
	}
	t.Logf("seed=%d (%s)", seed, src)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed=%d: reproduce with %s=%d go test -run '%s'", seed, SeedEnv, seed, t.Name())
		}
	})
	return seed
}

// SubSeed derives an independent seed for one component (a link direction,
// a workload) from a test seed and a label, so one printed seed reproduces
// every component.
func SubSeed(seed uint64, label string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(label))
	return splitmix64(seed ^ splitmix64(h.Sum64()))
}
