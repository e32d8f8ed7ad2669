package perf

import (
	"fmt"
	"io"
	"strings"
)

const rule = "---------------------------------------------------------------------------------------"

// testName is perftest's banner title per operation.
func testName(op Op, lat bool) string {
	n := map[Op]string{OpWrite: "RDMA_Write", OpRead: "RDMA_Read", OpSend: "Send", OpAtomic: "Atomic FETCH_AND_ADD"}[op]
	if lat {
		return n + " Latency Test"
	}
	return n + " BW Test"
}

// WriteHeader prints perftest's banner for a test.
func WriteHeader(w io.Writer, cfg Config, gbits bool) {
	_ = cfg.defaults()
	fmt.Fprintln(w, rule)
	fmt.Fprintf(w, "%s\n", center(testName(cfg.Op, cfg.Latency), len(rule)))
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : goroce (user-space RoCEv2)\n")
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : IB\n", cfg.QPs)
	fmt.Fprintf(w, " Connection type : RC\t\tUsing SRQ      : OFF\n")
	fmt.Fprintf(w, " TX depth        : %d\n", cfg.TxDepth)
	fmt.Fprintf(w, " Mtu             : %d[B]\n", cfg.MTU.Bytes())
	fmt.Fprintf(w, " Link type       : Ethernet (RoCEv2 over UDP %d)\n", 4791)
	fmt.Fprintln(w, rule)
	if cfg.Latency {
		fmt.Fprintln(w, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
		return
	}
	unit := "MB/sec"
	if gbits {
		unit = "Gb/sec"
	}
	fmt.Fprintf(w, " #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n", unit, unit)
}

// WriteResult prints one result row in perftest's format.
func WriteResult(w io.Writer, r Result, lat, gbits bool) {
	if lat {
		fmt.Fprintf(w, " %-7d %-10d %-14.2f %-14.2f %-16.2f %-14.2f %-15.2f %-22.2f %-22.2f\n",
			r.Size, r.Iters, r.LatMinus, r.LatMaxus, r.LatP50us, r.LatP50us, 0.0, r.LatP99us, r.LatP999us)
		return
	}
	peak, avg := r.PeakGbps*1e3/8, r.Gbps*1e3/8 // MB/sec as perftest (10^6 bytes)
	if gbits {
		peak, avg = r.PeakGbps, r.Gbps
	}
	fmt.Fprintf(w, " %-10d %-14d %-18.2f %-20.2f %.6f\n", r.Size, r.Iters, peak, avg, r.Mpps)
}

// WriteFooter closes the table.
func WriteFooter(w io.Writer) { fmt.Fprintln(w, rule) }

func center(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return strings.Repeat(" ", (width-len(s))/2) + s
}
