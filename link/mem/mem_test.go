package mem

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link"
)

var (
	addrA = netip.MustParseAddrPort("10.0.0.1:4791")
	addrB = netip.MustParseAddrPort("10.0.0.2:4791")
)

func dg(dst netip.AddrPort, b ...byte) link.Datagram { return link.Datagram{Buf: b, Dst: dst} }

func bufs(n, size int) []link.Datagram {
	d := make([]link.Datagram, n)
	for i := range d {
		d[i].Buf = make([]byte, size)
	}
	return d
}

func TestExchange(t *testing.T) {
	n := NewNetwork()
	a, b := n.Attach(addrA), n.Attach(addrB)
	defer a.Close()
	defer b.Close()
	out := []link.Datagram{dg(addrB, 1, 2, 3), dg(addrB, 4), dg(addrB)}
	out[1].ECN = link.CE
	out[2].ECN = link.ECT1
	out[2].IPID = 0xa354
	k, err := a.Send(out)
	require.NoError(t, err)
	require.Equal(t, 3, k)

	in := bufs(8, 16)
	k, err = b.Recv(in)
	require.NoError(t, err)
	require.Equal(t, 3, k)
	assert.Equal(t, []byte{1, 2, 3}, in[0].Buf)
	assert.Equal(t, []byte{4}, in[1].Buf)
	assert.Empty(t, in[2].Buf)
	for i, d := range in[:3] {
		assert.Equal(t, addrA, d.Src)
		assert.Equal(t, addrB, d.Dst)
		assert.Equal(t, out[i].ECN, d.ECN)
		assert.True(t, d.IPIDKnown)
		assert.Equal(t, out[i].IPID, d.IPID, "the IPv4 ID passes through")
	}
	assert.Equal(t, link.Stats{SentPackets: 3, SentBytes: 4}, a.Stats())
	assert.Equal(t, link.Stats{RecvPackets: 3, RecvBytes: 4}, b.Stats())
	assert.Equal(t, addrA, a.LocalAddr())
}

func TestOrderAndPartialRecv(t *testing.T) {
	n := NewNetwork()
	a, b := n.Attach(addrA), n.Attach(addrB)
	for i := 0; i < 10; i++ {
		_, err := a.Send([]link.Datagram{dg(addrB, byte(i))})
		require.NoError(t, err)
	}
	var got []byte
	for len(got) < 10 {
		in := bufs(3, 4)
		k, err := b.Recv(in)
		require.NoError(t, err)
		for _, d := range in[:k] {
			got = append(got, d.Buf[0])
		}
	}
	assert.Equal(t, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, got)
}

func TestQueueFullDrops(t *testing.T) {
	n := New(Config{QueueLen: 4})
	a, b := n.Attach(addrA), n.Attach(addrB)
	out := make([]link.Datagram, 6)
	for i := range out {
		out[i] = dg(addrB, byte(i))
	}
	k, err := a.Send(out)
	require.NoError(t, err)
	assert.Equal(t, 6, k, "UDP-like: Send succeeds, the network drops")
	in := bufs(8, 4)
	k, err = b.Recv(in)
	require.NoError(t, err)
	require.Equal(t, 4, k)
	assert.Equal(t, byte(3), in[3].Buf[0], "the oldest are kept")
	assert.Equal(t, uint64(2), b.Stats().RecvDropped)
}

func TestTruncatedAndNoRoute(t *testing.T) {
	n := NewNetwork()
	a, b := n.Attach(addrA), n.Attach(addrB)
	_, err := a.Send([]link.Datagram{dg(addrB, 1, 2, 3, 4, 5), dg(addrB, 6), dg(netip.MustParseAddrPort("10.9.9.9:1"), 7)})
	require.NoError(t, err)
	in := bufs(4, 2)
	k, err := b.Recv(in)
	require.NoError(t, err)
	require.Equal(t, 1, k)
	assert.Equal(t, []byte{6}, in[0].Buf)
	assert.Equal(t, uint64(1), b.Stats().RecvDropped)
	_, noRoute := n.Dropped()
	assert.Equal(t, uint64(1), noRoute)
}

func TestMTU(t *testing.T) {
	n := New(Config{MTU: 4})
	a := n.Attach(addrA)
	n.Attach(addrB)
	k, err := a.Send([]link.Datagram{dg(addrB, 1), dg(addrB, 1, 2, 3, 4, 5)})
	assert.Equal(t, 1, k)
	assert.ErrorIs(t, err, ErrTooBig)
	assert.Equal(t, uint64(1), a.Stats().SendErrors)
}

