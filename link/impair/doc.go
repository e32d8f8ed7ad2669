// Package impair wraps a link.Link with seeded, real-time impairments —
// loss (independent, Gilbert–Elliott, bursts), duplication, reordering and
// corruption — applied independently to what it sends and to what it
// receives, with counters. It is what `goroce perf --impair` and `goroce
// pingpong --impair` put under their device, so that a peer (rdma_rxe, a
// NIC) can be tested against a lossy path on machines without netem.
//
// A dropped sent packet is lost on the way to the peer; a dropped received
// packet is the peer's packet lost on the way here. Reordering holds a
// packet back until a few later packets have passed, or a short time
// (Config.HoldMax) has; corruption flips one bit after the sender sealed
// the ICRC, so the receiver's ICRC check drops the packet.
//
// The package is the real-time sibling of internal/testutil's virtual-time
// impaired link, which tests use; the decisions are the same kind
// (independent knobs, each consulted for every packet) but the two keep
// their own code: this one runs against the wall clock and a real socket.
package impair
