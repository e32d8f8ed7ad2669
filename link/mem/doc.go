// Package mem is an in-memory link.Link network for tests: links attached
// to one Network exchange datagrams through bounded per-link queues,
// deterministically (first in, first out; a full queue drops and counts),
// with ECN and the IPv4 ID passed through (the ID reported as known, as a
// raw binding reports it).
//
// Make a Network with NewNetwork (or New with a Config for the queue length
// and MTU), Attach a link per address, and give each to a device as
// roce.Config.Link: the devices then talk without sockets, as the roce
// package's Example does.
package mem
