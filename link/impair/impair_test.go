package impair_test

import (
	"context"
	"encoding/binary"
	"math"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

var (
	addrA = netip.MustParseAddrPort("10.0.0.1:4791")
	addrB = netip.MustParseAddrPort("10.0.0.2:4791")
)

// pair returns a's link impaired by cfg and b's plain link.
func pair(t *testing.T, cfg impair.Config) (*impair.Link, *mem.Link) {
	t.Helper()
	return pairQ(t, cfg, 1<<16)
}

// pairQ is pair with mem queues of qlen datagrams.
func pairQ(t *testing.T, cfg impair.Config, qlen int) (*impair.Link, *mem.Link) {
	t.Helper()
	n := mem.New(mem.Config{QueueLen: qlen})
	a, err := impair.New(n.Attach(addrA), cfg)
	require.NoError(t, err)
	b := n.Attach(addrB)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// seqDG is a 64-byte datagram to dst carrying seq in its first 4 bytes.
func seqDG(dst netip.AddrPort, seq uint32) link.Datagram {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b, seq)
	return link.Datagram{Buf: b, Dst: dst}
}

// drain receives from l until want datagrams came or quiet passed
// without one, and returns their sequence numbers.
func drain(t *testing.T, l link.Link, want int, quiet time.Duration) []uint32 {
	t.Helper()
	var got []uint32
	type res struct {
		seqs []uint32
		err  error
	}
	ch := make(chan res, 1)
	in := make([]link.Datagram, 64)
	for len(got) < want {
		go func() {
			for i := range in {
				in[i] = link.Datagram{Buf: make([]byte, 0, 256)}
			}
			n, err := l.Recv(in)
			var s []uint32
			for _, d := range in[:n] {
				s = append(s, binary.BigEndian.Uint32(d.Buf))
			}
			ch <- res{s, err}
		}()
		select {
		case r := <-ch:
			require.NoError(t, r.err)
			got = append(got, r.seqs...)
		case <-time.After(quiet):
			return got // the pending Recv ends at Close
		}
	}
	return got
}

// binomialOK reports whether k successes of n trials at p are within 5
// standard deviations of the mean.
func binomialOK(k uint64, n int, p float64) bool {
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(k)-mean) <= 5*sd+1
}

func TestTxLossAndDupCounts(t *testing.T) {
	const n = 20000
	a, b := pair(t, impair.Config{Tx: impair.Direction{Loss: 0.01, Dup: 0.02}, Seed: 42})
	for i := 0; i < n; i += 100 {
		batch := make([]link.Datagram, 100)
		for k := range batch {
			batch[k] = seqDG(addrB, uint32(i+k))
		}
		sent, err := a.Send(batch)
		require.NoError(t, err)
		require.Equal(t, 100, sent)
	}
	r := a.Report()
	assert.EqualValues(t, n, r.Tx.Packets)
	assert.True(t, binomialOK(r.Tx.Dropped, n, 0.01), "dropped %d of %d at 1%%", r.Tx.Dropped, n)
	assert.True(t, binomialOK(r.Tx.Duplicated, n-int(r.Tx.Dropped), 0.02), "duplicated %d at 2%%", r.Tx.Duplicated)
	assert.Zero(t, r.Rx)
	got := drain(t, b, n-int(r.Tx.Dropped)+int(r.Tx.Duplicated)+1, 200*time.Millisecond)
	st := b.Stats()
	assert.Equal(t, n-int(r.Tx.Dropped)+int(r.Tx.Duplicated), len(got), "%+v %+v", r.Tx, st)
	assert.EqualValues(t, len(got), st.RecvPackets)

	// The same seed gives the same decisions.
	a2, _ := pair(t, impair.Config{Tx: impair.Direction{Loss: 0.01, Dup: 0.02}, Seed: 42})
	for i := 0; i < n; i++ {
		_, err := a2.Send([]link.Datagram{seqDG(addrB, uint32(i))})
		require.NoError(t, err)
	}
	assert.Equal(t, r.Tx, a2.Report().Tx)
}

func TestRxLossCounts(t *testing.T) {
	const n = 20000
	b, a := pair(t, impair.Config{Rx: impair.Direction{Loss: 0.05}, Seed: 1})
	go func() {
		for i := 0; i < n; i++ {
			a.Send([]link.Datagram{seqDG(addrA, uint32(i))})
			if i%512 == 511 {
				time.Sleep(time.Millisecond) // within the mem queue
			}
		}
	}()
	got := drain(t, b, n, 300*time.Millisecond)
	r := b.Report()
	assert.EqualValues(t, n, r.Rx.Packets)
	assert.True(t, binomialOK(r.Rx.Dropped, n, 0.05), "dropped %d of %d at 5%%", r.Rx.Dropped, n)
	assert.Len(t, got, n-int(r.Rx.Dropped))
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1], got[i], "no reordering configured")
	}
}

