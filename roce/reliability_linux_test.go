package roce_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/rocev2"
)

// reseal re-computes a forwarded packet's ICRC for its new addresses (the
// proxy is a NAT that knows RoCE); a packet that arrived with a bad ICRC
// keeps a bad one.
func reseal(pkt []byte, oldSrc, oldDst, newSrc, newDst netip.AddrPort) bool {
	if len(pkt) < bth.Size+bth.ICRCSize {
		return false
	}
	var ph [48]byte
	body := pkt[:len(pkt)-4]
	ip, udp := rocev2.PseudoHeaders(&ph, oldSrc, oldDst, 0, len(pkt))
	got := rocev2.ComputeICRC(ip, udp, body)
	_, ok := rocev2.RecoverIPv4ID(got, rocev2.ReadICRC(pkt[len(pkt)-4:]), len(pkt))
	ip, udp = rocev2.PseudoHeaders(&ph, newSrc, newDst, 0, len(pkt))
	c := rocev2.ComputeICRC(ip, udp, body)
	if !ok {
		c = ^c
	}
	rocev2.PutICRC(pkt[len(pkt)-4:], c)
	return ok
}

// stallWatch samples two QPs' counters every watchTick from a goroutine of
// its own and keeps the last watchKeep samples, so that a failed run shows
// what led to it: whether packets still moved, how many retries the
// requester started, and how late the sampler itself woke — a late wake-up
// means this process was not running.
type stallWatch struct {
	mu   sync.Mutex
	ring [watchKeep]watchSample
	n    int
	max  watchSample // the latest wake-up
	stop chan struct{}
	done chan struct{}
}

type watchSample struct {
	at   time.Time
	late time.Duration
	a, b qp.Snapshot
}

const (
	watchTick = 10 * time.Millisecond
	watchKeep = 400 // 4 s
)

