// Package fabric builds a real leaf-spine IP fabric out of network
// namespaces for the multipath tests of issue 14: hosts behind leaf A,
// Spines routers, leaf B and its hosts, joined by veth pairs. Both leaves
// route to the far side over an equal-cost multipath route (one next hop
// per spine) with net.ipv4.fib_multipath_hash_policy=1, the L4 hash of
// the 5-tuple that switches use for RoCEv2, so the UDP source port of a
// flow picks its spine. SpineCounters snapshots the packets each spine
// link carried; Capture records the RoCEv2 headers on one interface and
// Conns pairs them into connections (QPNs and the source port each side
// used).
//
// Nothing leaves the namespaces the package creates, except through an
// optional Attach to a namespace the caller owns (the rxe harness's
// roce0). Everything is deleted at t.Cleanup, whatever the outcome;
// names carry the creating process's pid, and Build first deletes the
// leftovers of processes that no longer run. It is imported by _test.go
// files only.
package fabric
