package incast

import (
	"time"

	"github.com/goroce/goroce/cc"
)

// Profile returns the reaction point's parameters for a namespace fabric
// whose hosts send at line b/s: cc.ProfileP's algorithm with the line
// rate set, the floor at line/100, the rate steps scaled from the paper's
// 40 Gb/s testbed (R_AI 40 Mb/s, R_HAI 200 Mb/s there), and the rate
// increase and α timers T = K = 1 ms instead of 55 µs. The paper's timers
// assume round trips of microseconds; through a namespace fabric and
// Go's scheduler a CNP's round trip takes 0.1–1 ms, and a reaction point
// that recovers in 5 × 55 µs is back at line rate before the next CNP can
// come, so the queue is never held; with 1 ms timers the incast's tbf
// drops nearly vanish (doc/fabric.md "Incast" has the figures). The same
// reasoning set the timers of roce's TestDCQCNMarkingSwitch.
func Profile(line cc.Bitrate) cc.Config {
	c := cc.ProfileP.Config()
	c.LineRate = line
	c.MinRate = line / 100
	c.AI = line * 40 / 40_000
	c.HAI = line * 200 / 40_000
	c.RateTimer = time.Millisecond
	c.AlphaPeriod = time.Millisecond
	return c
}
