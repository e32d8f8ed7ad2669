// Package fabric builds a real leaf-spine IP fabric out of Linux network
// namespaces, for goroce's users (goroce fabric up|down|status|stats|exec)
// and its tests alike (doc/fabric.md).
//
// A fabric has Leaves leaf routers, each with HostsPerLeaf hosts, and
// Spines spine routers; every leaf is linked to every spine by a veth
// pair. Each leaf routes to the other leaves' hosts over an equal-cost
// multipath route with one next hop per spine and hashes the 5-tuple
// (net.ipv4.fib_multipath_hash_policy=1), as switches hash RoCEv2: a
// flow's UDP source port picks its spine. Each leaf–spine link can be
// rate-limited in both directions by a tbf (Rate), so uplinks can be
// oversubscribed, and so can host links (HostRate). Every rate-limited
// switch egress carries an ECN marker: a tc BPF program assembled in Go
// (package internal/ebpf) that keeps a phantom queue drained at γ·rate and
// marks ECN-capable packets CE above a threshold (HULL's phantom queue;
// the kernel here has no RED qdisc).
//
// Plan lays a fabric out (names, the address plan, links); Up builds it
// and records its state under StateDir, so that Load finds it by name from
// another process (goroce coll --fabric NAME); Down removes it, also what
// a crashed Up left, since every namespace is named "gfab-NAME-ROLE".
// Stats reads per link and per spine counters (interface bytes and
// packets, tbf drops, CE marks), and Record takes them at a steady
// interval; InNetns and Command run code and commands inside a host;
// Place puts a job's ranks on hosts (block, interleaved, random);
// SampleFlows watches, one packet in N, which spine each flow takes, and
// Capture and Conns record whole connections.
//
// Nothing leaves the namespaces a fabric makes, except through an
// optional Attach to a namespace the caller owns.
package fabric
