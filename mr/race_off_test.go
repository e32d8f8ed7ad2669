//go:build !race

package mr_test

// raceEnabled scales the long tests down under the race detector, which
// slows map-heavy code about tenfold.
const raceEnabled = false
