package perf

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWaitModePolls(t *testing.T) {
	tests := []struct {
		name string
		mode WaitMode
		cpus int
		want bool
	}{
		{"auto, 2 CPUs: park", WaitAuto, 2, false},
		{"auto, just below: park", WaitAuto, PollCPUs - 1, false},
		{"auto, PollCPUs: poll", WaitAuto, PollCPUs, true},
		{"event on a big machine", WaitEvent, 64, false},
		{"poll on a small machine", WaitPoll, 2, true},
		{"invalid: as auto", WaitMode(9), 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.mode.polls(tc.cpus))
		})
	}
	assert.Equal(t, "poll", WaitPoll.String())
}
