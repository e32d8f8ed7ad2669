//go:build race

package capfmt_test

const raceEnabled = true
