// Package testutil holds the deterministic, virtual-time test harness for
// goroce: a fake clock ([Clock]), an impaired one-way packet link ([Link]),
// a discrete-event driver for sans-IO engines ([Sim]), an integrity oracle
// for work requests and completions ([Oracle]), small byte helpers
// ([Pattern], [RequireSameBytes], [Seed]) and a strict XML parse of the
// HTML pages goroce writes ([ParseXML], [RequireXML]).
//
// It implements the harness requirements of the reliability reference
// (doc/matrix.md §1): seeded i.i.d. loss, Gilbert–Elliott and
// "rate with max burst" loss, drop lists, drop by packet class, duplication,
// reordering, delay with jitter, a bandwidth cap, blackhole schedules, byte
// corruption (anywhere, header only, ICRC only) and an attacker port.
//
// The package is internal and imported only by _test.go files. It imports no
// other goroce package: where it needs to know what a packet is (an ACK, a
// READ response, the last packet of a message) the caller passes a func.
// Packets are plain []byte holding a RoCEv2 UDP payload (BTH … ICRC).
//
// Everything runs in virtual time on the caller's goroutine: there are no
// goroutines, timers or sleeps, and every random choice comes from a PCG
// generator seeded by the caller, so a failing run is reproduced by its seed
// (see [Seed]). Unless a type says otherwise it is not safe for concurrent
// use.
//
// Two types are the exception, real-time relays for loopback socket tests
// with goroutines of their own (Close joins them): [UDPProxy], an
// impairing NAT between two endpoints, and [MarkSwitch] (Linux), a switch
// egress of fixed capacity that CE-marks by queue length for the DCQCN
// tests (doc/dcqcn.md §1.1).
package testutil