// inversions counts adjacent pairs out of order and checks that every
// number of 0..n-1 came exactly once.
func inversions(t *testing.T, got []uint32, n int) int {
	t.Helper()
	seen := make([]bool, n)
	inv := 0
	for i, s := range got {
		require.Less(t, int(s), n)
		require.False(t, seen[s], "seq %d twice", s)
		seen[s] = true
		if i > 0 && got[i-1] > s {
			inv++
		}
	}
	require.Len(t, got, n)
	return inv
}

func TestReorder(t *testing.T) {
	const n = 5000
	for _, side := range []string{"tx", "rx"} {
		t.Run(side, func(t *testing.T) {
			d := impair.Direction{Reorder: 0.05, ReorderDepth: 3}
			// Held packets leave by count here, not by time, unless the
			// test is descheduled for HoldMax.
			cfg := impair.Config{Seed: 9, HoldMax: 200 * time.Millisecond}
			if side == "tx" {
				cfg.Tx = d
			} else {
				cfg.Rx = d
			}
			a, b := pair(t, cfg)
			var src link.Link = a
			var dst link.Link = b
			to := addrB
			if side == "rx" {
				src, dst, to = b, a, addrA
			}
			for i := 0; i < n; i++ {
				_, err := src.Send([]link.Datagram{seqDG(to, uint32(i))})
				require.NoError(t, err)
			}
			got := drain(t, dst, n, time.Second)
			inv := inversions(t, got, n)
			r := a.Report()
			held := r.Tx.Reordered + r.Rx.Reordered
			assert.True(t, binomialOK(held, n, 0.05), "held %d of %d", held, n)
			assert.Greater(t, inv, 0)
			assert.LessOrEqual(t, uint64(inv), held)
			// A held packet is passed by at least 3 later ones (others
			// released meanwhile do not count).
			for i, s := range got {
				if i > 0 && got[i-1] > s {
					assert.GreaterOrEqual(t, got[i-1]-s, uint32(3), "at %d: %v", i, got[max(0, i-4):i+1])
					break
				}
			}
		})
	}
}

// TestReorderHoldMax: a held packet with nothing after it is sent after
// HoldMax by the timer (tx) or delivered by a waiting Recv (rx).
func TestReorderHoldMax(t *testing.T) {
	for _, side := range []string{"tx", "rx"} {
		t.Run(side, func(t *testing.T) {
			d := impair.Direction{Reorder: 1}
			cfg := impair.Config{Seed: 1, HoldMax: 5 * time.Millisecond}
			if side == "tx" {
				cfg.Tx = d
			} else {
				cfg.Rx = d
			}
			a, b := pair(t, cfg)
			var src link.Link = a
			var dst link.Link = b
			to := addrB
			if side == "rx" {
				src, dst, to = b, a, addrA
			}
			start := time.Now()
			_, err := src.Send([]link.Datagram{seqDG(to, 7)})
			require.NoError(t, err)
			got := drain(t, dst, 1, time.Second)
			assert.Equal(t, []uint32{7}, got)
			assert.GreaterOrEqual(t, time.Since(start), 5*time.Millisecond)
		})
	}
}

func TestCloseUnblocksRecv(t *testing.T) {
	a, _ := pair(t, impair.Config{Rx: impair.Direction{Loss: 0.5}, Tx: impair.Direction{Reorder: 0.5}})
	errc := make(chan error, 1)
	go func() {
		_, err := a.Recv([]link.Datagram{{Buf: make([]byte, 100)}})
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, a.Close())
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, link.ErrClosed)
	case <-time.After(time.Second):
		t.Fatal("Recv still blocked after Close")
	}
	assert.ErrorIs(t, a.Close(), link.ErrClosed)
	_, err := a.Recv([]link.Datagram{{Buf: make([]byte, 100)}})
	assert.ErrorIs(t, err, link.ErrClosed)
}

