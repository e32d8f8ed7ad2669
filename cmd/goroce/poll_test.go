package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUseEvents(t *testing.T) {
	tests := []struct {
		name        string
		event, poll bool
		cpus        int
		want        bool
	}{
		{"default, 2 CPUs: park", false, false, 2, true},
		{"default, 3 CPUs: park", false, false, pollCPUs - 1, true},
		{"default, 4 CPUs: poll", false, false, pollCPUs, false},
		{"-e on a big machine", true, false, 64, true},
		{"--poll on a small machine", false, true, 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, useEvents(tc.event, tc.poll, tc.cpus))
		})
	}
}

func TestPerfPollFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, runPerf([]string{"write", "-e", "--poll"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "exclude each other")
}
