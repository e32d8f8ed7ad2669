//go:build linux

package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link"
)

// pumpOn runs rx.Pump in a goroutine with batches of batch buffers and
// sends each datagram's payload, copied, to the returned channel; onBatch,
// if set, runs inside fn after the copies. The error channel gets Pump's
// result.
func pumpOn(t *testing.T, rx *Link, batch int, onBatch func(n int) bool) (<-chan []byte, <-chan error) {
	t.Helper()
	got := make(chan []byte, 4096)
	errc := make(chan error, 2)
	dgs := make([]link.Datagram, batch)
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, 9000)
		dgs[i].Buf = bufs[i]
	}
	go func() {
		errc <- rx.Pump(dgs, func(n int) bool {
			for _, d := range dgs[:n] {
				got <- append([]byte(nil), d.Buf...)
			}
			// A batch changes only dgs[:n] (link.Pumper): the rest are
			// as this function left them.
			for i := n; i < len(dgs); i++ {
				if d := dgs[i]; len(d.Buf) != len(bufs[i]) || &d.Buf[0] != &bufs[i][0] || d.Src.IsValid() || d.TTL != 0 {
					errc <- fmt.Errorf("slot %d of a batch of %d changed", i, n)
					return false
				}
			}
			for i := range dgs[:n] {
				dgs[i] = link.Datagram{Buf: bufs[i]}
			}
			if onBatch != nil {
				return onBatch(n)
			}
			return true
		})
	}()
	return got, errc
}

func seqDatagram(dst *Link, seq, size int) link.Datagram {
	b := make([]byte, size)
	payload(b, seq)
	return link.Datagram{Buf: b, Dst: dst.LocalAddr()}
}

func recvWithin(t *testing.T, got <-chan []byte, d time.Duration) []byte {
	t.Helper()
	select {
	case b := <-got:
		return b
	case <-time.After(d):
		t.Fatalf("nothing received within %v", d)
		return nil
	}
}

// TestPumpReceivesInOrder: bursts of random length, with pauses that let
// the pump drain the socket and wait, arrive complete and in order, with
// GRO and without.
func TestPumpReceivesInOrder(t *testing.T) {
	for _, noGRO := range []bool{false, true} {
		t.Run(map[bool]string{false: "gro", true: "plain"}[noGRO], func(t *testing.T) {
			rx := open(t, lo4, Config{DisableGRO: noGRO})
			tx := open(t, lo4, Config{})
			got, errc := pumpOn(t, rx, 16, nil)
			rng := rand.New(rand.NewPCG(1, 2))
			const total = 600
			for seq := 0; seq < total; {
				k := min(1+rng.IntN(40), total-seq)
				dgs := make([]link.Datagram, k)
				for i := range dgs {
					dgs[i] = seqDatagram(rx, seq+i, 1200)
				}
				n, err := tx.Send(dgs)
				require.NoError(t, err)
				require.Equal(t, k, n)
				seq += k
				if rng.IntN(3) == 0 {
					time.Sleep(200 * time.Microsecond)
				}
			}
			for seq := 0; seq < total; seq++ {
				b := recvWithin(t, got, 5*time.Second)
				require.Len(t, b, 1200)
				require.Equal(t, uint32(seq), binary.BigEndian.Uint32(b), "datagram %d in order", seq)
			}
			rx.Close()
			require.ErrorIs(t, <-errc, link.ErrClosed)
		})
	}
}

// TestPumpArrivalDuringBatch: a datagram that arrives while fn is still
// handling a batch (after the recvmmsg that drained the socket) is
// delivered without any later datagram to wake the pump. A pump that began
// a new netpoller wait per batch would lose that readiness (the netpoller
// recorded it while fn slept, and a new wait resets it) and hang here.
func TestPumpArrivalDuringBatch(t *testing.T) {
	rx := open(t, lo4, Config{})
	tx := open(t, lo4, Config{})
	sent := 1
	got, errc := pumpOn(t, rx, 64, func(int) bool {
		if sent < 50 {
			// On loopback the datagram is in rx's queue when Send returns.
			_, err := tx.Send([]link.Datagram{seqDatagram(rx, sent, 100)})
			if err != nil {
				return false
			}
			sent++
			// Park a while: an idle scheduler polls the network meanwhile
			// and records the datagram's readiness before fn returns.
			time.Sleep(time.Millisecond)
		}
		return true
	})
	_, err := tx.Send([]link.Datagram{seqDatagram(rx, 0, 100)})
	require.NoError(t, err)
	for seq := 0; seq < 50; seq++ {
		b := recvWithin(t, got, 2*time.Second)
		require.Equal(t, uint32(seq), binary.BigEndian.Uint32(b))
	}
	rx.Close()
	require.ErrorIs(t, <-errc, link.ErrClosed)
}

