package perf

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

func TestSetLatency(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		name    string
		samples []time.Duration
		div     float64
		want    Result
	}{
		{"one zero", []time.Duration{0}, 2, Result{}},
		{"round trips halved", []time.Duration{8 * us, 2 * us, 4 * us, 6 * us}, 2,
			Result{LatMinus: 1, LatMaxus: 4, LatP50us: 3, LatP99us: 4, LatP999us: 4, LatAvgus: 2.5, LatStdevus: 1.118033988749895}},
		{"as measured", []time.Duration{3 * us, 1 * us}, 1,
			Result{LatMinus: 1, LatMaxus: 3, LatP50us: 3, LatP99us: 3, LatP999us: 3, LatAvgus: 2, LatStdevus: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			setLatency(&r, tc.samples, tc.div)
			assert.Equal(t, tc.want, r)
		})
	}
}

func TestThroughput(t *testing.T) {
	r := throughput(OpWrite, 1000, 2, 4096, 4, 4000, 0.5)
	assert.Equal(t, Result{Op: OpWrite, Size: 1000, Iters: 2, QPs: 2, MTU: 4096, Bytes: 4000, Seconds: 0.5,
		Gbps: 64e-6, PeakGbps: 64e-6, Mpps: 8e-6}, r)
	tl := tally{msgs: 4, bytes: 4000, elapsed: 500 * time.Millisecond, peak: 1e5}
	assert.InDelta(t, 1e-4, tl.result(OpWrite, 1000, 2, 4096).PeakGbps, 1e-12, "the best window's peak")
}

// TestRunPostList runs loopback bw tests whose WRs are posted in lists:
// every iteration completes, also when the list does not divide it.
func TestRunPostList(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("real sockets")
	}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"write -l 16", Config{Op: OpWrite, Size: 64, Iters: 1000, PostList: 16}},
		{"write -q 4 -l 7", Config{Op: OpWrite, Size: 2, Iters: 500, QPs: 4, PostList: 7}},
		{"send -l 32", Config{Op: OpSend, Size: 64, Iters: 1000, PostList: 32}},
		{"read -l 16", Config{Op: OpRead, Size: 64, Iters: 300, PostList: 16}},
		{"atomic -l 4", Config{Op: OpAtomic, Iters: 300, PostList: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, port := freePorts(t)
			c := tc.cfg
			c.Addrs = [2]netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port),
				netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port)}
			c.OpenLink = func(a netip.AddrPort) (link.Link, error) { return udp.Open(udp.Config{Addr: a}) }
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := Run(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, tc.cfg.Iters, res.Iters)
			assert.Positive(t, res.Mpps)
		})
	}
	_, err := Run(context.Background(), Config{PostList: 200, OpenLink: func(netip.AddrPort) (link.Link, error) { return nil, nil }})
	require.ErrorContains(t, err, "post list 200")
}

// TestPollStall: poll reports a stall once one wait outlasts the watch's
// timeout, not when many short waits add up past it, and ctx's own error
// when ctx ends.
func TestPollStall(t *testing.T) {
	c, err := cq.New(cq.Config{Capacity: 8})
	require.NoError(t, err)
	errStall := errors.New("stalled")
	stalled := func() error { return errStall }
	failed := func(wc cq.Completion) error { return fmt.Errorf("failed %v", wc.Status) }
	wcs := make([]cq.Completion, 4)

	w := watchStalls(context.Background(), 40*time.Millisecond)
	defer w.stop()
	for i := range 6 { // 6 waits of 15 ms: 90 ms in all, none a stall
		go func() {
			time.Sleep(15 * time.Millisecond)
			_ = c.Push(cq.Completion{WRID: uint64(i)})
		}()
		n, err := poll(context.Background(), w, c, wcs, stalled, failed)
		require.NoError(t, err, "wait %d", i)
		require.Equal(t, 1, n)
	}
	start := time.Now()
	_, err = poll(context.Background(), w, c, wcs, stalled, failed)
	require.ErrorIs(t, err, errStall)
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	w2 := watchStalls(ctx, time.Minute)
	defer w2.stop()
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	_, err = poll(ctx, w2, c, wcs, stalled, failed)
	require.ErrorIs(t, err, context.Canceled)

	require.NoError(t, c.Push(cq.Completion{WRID: 9, Status: cq.StatusRemAccessErr}))
	w3 := watchStalls(context.Background(), time.Minute)
	defer w3.stop()
	_, err = poll(context.Background(), w3, c, wcs, stalled, failed)
	require.ErrorContains(t, err, "failed")
}

