// Package cc holds goroce's congestion control: the [Controller] interface
// a QP's sender paces by, and DCQCN (Zhu et al., "Congestion Control for
// Large-Scale RDMA Deployments", SIGCOMM 2015) in its three roles:
//
//   - [DCQCN], the reaction point (RP) in the sender NIC: per-QP rate RC,
//     target rate RT and α, cut on each CNP (paper eq. 1), α decay (eq. 2),
//     fast recovery, additive and hyper increase driven by the timer T and
//     the byte counter B (doc/dcqcn.md §1.3);
//   - [NP], the notification point in the receiver NIC: at most one CNP per
//     N per QP, only for CE-marked data packets (doc/dcqcn.md §1.2, §7.3);
//   - [RED], the congestion point's marking curve in a switch egress queue
//     (doc/dcqcn.md §1.1), used by the fabric simulator in cc/fabric.
//
// A [Pacer] holds a sender to the rate its controller chose: a token bucket
// computed from the clock at send time (doc/dcqcn.md §7.4), which package
// roce runs for every paced QP.
//
// Two parameter profiles are built in (doc/dcqcn.md §5.1): [ProfileP], the
// paper's parameters, and [ProfileM], a ConnectX-like model with the
// firmware's fixed-point α, the 4 µs decrease monitor period and the
// clamp-after-timer-increase rule (doc/dcqcn.md §2, §3.1).
//
// Everything here is sans-IO, as in quic-go's congestion package: the
// caller passes the current time into every method and arms one timer at
// [Controller.Deadline]. Nothing sleeps, reads a clock or starts a
// goroutine, so the same code runs in the device and, in virtual time, in
// the simulator. A controller is owned by the goroutine that owns its QP;
// none of the types is safe for concurrent use.
//
// Rates are [Bitrate] values in bits per second on the wire.
//
// The package imports no other goroce package.
package cc
