package coll

import (
	"fmt"
	"testing"
)

// TestChooseBySize pins the automatic choice and the channel count that
// doc/coll.md §4 and §5 state for the sizes of the goals (4 ranks,
// default configuration): halving-doubling on one channel at 8 B, the ring
// on two channels at 1 MiB and 64 MiB; and what a forced algorithm does.
func TestChooseBySize(t *testing.T) {
	tests := []struct {
		kind   Kind
		n      int
		bytes  int
		forced Algorithm
		want   Algorithm
		nch    int
	}{
		{KindAllReduce, 4, 8, AlgoAuto, AlgoHD, 1},
		{KindAllReduce, 4, 32 << 10, AlgoAuto, AlgoHD, 1},
		{KindAllReduce, 4, 256 << 10, AlgoAuto, AlgoHD, 2},
		{KindAllReduce, 4, 256<<10 + 4, AlgoAuto, AlgoRing, 2},
		{KindAllReduce, 4, 1 << 20, AlgoAuto, AlgoRing, 2},
		{KindAllReduce, 4, 64 << 20, AlgoAuto, AlgoRing, 2},
		{KindAllReduce, 4, 8, AlgoTree, AlgoTree, 1},
		{KindAllReduce, 3, 8, AlgoAuto, AlgoHD, 1},
		{KindReduceScatter, 4, 8, AlgoAuto, AlgoHD, 1},
		{KindReduceScatter, 3, 8, AlgoAuto, AlgoRing, 1},
		{KindReduceScatter, 3, 8, AlgoHD, AlgoRing, 1}, // hd needs a power of two
		{KindAllGather, 4, 1 << 20, AlgoAuto, AlgoRing, 2},
		{KindBroadcast, 4, 8, AlgoAuto, AlgoTree, 1},
		{KindBroadcast, 4, 1 << 20, AlgoAuto, AlgoRing, 2},
		{KindBroadcast, 4, 8, AlgoHD, AlgoTree, 1}, // no hd broadcast: the automatic choice
		{KindReduce, 4, 1 << 20, AlgoTree, AlgoTree, 2},
		{KindAllToAll, 4, 1 << 20, AlgoRing, AlgoAuto, 2},
		{KindSendRecv, 4, 8, AlgoAuto, AlgoAuto, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/n=%d/%d/%v", tt.kind, tt.n, tt.bytes, tt.forced), func(t *testing.T) {
			c := &Comm{cfg: Config{Size: tt.n, Channels: DefaultChannels}}
			if got := c.Choose(tt.kind, tt.bytes, tt.forced); got != tt.want {
				t.Errorf("Choose = %v, want %v", got, tt.want)
			}
			if got := c.channels(tt.bytes); got != tt.nch {
				t.Errorf("channels = %d, want %d", got, tt.nch)
			}
		})
	}
}
