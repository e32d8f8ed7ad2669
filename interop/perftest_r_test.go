//go:build rxe && linux

package interop

import (
	"testing"
)

// perftestRTools are the -R cells' tools: ib_write_bw, ib_read_bw,
// ib_send_bw, ib_write_lat, ib_read_lat and ib_send_lat with perftest's
// rdma_cm mode on both sides (doc/oob.md §3.6), the sizes and options of
// the TCP matrix. goroce's server binds the
// host's bridge address explicitly (--source_ip).
func perftestRTools(mtu int) []tool {
	var out []tool
	all := tools(mtu)
	for _, tl := range append(all[:3:3], all[5:8]...) {
		tl.name = "perftest-R " + tl.name
		tl.guest = append(append([]string(nil), tl.guest...), "-R")
		tl.goroce = append(append([]string(nil), tl.goroce...), "-R", "--source_ip", hostIP)
		tl.rdmaCM = true
		out = append(out, tl)
	}
	return out
}

// runPerftestR runs the -R cells of one MTU: each tool with goroce as
// server (the guest's ib_*_bw -R connects through the CM) and as client
// (goroce perf -R dials the guest's server), with the matrix's checks:
// the MTU goroce ran at, its ICRC counter, the figure, and the wire
// hygiene of the capture (every goroce packet, CM MADs included, decoded
// by tshark, ICRC checked, goroce cap = tshark). -cells perftest-R selects
// them.
func runPerftestR(t *testing.T, mtu int) { runTools(t, mtu, perftestRTools(mtu)) }
