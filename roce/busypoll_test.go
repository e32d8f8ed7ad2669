package roce_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// pollingLink is a link/mem link that records SetBusyPoll.
type pollingLink struct {
	link.Link
	set []time.Duration
}

var _ link.BusyPoller = (*pollingLink)(nil)

func (l *pollingLink) SetBusyPoll(d time.Duration) { l.set = append(l.set, d) }

// TestOpenBusyPoll: Config.BusyPoll reaches a link that can poll
// (link.BusyPoller), 0 leaves the link's own setting alone, a link that
// cannot poll is opened all the same, and a negative time is refused.
func TestOpenBusyPoll(t *testing.T) {
	n := mem.NewNetwork()
	for _, tc := range []struct {
		name string
		poll time.Duration
		want []time.Duration
	}{
		{"zero", 0, nil},
		{"50us", 50 * time.Microsecond, []time.Duration{50 * time.Microsecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &pollingLink{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))}
			d, err := roce.Open(roce.Config{Link: l, BusyPoll: tc.poll})
			require.NoError(t, err)
			require.NoError(t, d.Close())
			assert.Equal(t, tc.want, l.set)
		})
	}
	d, err := roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")), BusyPoll: time.Millisecond})
	require.NoError(t, err, "a link without busy polling ignores BusyPoll")
	require.NoError(t, d.Close())
	_, err = roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort("10.0.0.3:4791")), BusyPoll: -time.Microsecond})
	assert.ErrorIs(t, err, roce.ErrInvalidArg)
}
