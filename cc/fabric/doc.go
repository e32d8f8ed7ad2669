// Package fabric is a discrete-event simulator of a RoCEv2 fabric under
// DCQCN, driving the same [cc.DCQCN], [cc.NP] and [cc.RED] code a device
// uses, in virtual time (doc/dcqcn.md §5, §6).
//
// The topology is the one every scenario of doc/dcqcn.md §5.3 needs: N sender
// hosts, each with one flow (one QP) and a NIC at the reaction point's line
// rate, linked to one switch whose egress port toward a single receiver is
// the bottleneck. Each link has its own propagation delay.
//
//   - Senders are always backlogged and paced at the flow's cc rate RC by a
//     token bucket a few MTUs deep (doc/dcqcn.md §7.4), and never faster than
//     the NIC line rate.
//   - The switch egress is a FIFO in a shared buffer with tail drop. RED/ECN
//     marking (§1.1) is decided when a packet starts transmission, on the
//     queue it leaves behind, as in both ns-3 reference models. Optional
//     PFC pauses an ingress port whose buffered bytes exceed XOff and
//     resumes it below XOn.
//   - The receiver runs one [cc.NP] per flow; a CNP reaches the sender
//     after the reverse propagation delay plus a configurable NP delay,
//     without queueing (CNPs travel at high priority on an idle path).
//   - Packets are not retransmitted: a drop is counted and lost, since
//     only rates and queues matter here.
//
// Time is kept in integer picoseconds, so serialisation times at 25, 40
// and 100 Gb/s are exact; the controllers see it as a time.Time with
// nanosecond resolution. Events at the same instant run in the order they
// were scheduled, and all randomness (RED draws, start jitter) comes from
// one PCG seeded from [Config.Seed], so a run is a pure function of its
// Config.
//
// [Run] returns raw measurements ([Result]); [Scenario] wraps the §5.3
// scenarios S1–S6 with their figures and pass thresholds, and [WriteHTML]
// draws per-flow rates and the queue as a self-contained HTML page.
package fabric
