package rawnet

import (
	"runtime"
	"time"
)

// Spin calls ready until it reports true or d has passed, yielding the
// processor to other goroutines as it goes (so a sender in the same
// process keeps running on a busy machine). It reports whether ready did.
// With d <= 0 it calls ready once. The raw bindings' Recv spins this way
// for Config.BusyPoll before it sleeps in the netpoller (see
// link/afpacket.Config.BusyPoll for why).
func Spin(d time.Duration, ready func(uintptr) bool) bool {
	if d <= 0 {
		return ready(0)
	}
	deadline := time.Now().Add(d)
	for i := 1; ; i++ {
		if ready(0) {
			return true
		}
		if i%16 == 0 {
			if time.Now().After(deadline) {
				return false
			}
			runtime.Gosched()
		}
	}
}
