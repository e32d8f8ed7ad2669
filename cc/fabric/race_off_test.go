//go:build !race

package fabric_test

// raceEnabled reports a -race build.
const raceEnabled = false
