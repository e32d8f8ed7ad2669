// Package capreport renders the flow analysis (package capture/flow) and
// the linter's findings (package capture/lint) of a RoCEv2 capture as one
// self-contained HTML page: "goroce cap report". It is the command's
// renderer, not a library: the analyses it renders are public.
//
// Per connection the page shows a PSN-over-time sequence graph per
// requester in the style of Wireshark's tcptrace graph (requests as bars
// over the PSNs they take, the other side's cumulative ACK line, READ
// responses, NAKs, RNR NAKs, retransmissions, CE marks, CNPs and the
// linter's findings, each linking to its row), wire throughput and goodput
// over time, the opcode mix, the READ and ATOMIC latency distribution, the
// Go-Back-N episodes and NAKs, and the findings.
//
// The page has inline CSS and inline SVG only: no script, no font, image
// or style sheet from elsewhere, so it opens offline and from a mail
// attachment. It is also well-formed XML (void elements self-closed, only
// the predefined entities), which the tests check with encoding/xml.
//
// Memory stays bounded on large captures: the sequence graphs draw from
// capture/flow's decimated samples, at most a few thousand marks per series,
// and at most MaxFindings findings are listed (counts stay exact).
package capreport
