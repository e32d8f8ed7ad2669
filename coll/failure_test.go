package coll

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crash ends c as a killed process would end: no goodbye, the control
// connection and the device simply gone.
func (c *Comm) crash() {
	c.closeOnce.Do(func() {}) // Close now does nothing
	if c.ctl != nil {
		c.ctl.closing.Store(true)
		if c.ctl.srv != nil {
			c.ctl.srv.c.Close()
		}
		for _, cc := range c.ctl.peers {
			if cc != nil {
				cc.c.Close()
			}
		}
	}
	c.fail(ErrClosed)
	c.teardown()
}

func joinAll(t *testing.T, n int, timeout time.Duration, skip map[int]bool, mod func(r int, c *Config)) ([]*Comm, []error) {
	t.Helper()
	dir := t.TempDir()
	job := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		if skip[r] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := Config{Rank: r, Size: n, Rendezvous: "file://" + dir, JobID: job, Timeout: timeout}
			if mod != nil {
				mod(r, &cfg)
			}
			comms[r], errs[r] = Join(context.Background(), cfg)
		}()
	}
	wg.Wait()
	t.Cleanup(func() { closeComms(comms) })
	return comms, errs
}

func closeComms(comms []*Comm) {
	var wg sync.WaitGroup
	for _, c := range comms {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
}

func TestJoinNamesMissingRanks(t *testing.T) {
	start := time.Now()
	_, errs := joinAll(t, 4, 700*time.Millisecond, map[int]bool{2: true, 3: true}, nil)
	assert.Less(t, time.Since(start), 10*time.Second)
	var re *RankError
	require.ErrorAs(t, errs[0], &re)
	assert.Equal(t, []int{2, 3}, re.Ranks)
	assert.ErrorIs(t, errs[0], ErrTimeout)
	assert.Contains(t, errs[0].Error(), "ranks 2, 3")
	assert.Contains(t, errs[0].Error(), "never joined")
	// Rank 1 joined and is told why the rendezvous failed.
	require.Error(t, errs[1])
	assert.Contains(t, errs[1].Error(), "ranks 2, 3")
}

func TestJoinWithoutRankZero(t *testing.T) {
	_, errs := joinAll(t, 2, 500*time.Millisecond, map[int]bool{0: true}, nil)
	var re *RankError
	require.ErrorAs(t, errs[1], &re)
	assert.Equal(t, []int{0}, re.Ranks)
	assert.ErrorIs(t, errs[1], ErrTimeout)
}

func TestJoinRefusesMismatchedShape(t *testing.T) {
	_, errs := joinAll(t, 3, 5*time.Second, nil, func(r int, c *Config) {
		if r == 2 {
			c.Channels = 3
		}
	})
	// Rank 0 and the odd rank know why; rank 1 may have found the
	// rendezvous gone before it read the address file.
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		if r != 1 {
			assert.Contains(t, err.Error(), "rank 2", "rank %d", r)
		}
	}
}

func TestJoinRefusesAnotherJob(t *testing.T) {
	// A rank of another job at the same rendezvous is refused; the job's
	// own ranks still meet.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	comms := make([]*Comm, 3)
	for i, job := range []string{"a", "b", "a"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 50 * time.Millisecond) // a's rank 0 first, then b's stray rank 1
			comms[i], errs[i] = Join(context.Background(), Config{Rank: min(i, 1), Size: 2, Rendezvous: addr, JobID: job, Timeout: 3 * time.Second})
		}()
	}
	wg.Wait()
	defer closeComms(comms)
	require.NoError(t, errs[0])
	require.NoError(t, errs[2])
	require.Error(t, errs[1])
	assert.Contains(t, errs[1].Error(), `serves job "a", not "b"`)
}

// TestJoinIgnoresSilentConnection: a TCP connection to rank 0 that never
// sends its hello (a port scanner, a health check) does not hold the job
// up: the ranks join and exchange their connections. Before the fix rank
// 0 waited for the silent connection's read until the join deadline, and
// every rank failed the connection exchange.
func TestJoinIgnoresSilentConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	comms := make([]*Comm, 2)
	silent := make(chan net.Conn, 1)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r == 1 {
				// Rank 0 listens first; then the silent peer, then rank 1.
				var c net.Conn
				require.Eventually(t, func() bool {
					var derr error
					c, derr = net.Dial("tcp", addr)
					return derr == nil
				}, 5*time.Second, 10*time.Millisecond)
				silent <- c
			}
			comms[r], errs[r] = Join(context.Background(), Config{Rank: r, Size: 2, Rendezvous: addr, JobID: "quiet", Timeout: 3 * time.Second})
		}()
	}
	wg.Wait()
	defer closeComms(comms)
	defer (<-silent).Close()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	buf := []float32{1, 2}
	var rwg sync.WaitGroup
	for _, c := range comms {
		rwg.Add(1)
		go func() { defer rwg.Done(); assert.NoError(t, AllReduce(c, buf[:1], make([]float32, 1), Sum)) }()
	}
	rwg.Wait()
}

