//go:build race

package flow_test

const raceEnabled = true