// TestDeliverHook: the hook can CE-mark and drop, deterministically.
func TestDeliverHook(t *testing.T) {
	i := 0
	n := New(Config{Deliver: func(d *link.Datagram) bool {
		i++
		switch i % 3 {
		case 1:
			d.ECN = link.CE
		case 2:
			return false
		}
		return true
	}})
	a, b := n.Attach(addrA), n.Attach(addrB)
	out := make([]link.Datagram, 6)
	for j := range out {
		out[j] = dg(addrB, byte(j))
		out[j].ECN = link.ECT0
	}
	_, err := a.Send(out)
	require.NoError(t, err)
	in := bufs(8, 4)
	k, err := b.Recv(in)
	require.NoError(t, err)
	require.Equal(t, 4, k)
	assert.Equal(t, []uint8{link.CE, link.ECT0, link.CE, link.ECT0}, []uint8{in[0].ECN, in[1].ECN, in[2].ECN, in[3].ECN})
	assert.Equal(t, []byte{0, 2, 3, 5}, []byte{in[0].Buf[0], in[1].Buf[0], in[2].Buf[0], in[3].Buf[0]})
	byDeliver, _ := n.Dropped()
	assert.Equal(t, uint64(2), byDeliver)
}

func TestCloseUnblocksRecv(t *testing.T) {
	n := NewNetwork()
	a := n.Attach(addrA)
	done := make(chan error, 1)
	go func() {
		_, err := a.Recv(bufs(1, 4))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, a.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, link.ErrClosed)
	case <-time.After(2 * time.Second):
		t.Fatal("Recv still blocked")
	}
	assert.ErrorIs(t, a.Close(), link.ErrClosed)
	_, err := a.Send([]link.Datagram{dg(addrB, 1)})
	assert.ErrorIs(t, err, link.ErrClosed)
	// The address is free again.
	n.Attach(addrA).Close()
	assert.Panics(t, func() { n.Attach(addrB); n.Attach(addrB) })
}

func TestConcurrent(t *testing.T) {
	n := New(Config{QueueLen: 64})
	a, b := n.Attach(addrA), n.Attach(addrB)
	const total = 20000
	var wg sync.WaitGroup
	wg.Add(1)
	var got, last int
	ordered := true
	go func() {
		defer wg.Done()
		in := bufs(16, 4)
		for {
			k, err := b.Recv(in)
			if err != nil {
				return
			}
			for _, d := range in[:k] {
				v := int(d.Buf[0])<<8 | int(d.Buf[1])
				if got > 0 && v <= last {
					ordered = false
				}
				last = v
				got++
			}
		}
	}()
	for i := 0; i < total; i++ {
		for {
			if _, err := a.Send([]link.Datagram{dg(addrB, byte(i>>8), byte(i))}); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := b.Stats()
		if s.RecvPackets+s.RecvDropped == total || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.Close()
	wg.Wait()
	s := b.Stats()
	assert.Equal(t, uint64(total), s.RecvPackets+s.RecvDropped)
	assert.True(t, ordered, "FIFO")
}

func TestZeroAllocs(t *testing.T) {
	n := NewNetwork()
	a, b := n.Attach(addrA), n.Attach(addrB)
	out := make([]link.Datagram, 64)
	for i := range out {
		out[i] = link.Datagram{Buf: make([]byte, 1068), Dst: addrB, ECN: link.ECT0}
	}
	in := bufs(64, 2048)
	f := func() {
		if _, err := a.Send(out); err != nil {
			panic(err)
		}
		for i := range in {
			in[i].Buf = in[i].Buf[:cap(in[i].Buf)]
		}
		if k, err := b.Recv(in); err != nil || k != 64 {
			panic(err)
		}
	}
	for i := 0; i < DefaultQueueLen/64; i++ {
		f() // every queue slot grows its buffer once
	}
	assert.Zero(t, testing.AllocsPerRun(100, f))
}

func BenchmarkSendRecv(b *testing.B) {
	n := NewNetwork()
	x, y := n.Attach(addrA), n.Attach(addrB)
	out := make([]link.Datagram, 64)
	for i := range out {
		out[i] = link.Datagram{Buf: make([]byte, 4140), Dst: addrB}
	}
	in := bufs(64, 4200)
	b.SetBytes(64 * 4140)
	b.ReportAllocs()
	for b.Loop() {
		x.Send(out)
		for i := range in {
			in[i].Buf = in[i].Buf[:cap(in[i].Buf)]
		}
		y.Recv(in)
	}
}
