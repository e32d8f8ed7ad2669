// Package cmhostile is the table of hostile connection-manager scenarios
// of doc/cm.md §2 (issue 27): a peer that sends the CM MADs a well-behaved
// rdma_cm would not — a REQ of the wrong transport type or with a
// malformed IP-CM header, duplicate and stale REQs and REPs, messages for
// comm IDs nobody knows, MRAs, lost RTUs — and checks that the target
// answers each as the kernel's CM and rdma_cm do (drivers/infiniband/core
// cm.c and cma.c, read for behaviour; the guests of the interop suite
// prove the answers).
//
// The same scenarios run against a goroce device (roce's table test, over
// link/mem) and against the kernel of an rxe guest (the interop suite's
// cm-hostile cells), through a [Peer] that moves raw MADs to and from the
// target's QP1: [LinkPeer] builds the RoCEv2 packets itself on a link of
// its own, so what the target receives is exactly what the scenario wrote.
//
// The package is internal and imported only by _test.go files.
package cmhostile
