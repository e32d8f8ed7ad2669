package testutil

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClock(t *testing.T) {
	c := NewClock()
	require.Equal(t, Epoch(), c.Now())
	require.Zero(t, c.Elapsed())
	c.Advance(1500 * time.Millisecond)
	assert.Equal(t, Epoch().Add(1500*time.Millisecond), c.Now())
	c.Set(c.Now()) // same time is fine
	c.Set(Epoch().Add(time.Hour))
	assert.Equal(t, time.Hour, c.Elapsed())
	c.Advance(0)
	assert.Panics(t, func() { c.Advance(-1) })
	assert.Panics(t, func() { c.Set(Epoch()) })
	assert.Equal(t, time.Hour, c.Elapsed(), "a panicking call moved the clock")
}

func TestClockConcurrent(t *testing.T) {
	c := NewClock()
	var wg sync.WaitGroup
	wg.Go(func() {
		prev := c.Now()
		for range 10_000 {
			now := c.Now()
			if !assert.False(t, now.Before(prev), "clock went backwards: %v after %v", now, prev) {
				return
			}
			prev = now
		}
	})
	for range 10_000 {
		c.Advance(time.Microsecond)
	}
	wg.Wait()
}
