package coll_test

import (
	"sync"
	"testing"

	"github.com/goroce/goroce/coll"
)

// TestNoAllocsSteadyState: a collective repeated with the same shape
// allocates nothing (its programs, staging and completions are reused).
func TestNoAllocsSteadyState(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a job of 2 ranks")
	}
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, progress := range []coll.Progress{coll.ProgressInline, coll.ProgressCaller} {
		t.Run(progress.String(), func(t *testing.T) {
			comms := startJob(t, 2, func(c *coll.Config) { c.Progress = progress; c.Chunk = 16 << 10 })
			bufs := make([][]float32, 2)
			for i := range bufs {
				bufs[i] = make([]float32, 64<<10)
			}
			one := func(c *coll.Comm) error {
				b := bufs[c.Rank()]
				return coll.AllReduce(c, b, b, coll.Sum)
			}
			// Rank 1 runs the same calls on its own goroutine; rank 0's
			// allocations are counted (AllocsPerRun counts the process's,
			// so rank 1's count too: both must be zero).
			const runs, warm = 50, 300
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range warm + runs + 1 {
					<-start
					if err := one(comms[1]); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			call := func() {
				start <- struct{}{}
				if err := one(comms[0]); err != nil {
					t.Fatal(err)
				}
			}
			// Warm up: staging, programs, CTSs, and every slot of the QPs'
			// send rings (each keeps its SGL and inline buffers once grown).
			for range warm {
				call()
			}
			allocs := testing.AllocsPerRun(runs, call)
			wg.Wait()
			if allocs != 0 {
				t.Errorf("%v: %.2f allocations per all-reduce", progress, allocs)
			}
		})
	}
}
