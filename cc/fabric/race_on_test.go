//go:build race

package fabric_test

// raceEnabled reports a -race build, where the scenario matrix is skipped
// (the simulator is single-goroutine; -race would only make it 10× slower).
const raceEnabled = true
