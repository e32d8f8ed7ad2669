package cc

import (
	"math"
	"time"
)

// MaxPaceDepth bounds a Pacer's bucket, and is its default depth: a few
// packets at MTU 4096, and as much room as doc/dcqcn.md §7.4 allows for
// the bucket to absorb late wake-ups (Pacer.Wake). A longer burst at line
// rate would fill a switch queue well past DCQCN's Kmin (5 KB) before the
// rate could react.
const MaxPaceDepth = 16 << 10

// paceBurst is the burst a woken sender aims at, in time at its own rate:
// bursts of 50 µs of a flow's rate keep it smooth on any scale a switch
// queue or a receiver measures (a small part of the 10 ms windows over
// which doc/dcqcn.md §7.4 checks the rate).
const paceBurst = 50 * time.Microsecond

// Pacer spaces one sender's packets at a rate with a token bucket whose
// credit is computed from the monotonic clock at send time, never refilled
// by a ticker (doc/dcqcn.md §7.4: a Go timer fires in steps of about 1 ms,
// and 1 ms of credit at 10 Gb/s is a 1.25 MB burst). It is the generic
// cell rate algorithm: it keeps the time at which the bucket is full again
// given what was sent (the theoretical arrival time, tat), so the credit
// at now is depth − (tat − now)·rate.
//
// A packet may go when the credit covers a packet of the largest size, so
// bursts never exceed the depth and, once the bucket is empty, packets of
// s bytes leave s/rate apart. A Pacer is sans-IO: the caller passes the
// time, and waiting (a timer, or watching the clock) is its business. Its
// zero value must be sized (SetSize) and started (Start) before use; it
// is not safe for concurrent use (roce's QPs use theirs under the engine
// lock).
type Pacer struct {
	rate   Bitrate
	depth  int // bytes, ≥ maxPkt
	maxPkt int // bytes on the wire of the largest packet
	tat    time.Time
	frac   float64 // sub-nanosecond part of tat, so rounding never speeds the rate up
}

// SetSize sets the bucket depth and the largest packet size, both in bytes
// on the wire. depth 0 picks the default, MaxPaceDepth; any depth is
// raised to one packet, the smallest burst there is.
func (p *Pacer) SetSize(depth, maxPkt int) {
	if depth == 0 {
		depth = MaxPaceDepth
	}
	p.depth, p.maxPkt = max(depth, maxPkt), maxPkt
}

// Depth returns the bucket depth in bytes (SetSize).
func (p *Pacer) Depth() int { return p.depth }

// Rate returns the pacing rate.
func (p *Pacer) Rate() Bitrate { return p.rate }

// Start engages the pacer at rate r with a full bucket.
func (p *Pacer) Start(now time.Time, r Bitrate) {
	p.rate, p.tat, p.frac = r, now, 0
}

// SetRate changes the rate. The debt already incurred (bytes sent beyond
// the bucket's refill) is carried over at the new rate, so a cut takes
// effect on the very next packet.
func (p *Pacer) SetRate(now time.Time, r Bitrate) {
	if r == p.rate {
		return
	}
	if debt := p.tat.Sub(now); debt > 0 {
		p.tat = now.Add(time.Duration(float64(debt) * float64(p.rate) / float64(r)))
	}
	p.rate = r
}

// slack is the time the bucket takes to refill depth − maxPkt bytes: a
// packet may go while tat − now ≤ slack.
func (p *Pacer) slack() time.Duration { return p.rate.TxTime(p.depth - p.maxPkt) }

// Ready reports whether a packet of up to the largest size may go at now.
func (p *Pacer) Ready(now time.Time) bool { return !p.tat.After(now.Add(p.slack())) }

// Next returns the earliest time Ready returns true.
func (p *Pacer) Next() time.Time { return p.tat.Add(-p.slack()) }

// Wake returns when a sender the pacer holds should be looked at again,
// given that its wake-up may come up to lat late, and how much earlier
// than that the caller must arm its timer (and then watch the clock) to
// be on time.
//
// The sender is woken when the credit reaches one burst: one packet, or
// 50 µs at the rate if more. The rest of the bucket absorbs lateness: a
// wake-up late by up to (depth − burst)/rate loses no rate. Where that is
// shorter than lat (high rates), the lead is the difference.
func (p *Pacer) Wake(lat time.Duration) (at time.Time, lead time.Duration) {
	burst := p.maxPkt
	if b := float64(p.rate) * paceBurst.Seconds() / 8; b > float64(burst) {
		burst = int(min(b, float64(p.depth)))
	}
	tol := p.rate.TxTime(p.depth - burst)
	return p.tat.Add(-tol), max(0, lat-tol)
}

// Sent charges a packet of n bytes on the wire sent at now.
func (p *Pacer) Sent(now time.Time, n int) {
	if p.tat.Before(now) {
		p.tat, p.frac = now, 0
	}
	ns := float64(n)*8e9/float64(p.rate) + p.frac
	whole := math.Floor(ns)
	p.tat, p.frac = p.tat.Add(time.Duration(whole)), ns-whole
}
