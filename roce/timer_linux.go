package roce

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fdTimer is the device timer on Linux: a timerfd (CLOCK_MONOTONIC) read
// through the Go netpoller. Its expiry is a kernel hrtimer, precise to the
// thread's timer slack (50 µs by default), where a Go timer fires at the
// next millisecond here (doc/dcqcn.md §7.4: epoll_wait's timeout is in ms,
// golang/go#44343) — but a readable fd wakes epoll_wait at once. Waiting
// parks the engine goroutine and frees its processor, unlike a spin or a
// raw nanosleep (which holds the processor until sysmon retakes it, up to
// 10 ms later).
type fdTimer struct {
	f   *os.File
	fd  int
	buf [8]byte
}

func newDeviceTimer() deviceTimer {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return newGoTimer()
	}
	// A non-blocking fd becomes a pollable *os.File.
	return &fdTimer{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}
}

func (t *fdTimer) arm(d time.Duration) {
	if d <= 0 {
		d = 1 // a zero it_value would disarm
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	unix.TimerfdSettime(t.fd, 0, &spec, nil)
}

func (t *fdTimer) stop() {
	var spec unix.ItimerSpec
	unix.TimerfdSettime(t.fd, 0, &spec, nil)
}

func (t *fdTimer) wait() bool {
	_, err := t.f.Read(t.buf[:])
	return err == nil
}

func (t *fdTimer) close() { t.f.Close() }

// timerLatency is how late a timerfd wake-up of the engine may come, from
// expiry to the goroutine running on a loaded machine (doc/engine.md,
// Timers); pacer wake-ups are planned for it (cc.Pacer.Wake).
const timerLatency = 100 * time.Microsecond