// TestPumpSkipsEmptyRead: in a ping-pong, where every datagram comes
// alone, a loop of RecvLend calls reads the empty socket once per
// datagram; the pump does not.
func TestPumpSkipsEmptyRead(t *testing.T) {
	const rounds = 200
	tx := open(t, lo4, Config{})
	pingPong := func(rx *Link, got <-chan []byte) uint64 {
		before := rx.Info().EmptyReads
		for seq := 0; seq < rounds; seq++ {
			_, err := tx.Send([]link.Datagram{seqDatagram(rx, seq, 64)})
			require.NoError(t, err)
			b := recvWithin(t, got, 2*time.Second)
			require.Equal(t, uint32(seq), binary.BigEndian.Uint32(b))
		}
		return rx.Info().EmptyReads - before
	}

	loopRx := open(t, lo4, Config{})
	loopGot := make(chan []byte, 16)
	go func() {
		dgs := make([]link.Datagram, 64)
		for {
			for i := range dgs {
				dgs[i] = link.Datagram{Buf: make([]byte, 2048)}
			}
			n, err := loopRx.RecvLend(dgs)
			if err != nil {
				return
			}
			for _, d := range dgs[:n] {
				loopGot <- append([]byte(nil), d.Buf...)
			}
		}
	}()
	loopEmpty := pingPong(loopRx, loopGot)

	pumpRx := open(t, lo4, Config{})
	pumpGot, errc := pumpOn(t, pumpRx, 64, nil)
	pumpEmpty := pingPong(pumpRx, pumpGot)
	pumpRx.Close()
	require.ErrorIs(t, <-errc, link.ErrClosed)

	t.Logf("empty reads in %d round trips: RecvLend loop %d, Pump %d", rounds, loopEmpty, pumpEmpty)
	assert.GreaterOrEqual(t, loopEmpty, uint64(rounds/2), "a Recv loop reads the drained socket after each datagram")
	assert.Less(t, pumpEmpty, uint64(rounds/10), "the pump waits without that read")
}

// TestPumpStops: fn returning false ends Pump with nil, and the link
// still works; Pump on a closed link returns ErrClosed.
func TestPumpStops(t *testing.T) {
	rx := open(t, lo4, Config{})
	tx := open(t, lo4, Config{})
	got, errc := pumpOn(t, rx, 8, func(int) bool { return false })
	_, err := tx.Send([]link.Datagram{seqDatagram(rx, 7, 100), seqDatagram(rx, 8, 100)})
	require.NoError(t, err)
	assert.Equal(t, uint32(7), binary.BigEndian.Uint32(recvWithin(t, got, 2*time.Second)))
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("Pump did not return after fn returned false")
	}
	require.NoError(t, rx.Close())
	err = rx.Pump(make([]link.Datagram, 1), func(int) bool { return true })
	assert.True(t, errors.Is(err, link.ErrClosed), "Pump after Close: %v", err)
}

// TestRecvLendReusesLayout: the arena layout is reused from call to call
// (layoutArena resets only what the kernel wrote), so a message slot that
// last held a lone datagram, with no GRO control message, must take a
// coalesced buffer's segment size again, and slots must follow a Recv,
// whose layout differs, on the same link.
func TestRecvLendReusesLayout(t *testing.T) {
	rx := open(t, lo4, Config{})
	tx := open(t, lo4, Config{})
	dgs := make([]link.Datagram, 64)
	reset := func() {
		for i := range dgs {
			dgs[i] = link.Datagram{Buf: make([]byte, 4096)}
		}
	}
	recv := func(lend bool, want int, size int, seq0 int) {
		t.Helper()
		got := 0
		for got < want {
			reset()
			var n int
			var err error
			if lend {
				n, err = rx.RecvLend(dgs)
			} else {
				n, err = rx.Recv(dgs)
			}
			require.NoError(t, err)
			for _, d := range dgs[:n] {
				require.Len(t, d.Buf, size, "datagram %d", seq0+got)
				require.Equal(t, uint32(seq0+got), binary.BigEndian.Uint32(d.Buf))
				// Every control message arrived: TTL (IP_RECVTTL) and
				// the ECN and DSCP the burst was sent with (IP_RECVTOS).
				require.Equal(t, uint8(64), d.TTL, "datagram %d: TTL", seq0+got)
				require.Equal(t, [2]uint8{10, link.ECT0}, [2]uint8{d.DSCP, d.ECN}, "datagram %d: TOS", seq0+got)
				got++
			}
		}
		require.Equal(t, want, got)
	}
	burst := func(seq0, k, size int) {
		t.Helper()
		b := make([]link.Datagram, k)
		for i := range b {
			b[i] = seqDatagram(rx, seq0+i, size)
			b[i].DSCP, b[i].ECN = 10, link.ECT0
		}
		tx.PlanIPID(b) // GSO takes a run whose IDs follow its plan
		n, err := tx.Send(b)
		require.NoError(t, err)
		require.Equal(t, k, n)
	}
	seq := 0
	for round := 0; round < 6; round++ {
		lend := round%2 == 0
		// Lone datagrams, one per call: the slots' control space shrinks
		// to what a lone datagram needs.
		for i := 0; i < 3; i++ {
			burst(seq, 1, 300)
			recv(lend, 1, 300, seq)
			seq++
		}
		// A GSO burst lands coalesced: its segment size must come through.
		// Its segments are large enough for Recv to scatter them into the
		// caller's buffers, a layout unlike RecvLend's.
		burst(seq, 20, 3000)
		recv(lend, 20, 3000, seq)
		seq += 20
	}
	assert.Positive(t, rx.Info().GROReceived, "the bursts were coalesced")
}
