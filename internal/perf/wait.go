package perf

import "runtime"

// WaitMode says how a test waits for its completions and, in write_lat,
// for the peer's WRITE: parked until woken, or busy-polling as perftest
// does.
type WaitMode uint8

const (
	// WaitAuto polls on machines with PollCPUs CPUs or more. On smaller
	// ones it runs inline (WaitInline) what can (the loopback tests'
	// requester, ib_write_lat against a peer) and parks otherwise
	// (WaitEvent).
	WaitAuto WaitMode = iota
	// WaitEvent parks until a completion (or a received batch) wakes the
	// test: perftest's -e, --use_event.
	WaitEvent
	// WaitPoll busy-polls for up to PollSpin before parking, as perftest
	// polls by default (cq.CQ.SetSpin has the CPU cost: one core while a
	// request is outstanding).
	WaitPoll
	// WaitInline runs the requester on its device's receive goroutine
	// (run to completion, roce.Device.OnBatch): completions are polled and
	// the next requests posted where the device processed the ACKs, with
	// no goroutine woken in between. In-process loopback tests, and
	// ib_write_lat against a peer (its look at the buffer's last byte as
	// well).
	WaitInline
)

// String returns the mode's name.
func (m WaitMode) String() string {
	switch m {
	case WaitAuto:
		return "auto"
	case WaitEvent:
		return "event"
	case WaitPoll:
		return "poll"
	case WaitInline:
		return "inline"
	}
	return "WaitMode(invalid)"
}

// PollCPUs is the number of CPUs from which WaitAuto polls. A spinning
// test needs a core of its own beside the goroutines that do the work (the
// device's receive loop; on loopback the peer's too) and the kernel's
// packet path; with fewer it takes their core. On 2 CPUs polling made the
// 2-byte WRITE latency 3.5 times worse in-process (p50 31.8 µs against 8.9
// µs parked) and far worse between two processes: the execution trace
// shows the receive loop readied and then waiting 60-70 µs for the CPU
// the spinner held.
const PollCPUs = 4

// polls reports whether m busy-polls on a machine of cpus CPUs.
func (m WaitMode) polls(cpus int) bool {
	switch m {
	case WaitEvent, WaitInline:
		return false
	case WaitPoll:
		return true
	}
	return cpus >= PollCPUs
}

// inline reports whether a test of mode m that can run inline (an
// in-process loopback test, ib_write_lat against a peer) runs its
// requester on the device's receive goroutine on a machine of cpus CPUs.
// On 2 CPUs that is the fastest: the 2-byte WRITE ping-pong's p50 was
// 1.14-1.21 times the UDP ping-pong's inline against 1.10-1.29 parked,
// its p99 2.45-3.25 times against 3.51-3.61 (doc/latency.md §6); the
// requester then takes no processor of its own, as the UDP ping-pong's
// two goroutines each wait on their own socket.
func (m WaitMode) inline(cpus int) bool {
	return m == WaitInline || (m == WaitAuto && cpus < PollCPUs)
}

// spins reports whether m busy-polls here, where GOMAXPROCS must also
// leave a processor beside the spinner.
func (m WaitMode) spins() bool {
	return m.polls(runtime.NumCPU()) && runtime.GOMAXPROCS(0) > 1
}
