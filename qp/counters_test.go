package qp_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/qp"
)

func TestCounterNames(t *testing.T) {
	// rxe's hw_counters names (rxe_hw_counters.c) for the counters rxe has.
	rxe := []struct {
		c    qp.Counter
		name string
	}{
		{qp.CounterSentPkts, "sent_pkts"},
		{qp.CounterRcvdPkts, "rcvd_pkts"},
		{qp.CounterDuplicateRequest, "duplicate_request"},
		{qp.CounterOutOfSeqRequest, "out_of_seq_request"},
		{qp.CounterRcvdRNRErr, "rcvd_rnr_err"},
		{qp.CounterSendRNRErr, "send_rnr_err"},
		{qp.CounterRcvdSeqErr, "rcvd_seq_err"},
		{qp.CounterAckDeferred, "ack_deferred"},
		{qp.CounterRetryExceededErr, "retry_exceeded_err"},
		{qp.CounterRetryRNRExceededErr, "retry_rnr_exceeded_err"},
		{qp.CounterCompleterRetryErr, "completer_retry_err"},
	}
	for _, tc := range rxe {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.name, tc.c.String()) })
	}
	seen := map[string]qp.Counter{}
	for c := range qp.Counter(qp.NumCounters) {
		name := c.String()
		assert.NotEmpty(t, name, "counter %d has no name", int(c))
		assert.Regexp(t, `^[a-z][a-z0-9_]*$`, name)
		if prev, dup := seen[name]; dup {
			t.Errorf("counters %d and %d are both %q", int(prev), int(c), name)
		}
		seen[name] = c
	}
	assert.Equal(t, fmt.Sprintf("Counter(%d)", qp.NumCounters), qp.Counter(qp.NumCounters).String())
}

func TestCountersSnapshot(t *testing.T) {
	var c qp.Counters
	c.Add(qp.CounterSentPkts, 3)
	c.Add(qp.CounterRkeyViolation, 1)
	before := c.Snapshot()
	c.Add(qp.CounterSentPkts, 2)
	s := c.Snapshot()
	assert.Equal(t, uint64(5), c.Load(qp.CounterSentPkts))
	assert.Equal(t, uint64(5), s[qp.CounterSentPkts])
	assert.Equal(t, uint64(2), s.Sub(before)[qp.CounterSentPkts])
	assert.Zero(t, s.Sub(before)[qp.CounterRkeyViolation])
	assert.Equal(t, "{sent_pkts:5 rkey_violation:1}", s.String())
	assert.Equal(t, "{sent_pkts:5 rkey_violation:1}", fmt.Sprintf("%+v", s))
	assert.Equal(t, "{}", qp.Snapshot{}.String())
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		c.Add(qp.CounterRcvdPkts, 1)
		_ = c.Load(qp.CounterRcvdPkts)
	}))
}

func ExampleSnapshot() {
	var c qp.Counters
	c.Add(qp.CounterSentPkts, 7)
	c.Add(qp.CounterCompleterRetryErr, 1)
	s := c.Snapshot()
	fmt.Println(s[qp.CounterSentPkts], qp.CounterCompleterRetryErr)
	fmt.Println(s)
	// Output:
	// 7 completer_retry_err
	// {sent_pkts:7 completer_retry_err:1}
}
