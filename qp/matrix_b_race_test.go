//go:build race

package qp_test

// raceDetector reports a -race build. Matrix B then runs the reduced set
// of reliability.md E5: 8 MiB transfers and sampled injection floods, since
// the race detector makes every packet 5 to 20 times dearer.
const raceDetector = true
