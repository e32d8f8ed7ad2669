package cc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
)

// TestN1_CNPPacing: doc/dcqcn.md §5.4 N1 — CE packets at 0, 10, …, 200 µs on
// one flow give CNPs at 0, 50, 100, 150, 200 µs (the first at once, then
// at most one per N = 50 µs, §1.2); CE on flow A never triggers a CNP for
// flow B.
func TestN1_CNPPacing(t *testing.T) {
	a, err := cc.NewNP(cc.ProfileP.NPConfig())
	require.NoError(t, err)
	b, err := cc.NewNP(cc.ProfileP.NPConfig())
	require.NoError(t, err)

	var cnps []float64
	for us := 0; us <= 200; us += 10 {
		now := t0.Add(time.Duration(us) * time.Microsecond)
		if a.OnPacket(now, true, true) {
			cnps = append(cnps, float64(us))
		}
		require.False(t, b.OnPacket(now, false, true), "flow B saw no CE")
	}
	assert.Equal(t, []float64{0, 50, 100, 150, 200}, cnps)
	assert.Equal(t, cc.NPStats{CE: 21, CNPs: 5, Suppressed: 16}, a.Stats())
	assert.Equal(t, cc.NPStats{}, b.Stats())
	last, ok := a.LastCNP()
	assert.True(t, ok)
	assert.Equal(t, t0.Add(200*time.Microsecond), last)
}

// TestNP_OnlyDataTriggers: doc/dcqcn.md §7.3 — only request/data packets
// trigger CNPs, never ACKs or CNPs, even CE-marked.
func TestNP_OnlyDataTriggers(t *testing.T) {
	np, err := cc.NewNP(cc.NPConfig{Interval: 50 * time.Microsecond})
	require.NoError(t, err)
	assert.False(t, np.OnPacket(t0, true, false), "CE-marked ACK")
	assert.False(t, np.OnPacket(t0, false, true), "unmarked data")
	_, ok := np.LastCNP()
	assert.False(t, ok)
	assert.True(t, np.OnPacket(t0.Add(time.Microsecond), true, true), "first CE data packet: immediate CNP")
}

func TestNP_ZeroInterval(t *testing.T) {
	// N = 0: a CNP for every CE-marked data packet (§5.1 M alternative).
	np, err := cc.NewNP(cc.NPConfig{})
	require.NoError(t, err)
	for range 3 {
		assert.True(t, np.OnPacket(t0, true, true))
	}
	_, err = cc.NewNP(cc.NPConfig{Interval: -time.Nanosecond})
	require.ErrorIs(t, err, cc.ErrInvalidConfig)
}
