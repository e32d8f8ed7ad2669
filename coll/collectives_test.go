package coll_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/coll"
	"github.com/goroce/goroce/internal/collcheck"
	"github.com/stretchr/testify/require"
)

// startJob joins n communicators in this process (one device each, on
// loopback) through a file rendezvous and closes them when the test ends.
func startJob(t testing.TB, n int, cfg func(*coll.Config)) []*coll.Comm {
	t.Helper()
	dir := t.TempDir()
	jobID := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	comms := make([]*coll.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := coll.Config{Rank: r, Size: n, Rendezvous: "file://" + dir, JobID: jobID, Timeout: 20 * time.Second}
			if cfg != nil {
				cfg(&c)
			}
			comms[r], errs[r] = coll.Join(context.Background(), c)
		}()
	}
	wg.Wait()
	t.Cleanup(func() { closeJob(comms) })
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	return comms
}

func closeJob(comms []*coll.Comm) {
	var wg sync.WaitGroup
	for _, c := range comms {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
}

// onAll runs f on every rank at once.
func onAll(comms []*coll.Comm, f func(c *coll.Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(c) }()
	}
	wg.Wait()
	return errs
}

// check is one collective on every rank with collcheck's data; it returns
// the number of wrong elements over the ranks.
type check struct {
	kind    coll.Kind
	dt      coll.DataType
	op      coll.Op
	count   int // per-rank count (Request's)
	root    int
	algo    coll.Algorithm
	inPlace bool
	seed    uint64
}

func (k check) String() string {
	return fmt.Sprintf("%v/%v/%v/count=%d/root=%d/%v/inplace=%v", k.kind, k.dt, k.op, k.count, k.root, k.algo, k.inPlace)
}

