package cc

import (
	"strconv"
	"time"
)

// Controller is a per-QP, rate-based congestion controller. The sender
// transmits no faster than Rate, reports every packet it puts on the wire
// with OnPacketSent, every congestion notification (RoCEv2 CNP, doc/dcqcn.md
// §7.2) with OnCNP, and calls OnTimeout once the time returned by Deadline
// has been reached.
//
// Every method takes the caller's current time, which must never go
// backwards from one call to the next. Each input first runs every timer
// that fell due at or before now, so a driver that calls OnTimeout a little
// late still sees the timers fire in order. Implementations never sleep,
// read a clock or start goroutines, and are not safe for concurrent use:
// the goroutine that owns the QP owns its Controller.
type Controller interface {
	// OnPacketSent records that a packet of the given size in bytes (on
	// the wire) was transmitted at now.
	OnPacketSent(now time.Time, bytes int)
	// OnCNP records that a congestion notification for this QP arrived at
	// now.
	OnCNP(now time.Time)
	// OnTimeout runs every timer that fell due at or before now. It may be
	// called at any time; calling it early does nothing.
	OnTimeout(now time.Time)
	// Deadline returns the earliest time at which OnTimeout has work to
	// do, and false if no timer is armed.
	Deadline() (time.Time, bool)
	// Rate returns the current sending rate.
	Rate() Bitrate
}

var _ Controller = (*DCQCN)(nil)

// Bitrate is a data rate in bits per second. It is a float64 because the
// DCQCN rate arithmetic (halving, (RT+RC)/2) is defined on real numbers.
type Bitrate float64

// Common rates.
const (
	BitPerSecond Bitrate = 1
	Kbps                 = 1e3 * BitPerSecond
	Mbps                 = 1e6 * BitPerSecond
	Gbps                 = 1e9 * BitPerSecond
)

// String formats r with the largest unit that keeps it at or above 1, for
// example "98.4375 Gb/s" or "40 Mb/s".
func (r Bitrate) String() string {
	v, unit := float64(r), "b/s"
	switch a := max(v, -v); {
	case a >= 1e9:
		v, unit = v/1e9, "Gb/s"
	case a >= 1e6:
		v, unit = v/1e6, "Mb/s"
	case a >= 1e3:
		v, unit = v/1e3, "kb/s"
	}
	return strconv.FormatFloat(v, 'g', -1, 64) + " " + unit
}

// TxTime returns how long a packet of the given size in bytes takes at r.
// A rate that is not positive yields the maximum Duration.
func (r Bitrate) TxTime(bytes int) time.Duration {
	if !(r > 0) {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(float64(bytes) * 8 * 1e9 / float64(r))
}
