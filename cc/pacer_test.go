package cc

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil"
)

// paceRun drives p with a fake clock: whenever the pacer allows, a packet
// of size(i) bytes goes; otherwise the clock jumps to the pacer's time. It
// returns the send times.
func paceRun(p *Pacer, clk *testutil.Clock, n int, size func(i int) int) []time.Time {
	at := make([]time.Time, 0, n)
	for i := 0; i < n; {
		now := clk.Now()
		if !p.Ready(now) {
			clk.Set(p.Next())
			continue
		}
		p.Sent(now, size(i))
		at = append(at, now)
		i++
	}
	return at
}

func TestPacerDepthDefaults(t *testing.T) {
	tests := []struct {
		name                string
		depth, maxPkt, want int
	}{
		{"default MTU 1024", 0, 1104, MaxPaceDepth},
		{"default MTU 4096", 0, 4176, MaxPaceDepth},
		{"explicit", 9000, 1104, 9000},
		{"raised to one packet", 100, 1104, 1104},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p Pacer
			p.SetSize(tc.depth, tc.maxPkt)
			assert.Equal(t, tc.want, p.depth)
		})
	}
}

// TestPacerGaps: after the initial burst of one bucket, packets of s bytes
// leave exactly s/rate apart (doc/dcqcn.md §7.4 "gaps equal size/RC").
func TestPacerGaps(t *testing.T) {
	for _, rate := range []Bitrate{100 * Mbps, 1 * Gbps, 10 * Gbps} {
		clk := testutil.NewClock()
		var p Pacer
		const pkt = 1104
		p.SetSize(0, pkt)
		p.Start(clk.Now(), rate)
		at := paceRun(&p, clk, 200, func(int) int { return pkt })
		// The initial burst: packets while the credit covers a full one.
		burst := (p.depth-pkt)/pkt + 1
		for i := 1; i < burst; i++ {
			assert.Equal(t, at[0], at[i], "packet %d of the initial burst", i)
		}
		assert.True(t, at[burst].After(at[0]))
		// Then, once the leftover credit is spent, one packet per size/rate.
		gap := rate.TxTime(pkt)
		for i := burst + 1; i < len(at); i++ {
			assert.InDelta(t, float64(gap), float64(at[i].Sub(at[i-1])), 1, "%v: gap %d", rate, i)
		}
		// The long-run rate is the configured one.
		span := at[len(at)-1].Sub(at[burst])
		got := float64(pkt*(len(at)-burst-1)) * 8 / span.Seconds()
		assert.InEpsilon(t, float64(rate), got, 1e-5)
	}
}

// TestPacerWake: a held QP is woken when one burst (a packet, or 50 µs at
// the rate) may go, early enough that a wake-up up to lat late loses
// nothing, with a lead (to be spent watching the clock) where the bucket
// cannot absorb lat.
func TestPacerWake(t *testing.T) {
	const lat = 100 * time.Microsecond
	const pkt = 4176
	tests := []struct {
		rate      Bitrate
		wantBurst int // credit at the wake-up
		wantLead  time.Duration
	}{
		{100 * Mbps, pkt, 0},
		{500 * Mbps, pkt, 0},                    // the rest, 12,208 B, lasts 195 µs
		{1 * Gbps, 6250, 19 * time.Microsecond}, // the rest lasts 81 µs
		{10 * Gbps, MaxPaceDepth, lat},
	}
	for _, tc := range tests {
		clk := testutil.NewClock()
		var p Pacer
		p.SetSize(0, pkt)
		p.Start(clk.Now(), tc.rate)
		paceRun(&p, clk, 10, func(int) int { return pkt })
		require.False(t, p.Ready(clk.Now()))
		at, lead := p.Wake(lat)
		assert.InDelta(t, float64(tc.wantLead), float64(lead), 1000, "%v: lead", tc.rate)
		credit := float64(p.depth) - p.tat.Sub(at).Seconds()*float64(tc.rate)/8
		assert.InDelta(t, float64(tc.wantBurst), credit, 2, "%v: credit at the wake-up", tc.rate)
		assert.False(t, at.Before(p.Next()), "%v: not before a packet may go", tc.rate)
		// Woken lat late (after its lead), the bucket is not yet full.
		assert.False(t, at.Add(-lead).Add(lat).After(p.tat), "%v: a late wake-up loses no credit", tc.rate)
	}
}

// TestPacerBurstBound: with random sizes (up to the largest packet) and
// random idle periods, no interval of length Δ carries more than depth +
// rate·Δ bytes; in particular a burst at one instant is at most depth.
func TestPacerBurstBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const maxPkt = 4176
	clk := testutil.NewClock()
	var p Pacer
	p.SetSize(0, maxPkt)
	require.Equal(t, MaxPaceDepth, p.depth)
	rate := 400 * Mbps
	p.Start(clk.Now(), rate)
	type sent struct {
		at time.Time
		n  int
	}
	var log []sent
	for len(log) < 5000 {
		if rng.IntN(50) == 0 {
			clk.Advance(time.Duration(rng.IntN(2000)) * time.Microsecond) // idle: the bucket refills
		}
		now := clk.Now()
		if !p.Ready(now) {
			clk.Set(p.Next())
			continue
		}
		n := 64 + rng.IntN(maxPkt-63)
		p.Sent(now, n)
		log = append(log, sent{now, n})
	}
	for i := range log {
		bytes := 0
		for j := i; j < len(log); j++ {
			bytes += log[j].n
			dt := log[j].at.Sub(log[i].at)
			// The last packet of the interval may start at its end.
			if limit := float64(p.depth) + float64(rate)*dt.Seconds()/8; float64(bytes) > limit+1 {
				t.Fatalf("packets %d..%d: %d bytes over %v, more than depth + rate·Δ = %.0f", i, j, bytes, dt, limit)
			}
			if dt > 10*time.Millisecond {
				break
			}
		}
	}
}

// TestPacerRateCut: a rate cut applies to the next packet, and the debt of
// packets already sent is re-expressed at the new rate.
func TestPacerRateCut(t *testing.T) {
	clk := testutil.NewClock()
	var p Pacer
	const pkt = 1000
	p.SetSize(pkt, pkt) // no burst: every packet waits for the previous one
	p.Start(clk.Now(), 1*Gbps)
	at := paceRun(&p, clk, 3, func(int) int { return pkt })
	assert.Equal(t, 8*time.Microsecond, at[2].Sub(at[1]))
	// 8 µs of debt at 1 Gb/s is 1000 bytes: 16 µs at 500 Mb/s.
	p.SetRate(clk.Now(), 500*Mbps)
	assert.Equal(t, clk.Now().Add(16*time.Microsecond), p.Next())
	at = paceRun(&p, clk, 3, func(int) int { return pkt })
	assert.Equal(t, 16*time.Microsecond, at[1].Sub(at[0]))
	assert.Equal(t, 16*time.Microsecond, at[2].Sub(at[1]))
}