// TestDeadRankEndsCalls kills one rank in the middle of a large
// all-reduce: every other rank's call returns an error naming it, long
// before the timeout.
func TestDeadRankEndsCalls(t *testing.T) {
	for _, dead := range []int{0, 2} {
		t.Run(fmt.Sprintf("rank%d", dead), func(t *testing.T) {
			comms, errs := joinAll(t, 4, 30*time.Second, nil, func(r int, c *Config) { c.Chunk = 8192 })
			for _, err := range errs {
				require.NoError(t, err)
			}
			results := make([]error, 4)
			var wg sync.WaitGroup
			start := time.Now()
			for r, c := range comms {
				if r == dead {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := make([]float32, 4<<20)
					for {
						if err := AllReduce(c, buf, buf, Sum); err != nil {
							results[r] = err
							return
						}
					}
				}()
			}
			time.Sleep(200 * time.Millisecond)
			comms[dead].crash()
			wg.Wait()
			assert.Less(t, time.Since(start), 10*time.Second)
			for r, err := range results {
				if r == dead {
					continue
				}
				var re *RankError
				require.ErrorAs(t, err, &re, "rank %d", r)
				assert.Contains(t, re.Ranks, dead, "rank %d: %v", r, err)
				assert.Contains(t, err.Error(), "died", "rank %d", r)
			}
		})
	}
}

// TestHungRankTimesOut: a rank that stays alive but never calls makes
// its neighbours' calls fail after Timeout, naming the rank they wait for.
func TestHungRankTimesOut(t *testing.T) {
	comms, errs := joinAll(t, 2, time.Second, nil, nil)
	for _, err := range errs {
		require.NoError(t, err)
	}
	start := time.Now()
	buf := make([]int32, 1000)
	err := AllReduce(comms[0], buf, buf, Sum)
	el := time.Since(start)
	var re *RankError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, []int{1}, re.Ranks)
	assert.ErrorIs(t, err, ErrTimeout)
	assert.GreaterOrEqual(t, el, time.Second)
	assert.Less(t, el, 5*time.Second)
	// Rank 1 hears of it through rank 0's report.
	time.Sleep(100 * time.Millisecond)
	err = AllReduce(comms[1], buf, buf, Sum)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reported by rank 0")
}

func TestCloseEndsCall(t *testing.T) {
	comms, errs := joinAll(t, 2, 30*time.Second, nil, nil)
	for _, err := range errs {
		require.NoError(t, err)
	}
	done := make(chan error)
	go func() {
		buf := make([]int32, 1000)
		done <- AllReduce(comms[0], buf, buf, Sum)
	}()
	time.Sleep(100 * time.Millisecond)
	closed := make(chan error)
	go func() { closed <- comms[0].Close() }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the call")
	}
	// Close waits for the other rank's Close (its last collective may still
	// need this rank's device), and returns once it came.
	select {
	case <-closed:
		t.Fatal("rank 0's Close returned before rank 1 closed")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, comms[1].Close())
	select {
	case err := <-closed:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("rank 0's Close did not return after rank 1's")
	}
}

func TestAbortDoesNotWait(t *testing.T) {
	comms, errs := joinAll(t, 3, 30*time.Second, nil, nil)
	for _, err := range errs {
		require.NoError(t, err)
	}
	start := time.Now()
	comms[1].Abort(errors.New("interrupted"))
	assert.Less(t, time.Since(start), 5*time.Second)
	buf := make([]int32, 10)
	for _, r := range []int{0, 2} {
		err := AllReduce(comms[r], buf, buf, Sum)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "rank 1", "rank %d", r)
		assert.Contains(t, err.Error(), "interrupted", "rank %d", r)
	}
}

// TestCloseConcurrentWithAbort: Abort from a signal handler while the
// program closes (cmd/goroce's ranks do both): each returns only once the
// communicator is closed, both with Close's result, and -race sees no
// unsynchronised access (Close read closeErr while the first caller wrote
// it, and the second returned at once).
func TestCloseConcurrentWithAbort(t *testing.T) {
	for range 3 {
		comms, errs := joinAll(t, 1, 5*time.Second, nil, nil)
		require.NoError(t, errs[0])
		c := comms[0]
		var wg sync.WaitGroup
		got := make([]error, 2)
		wg.Add(2)
		go func() { defer wg.Done(); got[0] = c.Close() }()
		go func() { defer wg.Done(); got[1] = c.Abort(errors.New("interrupt")) }()
		wg.Wait()
		assert.Equal(t, got[0], got[1])
		assert.Equal(t, c.closeErr, got[0])
		assert.Error(t, AllReduce(c, []float32{1}, make([]float32, 1), Sum), "a closed communicator")
	}
}

// TestRepeatedGoodbyeCountsOnce: rank 0 counts one goodbye per rank, however
// many it sends, and its reader of that rank still ends when the
// connection closes (before, each repeat counted as another rank's
// goodbye, and past Size of them the reader blocked and Close hung).
func TestRepeatedGoodbyeCountsOnce(t *testing.T) {
	ct := &control{size: 2, byes: make(chan struct{}, 2)}
	here, there := net.Pipe()
	cc := &ctlConn{c: here, rank: 1, done: make(chan struct{})}
	ct.wg.Add(1)
	go ct.readPeer(cc)
	go func() { // net.Pipe is synchronous: a reader that blocks blocks these
		defer there.Close()
		for range 5 {
			if _, err := there.Write(appendFrame(nil, msgBye, nil)); err != nil {
				return
			}
		}
	}()
	select {
	case <-cc.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not end when the connection closed")
	}
	assert.Len(t, ct.byes, 1, "goodbyes counted")
}
