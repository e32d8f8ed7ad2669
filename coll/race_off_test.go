//go:build !race

package coll_test

// raceEnabled: the race detector allocates in the instrumented code, so
// allocation counts mean nothing under it.
const raceEnabled = false
