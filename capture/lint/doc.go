// Package lint checks captured RoCEv2 traffic against the transport
// rules of the InfiniBand Architecture (IBA Vol. 1, ch. 9, and the RoCEv2
// Annex A17) as Linux rdma_rxe implements them: the analysis behind
// "goroce cap lint".
//
//	r, _ := capture.Open("x.pcap")
//	findings, flows, err := lint.Lint(r)  // or New + Checker.Check, streaming
//
// Each rule has an ID, a one-line summary and a citation (Rules). A
// finding names the rule and the offending packet's frame.number, one
// finding per offending packet and rule.
//
// A Checker reads packets once, in capture order, after package
// capture/flow has placed each into its connection (so a response can be checked
// against the requests of the other direction). Per direction it keeps a
// fixed amount of state: a ring of the last 4096 PSNs' opcodes, the
// message in progress and the READ response in progress.
//
// Captures lose packets (tcpdump drops, a capture started mid-flow), and
// Go-Back-N resends old PSNs. The rules are written so that neither is a
// finding: sequence checks look at the opcode of the PSN before this one
// and skip when it was not captured; length checks run only on messages
// seen whole and in order; a response that acknowledges a PSN not yet seen
// is held until a later request shows whether the capture missed requests.
// A check that needs the path MTU waits until a FIRST or MIDDLE packet
// reveals it.
//
// # Fabric rules
//
// Three rules are warnings (Rule.Severity): the traffic works on one link
// but not as intended on a leaf-spine fabric. They are decided from the
// capture alone:
//   - ECMP-SHARED-TUPLE: two or more RC directions from one IP to another
//     (different destination QPNs) whose every packet comes from the same
//     UDP source port, so that switches hashing the 5-tuple put them on one
//     path. rxe gives each QP its own port (rdma_get_udp_sport), and so
//     does goroce on link/udp (roce's QP.SourcePort), so their captures do
//     not trip it; a stack that sends every QP from port 4791 does as soon
//     as two of its QPs join the same two hosts.
//   - CNP-DSCP: a CNP with the DSCP of the packets it throttles (the last
//     non-CNP packet of its connection's other direction), so it queues
//     behind them.
//   - PFC-PRIORITY: when PFC frames in the capture enable some
//     priorities, 802.1Q-tagged RoCEv2 traffic (CNPs aside) on a priority
//     none of them enabled. Untagged traffic is not checked; without PFC
//     frames the rule is silent. It needs Checker.SetPauses before Finish.
package lint