// TestCorruptFailsICRC: every packet corrupted on the way is dropped by
// the receiving device's ICRC check and counted as bad_icrc; everything
// else verifies, and the WRITEs complete (Go-Back-N resends).
func TestCorruptFailsICRC(t *testing.T) {
	n := mem.NewNetwork()
	la, err := impair.New(n.Attach(addrA), impair.Config{Seed: 5,
		Tx: impair.Direction{Corrupt: 0.05, Reorder: 0.02, Dup: 0.02}})
	require.NoError(t, err)
	a, err := roce.Open(roce.Config{Link: la})
	require.NoError(t, err)
	defer a.Close()
	b, err := roce.Open(roce.Config{Link: n.Attach(addrB)})
	require.NoError(t, err)
	defer b.Close()
	qa, err := a.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	qb, err := b.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	const size = 256 << 10
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, size)
	smr, err := a.RegisterMR(nil, src, 0)
	require.NoError(t, err)
	dmr, err := b.RegisterMR(nil, dst, roce.LocalWrite|roce.RemoteWrite)
	require.NoError(t, err)
	ib := qb.Info()
	opts := roce.ConnectOptions{MTU: roce.MTU1024, Timeout: 10 * time.Millisecond}
	require.NoError(t, qa.Connect(ib, opts))
	require.NoError(t, qb.Connect(qa.Info(), opts))
	require.NoError(t, qa.PostSend(&roce.SendWR{WRID: 1, Opcode: roce.WRRDMAWrite, Flags: roce.SendSignaled,
		SGL: []roce.SGE{smr.SGE(0, size)}, RemoteAddr: dmr.IOVA(), RKey: dmr.RKey()}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wc := make([]roce.Completion, 1)
	_, err = qa.SendCQ().Wait(ctx, wc)
	require.NoError(t, err)
	require.NoError(t, wc[0].Err())
	require.NoError(t, dmr.ReadAt(dst, dmr.IOVA()))
	assert.Equal(t, src, dst)
	r := la.Report()
	require.NotZero(t, r.Tx.Corrupted)
	// A corrupted packet may still be held for reordering or queued.
	assert.Eventually(t, func() bool { return la.Report().Tx.Corrupted == b.Stats().BadICRC.Load() }, time.Second, time.Millisecond,
		"each corrupted packet fails the ICRC, no other does: corrupted %d, bad ICRC %d", la.Report().Tx.Corrupted, b.Stats().BadICRC.Load())
	assert.Equal(t, b.Stats().BadICRC.Load(), qb.Counters().Load(qp.CounterBadICRC))
	assert.Zero(t, a.Stats().BadICRC.Load())
}

// TestSteadyStateAllocs pins the impaired send and receive paths at zero
// allocations per packet once their buffers have grown.
func TestSteadyStateAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	cfg := impair.Config{Seed: 3, HoldMax: time.Hour}
	d := impair.Direction{Loss: 0.05, Dup: 0.05, Reorder: 0.05, Corrupt: 0.05, GilbertElliott: impair.GilbertElliott{PGB: 0.01, PBG: 0.3}, Burst: impair.Burst{Start: 0.01, Len: 3}}
	cfg.Tx, cfg.Rx = d, d
	a, b := pairQ(t, cfg, 256)
	out := make([]link.Datagram, 32)
	for i := range out {
		out[i] = seqDG(addrB, uint32(i))
	}
	back := make([]link.Datagram, 32)
	for i := range back {
		back[i] = seqDG(addrA, uint32(i))
	}
	in := make([]link.Datagram, 64)
	bufs := make([][]byte, len(in))
	for i := range bufs {
		bufs[i] = make([]byte, 256)
	}
	var mu sync.Mutex
	round := func() {
		mu.Lock()
		defer mu.Unlock()
		a.Send(out)
		// mem's Recv does not allocate; drain b so its queue stays short.
		for i := range in {
			in[i].Buf = bufs[i]
		}
		b.Recv(in)
		b.Send(back)
		for i := range in {
			in[i].Buf = bufs[i]
		}
		a.Recv(in)
	}
	for range 200 {
		round()
	}
	allocs := testing.AllocsPerRun(200, round)
	assert.Zero(t, allocs)
}

// fixedPortLink is a link.Link that sends from one port whatever Src says.
type fixedPortLink struct{ link.Link }

// TestSourcePortForwarded: behind the impairment a device still gets the
// per-QP source ports of a link that has them, and the inner link's one
// port from one that has not.
func TestSourcePortForwarded(t *testing.T) {
	n := mem.NewNetwork()
	inner := n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))
	l, err := impair.New(inner, impair.Config{})
	require.NoError(t, err)
	defer l.Close()
	want := uint16(49593)
	assert.Equal(t, inner.SourcePort(want), l.SourcePort(want), "link/mem sends from any port")
	assert.Equal(t, want, l.SourcePort(want))
	l2, err := impair.New(fixedPortLink{n.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))}, impair.Config{})
	require.NoError(t, err)
	defer l2.Close()
	assert.Equal(t, uint16(4791), l2.SourcePort(want))
}
