//go:build race

package qp_test

// raceDetector reports a -race build. Matrix B then runs the reduced set
// of matrix E5, doc/matrix.md §3: 8 MiB transfers and sampled injection floods, since
// the race detector makes every packet 5 to 20 times dearer.
const raceDetector = true
