//go:build linux

package udp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link"
)

// TestRandomStreams sends seeded random mixes — runs of random length and
// size (RoCE MTUs and odd sizes), singles, empty datagrams, ECN changes —
// and receives them with random slot counts, in every GSO/GRO mode and
// both families. Every datagram must arrive once, in order, intact, with
// its ECN, in the buffer the caller put at its index. With GRO this walks all of Recv's paths: in place, overflow,
// gathered after a gso_size change, carried over between calls.
func TestRandomStreams(t *testing.T) {
	for _, f := range families {
		for _, m := range modes {
			t.Run(f.name+"/"+m.name, func(t *testing.T) {
				for seed := uint64(1); seed <= 3; seed++ {
					randomStream(t, f.a, f.b, m.noGSO, m.noGRO, seed)
				}
			})
		}
	}
}

func randomStream(t *testing.T, a, b netip.Addr, noGSO, noGRO bool, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	tx := open(t, a, Config{DisableGSO: noGSO, DisableGRO: noGRO, BatchSize: 1 + rng.IntN(64)})
	rx := open(t, b, Config{DisableGSO: noGSO, DisableGRO: noGRO, BatchSize: 1 + rng.IntN(64)})
	sizesMenu := []int{4140, 1068, 2092, 300, 4140, 1068}
	var all []link.Datagram
	for len(all) < 1500 {
		switch rng.IntN(6) {
		case 0: // a single odd-sized or empty datagram
			n := rng.IntN(1500)
			if rng.IntN(10) == 0 {
				n = 0
			}
			all = append(all, link.Datagram{Buf: make([]byte, n)})
		default: // a run, maybe with a short last
			size := sizesMenu[rng.IntN(len(sizesMenu))]
			ecn := uint8(rng.IntN(4))
			run := 1 + rng.IntN(80)
			for i := 0; i < run; i++ {
				n := size
				if i == run-1 && rng.IntN(2) == 0 {
					n = 1 + rng.IntN(size)
				}
				all = append(all, link.Datagram{Buf: make([]byte, n), ECN: ecn})
			}
		}
	}
	for i := range all {
		all[i].Dst = rx.LocalAddr()
		payload(all[i].Buf, i)
	}
	done := make(chan error, 1)
	var got []link.Datagram
	go func() {
		// Random slot counts per call; every buffer holds the largest.
		for len(got) < len(all) {
			slots := 1 + rng.IntN(100)
			dgs := make([]link.Datagram, slots)
			orig := make([]*byte, slots)
			for i := range dgs {
				dgs[i].Buf = make([]byte, 4200)
				orig[i] = &dgs[i].Buf[0]
			}
			n, err := rx.Recv(dgs)
			if err != nil {
				done <- err
				return
			}
			for i := range dgs {
				if &dgs[i].Buf[:1][0] != orig[i] {
					done <- fmt.Errorf("Recv moved the buffer of slot %d", i)
					return
				}
			}
			got = append(got, dgs[:n]...)
		}
		done <- nil
	}()
	// Send in random chunks, paced so the receiver is never overrun.
	srng := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < len(all); {
		n := min(1+srng.IntN(200), len(all)-i)
		chunk := all[i : i+n]
		tx.PlanIPID(chunk)
		k, err := tx.Send(chunk)
		require.NoError(t, err)
		require.Equal(t, n, k)
		i += n
		deadline := time.Now().Add(2 * time.Second)
		for rx.Stats().RecvPackets+2000 < uint64(i) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		rx.Close()
		<-done
		t.Fatalf("seed %d: received %d of %d", seed, len(got), len(all))
	}
	require.Len(t, got, len(all))
	for i, d := range got {
		require.Len(t, d.Buf, len(all[i].Buf), "seed %d datagram %d", seed, i)
		checkPayload(t, d.Buf, i)
		require.Equal(t, all[i].ECN, d.ECN, "seed %d datagram %d", seed, i)
		require.Equal(t, tx.LocalAddr(), d.Src)
	}
	in := rx.Info()
	assert.Zero(t, in.Truncated)
	t.Logf("seed %d: %d datagrams, %d super-packets, %d coalesced, %d copied", seed, len(all), tx.Info().GSOSent, in.GROReceived, in.GROCopied)
}
