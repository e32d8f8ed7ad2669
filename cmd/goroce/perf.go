package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/roce/metrics"
)

var perfCommand = command{
	name:    "perf",
	summary: "RDMA bandwidth/latency benchmark in the style of perftest (ib_write_bw …), loopback or against perftest",
	run:     runPerf,
}

// perfFlags are perftest's flags that matter, with its spellings.
type perfFlags struct {
	cpuProfile string // --cpuprofile
	trace      string // --trace
	useEvent   bool   // -e, --use_event
	rtc        bool   // --rtc
	poll       bool   // --poll
	shards     int    // --shards
	size       int
	iters      int
	duration   float64
	all        bool
	qps        int
	mtu        int
	txDepth    int
	postList   int
	rxDepth    int
	gbits      bool
	lat        bool
	jsonOut    bool
	baseline   bool
	segs       segmentFlags
	addrA      string
	addrB      string
	server     bool
	port       int
	gid        int
	atomic     string
	timeout    time.Duration
	ignored    bool
	stats      bool
	metrics    string
	linkKind   string
	dev        string
	qpTO       uint
	tclass     uint
	pcap       perfPcap
	exporter   *metrics.Exporter // --metrics
	impair     string
	rdmaCM     bool   // -R
	sourceIP   string // --source_ip
	rocePort   int    // --roce-port
	cpuUtil    bool   // --cpu_util
}

// waitMode is the perf.WaitMode of -e, --poll and --rtc: auto when none
// is given.
func waitMode(event, poll, rtc bool) perf.WaitMode {
	switch {
	case event:
		return perf.WaitEvent
	case poll:
		return perf.WaitPoll
	case rtc:
		return perf.WaitInline
	}
	return perf.WaitAuto
}

// perfListening, if set, is called when a -R server listens (tests start
// their client then).
var perfListening func()

// parseInterleaved parses flags that may come before and after positional
// arguments ("goroce perf write 10.77.0.2 -s 8", as perftest allows) and
// returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// perfTool maps the operation argument ("write", "read_lat",
// "ib_atomic_bw", …) to perftest's tool and the loopback operation.
func perfTool(arg string, lat bool) (perftest.Tool, error) {
	n := strings.TrimPrefix(arg, "ib_")
	if !strings.HasSuffix(n, "_bw") && !strings.HasSuffix(n, "_lat") {
		if lat {
			n += "_lat"
		} else {
			n += "_bw"
		}
	}
	return perftest.ParseTool(n)
}

