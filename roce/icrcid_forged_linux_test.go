package roce_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// TestICRCIDForgedThenValidUDP (issue 27, part 4): after the device on
// link/udp accepted a WRITE whose ICRC covered another IPv4 ID than the
// peer's counter gives, but one inside its window (the binding cannot
// tell it from a genuine jump, doc/icrc-id.md), the peer's next valid
// packets, at its counter's next IDs, are accepted and written: the
// forged packet does not move the window's anchor. It is accepted and
// counted as an ID fixup; nothing is counted as out of window or a bad
// ICRC. Before, the window had moved to the forged ID and the next valid
// packet was dropped as a bad ICRC.
func TestICRCIDForgedThenValidUDP(t *testing.T) {
	for _, ahead := range []uint16{40, 200, 256} {
		t.Run("forged "+strconv.Itoa(int(ahead))+" ahead", func(t *testing.T) {
			p := newCraftedPeer(t, roce.ICRCIDWindow)
			st := p.dev.Stats()
			id := uint16(0xa354)
			for i := range 4 {
				require.True(t, p.write(t, id, 8*i, byte(i+1)), "rxe-like packet %d", i)
				id++
			}
			require.True(t, p.write(t, id+ahead, 32, 0xee), "the forged packet is in the window: accepted")
			assert.EqualValues(t, 5, st.ICRCIDFixups.Load(), "the forged packet counted as a fixup")
			for i := range 4 {
				require.True(t, p.write(t, id, 40+8*i, byte(0x10+i)), "valid packet %d after the forged one, ID %#04x", i, id)
				assert.Equal(t, bytes.Repeat([]byte{byte(0x10 + i)}, 8), p.mem(40+8*i))
				id++
			}
			assert.EqualValues(t, 9, st.ICRCIDFixups.Load())
			assert.Zero(t, st.ICRCIDOutOfWindow.Load())
			assert.Zero(t, st.BadICRC.Load())
			assert.Zero(t, p.q.Counters().Load(qp.CounterBadICRC))
			assert.EqualValues(t, 1, st.ICRCIDReseeds.Load(), "only the first packet seeded")
		})
	}
}