// TestRequestAllocatesNothing: building a request into a reused WR takes
// no allocation (a garbage collection in the middle of a latency test is a
// tail sample), for every operation, and the WR is complete each time.
func TestRequestAllocatesNothing(t *testing.T) {
	d, err := roce.Open(roce.Config{Link: mem.NewNetwork().Attach(netip.MustParseAddrPort("10.0.0.1:4791"))})
	require.NoError(t, err)
	defer d.Close()
	e := &endpoint{dev: d}
	require.NoError(t, e.setup(endpointConfig{qps: 1, cqDepth: 4, sendWRs: 4, recvWRs: 4, bufSize: 4096}))
	var wr qp.SendWR
	for _, op := range []Op{OpWrite, OpRead, OpSend, OpAtomic} {
		allocs := testing.AllocsPerRun(100, func() {
			e.request(&wr, op, false, 3, 9, 64, 128, 0x1000, 7)
		})
		assert.Zero(t, allocs, "%s", op)
		assert.Equal(t, uint64(3)<<40|9, wr.WRID)
		require.Len(t, wr.SGL, 1)
		assert.Equal(t, e.mr.SGE(64, map[bool]int{true: 8, false: 128}[op == OpAtomic]), wr.SGL[0], "%s", op)
	}
}

// loopbackEndpoints opens the two devices of a loopback WRITE test of
// size bytes on free ports, b's buffer writable by a, and closes them at
// the end of the test.
func loopbackEndpoints(t *testing.T, size int) (cfg *Config, a, b *endpoint) {
	t.Helper()
	_, port := freePorts(t)
	cfg = &Config{Op: OpWrite, Size: size, Iters: 1,
		Addrs:    [2]netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port)},
		OpenLink: func(a netip.AddrPort) (link.Link, error) { return udp.Open(udp.Config{Addr: a}) }}
	require.NoError(t, cfg.defaults())
	a, err := open(cfg, cfg.OpenLink, cfg.Addrs[0], port, size, 0)
	require.NoError(t, err)
	t.Cleanup(func() { a.dev.Close() })
	b, err = open(cfg, cfg.OpenLink, cfg.Addrs[1], port, size, mr.RemoteWrite)
	require.NoError(t, err)
	t.Cleanup(func() { b.dev.Close() })
	return cfg, a, b
}

// inlinePair is loopbackEndpoints with the QPs connected.
func inlinePair(t *testing.T, opts roce.ConnectOptions) (a, b *endpoint) {
	t.Helper()
	_, a, b = loopbackEndpoints(t, 4096)
	opts.Access = qpAccess(0)
	require.NoError(t, a.qps[0].Connect(b.qps[0].Info(), opts))
	opts.Access = qpAccess(mr.RemoteWrite)
	require.NoError(t, b.qps[0].Connect(a.qps[0].Info(), opts))
	return a, b
}

// TestRunInlineEnds: the run-to-completion driver ends with the error of
// a failed completion, whether a received batch brought it (a NAK for a
// bad rkey, seen by the device's OnBatch function) or none did (the
// retry counter running out against a closed peer, seen by the driver's
// own look at the CQ), and completes a good run.
func TestRunInlineEnds(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("real sockets")
	}
	failed := func(wc cq.Completion) error { return fmt.Errorf("failed: %v", wc.Status) }
	stalled := func() error { return errors.New("stalled") }
	run := func(a, b *endpoint, rkey mr.Key, iters int) (tally, error) {
		l := &loop{qps: a.qps, size: 64, depth: 1, iters: iters, times: true,
			next: func(wr *qp.SendWR, i int, seq uint64) {
				a.request(wr, OpWrite, false, i, seq, 0, 64, b.mr.IOVA(), rkey)
			}}
		return l.runInline(context.Background(), a.dev, a.scq, 4*time.Second, failed, stalled)
	}

	a, b := inlinePair(t, roce.ConnectOptions{})
	tl, err := run(a, b, b.mr.RKey(), 300)
	require.NoError(t, err)
	assert.Equal(t, 300, tl.msgs)
	assert.Len(t, tl.rtts, 300)

	_, err = run(a, b, b.mr.RKey()+1, 10)
	require.Error(t, err)
	assert.Contains(t, err.Error(), cq.StatusRemAccessErr.String())

	a, b = inlinePair(t, roce.ConnectOptions{Timeout: time.Millisecond, RetryCnt: 2})
	require.NoError(t, b.dev.Close())
	start := time.Now()
	_, err = run(a, b, b.mr.RKey(), 10)
	require.Error(t, err)
	assert.Contains(t, err.Error(), cq.StatusRetryExcErr.String(), "the timer's error, found without a received batch")
	assert.Less(t, time.Since(start), 4*time.Second, "before the stall watch")
}

// TestSendKeepsReceivesPosted runs the send test at message rate over a
// lossless link/mem network in each wait mode: no SEND may find its
// receive queue empty (an RNR NAK, and the retransmission that follows
// it). In run-to-completion mode the responder's receive goroutine
// reposts after each batch (reposter, OnBatch); in the others a goroutine
// does, and end-to-end flow control (package qp) holds the requester at
// the responder's credits.
func TestSendKeepsReceivesPosted(t *testing.T) {
	for _, w := range []WaitMode{WaitInline, WaitEvent} {
		t.Run(w.String(), func(t *testing.T) {
			n := mem.NewNetwork()
			res, err := Run(context.Background(), Config{Op: OpSend, Size: 64, Iters: 20000, Wait: w,
				OpenLink: func(a netip.AddrPort) (link.Link, error) { return n.Attach(a), nil }})
			require.NoError(t, err)
			assert.Equal(t, 20000, res.Iters)
			assert.Zero(t, res.Retransmitted)
		})
	}
}
