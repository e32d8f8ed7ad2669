//go:build race

package rocev2_test

// raceEnabled reports a -race build, where the stress test runs fewer
// packets.
const raceEnabled = true
