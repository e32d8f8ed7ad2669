//go:build !linux

package roce

import "time"

func newDeviceTimer() deviceTimer { return newGoTimer() }

// timerLatency is how late a Go timer wakes the engine: it fires at the
// next millisecond step (doc/dcqcn.md §7.4); pacer wake-ups are planned for it
// (cc.Pacer.Wake).
const timerLatency = 1100 * time.Microsecond