func runPerf(args []string, stdout, stderr io.Writer) int {
	opArg := "write"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		opArg = args[0]
		args = args[1:]
	}
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f perfFlags
	fs.IntVar(&f.size, "s", 0, "message size in bytes (default 65536; latency tests 2)")
	fs.IntVar(&f.size, "size", 0, "same as -s")
	fs.IntVar(&f.iters, "n", 0, "iterations (default 5000; latency tests 1000)")
	fs.IntVar(&f.iters, "iters", 0, "same as -n")
	fs.Float64Var(&f.duration, "D", 0, "run for this many seconds instead of -n iterations (bw tests)")
	fs.BoolVar(&f.all, "a", false, "run all sizes from 2 to 2^23 bytes")
	fs.IntVar(&f.qps, "q", 1, "number of QPs (bw tests)")
	fs.IntVar(&f.mtu, "m", 0, "path MTU: 256, 512, 1024, 2048 or 4096 (loopback default 4096; against a peer: the interface's active MTU, negotiated down to the peer's)")
	fs.IntVar(&f.txDepth, "t", 0, "outstanding WRs per QP (default 128; loopback read/atomic 16)")
	fs.IntVar(&f.postList, "l", 1, "post lists of this many WRs in one call (perftest's --post_list; bw tests)")
	fs.IntVar(&f.postList, "post_list", 1, "same as -l")
	fs.IntVar(&f.rxDepth, "r", 0, "receive queue depth of the send tests against a peer (default 512)")
	fs.BoolVar(&f.gbits, "report_gbits", false, "report bandwidth in Gb/sec instead of MB/sec")
	fs.BoolVar(&f.gbits, "report-gbits", false, "same as --report_gbits")
	fs.BoolVar(&f.lat, "lat", false, "latency test (ib_*_lat)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object per result instead of the table")
	fs.BoolVar(&f.baseline, "baseline", false, "loopback: also measure the raw UDP ceiling of this machine in the same run, interleaved with goroce (--segments)")
	f.segs.flags(fs)
	fs.StringVar(&f.addrA, "local", "127.0.0.1:4791", "first in-process device address (loopback mode)")
	fs.StringVar(&f.addrB, "remote", "127.0.0.2:4791", "second in-process device address (loopback mode)")
	fs.BoolVar(&f.server, "server", false, "wait for a perftest client (ib_*_bw/lat … <this host>) on -p")
	fs.IntVar(&f.port, "p", perftest.Port, "TCP port of perftest's exchange (with -R: the rdma_cm port)")
	fs.IntVar(&f.gid, "x", -1, "GID index: goroce's only GID, ::ffff:<IPv4>, is index 1 (as on rxe)")
	fs.StringVar(&f.atomic, "A", "FETCH_AND_ADD", "atomic operation: FETCH_AND_ADD or CMP_AND_SWAP")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "against a peer: limit for each exchange step, for connecting and for any stretch without progress")
	fs.UintVar(&f.tclass, "tclass", 0, "traffic class: the IPv4 TOS / IPv6 traffic class byte (DSCP << 2 | ECN) of every QP's packets, as perftest's --tclass (e.g. 106: DSCP 26, ECT(0))")
	fs.UintVar(&f.qpTO, "u", 14, "QP timeout: the ACK timeout is 4.096 usec * 2^u, with 7 retries (as perftest's -u)")
	fs.BoolVar(&f.stats, "stats", false, "print the devices' counters to stderr at the end, as `rdma statistic show` lines (rxe's names, to diff against rxe); against a peer first a one-line summary (ICRC, drops, retransmissions)")
	fs.StringVar(&f.metrics, "metrics", "", "serve the devices' and QPs' counters in the Prometheus text format at http://ADDR/metrics during the run (e.g. 127.0.0.1:9100)")
	fs.StringVar(&f.linkKind, "link", "udp", "binding: udp, afpacket or afxdp (the raw ones need --dev and root)")
	fs.StringVar(&f.dev, "dev", "", "network interface of --link afpacket|afxdp (loopback mode: IFACE_A,IFACE_B, e.g. the two ends of a veth pair)")
	f.pcap.flags(fs)
	fs.StringVar(&f.impair, "impair", "", "impair the device's link both ways, e.g. loss=1%,dup=0.5%,reorder=1%,corrupt=0.1%,seed=N ("+impair.SpecSyntax+"); the end of the run reports what the peer did about it (stderr, and in --json); loopback: the first device's link, and the data are verified")
	fs.BoolVar(&f.rdmaCM, "R", false, "against a peer: perftest's -R: connect the QPs with rdma_cm and exchange over an rdma_cm connection instead of TCP (port -p, rdma_cm's TCP port space)")
	fs.BoolVar(&f.rdmaCM, "rdma_cm", false, "same as -R")
	fs.StringVar(&f.sourceIP, "source_ip", "", "against a peer: the local IPv4 address; a -R server binds it (default: the host's only one), a -R client sends from it (default: the route's)")
	fs.IntVar(&f.rocePort, "roce-port", 0, "against a peer: UDP port of both devices (default 4791; two goroce processes on one host need another)")
	fs.BoolVar(&f.cpuUtil, "cpu_util", false, "bw tests with -D (loopback, or the client against a peer): show CPU utilisation, as perftest's --cpu_util: the CPU time of this process (loopback: both devices) over the measured window, in % of all CPUs (runtime.NumCPU); in --json \"cpu_util\" and \"cpu_seconds\" (loopback) or \"cpu_seconds\" (peer)")
	fs.BoolVar(&f.cpuUtil, "cpu-util", false, "same as --cpu_util")
	fs.BoolVar(&f.ignored, "F", false, "accepted for perftest compatibility (no CPU frequency check here)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to FILE (go tool pprof FILE)")
	fs.BoolVar(&f.useEvent, "e", false, "sleep on the CQ until a completion arrives instead of busy-polling it (perftest's --use_event); against a peer, the default on machines with fewer than "+strconv.Itoa(perf.PollCPUs)+" CPUs; loopback send tests: the receiver reposts its receives on its device's receive goroutine whatever the mode")
	fs.BoolVar(&f.useEvent, "use_event", false, "same as -e")
	fs.BoolVar(&f.useEvent, "use-event", false, "same as -e")
	fs.BoolVar(&f.rtc, "rtc", false, "run to completion (loopback tests, and ib_write_lat against a peer): the requester runs on its device's receive goroutine (roce.Device.OnBatch), polling the CQ (and write_lat's buffer) and posting the next requests where the packets were processed, with no goroutine woken in between, and the requests posted there leaving when it returns; their default on machines with fewer than "+strconv.Itoa(perf.PollCPUs)+" CPUs, for latency, bandwidth and message-rate tests alike (doc/latency.md §8)")
	fs.BoolVar(&f.poll, "poll", false, "busy-poll the CQs (and, in write_lat, the buffer) as perftest does, keeping a core busy while a request is outstanding; the default on machines with "+strconv.Itoa(perf.PollCPUs)+" CPUs or more")
	fs.StringVar(&f.trace, "trace", "", "write a Go execution trace of the run to FILE (go tool trace FILE): goroutine hand-offs and wake-up latencies")
	fs.IntVar(&f.shards, "shards", 0, "loopback: engines per device (roce.Config.Shards; 0: GOMAXPROCS, at most 8)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: goroce perf [write|read|send|atomic|ib_write_bw|ib_read_lat|…] [flags] [--server | SERVER]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "With neither --server nor SERVER it runs an in-process loopback test between two devices")
		fmt.Fprintln(stderr, "on 127.0.0.1 and 127.0.0.2 (UDP 4791). With --server it waits for a perftest 4.5 client")
		fmt.Fprintln(stderr, "(e.g. ib_write_bw -d rxe0 -x 1 -F <this host>); with SERVER it is the client of a perftest")
		fmt.Fprintln(stderr, "server there. Both sides must run the same test with the same -s, -n, -a, -q. With -R")
		fmt.Fprintln(stderr, "(perftest's --rdma_cm) there is no TCP: both sides connect through the RDMA CM, as the")
		fmt.Fprintln(stderr, "peer's ib_write_bw -R does.")
		printFlags(stderr, fs, perfFlagGroups)
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "goroce perf: unexpected arguments %q\n", pos[1:])
		return 2
	}
	if f.tclass > 255 {
		fmt.Fprintf(stderr, "goroce perf: --tclass %d: the traffic class is one byte (0 to 255)\n", f.tclass)
		return 2
	}
	if f.cpuUtil && (f.lat || f.duration <= 0) {
		// perftest: "CPU Utilization works only with Duration mode".
		fmt.Fprintln(stderr, "goroce perf: --cpu_util works only in bw tests in duration mode (-D)")
		return 2
	}
	if (f.useEvent && f.poll) || (f.rtc && (f.useEvent || f.poll)) {
		fmt.Fprintln(stderr, "goroce perf: -e (--use_event), --poll and --rtc exclude each other")
		return 2
	}
	tool, err := perfTool(opArg, f.lat)
	if err != nil {
		fmt.Fprintf(stderr, "goroce perf: %v\n", err)
		return 2
	}
	if f.segs.floor && (!f.baseline || tool.Lat) {
		fmt.Fprintln(stderr, "goroce perf: --floor works only with --baseline in bw tests")
		return 2
	}
	var imp *impair.Config
	if f.impair != "" {
		c, err := impair.Parse(f.impair)
		if err != nil {
			fmt.Fprintf(stderr, "goroce perf: --impair: %v\n", err)
			return 2
		}
		imp = &c
	}
	var mtu qp.MTU
	if f.mtu != 0 {
		var ok bool
		if mtu, ok = qp.MTUFromBytes(f.mtu); !ok {
			fmt.Fprintf(stderr, "goroce perf: invalid MTU %d (256, 512, 1024, 2048 or 4096)\n", f.mtu)
			return 2
		}
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "goroce perf: --cpuprofile: %v\n", err)
			return 2
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintf(stderr, "goroce perf: --cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if f.trace != "" {
		tf, err := os.Create(f.trace)
		if err != nil {
			fmt.Fprintf(stderr, "goroce perf: --trace: %v\n", err)
			return 2
		}
		defer tf.Close()
		if err := trace.Start(tf); err != nil {
			fmt.Fprintf(stderr, "goroce perf: --trace: %v\n", err)
			return 2
		}
		defer trace.Stop()
	}
	if f.metrics != "" {
		f.exporter = metrics.NewExporter()
		stopMetrics, err := serveMetrics(f.metrics, f.exporter, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "goroce perf: %v\n", err)
			return 2
		}
		defer stopMetrics()
	}
	if f.server || len(pos) == 1 {
		if f.server && len(pos) == 1 {
			fmt.Fprintln(stderr, "goroce perf: --server and a server address exclude each other")
			return 2
		}
		return interruptible(stderr, func(ctx context.Context) int {
			return runPerfRemote(ctx, tool, mtu, pos, &f, imp, stdout, stderr)
		})
	}
	if f.rdmaCM {
		fmt.Fprintln(stderr, "goroce perf: -R runs against a peer: add --server or the server's address")
		return 2
	}
	return interruptible(stderr, func(ctx context.Context) int {
		return runPerfLoopback(ctx, tool, mtu, &f, imp, stdout, stderr)
	})
}