func startWatch(a, b *roce.QP) *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		next := time.Now()
		for {
			next = next.Add(watchTick)
			select {
			case <-w.stop:
				return
			case <-time.After(time.Until(next)):
			}
			now := time.Now()
			s := watchSample{at: now, late: now.Sub(next), a: a.Counters().Snapshot(), b: b.Counters().Snapshot()}
			if s.late > watchTick {
				next = now // catch up, do not fire a burst
			}
			w.mu.Lock()
			w.ring[w.n%watchKeep] = s
			w.n++
			if s.late > w.max.late {
				w.max = s
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// close stops the sampler.
func (w *stallWatch) close() {
	close(w.stop)
	<-w.done
}

// timeline renders the samples kept: per row the time before the last
// sample, how late the sampler woke, and what moved since the row before
// (packets A sent and received, retries A started, NAK PSN sequence errors
// A received, packets B received and sent). Rows before the last ten where
// the sampler was on time and A started no retry are left out.
func (w *stallWatch) timeline() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(w.n, watchKeep)
	if n < 2 {
		return "no samples"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "latest sampler wake-up: %v late at %v; last %d samples (tick %v), rows with a retry or a late wake-up and the last ten:\n",
		w.max.late, w.max.at.Format("15:04:05.000"), n, watchTick)
	last := w.ring[(w.n-1)%watchKeep].at
	prev := w.ring[(w.n-n)%watchKeep]
	skipped := 0
	for i := w.n - n + 1; i < w.n; i++ {
		s := w.ring[i%watchKeep]
		retries := s.a[qp.CounterCompleterRetryErr] - prev.a[qp.CounterCompleterRetryErr]
		if retries == 0 && s.late < watchTick && i < w.n-10 {
			skipped++
			prev = s
			continue
		}
		if skipped > 0 {
			fmt.Fprintf(&sb, "  … %d quiet samples\n", skipped)
			skipped = 0
		}
		fmt.Fprintf(&sb, "  %9.1fms late %6.1fms  A sent %5d rcvd %5d retries %d seqNAKs %d exceeded %d  B rcvd %5d sent %5d\n",
			-float64(last.Sub(s.at).Microseconds())/1e3, float64(s.late.Microseconds())/1e3,
			s.a[qp.CounterSentPkts]-prev.a[qp.CounterSentPkts], s.a[qp.CounterRcvdPkts]-prev.a[qp.CounterRcvdPkts], retries,
			s.a[qp.CounterRcvdSeqErr]-prev.a[qp.CounterRcvdSeqErr], s.a[qp.CounterRetryExceededErr], s.b[qp.CounterRcvdPkts]-prev.b[qp.CounterRcvdPkts], s.b[qp.CounterSentPkts]-prev.b[qp.CounterSentPkts])
		prev = s
	}
	if skipped > 0 {
		fmt.Fprintf(&sb, "  … %d quiet samples\n", skipped)
	}
	return sb.String()
}

// TestRealSocketReliability moves 1 GiB of RDMA WRITE and 256 MiB of READ
// between two devices on loopback UDP sockets through an impairing proxy
// (1% loss, 1% reorder, 0.5% duplication each way): the data arrives
// byte-exact (SHA-256) with exactly one successful CQE per WR. With
// GOROCE_QUICK set, and under -race, it moves 64 MiB and 16 MiB.
func TestRealSocketReliability(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer of 1.25 GiB; skipped with -short")
	}
	writeSize, readSize := 1<<30, 256<<20
	if os.Getenv("GOROCE_QUICK") != "" || raceEnabled {
		writeSize, readSize = 64<<20, 16<<20
	}
	// Every address gets a free port (tests of several packages run at
	// once): the links first, then the proxy's fronts, then the devices,
	// each sending to the front that stands for its peer.
	ap := netip.MustParseAddrPort
	la, err := udp.Open(udp.Config{Addr: ap("127.0.0.1:0")})
	require.NoError(t, err)
	lb, err := udp.Open(udp.Config{Addr: ap("127.0.0.2:0")})
	require.NoError(t, err)
	imp := testutil.Impairment{Loss: 0.01, Dup: 0.005,
		Reorder: testutil.Reorder{Rate: 0.01, MinSlots: 1, MaxSlots: 8, HoldMax: 200 * time.Microsecond}}
	px, err := testutil.NewUDPProxy(testutil.ProxyConfig{A: la.LocalAddr(), B: lb.LocalAddr(),
		FrontA: ap("127.0.0.4:0"), FrontB: ap("127.0.0.3:0"),
		Seed: testutil.Seed(t), AB: imp, BA: imp, Reseal: reseal})
	require.NoError(t, err)
	defer px.Close()
	frontA, frontB := px.Fronts()

	open := func(l *udp.Link, destPort uint16) (*roce.Device, *mr.PD, *cq.CQ, *roce.QP) {
		d, err := roce.Open(roce.Config{Link: l, DestPort: destPort})
		require.NoError(t, err)
		pd := d.AllocPD()
		c, err := d.CreateCQ(1024)
		require.NoError(t, err)
		q, err := d.CreateQP(roce.QPConfig{PD: pd, SendCQ: c, RecvCQ: c})
		require.NoError(t, err)
		return d, pd, c, q
	}
	da, pda, cqa, qa := open(la, frontB.Port())
	defer da.Close()
	db, pdb, _, qb := open(lb, frontA.Port())
	defer db.Close()
	ia, ib := qa.Info(), qb.Info()
	ia.Addr, ib.Addr = frontA.Addr(), frontB.Addr()
	// retry_cnt 7 as in rdma-core's tests, but timeout 16 (268 ms), not
	// their 14 (67 ms). retry_cnt counts consecutive retries without
	// progress, and after the first only timeouts follow one another
	// (rxe_comp.c; qp's TestStallRetryBudget), so timeout 14 fails a WR with
	// RETRY_EXC_ERR when the peer makes no progress for 7 to 8 timeouts,
	// 0.47–0.54 s — under the rules, as rxe would. Both devices and the
	// proxy live in this process on a 2-core machine shared with other
	// tests, QEMU and busy loops, and such stretches happened there (4
	// failures in 12 loaded runs). Timeout 16 allows 1.9–2.1 s. It costs
	// time: a run at 1% loss needs 70–90 timeouts (lost retransmissions and
	// tails), about 20 s more than with timeout 14; timeout 18 (1.07 s)
	// would add over a minute. A stall longer than that still fails the
	// test, with the timeline the watch below keeps.
	opts := roce.ConnectOptions{MTU: qp.MTU4096, Timeout: 4096 * time.Nanosecond << 16, RetryCnt: 7} // code 16: 268 ms
	require.NoError(t, qa.Connect(ib, opts))
	require.NoError(t, qb.Connect(ia, opts))
	watch := startWatch(qa, qb)
	t.Cleanup(func() {
		watch.close()
		if t.Failed() {
			t.Logf("A %+v\nB %+v\n%s", qa.Counters().Snapshot(), qb.Counters().Snapshot(), watch.timeline())
		}
	})

	const chunk = 64 << 20
	src := testutil.Pattern(7, chunk)
	dst := make([]byte, chunk)
	acc := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead
	sm, err := da.RegisterMR(pda, src, acc)
	require.NoError(t, err)
	dm, err := db.RegisterMR(pdb, dst, acc)
	require.NoError(t, err)
	bm, err := da.RegisterMR(pda, make([]byte, chunk), acc)
	require.NoError(t, err)
	// dst (B's memory) and back are read and written only through their
	// regions, below; got and zero are the test's own.
	got, zero := make([]byte, chunk), make([]byte, chunk)

	// run posts msg-byte WRs covering size bytes (the 64 MiB buffers are
	// reused round after round) and checks each round's data.
	run := func(op qp.WROpcode, size int) {
		const msg, depth = 1 << 20, 16
		posted, done := 0, 0
		n := size / msg
		wcs := make([]cq.Completion, 64)
		round := chunk / msg
		for done < n {
			for posted < n && posted-done < depth && posted/round == done/round {
				off := uint64(posted%round) * msg
				wr := qp.SendWR{WRID: uint64(posted), Opcode: op, Flags: qp.SendSignaled}
				if op == qp.WRRDMAWrite {
					wr.SGL = []qp.SGE{{Addr: sm.IOVA() + off, Length: msg, LKey: sm.LKey()}}
					wr.RemoteAddr, wr.RKey = dm.IOVA()+off, dm.RKey()
				} else {
					wr.SGL = []qp.SGE{{Addr: bm.IOVA() + off, Length: msg, LKey: bm.LKey()}}
					wr.RemoteAddr, wr.RKey = dm.IOVA()+off, dm.RKey()
				}
				require.NoError(t, qa.PostSend(&wr))
				posted++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			k, err := cqa.Wait(ctx, wcs)
			cancel()
			require.NoError(t, err, "no completion for 30 s: posted %d done %d, A %+v B %+v", posted, done,
				qa.Counters().Snapshot(), qb.Counters().Snapshot())
			for _, wc := range wcs[:k] {
				require.Equal(t, cq.StatusSuccess, wc.Status, "wr %d: %v; A %+v; B %+v", wc.WRID, wc.Status, qa.Counters().Snapshot(), qb.Counters().Snapshot())
				require.Equal(t, uint64(done), wc.WRID, "one CQE per WR, in post order")
				require.Equal(t, uint32(msg), wc.ByteLen)
				done++
			}
			if done%round == 0 && done == posted {
				// Through the region's lock: B wrote dst and A's CQE
				// followed through sockets, which carry no happens-before
				// edge the race detector sees; the lock does.
				m := dm
				if op == qp.WRRDMARead {
					m = bm
				}
				require.NoError(t, m.ReadAt(got, m.IOVA()))
				require.Equal(t, sha256.Sum256(src), sha256.Sum256(got), "round ending at WR %d", done)
				require.NoError(t, m.WriteAt(zero, m.IOVA()))
			}
		}
	}
	start := time.Now()
	run(qp.WRRDMAWrite, writeSize)
	tw := time.Since(start)
	require.NoError(t, dm.WriteAt(src, dm.IOVA()))
	start = time.Now()
	run(qp.WRRDMARead, readSize)
	tr := time.Since(start)
	ab, ba := px.Stats()
	t.Logf("WRITE %d MiB in %v (%.2f Gb/s), READ %d MiB in %v (%.2f Gb/s); proxy dropped %d/%d, duplicated %d/%d, reordered %d/%d",
		writeSize>>20, tw, float64(writeSize)*8/tw.Seconds()/1e9, readSize>>20, tr, float64(readSize)*8/tr.Seconds()/1e9,
		ab.TotalDropped(), ba.TotalDropped(), ab.Duplicated, ba.Duplicated, ab.Reordered, ba.Reordered)
	watch.mu.Lock()
	t.Logf("sampler woke at most %v late (tick %v)", watch.max.late, watchTick)
	watch.mu.Unlock()
	t.Logf("A %+v", qa.Counters().Snapshot())
	t.Logf("B %+v", qb.Counters().Snapshot())
	require.Positive(t, ab.TotalDropped()+ba.TotalDropped())
}
