package aeth

import "time"

// rnrTimer is the IBTA RNR timer table (IBA 9.7.5.2.8, Table 45): the time a
// requester waits before retrying after an RNR NAK with timer code i. Code 0
// is the longest (655.36 ms). rxe's rnrnak_usec has a typo for code 25
// (61410 µs); the spec value 61.44 ms is used here (doc/rxe.md §6).
var rnrTimer = [32]time.Duration{
	655360 * time.Microsecond,
	10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond, 40 * time.Microsecond,
	60 * time.Microsecond, 80 * time.Microsecond, 120 * time.Microsecond, 160 * time.Microsecond,
	240 * time.Microsecond, 320 * time.Microsecond, 480 * time.Microsecond, 640 * time.Microsecond,
	960 * time.Microsecond, 1280 * time.Microsecond, 1920 * time.Microsecond, 2560 * time.Microsecond,
	3840 * time.Microsecond, 5120 * time.Microsecond, 7680 * time.Microsecond, 10240 * time.Microsecond,
	15360 * time.Microsecond, 20480 * time.Microsecond, 30720 * time.Microsecond, 40960 * time.Microsecond,
	61440 * time.Microsecond, 81920 * time.Microsecond, 122880 * time.Microsecond, 163840 * time.Microsecond,
	245760 * time.Microsecond, 327680 * time.Microsecond, 491520 * time.Microsecond,
}

// RNRDelay returns the RNR NAK timer value for a 5-bit timer code.
func RNRDelay(code uint8) time.Duration { return rnrTimer[code&0x1f] }
