package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/internal/perf"
)

func TestWaitMode(t *testing.T) {
	assert.Equal(t, perf.WaitAuto, waitMode(false, false))
	assert.Equal(t, perf.WaitEvent, waitMode(true, false))
	assert.Equal(t, perf.WaitPoll, waitMode(false, true))
}

func TestPerfPollFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, runPerf([]string{"write", "-e", "--poll"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "exclude each other")
}