// run performs k on comms and returns #wrong summed over ranks.
func (k check) run(t testing.TB, comms []*coll.Comm) int64 {
	t.Helper()
	n := len(comms)
	esz := k.dt.Size()
	wrong := make([]int64, n)
	errs := onAll(comms, func(c *coll.Comm) error {
		me := c.Rank()
		sendLen, recvLen := k.count, k.count
		switch k.kind {
		case coll.KindReduceScatter:
			sendLen = k.count * n
		case coll.KindAllGather:
			recvLen = k.count * n
		case coll.KindAllToAll:
			sendLen, recvLen = k.count*n, k.count*n
		}
		send := make([]byte, sendLen*esz)
		recv := make([]byte, recvLen*esz)
		want := make([]byte, recvLen*esz)
		for i := range recv {
			recv[i] = 0xEE
		}
		r := coll.Request{Kind: k.kind, Type: k.dt, Op: k.op, Root: k.root, Algorithm: k.algo}
		check := true
		switch k.kind {
		case coll.KindAllReduce:
			collcheck.Input(send, k.dt, k.op, n, me, k.seed, 0)
			collcheck.Expected(want, k.dt, k.op, n, k.seed, 0)
		case coll.KindReduceScatter:
			collcheck.Input(send, k.dt, k.op, n, me, k.seed, 0)
			collcheck.Expected(want, k.dt, k.op, n, k.seed, me*k.count)
		case coll.KindAllGather:
			collcheck.Input(send, k.dt, coll.Sum, 1, 0, 33*k.seed+uint64(me), 0)
			for j := range n {
				collcheck.Input(want[j*k.count*esz:(j+1)*k.count*esz], k.dt, coll.Sum, 1, 0, 33*k.seed+uint64(j), 0)
			}
		case coll.KindBroadcast:
			collcheck.Input(send, k.dt, coll.Sum, 1, 0, k.seed, 0)
			copy(want, send)
		case coll.KindReduce:
			collcheck.Input(send, k.dt, k.op, n, me, k.seed, 0)
			if me == k.root {
				collcheck.Expected(want, k.dt, k.op, n, k.seed, 0)
			} else {
				check = false
			}
		case coll.KindAllToAll:
			collcheck.Input(send, k.dt, coll.Sum, 1, 0, 33*k.seed+uint64(me), 0)
			for j := range n {
				collcheck.Input(want[j*k.count*esz:(j+1)*k.count*esz], k.dt, coll.Sum, 1, 0, 33*k.seed+uint64(j), me*k.count)
			}
		case coll.KindSendRecv:
			r.Peer, r.From = (me+1)%n, (me-1+n)%n
			collcheck.Input(send, k.dt, coll.Sum, 1, 0, k.seed, me*k.count)
			collcheck.Input(want, k.dt, coll.Sum, 1, 0, k.seed, r.From*k.count)
		}
		r.Send, r.Recv = send, recv
		if k.inPlace {
			switch k.kind {
			case coll.KindReduceScatter:
				r.Recv = send[me*k.count*esz : (me+1)*k.count*esz]
				recv = r.Recv
			case coll.KindAllGather:
				copy(recv[me*k.count*esz:], send)
				r.Send = recv[me*k.count*esz : (me+1)*k.count*esz]
			default:
				copy(recv, send)
				r.Send = recv
			}
		}
		if err := c.Run(&r); err != nil {
			return err
		}
		if check {
			wrong[me] = collcheck.Wrong(recv, want, k.dt)
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "%v rank %d", k, r)
	}
	var sum int64
	for _, w := range wrong {
		sum += w
	}
	return sum
}

// TestCollectivesExact runs every collective with every algorithm on 1 to
// 5 ranks over sizes that do not divide evenly (and span several chunks),
// and checks every element bit for bit.
func TestCollectivesExact(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			comms := startJob(t, n, func(c *coll.Config) { c.Chunk = 4096; c.Channels = 2 })
			counts := []int{1, 3, 1000, 70001}
			var checks []check
			for _, count := range counts {
				for _, algo := range []coll.Algorithm{coll.AlgoRing, coll.AlgoTree, coll.AlgoHD} {
					checks = append(checks,
						check{kind: coll.KindAllReduce, dt: coll.Float32, op: coll.Sum, count: count, algo: algo},
						check{kind: coll.KindAllReduce, dt: coll.Int32, op: coll.Avg, count: count, algo: algo, inPlace: true},
						check{kind: coll.KindReduceScatter, dt: coll.Float64, op: coll.Sum, count: count, algo: algo},
						check{kind: coll.KindAllGather, dt: coll.Uint8, count: count, algo: algo},
						check{kind: coll.KindBroadcast, dt: coll.BFloat16, count: count, root: n - 1, algo: algo},
						check{kind: coll.KindReduce, dt: coll.Float16, op: coll.Max, count: count, root: n / 2, algo: algo},
					)
				}
				checks = append(checks,
					check{kind: coll.KindAllToAll, dt: coll.Int64, count: count},
					check{kind: coll.KindAllToAll, dt: coll.Uint32, count: count, inPlace: true},
					check{kind: coll.KindSendRecv, dt: coll.Int8, count: count, inPlace: true},
					check{kind: coll.KindSendRecv, dt: coll.Float32, count: count},
					check{kind: coll.KindReduceScatter, dt: coll.Int8, op: coll.Prod, count: count, inPlace: true},
					check{kind: coll.KindAllGather, dt: coll.Float32, count: count, inPlace: true},
				)
			}
			for i, k := range checks {
				k.seed = uint64(i + 1)
				if w := k.run(t, comms); w != 0 {
					t.Errorf("%v: %d wrong elements", k, w)
				}
			}
		})
	}
}

// TestTypesAndOps runs all-reduce over every type and reduction.
func TestTypesAndOps(t *testing.T) {
	comms := startJob(t, 3, func(c *coll.Config) { c.Chunk = 1024 })
	for _, dt := range coll.AllDataTypes() {
		for _, op := range coll.AllOps() {
			for _, algo := range []coll.Algorithm{coll.AlgoRing, coll.AlgoHD} {
				k := check{kind: coll.KindAllReduce, dt: dt, op: op, count: 2049, algo: algo, seed: 7}
				if w := k.run(t, comms); w != 0 {
					t.Errorf("%v: %d wrong elements", k, w)
				}
			}
		}
	}
}
