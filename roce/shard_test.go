package roce_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// gatedLink is a memory link whose Send, once armed, blocks until the gate
// opens: a socket whose send buffer is full.
type gatedLink struct {
	*mem.Link
	armed   atomic.Bool
	gate    chan struct{}
	blocked atomic.Int32 // Sends waiting at the gate
}

func (g *gatedLink) Send(dgs []link.Datagram) (int, error) {
	if g.armed.Load() {
		g.blocked.Add(1)
		<-g.gate
		g.blocked.Add(-1)
	}
	return g.Link.Send(dgs)
}

// shardPair is two devices on a memory network with nq connected RC QP
// pairs, A's QPs writing into B's region.
type shardPair struct {
	a, b   *roce.Device
	qa, qb []*roce.QP
	ma, mb *mr.Region
}

func newShardPair(t *testing.T, la, lb link.Link, cfg roce.Config, nq int) *shardPair {
	t.Helper()
	p := &shardPair{}
	var err error
	cfg.Link = la
	p.a, err = roce.Open(cfg)
	require.NoError(t, err)
	cfg.Link = lb
	p.b, err = roce.Open(cfg)
	require.NoError(t, err)
	p.ma, err = p.a.RegisterMR(nil, make([]byte, 1<<16), mr.LocalWrite)
	require.NoError(t, err)
	p.mb, err = p.b.RegisterMR(nil, make([]byte, 1<<16), mr.LocalWrite|mr.RemoteWrite)
	require.NoError(t, err)
	pattern := make([]byte, p.ma.Len())
	for i := range pattern {
		pattern[i] = byte(i*7 + i>>8)
	}
	require.NoError(t, p.ma.WriteAt(pattern, p.ma.IOVA()))
	for range nq {
		x, err := p.a.CreateQP(roce.QPConfig{})
		require.NoError(t, err)
		y, err := p.b.CreateQP(roce.QPConfig{})
		require.NoError(t, err)
		require.NoError(t, x.Connect(y.Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
		require.NoError(t, y.Connect(x.Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
		p.qa, p.qb = append(p.qa, x), append(p.qb, y)
	}
	return p
}

func (p *shardPair) close(t *testing.T) {
	assert.NoError(t, p.a.Close())
	assert.NoError(t, p.b.Close())
}

// write returns a signaled WRITE of n bytes at off, from A's region to B's.
func (p *shardPair) write(id uint64, off, n int) *qp.SendWR {
	return &qp.SendWR{WRID: id, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{p.ma.SGE(off, n)}, RemoteAddr: p.mb.IOVA() + uint64(off), RKey: p.mb.RKey()}
}

// awaitSuccess waits for n successful completions on c; any goroutine
// may call it.
func awaitSuccess(c *cq.CQ, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wcs := make([]cq.Completion, 1)
	for n > 0 {
		k, err := c.Wait(ctx, wcs[:min(n, len(wcs))])
		if err != nil {
			return err
		}
		for _, wc := range wcs[:k] {
			if wc.Status != cq.StatusSuccess {
				return fmt.Errorf("WR %d: %v", wc.WRID, wc.Status)
			}
		}
		n -= k
	}
	return nil
}

func waitSuccess(t *testing.T, c *cq.CQ, n int) {
	t.Helper()
	require.NoError(t, awaitSuccess(c, n))
}

// A verb on one QP does not wait for another QP's send: the link's Send is
// made outside the engine lock (the goroutine that queued the first batch
// sends it after unlocking), so while it blocks in the link, a PostSend on
// another QP of the same engine returns. Before the lock redesign the
// second PostSend waited on the device lock until the first Send returned.
func TestPostSendDoesNotWaitForAnotherQPsSend(t *testing.T) {
	n := mem.NewNetwork()
	g := &gatedLink{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")), gate: make(chan struct{})}
	p := newShardPair(t, g, n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")), roce.Config{Shards: 1}, 2)
	defer p.close(t)

	g.armed.Store(true)
	first := make(chan error, 1)
	go func() { first <- p.qa[0].PostSend(p.write(1, 0, 4096)) }()
	for deadline := time.Now().Add(10 * time.Second); g.blocked.Load() == 0; {
		require.True(t, time.Now().Before(deadline), "the first PostSend never reached the link")
		time.Sleep(time.Millisecond)
	}

	second := make(chan error, 1)
	go func() { second <- p.qa[1].PostSend(p.write(2, 4096, 4096)) }()
	select {
	case err := <-second:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(g.gate) // let the test end
		t.Fatal("PostSend on QP 2 waited for QP 1's blocked link Send")
	}
	assert.EqualValues(t, 1, g.blocked.Load(), "the first Send is still blocked")
	select {
	case <-first:
		t.Fatal("the first PostSend returned while its Send was blocked")
	default:
	}

	g.armed.Store(false)
	close(g.gate)
	require.NoError(t, <-first)
	waitSuccess(t, p.qa[0].SendCQ(), 1)
	waitSuccess(t, p.qa[1].SendCQ(), 1)
}

// A transmit pass that outgrows the shard's batches does not send under
// the engine lock either: with batches of 4 datagrams, one 16-packet WRITE
// fills all three, and the poster, which holds the sender role, stops the
// pass, sends after releasing the lock and then builds the rest. While its
// Send blocks, a verb that takes the engine lock returns. (A first version
// sent the queued batches under the lock at that point.)
func TestLongTransmitPassSendsOutsideTheLock(t *testing.T) {
	n := mem.NewNetwork()
	g := &gatedLink{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")), gate: make(chan struct{})}
	p := newShardPair(t, g, n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")), roce.Config{Shards: 1, Batch: 4}, 2)
	defer p.close(t)

	g.armed.Store(true)
	first := make(chan error, 1)
	go func() { first <- p.qa[0].PostSend(p.write(1, 0, 16<<10)) }()
	for deadline := time.Now().Add(10 * time.Second); g.blocked.Load() == 0; {
		require.True(t, time.Now().Before(deadline), "the PostSend never reached the link")
		time.Sleep(time.Millisecond)
	}
	state := make(chan qp.State, 1)
	go func() { state <- p.qa[1].State() }()
	select {
	case st := <-state:
		assert.Equal(t, qp.StateRTS, st)
	case <-time.After(10 * time.Second):
		close(g.gate)
		t.Fatal("State waited for the engine lock held across a blocked link Send")
	}
	assert.EqualValues(t, 1, g.blocked.Load(), "the Send is still blocked")

	g.armed.Store(false)
	close(g.gate)
	require.NoError(t, <-first)
	waitSuccess(t, p.qa[0].SendCQ(), 1)
	got := make([]byte, 16<<10)
	require.NoError(t, p.mb.ReadAt(got, p.mb.IOVA()))
	want := make([]byte, 16<<10)
	require.NoError(t, p.ma.ReadAt(want, p.ma.IOVA()))
	assert.Equal(t, want, got)
}

// psnLink is a memory link that records, per destination QP, the PSNs of
// the request packets it sends, in send order.
type psnLink struct {
	*mem.Link
	mu   sync.Mutex
	psns map[bth.QPN][]bth.PSN
}

func (l *psnLink) Send(dgs []link.Datagram) (int, error) {
	l.mu.Lock()
	for i := range dgs {
		if h, err := bth.Parse(dgs[i].Buf); err == nil && h.Opcode().IsRequest() {
			l.psns[h.DestQP()] = append(l.psns[h.DestQP()], h.PSN())
		}
	}
	l.mu.Unlock()
	return l.Link.Send(dgs)
}

// Packets of one QP leave in PSN order although the engine's batches are
// sent outside its lock and several shards send at once: many QPs on four
// shards, each posted to by its own goroutine with multi-packet WRITEs, and
// every QP's requests reach the link with strictly increasing PSNs (a QP
// that retransmitted is exempt: Go-Back-N sends a PSN again).
func TestShardedSendsKeepPSNOrder(t *testing.T) {
	n := mem.New(mem.Config{QueueLen: 1 << 14})
	rec := &psnLink{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")), psns: make(map[bth.QPN][]bth.PSN)}
	const nq, msgs = 16, 40
	p := newShardPair(t, rec, n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")), roce.Config{Shards: 4}, nq)
	defer p.close(t)

	var wg sync.WaitGroup
	for i := range nq {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range msgs {
				// 3 packets each at MTU 1024; up to 8 outstanding.
				if k >= 8 {
					if err := awaitSuccess(p.qa[i].SendCQ(), 1); err != nil {
						t.Error(err)
						return
					}
				}
				if err := p.qa[i].PostSend(p.write(uint64(k), i*3072, 3072)); err != nil {
					t.Error(err)
					return
				}
			}
			if err := awaitSuccess(p.qa[i].SendCQ(), 8); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, q := range p.qb {
		psns := rec.psns[q.QPN()]
		require.Len(t, psns, msgs*3, "QP %d", i)
		if p.qa[i].Counters().Load(qp.CounterRetransmittedPkts) > 0 {
			continue
		}
		for k := 1; k < len(psns); k++ {
			require.Equal(t, psns[k-1].Add(1), psns[k], "QP %d: packet %d out of PSN order", i, k)
		}
	}
}

// Config.Shards is checked: negative or above 256 is ErrInvalidArg.
func TestConfigShards(t *testing.T) {
	for _, s := range []int{-1, 257} {
		_, err := roce.Open(roce.Config{Link: mem.NewNetwork().Attach(netip.MustParseAddrPort("10.0.0.9:4791")), Shards: s})
		assert.True(t, errors.Is(err, roce.ErrInvalidArg), "Shards %d: %v", s, err)
	}
}

// senderLink records which goroutine sends each datagram: the device's
// receive goroutine (recvLoop), a shard's sender goroutine (senderLoop)
// or another, and whether the datagram is request data (a WRITE or SEND
// packet with payload).
type senderLink struct {
	link.Link
	mu sync.Mutex
	// n[kind][data]: datagrams sent by kind (0 receive goroutine, 1 sender
	// goroutine, 2 other), data or not.
	n [3][2]int
}

func (l *senderLink) Send(dgs []link.Datagram) (int, error) {
	buf := make([]byte, 16<<10)
	st := string(buf[:runtime.Stack(buf, false)])
	kind := 2
	switch {
	case strings.Contains(st, "(*shard).senderLoop"):
		kind = 1
	case strings.Contains(st, "(*Device).recvLoop"):
		kind = 0
	}
	l.mu.Lock()
	for _, d := range dgs {
		op := bth.Opcode(d.Buf[0])
		data := 0
		if op.IsRequest() && op.HasPayload() {
			data = 1
		}
		l.n[kind][data]++
	}
	l.mu.Unlock()
	return l.Link.Send(dgs)
}

// TestReceiveGoroutineHandsOffRequestData: the WRITE data an ACK lets go
// is sealed and sent by the shard's sender goroutine, not by the receive
// goroutine that took the ACK, which goes back to receiving; replies (the
// responder's ACKs) are still sent where they were made. The PSN order
// and the data are intact.
func TestReceiveGoroutineHandsOffRequestData(t *testing.T) {
	n := mem.New(mem.Config{QueueLen: 1 << 14})
	la := &senderLink{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))}
	lb := &senderLink{Link: n.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))}
	p := newShardPair(t, la, lb, roce.Config{Shards: 1}, 1)
	defer p.close(t)
	const msgs, size = 200, 16 << 10 // 16 packets each at MTU 1024: the window fills
	for k := range msgs {
		off := k % 4 * size
		require.NoError(t, p.qa[0].PostSend(p.write(uint64(k), off, size)))
	}
	require.NoError(t, awaitSuccess(p.qa[0].SendCQ(), msgs))
	assert.Zero(t, p.qa[0].Counters().Load(qp.CounterRetransmittedPkts))
	assert.Equal(t, readMR(t, p.ma)[:4*size], readMR(t, p.mb)[:4*size])

	la.mu.Lock()
	defer la.mu.Unlock()
	lb.mu.Lock()
	defer lb.mu.Unlock()
	t.Logf("A's WRITE packets sent by: receive goroutine %d, sender goroutine %d, poster %d",
		la.n[0][1], la.n[1][1], la.n[2][1])
	assert.Equal(t, msgs*16, la.n[0][1]+la.n[1][1]+la.n[2][1])
	assert.Greater(t, la.n[1][1], msgs*16/2, "most of the data the ACKs let go leaves from the sender goroutine")
	assert.Zero(t, lb.n[1][0]+lb.n[1][1], "the responder's ACKs leave where they were made")
	assert.Positive(t, lb.n[0][0], "the responder's ACKs leave from its receive goroutine")
}

// TestSmallWritesSentWhereBuilt: the small WRITEs an ACK lets go on one
// QP, one GSO send however many they are, are sent by the receive
// goroutine that built them: handing them to the sender goroutine would
// cost a wake-up for less work than that (txBatch.weigh).
func TestSmallWritesSentWhereBuilt(t *testing.T) {
	n := mem.New(mem.Config{QueueLen: 1 << 14})
	la := &senderLink{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))}
	lb := &senderLink{Link: n.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))}
	p := newShardPair(t, la, lb, roce.Config{Shards: 1}, 1)
	defer p.close(t)
	const msgs, size = 1000, 64 // within the send queue (1024)
	for k := range msgs {
		require.NoError(t, p.qa[0].PostSend(p.write(uint64(k), k%64*size, size)))
	}
	require.NoError(t, awaitSuccess(p.qa[0].SendCQ(), msgs))
	la.mu.Lock()
	defer la.mu.Unlock()
	t.Logf("A's WRITE packets sent by: receive goroutine %d, sender goroutine %d, poster %d",
		la.n[0][1], la.n[1][1], la.n[2][1])
	assert.Equal(t, msgs, la.n[0][1]+la.n[1][1]+la.n[2][1])
	assert.Positive(t, la.n[0][1], "WRITEs left with the ACKs")
	assert.Zero(t, la.n[1][1], "none handed to the sender goroutine")
}
