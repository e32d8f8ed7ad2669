package testutil

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Completion statuses the [Oracle] knows by number. They mirror the
// ibv_wc_status numbering that cq.Status follows; the oracle takes plain
// ints so that it does not import cq.
const (
	StatusSuccess    = 0 // IBV_WC_SUCCESS
	StatusWRFlushErr = 5 // IBV_WC_WR_FLUSH_ERR
)

// AnyLen, passed as the byteLen of [Oracle.Post], disables the byte_len
// check for that work request (the byte_len of a send completion is not
// defined by the verbs API, for instance).
const AnyLen = ^uint32(0)

// maxProblemsPerQueue caps the problems an Oracle reports for one queue.
const maxProblemsPerQueue = 20

// Oracle checks completion accounting for the reliability tests
// (doc/matrix.md §1 "Integrity oracle"): the test records each posted
// work request with Post and each completion with Complete, and Check
// verifies, per queue (a send or receive queue, named by the caller):
//
//   - exactly one CQE per signaled WR, and none for an unsignaled WR that
//     succeeds; an unsignaled WR counts as completed when a later CQE on
//     its queue arrives;
//   - a WR completed in error always produces a CQE, signaled or not
//     (IBA 10.7.3.1), and so does every WR after it: once a queue has seen
//     an error CQE, every later WR must complete with StatusWRFlushErr;
//   - CQEs arrive in post order;
//   - a successful CQE carries the byte_len given to Post (unless AnyLen);
//   - no CQE names an unknown WR or completes a WR twice.
//
// Problems found by Complete are remembered and reported by Check, so
// Complete can be called from a poll loop that has no testing.T.
//
// An Oracle is safe for concurrent use.
type Oracle struct {
	mu     sync.Mutex
	queues map[string]*oracleQueue
	order  []string // queue names in first-use order, for stable reports
}

type oracleWR struct {
	wrid     uint64
	byteLen  uint32
	signaled bool
	done     bool // a CQE arrived
	status   int
}

type oracleQueue struct {
	wrs      []oracleWR
	cursor   int // first WR without a CQE or verdict
	firstErr int // index of the first error CQE's WR, -1 if none
	problems problems
}

// NewOracle returns an empty oracle.
func NewOracle() *Oracle {
	return &Oracle{queues: make(map[string]*oracleQueue)}
}

func (o *Oracle) queue(name string) *oracleQueue {
	q := o.queues[name]
	if q == nil {
		q = &oracleQueue{firstErr: -1}
		o.queues[name] = q
		o.order = append(o.order, name)
	}
	return q
}

func (q *oracleQueue) problem(format string, args ...any) {
	q.problems.add(format, args...)
}

// Post records a work request posted to queue, in post order. byteLen is
// the byte_len its successful CQE must carry: for a receive WR, the length
// of the message it will receive, not the buffer size; AnyLen skips the
// check. Receive WRs are always signaled.
func (o *Oracle) Post(queue string, wrid uint64, signaled bool, byteLen uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.queue(queue)
	q.wrs = append(q.wrs, oracleWR{wrid: wrid, signaled: signaled, byteLen: byteLen})
}

