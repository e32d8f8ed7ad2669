package testutil

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type post struct {
	wrid     uint64
	signaled bool
	n        uint32
}

type cqe struct {
	wrid   uint64
	status int
	n      uint32
}

func TestOracle(t *testing.T) {
	const flush = StatusWRFlushErr
	const retryExc = 12 // IBV_WC_RETRY_EXC_ERR
	three := []post{{1, true, 10}, {2, true, 20}, {3, true, 30}}
	tests := []struct {
		name       string
		posts      []post
		cqes       []cqe
		allSuccess bool
		want       []string // substrings of the error; nil means no error
	}{
		{name: "exact", posts: three, cqes: []cqe{{1, 0, 10}, {2, 0, 20}, {3, 0, 30}}, allSuccess: true},
		{name: "missing", posts: three, cqes: []cqe{{1, 0, 10}, {2, 0, 20}},
			want: []string{"missing CQE for signaled wr_id 3"}},
		{name: "missing middle", posts: three, cqes: []cqe{{1, 0, 10}, {3, 0, 30}},
			want: []string{"missing CQE for signaled wr_id 2"}},
		{name: "duplicate", posts: three, cqes: []cqe{{1, 0, 10}, {2, 0, 20}, {2, 0, 20}, {3, 0, 30}},
			want: []string{"duplicate CQE for wr_id 2"}},
		{name: "out of order", posts: three, cqes: []cqe{{1, 0, 10}, {3, 0, 30}, {2, 0, 20}},
			want: []string{"out of post order: wr_id 2"}},
		{name: "wrong len", posts: three, cqes: []cqe{{1, 0, 10}, {2, 0, 21}, {3, 0, 30}},
			want: []string{"wr_id 2 (post #1): byte_len 21, want 20"}},
		{name: "any len", posts: []post{{1, true, AnyLen}}, cqes: []cqe{{1, 0, 1234}}},
		{name: "unknown", posts: three, cqes: []cqe{{1, 0, 10}, {2, 0, 20}, {3, 0, 30}, {4, 0, 0}},
			want: []string{"unknown wr_id 4"}},
		{name: "unsignaled skipped",
			posts: []post{{1, false, 0}, {2, false, 0}, {3, true, 30}},
			cqes:  []cqe{{3, 0, 30}}, allSuccess: true},
		{name: "unsignaled trailing", posts: []post{{1, true, 10}, {2, false, 0}},
			cqes: []cqe{{1, 0, 10}}},
		{name: "success CQE for unsignaled",
			posts: []post{{1, false, 0}, {2, true, 30}},
			cqes:  []cqe{{1, 0, 0}, {2, 0, 30}},
			want:  []string{"success CQE for unsignaled wr_id 1"}},
		{name: "B8 retry exceeded then flush",
			posts: []post{{1, true, 0}, {2, false, 0}, {3, true, 0}, {4, false, 0}},
			cqes:  []cqe{{1, retryExc, 0}, {2, flush, 0}, {3, flush, 0}, {4, flush, 0}}},
		{name: "error fails requireAllSuccess",
			posts: []post{{1, true, 0}}, cqes: []cqe{{1, retryExc, 0}}, allSuccess: true,
			want: []string{"wr_id 1 (post #0) completed with status 12"}},
		{name: "error on unsignaled WR",
			posts: []post{{1, false, 0}, {2, true, 0}},
			cqes:  []cqe{{1, retryExc, 0}, {2, flush, 0}}},
		{name: "unsignaled not flushed after error",
			posts: []post{{1, true, 0}, {2, false, 0}, {3, false, 0}},
			cqes:  []cqe{{1, retryExc, 0}, {3, flush, 0}},
			want:  []string{"missing flush CQE for unsignaled wr_id 2"}},
		{name: "unsignaled trailing after error",
			posts: []post{{1, true, 0}, {2, false, 0}},
			cqes:  []cqe{{1, retryExc, 0}},
			want:  []string{"missing flush CQE for unsignaled wr_id 2"}},
		{name: "success after error",
			posts: []post{{1, true, 0}, {2, true, 0}},
			cqes:  []cqe{{1, retryExc, 0}, {2, 0, 0}},
			want:  []string{"succeeded after an error CQE"}},
		{name: "second error not a flush",
			posts: []post{{1, true, 0}, {2, true, 0}},
			cqes:  []cqe{{1, retryExc, 0}, {2, retryExc, 0}},
			want:  []string{"status 12 after an error CQE"}},
		{name: "late error for skipped unsignaled",
			posts: []post{{1, false, 0}, {2, true, 0}},
			cqes:  []cqe{{2, 0, 0}, {1, retryExc, 0}},
			want:  []string{"out of post order: wr_id 1"}},
		{name: "reused wr_id",
			posts: []post{{0, true, 1}, {0, true, 2}, {0, true, 3}},
			cqes:  []cqe{{0, 0, 1}, {0, 0, 2}, {0, 0, 3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOracle()
			for _, p := range tc.posts {
				o.Post("sq", p.wrid, p.signaled, p.n)
			}
			for _, c := range tc.cqes {
				o.Complete("sq", c.wrid, c.status, c.n)
			}
			err := o.Check(tc.allSuccess)
			if tc.want == nil {
				require.NoError(t, err)
				assert.True(t, o.Done())
				assert.Zero(t, o.Outstanding("sq"))
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

func TestOracleQueuesIndependent(t *testing.T) {
	o := NewOracle()
	o.Post("sq", 1, true, 0)
	o.Post("rq", 1, true, 100)
	o.Post("rq", 2, true, 200)
	require.False(t, o.Done())
	require.Equal(t, 1, o.Outstanding("sq"))
	require.Equal(t, 2, o.Outstanding("rq"))
	require.Zero(t, o.Outstanding("nope"))
	o.Complete("rq", 1, StatusSuccess, 100)
	o.Complete("sq", 1, StatusSuccess, 0)
	require.False(t, o.Done(), "rq wr 2 outstanding")
	o.Complete("rq", 2, StatusSuccess, 200)
	require.NoError(t, o.Check(true))
	// Check is repeatable and does not accumulate.
	o.Complete("cq9", 7, 0, 0)
	e1, e2 := o.Check(true), o.Check(true)
	require.Error(t, e1)
	assert.Equal(t, e1.Error(), e2.Error(), "Check() not repeatable")
	assert.ErrorContains(t, e1, `queue "cq9": CQE for unknown wr_id 7`)
}

func TestOracleTruncates(t *testing.T) {
	o := NewOracle()
	for i := range 100 {
		o.Post("sq", uint64(i), true, 0)
	}
	err := o.Check(true)
	require.ErrorContains(t, err, "and 80 more problems")
	assert.Equal(t, maxProblemsPerQueue, strings.Count(err.Error(), "\n"), "lines - 1")
}

func TestOracleConcurrent(t *testing.T) {
	o := NewOracle()
	const n = 1000
	for i := range n {
		o.Post("sq", uint64(i), true, 8)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			o.Complete("sq", uint64(i), StatusSuccess, 8)
		}
	}()
	for !o.Done() {
		_ = o.Outstanding("sq")
	}
	<-done
	require.NoError(t, o.Check(true))
}