// runPerfRemote runs a test against a perftest peer.
func runPerfRemote(ctx context.Context, tool perftest.Tool, mtu qp.MTU, pos []string, f *perfFlags, imp *impair.Config, stdout, stderr io.Writer) int {
	if f.pcap.path != "" {
		fmt.Fprintln(stderr, "goroce perf: --pcap captures loopback runs only")
		return 2
	}
	at, err := perftest.ParseAtomicType(f.atomic)
	if err != nil {
		fmt.Fprintf(stderr, "goroce perf: %v\n", err)
		return 2
	}
	if err := perf.CheckGIDIndex(f.gid, "-x"); err != nil {
		fmt.Fprintf(stderr, "goroce perf: %v\n", err)
		return 2
	}
	cfg := perf.RemoteConfig{
		Tool: tool, Atomic: at, Server: f.server, Port: f.port,
		Size: f.size, Iters: f.iters, Duration: time.Duration(f.duration * float64(time.Second)), All: f.all,
		QPs: f.qps, MTU: mtu, TxDepth: f.txDepth, RxDepth: f.rxDepth, PostList: f.postList, Gbits: f.gbits, CPUUtil: f.cpuUtil,
		Timeout: f.timeout, Out: stdout, QPTimeout: uint8(min(f.qpTO, 255)), TrafficClass: uint8(f.tclass),
		Impair: imp, ImpairOut: stderr, Wait: waitMode(f.useEvent, f.poll, f.rtc),
		RDMACM: f.rdmaCM, RoCEPort: uint16(f.rocePort), Listening: perfListening,
	}
	if f.rocePort < 0 || f.rocePort > 65535 {
		fmt.Fprintf(stderr, "goroce perf: --roce-port %d out of range\n", f.rocePort)
		return 2
	}
	if f.server {
		cfg.Listen = f.sourceIP
	} else {
		cfg.Source = f.sourceIP
	}
	if f.linkKind != "" && f.linkKind != "udp" {
		open, err := linkOpener(f.linkKind, f.dev)
		if err != nil {
			fmt.Fprintf(stderr, "goroce perf: %v\n", err)
			return 2
		}
		cfg.OpenLink = open
	}
	if len(pos) == 1 {
		cfg.Peer = pos[0]
	}
	if f.stats {
		cfg.Stats = stderr
	}
	cfg.Metrics = f.exporter
	if f.jsonOut {
		cfg.Out = io.Discard
	}
	rows, err := perf.RunRemote(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "goroce perf: %v\n", err)
		return 1
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return 1
			}
		}
	}
	return 0
}

