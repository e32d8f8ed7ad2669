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

func TestWaitModeInline(t *testing.T) {
	tests := []struct {
		name         string
		mode         WaitMode
		cpus         int
		inline, poll bool
	}{
		{"auto, 2 CPUs: inline", WaitAuto, 2, true, false},
		{"auto, PollCPUs: poll", WaitAuto, PollCPUs, false, true},
		{"inline on a big machine", WaitInline, 64, true, false},
		{"event: parks", WaitEvent, 2, false, false},
		{"poll: polls", WaitPoll, 2, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.inline, tc.mode.inline(tc.cpus), "inline")
			assert.Equal(t, tc.poll, tc.mode.polls(tc.cpus), "polls")
		})
	}
	assert.Equal(t, "inline", WaitInline.String())
}
