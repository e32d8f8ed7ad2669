package roce

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestIDTrackerForgedDoesNotMoveAnchor: one packet whose ICRC covers an
// ID inside the window but off the peer's counter (a forged or corrupted
// one, which the UDP binding cannot tell from a genuine jump) is
// accepted, but the window's anchor stays where the genuine traffic put
// it, so the peer's next packets, at the counter's real next ID, are
// accepted too. Only a second packet that follows the jump moves the
// anchor there (a genuine jump: loss, or the counter's time step).
func TestIDTrackerForgedDoesNotMoveAnchor(t *testing.T) {
	type step struct {
		id     uint16
		at     time.Duration
		ok     bool
		reseed bool
	}
	base := uint16(0xa354)
	seed := []step{{base, 0, true, true}, {base + 1, 0, true, false}, {base + 2, 0, true, false}}
	next := base + 3
	tests := []struct {
		name  string
		steps []step
	}{
		{"forged 200 ahead, then the counter's IDs", []step{
			{next + 200, 0, true, false},
			{next, 0, true, false}, {next + 1, 0, true, false}, {next + 2, time.Millisecond, true, false},
		}},
		{"forged at the window's edge, then the counter's IDs", []step{
			{next + idAhead, 0, true, false},
			{next, 0, true, false}, {next + 1, 0, true, false},
		}},
		{"forged one step past idStep, then the counter's IDs", []step{
			{next + idStep + 1, 0, true, false},
			{next, 0, true, false}, {next + 1, 0, true, false},
		}},
		{"forged within idStep moves the anchor no further than idBehind allows", []step{
			{next + idStep, 0, true, false},
			{next, 0, true, false}, {next + 1, 0, true, false}, {next + idStep + 1, 0, true, false},
		}},
		{"two forged packets that do not follow each other, then the counter's IDs", []step{
			{next + 180, 0, true, false}, {next + 100, 0, true, false},
			{next, 0, true, false}, {next + 1, 0, true, false},
		}},
		{"a run of two consistent forged packets moves it; two of the counter's re-seed", []step{
			{next + 100, 0, true, false}, {next + 180, 0, true, false},
			{next, 0, false, false}, {next + 1, 0, true, true}, {next + 2, 0, true, false},
		}},
		{"a genuine jump: its second packet moves the anchor", []step{
			{next + 200, 0, true, false}, {next + 201, 0, true, false}, {next + 202, 0, true, false},
			{next + 202 + idAhead + 1, 0, true, false}, // in the moved window's forward edge
			{next, 0, false, false},                    // far behind the moved anchor
		}},
		{"a genuine jump after a forged one", []step{
			{next + 100, 0, true, false}, {next + 150, 0, true, false}, {next + 151, 0, true, false},
			{next + 152, 0, true, false}, {next + 100 - idBehind - 20, 0, false, false},
		}},
		{"a slow peer's time steps", []step{
			{next + 60, 100 * time.Millisecond, true, false},
			{next + 130, 200 * time.Millisecond, true, false},
			{next + 190, 300 * time.Millisecond, true, false},
			{next + 260, 400 * time.Millisecond, true, false},
		}},
	}
	t0 := time.Unix(1_800_000_000, 0)
	src := netip.MustParseAddr("10.77.0.3")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tr idTracker
			for i, s := range append(append([]step(nil), seed...), tc.steps...) {
				ok, reseed := tr.accept(src, s.id, t0.Add(s.at))
				assert.Equal(t, s.ok, ok, "step %d: ID %#04x accepted", i, s.id)
				assert.Equal(t, s.reseed, reseed, "step %d: ID %#04x re-seeds", i, s.id)
			}
		})
	}
}