// Complete records a completion polled from queue's CQ. status uses the
// ibv_wc_status numbering (StatusSuccess is 0).
func (o *Oracle) Complete(queue string, wrid uint64, status int, byteLen uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.queue(queue)

	i := q.cursor
	for i < len(q.wrs) && q.wrs[i].wrid != wrid {
		i++
	}
	if i == len(q.wrs) { // not outstanding: late, duplicate or unknown
		for k := q.cursor - 1; k >= 0; k-- {
			w := &q.wrs[k]
			if w.wrid != wrid {
				continue
			}
			switch {
			case w.done:
				q.problem("duplicate CQE for wr_id %d (post #%d), status %d", wrid, k, status)
			case w.signaled || status != StatusSuccess:
				w.done, w.status = true, status
				q.problem("CQE out of post order: wr_id %d (post #%d) completed after a later WR", wrid, k)
				if status != StatusSuccess && (q.firstErr < 0 || k < q.firstErr) {
					q.firstErr = k
				}
			default:
				q.problem("success CQE for unsignaled wr_id %d (post #%d)", wrid, k)
			}
			return
		}
		q.problem("CQE for unknown wr_id %d, status %d", wrid, status)
		return
	}

	// WRs before i are passed over: an unsignaled one succeeded silently; a
	// signaled one, or any after an error, is still owed a CQE (reported by
	// Check if it never comes, and as out of order if it comes late).
	w := &q.wrs[i]
	w.done, w.status = true, status
	q.cursor = i + 1
	switch {
	case status == StatusSuccess && q.firstErr >= 0:
		q.problem("wr_id %d (post #%d) succeeded after an error CQE; want WR_FLUSH_ERR (%d)", wrid, i, StatusWRFlushErr)
	case status == StatusSuccess && !w.signaled:
		q.problem("success CQE for unsignaled wr_id %d (post #%d)", wrid, i)
	case status == StatusSuccess && w.byteLen != AnyLen && byteLen != w.byteLen:
		q.problem("wr_id %d (post #%d): byte_len %d, want %d", wrid, i, byteLen, w.byteLen)
	case status != StatusSuccess && q.firstErr >= 0 && status != StatusWRFlushErr:
		q.problem("wr_id %d (post #%d): status %d after an error CQE; want WR_FLUSH_ERR (%d)", wrid, i, status, StatusWRFlushErr)
	}
	if status != StatusSuccess && q.firstErr < 0 {
		q.firstErr = i
	}
}

// outstanding counts the WRs of q still owed a CQE.
func (q *oracleQueue) outstanding() int {
	n := 0
	for k := range q.wrs {
		w := &q.wrs[k]
		if !w.done && (w.signaled || (q.firstErr >= 0 && k > q.firstErr)) {
			n++
		}
	}
	return n
}

// Outstanding returns the number of WRs on queue still owed a CQE: the
// signaled ones without a CQE, plus, once the queue has seen an error, every
// later WR without one.
func (o *Oracle) Outstanding(queue string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if q := o.queues[queue]; q != nil {
		return q.outstanding()
	}
	return 0
}

// Done reports whether no queue is owed a CQE; a [Sim] run can stop on it.
func (o *Oracle) Done() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, q := range o.queues {
		if q.outstanding() > 0 {
			return false
		}
	}
	return true
}

// Check returns nil if the completions recorded so far account exactly for
// the posted work requests, and otherwise an error listing every problem
// (at most 20 per queue). With requireAllSuccess, any CQE with a status
// other than StatusSuccess is a problem too. Check does not change the
// oracle; it may be called again after more completions.
func (o *Oracle) Check(requireAllSuccess bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var errs []error
	for _, name := range o.order {
		q := o.queues[name]
		ps := problems{items: slices.Clone(q.problems.items), truncated: q.problems.truncated}
		for k := range q.wrs {
			w := &q.wrs[k]
			switch {
			case !w.done && w.signaled:
				ps.add("missing CQE for signaled wr_id %d (post #%d)", w.wrid, k)
			case !w.done && q.firstErr >= 0 && k > q.firstErr:
				ps.add("missing flush CQE for unsignaled wr_id %d (post #%d) after an error (IBA 10.7.3.1)", w.wrid, k)
			case w.done && w.status != StatusSuccess && requireAllSuccess:
				ps.add("wr_id %d (post #%d) completed with status %d", w.wrid, k, w.status)
			}
		}
		for _, p := range ps.items {
			errs = append(errs, fmt.Errorf("oracle: queue %q: %s", name, p))
		}
		if ps.truncated > 0 {
			errs = append(errs, fmt.Errorf("oracle: queue %q: … and %d more problems", name, ps.truncated))
		}
	}
	return errors.Join(errs...)
}

// problems is a capped list of problem descriptions.
type problems struct {
	items     []string
	truncated int
}

func (p *problems) add(format string, args ...any) {
	if len(p.items) >= maxProblemsPerQueue {
		p.truncated++
		return
	}
	p.items = append(p.items, fmt.Sprintf(format, args...))
}
