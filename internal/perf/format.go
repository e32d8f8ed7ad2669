package perf

import (
	"fmt"
	"io"
	"strings"

	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/rocev2"
)

const rule = "---------------------------------------------------------------------------------------"

// Row formats of perftest 4.5 (REPORT_FMT, REPORT_FMT_LAT), so that
// scripts that parse perftest's output parse goroce's.
const (
	bwRowFmt  = " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n"
	bwRowFmtG = " %-7d    %d           %-7.6f            %-7.6f            %-7.6f\n" // REPORT_FMT_EXT (--report_gbits)
	latRowFmt = " %-7d %-10d %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n"
	bwHeadFmt = " #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n"
	// cpuHead and cpuCol end a bandwidth row's header and row with
	// perftest's --cpu_util column (RESULT_EXT_CPU_UTIL, REPORT_EXT_CPU_UTIL).
	cpuHead = "    CPU_Util[%]\n"
	cpuCol  = "\t    %-3.2f\n"
	latHead = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
)

// testName is perftest's banner title.
func testName(op Op, lat bool, atomic perftest.AtomicType) string {
	n := map[Op]string{OpWrite: "RDMA_Write", OpRead: "RDMA_Read", OpSend: "Send", OpAtomic: "Atomic " + atomic.String()}[op]
	if lat {
		return n + " Latency Test"
	}
	return n + " BW Test"
}

// banner holds what perftest's test-information block shows.
type banner struct {
	title    string
	qps      int
	txDepth  int
	mtu      int
	gidIndex int
	outReads int
	remote   bool
	rdmaCM   bool // perftest's -R: "rdma_cm QPs : ON", "Data ex. method : rdma_cm"
}

func writeBanner(w io.Writer, b banner) {
	fmt.Fprintln(w, rule)
	fmt.Fprintf(w, "                    %s\n", b.title) // perftest's fixed indent
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : goroce\n")
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : IB\n", b.qps)
	fmt.Fprintf(w, " Connection type : RC\t\tUsing SRQ      : OFF\n")
	if b.txDepth > 0 {
		fmt.Fprintf(w, " TX depth        : %d\n", b.txDepth)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", b.mtu)
	fmt.Fprintf(w, " Link type       : Ethernet\n")
	if b.remote {
		fmt.Fprintf(w, " GID index       : %d\n", b.gidIndex)
		if b.outReads > 0 {
			fmt.Fprintf(w, " Outstand reads  : %d\n", b.outReads)
		}
		if b.rdmaCM {
			fmt.Fprintf(w, " rdma_cm QPs\t : ON\n")
			fmt.Fprintf(w, " Data ex. method : rdma_cm\n")
		} else {
			fmt.Fprintf(w, " rdma_cm QPs\t : OFF\n")
			fmt.Fprintf(w, " Data ex. method : Ethernet\n")
		}
	} else {
		fmt.Fprintf(w, " Data ex. method : in-process loopback (RoCEv2 over UDP %d)\n", rocev2.UDPPort)
	}
	fmt.Fprintln(w, rule)
}

// writeColumns prints the result table's column header.
func writeColumns(w io.Writer, lat, gbits bool) {
	if lat {
		fmt.Fprint(w, latHead)
		return
	}
	unit := "MB/sec"
	if gbits {
		unit = "Gb/sec"
	}
	fmt.Fprintf(w, bwHeadFmt, unit, unit)
}

// writeAddress prints one "local address" / "remote address" block as
// perftest's ctx_print_pingpong_data does.
func writeAddress(w io.Writer, side string, d perftest.Dest, send, reads bool) {
	fmt.Fprintf(w, " %s address: LID %04x QPN %#06x PSN %#06x", side, d.LID, d.QPN, d.PSN)
	if reads {
		fmt.Fprintf(w, " OUT %#04x", d.OutReads)
	}
	if !send {
		fmt.Fprintf(w, " RKey %#08x VAddr %#016x", d.RKey, d.VAddr)
	}
	fmt.Fprint(w, "\n GID: ")
	for i, g := range d.GID {
		if i > 0 {
			fmt.Fprint(w, ":")
		}
		fmt.Fprintf(w, "%02d", g)
	}
	fmt.Fprintln(w)
}

// WriteHeader prints perftest's banner for a loopback test.
func WriteHeader(w io.Writer, cfg Config, gbits bool) {
	_ = cfg.defaults()
	writeBanner(w, banner{title: testName(cfg.Op, cfg.Latency, perftest.FetchAndAdd), qps: cfg.QPs,
		txDepth: cfg.TxDepth, mtu: cfg.MTU.Bytes()})
	writeColumns(w, cfg.Latency, gbits)
}

// WriteResult prints one result row in perftest's format: bandwidth in
// MB/sec (2^20 bytes per second, as perftest) or Gb/sec (10^9 bit/s).
func WriteResult(w io.Writer, r Result, lat, gbits bool) {
	if lat {
		fmt.Fprintf(w, latRowFmt, r.Size, r.Iters, r.LatMinus, r.LatMaxus, r.LatP50us, r.LatAvgus,
			r.LatStdevus, r.LatP99us, r.LatP999us)
		return
	}
	if gbits {
		fmt.Fprintf(w, bwRowFmtG, r.Size, r.Iters, r.PeakGbps, r.Gbps, r.Mpps)
		return
	}
	fmt.Fprintf(w, bwRowFmt, r.Size, r.Iters, r.PeakGbps*1e9/8/(1<<20), r.Gbps*1e9/8/(1<<20), r.Mpps)
}

// WriteHeaderCPUUtil prints perftest's banner for a loopback bandwidth
// test with --cpu_util: the columns end with CPU_Util[%].
func WriteHeaderCPUUtil(w io.Writer, cfg Config, gbits bool) {
	_ = cfg.defaults()
	writeBanner(w, banner{title: testName(cfg.Op, cfg.Latency, perftest.FetchAndAdd), qps: cfg.QPs,
		txDepth: cfg.TxDepth, mtu: cfg.MTU.Bytes()})
	writeColumnsCPUUtil(w, gbits)
}

// writeColumnsCPUUtil prints a bandwidth table's column header with
// perftest's CPU_Util[%] column at the end.
func writeColumnsCPUUtil(w io.Writer, gbits bool) {
	var b strings.Builder
	writeColumns(&b, false, gbits)
	fmt.Fprint(w, strings.TrimSuffix(b.String(), "\n")+cpuHead)
}

// WriteResultCPUUtil prints a bandwidth row as WriteResult does, with
// perftest's CPU_Util[%] column: the CPU time this process used over the
// measured window as a percentage of cpus CPUs (CPUUse.Util).
func WriteResultCPUUtil(w io.Writer, r Result, gbits bool, cpus int) {
	var b strings.Builder
	WriteResult(&b, r, false, gbits)
	fmt.Fprint(w, strings.TrimSuffix(b.String(), "\n"))
	fmt.Fprintf(w, cpuCol, r.CPUUse().Util(cpus))
}

// WriteFooter closes the table.
func WriteFooter(w io.Writer) { fmt.Fprintln(w, rule) }