// runPerfLoopback runs the in-process test between two devices.
func runPerfLoopback(ctx context.Context, tool perftest.Tool, mtu qp.MTU, f *perfFlags, imp *impair.Config, stdout, stderr io.Writer) (rc int) {
	if tool.Verb == perftest.Atomic && f.atomic != "FETCH_AND_ADD" {
		fmt.Fprintln(stderr, "goroce perf: loopback mode runs FETCH_AND_ADD only")
		return 2
	}
	a, err := netip.ParseAddrPort(f.addrA)
	if err != nil {
		fmt.Fprintf(stderr, "goroce perf: --local: %v\n", err)
		return 2
	}
	b, err := netip.ParseAddrPort(f.addrB)
	if err != nil {
		fmt.Fprintf(stderr, "goroce perf: --remote: %v\n", err)
		return 2
	}
	openLink, err := linkOpener(f.linkKind, f.dev, a, b)
	if err != nil {
		fmt.Fprintf(stderr, "goroce perf: %v\n", err)
		return 2
	}
	cfg := perf.Config{
		Op: perf.Op(tool.Verb.String()), Size: f.size, Iters: f.iters, Duration: time.Duration(f.duration * float64(time.Second)),
		QPs: f.qps, MTU: mtu, TxDepth: f.txDepth, Latency: tool.Lat, PostList: f.postList, TrafficClass: uint8(f.tclass),
		Addrs:    [2]netip.AddrPort{a, b},
		OpenLink: openLink,
		Metrics:  f.exporter,
		Impair:   imp, Verify: imp != nil, Wait: waitMode(f.useEvent, f.poll, f.rtc),
	}
	if f.stats {
		cfg.Stats = stderr
	}
	if err := f.pcap.setup(&cfg); err != nil {
		fmt.Fprintf(stderr, "goroce perf: %v\n", err)
		return 2
	}
	if f.shards != 0 {
		pcap := cfg.Configure
		cfg.Configure = func(addr netip.AddrPort, c *roce.Config) {
			c.Shards = f.shards
			if pcap != nil {
				pcap(addr, c)
			}
		}
	}
	defer func() {
		if err := f.pcap.finish(stderr); err != nil {
			fmt.Fprintf(stderr, "goroce perf: %v\n", err)
			if rc == 0 {
				rc = 1
			}
		}
	}()
	lat := tool.Lat
	tty := false
	if fd, ok := stderr.(*os.File); ok && !f.jsonOut {
		if st, err := fd.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	sizes := []int{f.size}
	if f.all {
		sizes = perftest.AllSizes()
	}
	switch {
	case f.jsonOut:
	case f.cpuUtil:
		perf.WriteHeaderCPUUtil(stdout, cfg, f.gbits)
	default:
		perf.WriteHeader(stdout, cfg, f.gbits)
	}
	for _, s := range sizes {
		c := cfg
		c.Size = s
		if f.all && c.Iters == 0 && c.Duration == 0 {
			c.Iters = 1000
		}
		if tty {
			c.Progress = func(done, total int64) {
				if total > 0 {
					fmt.Fprintf(stderr, "\r %3.0f%% %d/%d bytes", 100*float64(done)/float64(total), done, total)
				}
			}
		}
		res, err := perf.Run(ctx, c)
		if tty {
			fmt.Fprint(stderr, "\r\033[K")
		}
		if err != nil {
			if res.Impair != nil {
				perf.WritePeerReport(stderr, *res.Impair)
			}
			fmt.Fprintf(stderr, "goroce perf: %v\n", err)
			return 1
		}
		if f.jsonOut {
			out := map[string]any{
				"op": res.Op, "size": res.Size, "iters": res.Iters, "qps": res.QPs, "mtu": res.MTU,
				"bytes": res.Bytes, "seconds": res.Seconds, "gbps": res.Gbps, "mpps": res.Mpps, "retransmitted": res.Retransmitted,
			}
			if lat {
				out["lat_p50_us"], out["lat_p99_us"], out["lat_p999_us"] = res.LatP50us, res.LatP99us, res.LatP999us
			}
			if f.cpuUtil {
				out["cpu_util"], out["cpu_seconds"] = res.CPUUse().Util(perf.CPUs()), res.CPUSeconds
			}
			if res.Impair != nil {
				out["impair"], out["verified"] = res.Impair, res.Verified
			}
			if f.baseline {
				if err := addBaseline(ctx, out, c, res, f.segs); err != nil {
					fmt.Fprintf(stderr, "goroce perf: baseline: %v\n", err)
					return 1
				}
			}
			if err := json.NewEncoder(stdout).Encode(out); err != nil {
				return 1
			}
			if res.Impair != nil {
				perf.WritePeerReport(stderr, *res.Impair)
			}
			continue
		}
		if f.cpuUtil {
			perf.WriteResultCPUUtil(stdout, res, f.gbits, perf.CPUs())
		} else {
			perf.WriteResult(stdout, res, lat, f.gbits)
		}
		if res.Impair != nil {
			perf.WritePeerReport(stderr, *res.Impair)
		}
		if f.baseline {
			out := map[string]any{}
			if err := addBaseline(ctx, out, c, res, f.segs); err != nil {
				fmt.Fprintf(stderr, "goroce perf: baseline: %v\n", err)
				return 1
			}
			writeBaseline(stdout, out, lat)
		}
	}
	if !f.jsonOut {
		perf.WriteFooter(stdout)
	}
	return 0
}
