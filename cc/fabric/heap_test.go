package fabric

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEventHeapOrder checks the 4-ary heap against a sort: events come
// out by time, and at equal times in scheduling order.
func TestEventHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h eventHeap
	var want []event
	seq := uint64(0)
	for round := range 200 {
		for range rng.IntN(50) {
			seq++
			e := event{at: ps(rng.IntN(100)), seq: seq}
			h.push(e)
			want = append(want, e)
		}
		slices.SortFunc(want, func(a, b event) int {
			if a.at != b.at {
				return int(a.at - b.at)
			}
			return int(a.seq) - int(b.seq)
		})
		for range rng.IntN(len(want) + 1) {
			got := h.pop()
			require.Equal(t, want[0], got, "round %d", round)
			want = want[1:]
		}
	}
	require.Len(t, h, len(want))
}

func TestFIFO(t *testing.T) {
	var q fifo
	next := int32(0)
	for i := range 1000 {
		for range i % 7 {
			q.push(int32(q.size) + next)
		}
		for range min(q.size, i%5) {
			require.Equal(t, next, q.pop())
			next++
		}
	}
}
