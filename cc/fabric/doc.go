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
//
// # ECMP on a leaf-spine fabric
//
// [ECMPSim] runs a ring all-reduce over a two-tier leaf-spine fabric
// (issue 14, "Simulate what the fabric cannot show"): by default 2 leaves ×
// 8 hosts and 8 spines, every leaf linked to every spine. Ring member i
// sends to i+1; each of the 2(N−1) steps moves Data/N from every host to
// its neighbour, split evenly over the pair's QPs, and ends when the last
// flow of the step finishes. A pair under one leaf stays under it; a
// pair across leaves leaves its source leaf on the spine that leaf's hash
// picks, xxhash64 of the 5-tuple (source and destination IP, UDP, source
// and destination port) with a per-leaf seed, modulo the spines
// ([FiveTuple.Hash]). The spine has one link down to the destination leaf.
// A QP's source port follows the device's rules ([PortMode]): 4791 for
// every QP (goroce before issue 14), the kernel rule on random 24-bit QPNs
// (rocev2.ConnSourcePort, as rdma_rxe, mlx5 and goroce send), or an
// explicit port set. The seed draws the leaves' hash seeds and the QPNs.
//
// Timing is a flow-level (fluid) model, not the packet simulator: every
// step has the same flows, so one step is timed and multiplied by 2(N−1),
// with max-min fair rates recomputed at each flow's completion. Packet
// level would cost several million events per collective and seed for the
// default 32 MiB, and shrinking the chunks until a sweep of 9
// configurations × 20 seeds runs in seconds would leave steps shorter than
// DCQCN's 50 µs CNP interval, so DCQCN would never act. DCQCN stays
// packet-level where it matters, on the links ECMP overloads: a spine link
// offered more than its rate at the start of a step (each flow asking its
// hosts' fair share) is a queue under DCQCN, so the fluid model scales its
// rate by the utilisation [Run] measures for the same collision — k
// always-backlogged QPs, each at its NIC share, into one egress of the
// link's rate, with RED/ECN marking, CNPs and the profile's reaction
// point, for the collective's ideal duration ([Calibration]). A link that
// is not overloaded keeps its rate: it builds no queue and marks nothing.
// The utilisation includes DCQCN's onset (flows start at line rate, the
// queue overshoots, repeated cuts leave the link idle while the rates
// recover) and its cost in the steady state; the runs are cached per
// collision, so a sweep makes a handful. ECMPConfig.NoDCQCN gives pure
// max-min sharing.
//
// The ideal is the same collective with every cross-leaf pair's chunk
// spread evenly over all spines (a perfect spray), timed the same way.
//
// Rates. With hosts 0–7 under leaf 0 (PlaceBlock, the ring) only
// two pairs cross, 7→8 and 15→0, and they use opposite directions of
// the spine links, so each direction of a spine link carries the QPs of
// one pair. With leaf–spine links as fast as the hosts, even one spine
// carries a pair at its NIC's rate and no source-port rule can matter.
// The default leaf–spine rate is therefore 50 Gb/s (2:1 oversubscription
// at 8 × 100 Gb/s hosts over 8 × 50 Gb/s uplinks): a pair on one spine
// runs at half rate, the fixed port's collapse, while 8 QPs hashed over
// 8 spines need at most 4 on one link to run at full rate. PlaceInterleaved
// puts every pair across the leaves at 1:1, where any collision slows the
// step; there 8 QPs per pair are not enough for 1.25 × ideal (see the
// figures of goroce sim ecmp --placement interleaved --spine-gbps 100).
package fabric
