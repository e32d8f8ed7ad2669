//go:build linux

package udp

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link"
)

var _ link.BusyPoller = (*Link)(nil)

// pingPong sends rounds datagrams to rx one at a time, each after the
// previous one came out of got, and checks their order.
func pingPong(t *testing.T, tx, rx *Link, got <-chan []byte, rounds int) {
	t.Helper()
	for seq := 0; seq < rounds; seq++ {
		_, err := tx.Send([]link.Datagram{seqDatagram(rx, seq, 64)})
		require.NoError(t, err)
		b := recvWithin(t, got, 5*time.Second)
		require.Equal(t, uint32(seq), binary.BigEndian.Uint32(b), "datagram %d in order", seq)
	}
}

// TestPumpBusyPollFindsDatagrams: in a ping-pong a busy-polling pump finds
// the datagrams by polling the empty socket (PolledReads, EmptyReads), and
// delivers them all in order, with GRO and without; a pump without a
// busy-poll time never polls.
func TestPumpBusyPollFindsDatagrams(t *testing.T) {
	const rounds = 200
	for _, tc := range []struct {
		name  string
		noGRO bool
		poll  time.Duration
	}{
		{"gro/wait", false, 0},
		{"gro/poll", false, time.Second},
		{"plain/poll", true, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rx := open(t, lo4, Config{DisableGRO: tc.noGRO, BusyPoll: tc.poll})
			tx := open(t, lo4, Config{})
			got, errc := pumpOn(t, rx, 16, nil)
			pingPong(t, tx, rx, got, rounds)
			in := rx.Info()
			require.NoError(t, rx.Close())
			require.ErrorIs(t, <-errc, link.ErrClosed)
			t.Logf("%d round trips: %d empty reads, %d polled reads", rounds, in.EmptyReads, in.PolledReads)
			if tc.poll == 0 {
				assert.Zero(t, in.PolledReads, "a pump that waits never polls")
				assert.Less(t, in.EmptyReads, uint64(rounds/10))
				return
			}
			// Every datagram after the first arrives while the pump polls
			// (a second of polling outlasts any round trip).
			assert.GreaterOrEqual(t, in.PolledReads, uint64(rounds/2))
			assert.GreaterOrEqual(t, in.EmptyReads, in.PolledReads)
		})
	}
}

// TestPumpBusyPollYields: on one processor a busy-polling pump lets the
// other goroutines run every pollYield empty polls. Without the yield the
// test goroutine would run only when the scheduler preempts the pump (about
// every 10 ms: thousands of polls).
func TestPumpBusyPollYields(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	rx := open(t, lo4, Config{BusyPoll: time.Hour})
	tx := open(t, lo4, Config{})
	got, errc := pumpOn(t, rx, 16, nil)
	pingPong(t, tx, rx, got, 1) // the pump polls from here on
	var sum, most uint64
	for range 50 {
		before := rx.Info().EmptyReads
		runtime.Gosched()
		d := rx.Info().EmptyReads - before
		sum += d
		most = max(most, d)
	}
	pingPong(t, tx, rx, got, 10) // still delivering
	require.NoError(t, rx.Close())
	require.ErrorIs(t, <-errc, link.ErrClosed)
	t.Logf("empty polls between two turns of the test goroutine: %d at most, %d in 50 turns", most, sum)
	assert.GreaterOrEqual(t, sum, uint64(50), "the pump polled while the test goroutine yielded")
	assert.LessOrEqual(t, most, uint64(4*pollYield), "the pump yields every %d empty polls", pollYield)
}

// TestPumpBusyPollStopsOnClose: Close ends a pump that is busy-polling
// (with a poll time of an hour), and SetBusyPoll(0) makes a polling pump
// wait again, still delivering what comes.
func TestPumpBusyPollStopsOnClose(t *testing.T) {
	rx := open(t, lo4, Config{BusyPoll: time.Hour})
	tx := open(t, lo4, Config{})
	got, errc := pumpOn(t, rx, 16, nil)
	pingPong(t, tx, rx, got, 1)
	require.Eventually(t, func() bool { return rx.Info().EmptyReads > 100 }, 5*time.Second, time.Millisecond, "the pump polls")

	rx.SetBusyPoll(0)
	// The pump sees the change at its next poll and waits; then the empty
	// reads stop.
	require.Eventually(t, func() bool {
		before := rx.Info().EmptyReads
		time.Sleep(5 * time.Millisecond)
		return rx.Info().EmptyReads == before
	}, 5*time.Second, time.Millisecond, "the pump stops polling")
	polled := rx.Info().PolledReads
	pingPong(t, tx, rx, got, 20)
	assert.Equal(t, polled, rx.Info().PolledReads, "nothing found by polling after SetBusyPoll(0)")

	rx.SetBusyPoll(time.Hour)
	pingPong(t, tx, rx, got, 1)
	require.Eventually(t, func() bool { return rx.Info().EmptyReads > 100 }, 5*time.Second, time.Millisecond, "the pump polls again")
	closed := make(chan error, 1)
	go func() { closed <- rx.Close() }()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, link.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("a busy-polling pump did not return after Close")
	}
	require.NoError(t, <-closed)
}
