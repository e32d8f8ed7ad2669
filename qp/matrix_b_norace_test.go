//go:build !race

package qp_test

// raceDetector reports a -race build; see matrix_b_race_test.go.
const raceDetector = false
