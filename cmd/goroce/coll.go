package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/coll"
	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/internal/fabric/incast"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/roce"
)

var collCommand = command{
	name:    "coll",
	summary: "collectives (all_reduce, …) over RoCEv2 in the style of nccl-tests, under torchrun, mpirun, srun or -np N",
	run:     runColl,
}

// collFlags are nccl-tests' flags, with its spellings, and goroce's.
type collFlags struct {
	minBytes, maxBytes, stepBytes int
	stepFactor                    int
	iters, warmup, agg            int
	check                         int
	dtype, op                     string
	root                          int
	average                       int
	blocking                      int
	timeout                       int
	jsonFile                      string
	nthreads, ngpus               int

	algoName  string
	algo      coll.Algorithm
	qpc       int
	split     bool
	channels  int
	chunk     int
	steps     int
	tclass    int
	sport     string
	rankOrder string
	jsonOut   bool
	impair    string
	wide      bool
	ceiling   bool
	conns     bool
	stats     bool
	inject    bool
	progress  string
	ccMode    string

	fabric      string
	placement   string
	report      string
	sampleEvery int
	series      time.Duration

	np       int
	wrap     string
	addrs    string
	rdzv     string
	rank     int
	size     int
	jobID    string
	addr     string
	procs    int
	qpTO     time.Duration
	noCheckN bool
}

// sizeValue is a byte count with nccl-tests' suffixes: K, M, G (binary).
type sizeValue struct{ p *int }

func (s sizeValue) String() string {
	if s.p == nil {
		return "0"
	}
	return strconv.Itoa(*s.p)
}

func (s sizeValue) Set(v string) error {
	n, err := parseNCCLSize(v)
	if err != nil {
		return err
	}
	*s.p = n
	return nil
}

// parseNCCLSize parses nccl-tests' sizes: a number with an optional K,
// M or G (binary units).
func parseNCCLSize(v string) (int, error) {
	v = strings.TrimSpace(v)
	mul := 1.0
	if v != "" {
		switch v[len(v)-1] {
		case 'K', 'k':
			mul = 1 << 10
		case 'M', 'm':
			mul = 1 << 20
		case 'G', 'g':
			mul = 1 << 30
		}
		if mul != 1 {
			v = v[:len(v)-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 || f*mul > 1<<40 {
		return 0, fmt.Errorf("invalid size %q", v)
	}
	return int(f * mul), nil
}

func collFlagSet(f *collFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("goroce coll", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.minBytes, f.maxBytes, f.stepBytes = 32<<20, 32<<20, 1<<20
	for _, n := range []string{"b", "minbytes"} {
		fs.Var(sizeValue{&f.minBytes}, n, "minimum size in bytes (K, M, G suffixes; default 32M)")
	}
	for _, n := range []string{"e", "maxbytes"} {
		fs.Var(sizeValue{&f.maxBytes}, n, "maximum size in bytes (default 32M)")
	}
	for _, n := range []string{"i", "stepbytes"} {
		fs.Var(sizeValue{&f.stepBytes}, n, "increment between sizes (default 1M)")
	}
	intVar := func(p *int, names []string, def int, usage string) {
		for _, n := range names {
			fs.IntVar(p, n, def, usage)
		}
	}
	strVar := func(p *string, names []string, def, usage string) {
		for _, n := range names {
			fs.StringVar(p, n, def, usage)
		}
	}
	intVar(&f.stepFactor, []string{"f", "stepfactor"}, 1, "multiplication factor between sizes (replaces -i)")
	intVar(&f.iters, []string{"n", "iters"}, 20, "timed iterations per size")
	intVar(&f.warmup, []string{"w", "warmup_iters"}, 1, "warm-up iterations per size")
	intVar(&f.agg, []string{"m", "agg_iters"}, 1, "operations aggregated per iteration")
	intVar(&f.check, []string{"c", "check"}, 1, "untimed check passes per size (0: none, #wrong N/A)")
	strVar(&f.dtype, []string{"d", "datatype"}, "float", "element type: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, or all")
	strVar(&f.op, []string{"o", "op"}, "sum", "reduction: sum prod max min avg, or all")
	intVar(&f.root, []string{"r", "root"}, 0, "root of broadcast and reduce (-1: every rank in turn)")
	intVar(&f.average, []string{"a", "average"}, 1, "time over the ranks: 0 rank 0's, 1 the average, 2 the minimum, 3 the maximum")
	intVar(&f.blocking, []string{"z", "blocking"}, 0, "1: barrier after each operation; 3: barrier after each iteration, not timed")
	intVar(&f.timeout, []string{"T", "timeout"}, 0, "seconds a rank waits without progress before the job fails (0: 60)")
	strVar(&f.jsonFile, []string{"J", "output_file"}, "", "write nccl-tests' JSON results to FILE (a name ending in .json)")
	intVar(&f.nthreads, []string{"t", "nthreads"}, 1, "nccl-tests' threads per process (only 1)")
	intVar(&f.ngpus, []string{"g", "ngpus"}, 1, "nccl-tests' GPUs per thread (only 1: one rank per process)")

	fs.StringVar(&f.algoName, "algo", "auto", "algorithm: auto, ring, tree (double binary tree) or hd (halving-doubling)")
	fs.IntVar(&f.qpc, "qps-per-conn", 0, "RC QPs per connection (NCCL_IB_QPS_PER_CONNECTION; default 1)")
	fs.BoolVar(&f.split, "split", false, "split every message across the connection's QPs (NCCL_IB_SPLIT_DATA_ON_QPS=1)")
	fs.IntVar(&f.channels, "channels", 0, "channels (default 2)")
	fs.Var(sizeValue{&f.chunk}, "chunk", "largest message in bytes (default 128K)")
	fs.IntVar(&f.steps, "steps", 0, "messages in flight per connection (default 8)")
	fs.IntVar(&f.tclass, "tclass", 0, "IP traffic class of the data packets, DSCP and ECN (NCCL_IB_TC; 106 = DSCP 26, ECT(0))")
	fs.StringVar(&f.sport, "sport", "kernel", "UDP source ports: kernel (rdma_get_udp_sport), fixed (4791) or explicit (49152 + QP index)")
	fs.StringVar(&f.rankOrder, "rank-order", "", "ring order, a permutation of the ranks (0,2,1,3)")
	fs.BoolVar(&f.jsonOut, "json", false, "print nccl-tests' JSON document (-J's keys) instead of the table")
	fs.StringVar(&f.impair, "impair", "", "impair every rank's link both ways, as goroce perf --impair: loss=1%,dup=…,reorder=…,seed=N")
	fs.BoolVar(&f.wide, "wide", false, "add the ceiling, busbw/ceiling and the time's minimum and maximum over the ranks to each row (out-of-place)")
	fs.BoolVar(&f.ceiling, "ceiling", true, "measure the point-to-point rate between ranks 0 and 1 first")
	fs.BoolVar(&f.conns, "conns", false, "print every rank's connections: QPs and UDP source ports (stderr)")
	fs.StringVar(&f.progress, "progress", "auto", "who drives a call: inline (the device's receive goroutine, run to completion), caller, or auto")
	fs.BoolVar(&f.inject, "inject-wrong", false, "corrupt one element of rank 1's result before each check (tests the exit rule)")
	fs.BoolVar(&f.stats, "stats", false, "print every rank's device counters at the end (stderr)")
	fs.DurationVar(&f.qpTO, "qp-timeout", 0, "the QPs' local ACK timeout (default 67ms)")
	fs.StringVar(&f.ccMode, "cc", "auto", "congestion control: RATE (DCQCN fitted to that line rate, tc units: 1gbit), default (roce's: the paper's at 100 Gb/s), off (no CNPs, no rate cuts), auto (RATE of the fabric's links with --fabric, else default)")

	fs.StringVar(&f.fabric, "fabric", "", "with -np: run rank i in host i of this namespace fabric (goroce fabric up; root) and report per-spine load and each QP's spine")
	fs.StringVar(&f.placement, "placement", "block", "with --fabric: ranks on hosts block (rank i on host i), interleaved (rank i on leaf i mod leaves) or random[:SEED]")
	fs.StringVar(&f.report, "report", "", "with -np: write an HTML report to FILE.html (busbw against size; with --fabric the leaf-spine load, each link's throughput over time, ECN and CNPs)")
	fs.IntVar(&f.sampleEvery, "sample-every", 0, "with --fabric: see each QP's spine in one of N packets on the leaves' uplinks (default 32)")
	fs.DurationVar(&f.series, "series", 0, "with --fabric: the interval of the links' throughput over time (default 200ms)")
	fs.IntVar(&f.np, "np", 0, "spawn N ranks on this host (unprivileged, loopback addresses)")
	fs.StringVar(&f.wrap, "wrap", "", "with -np: run each rank under this command, {rank} replaced (ip netns exec ns{rank})")
	fs.StringVar(&f.addrs, "addrs", "", "with -np: each rank's data-plane address, {rank} replaced (10.0.{rank}.2)")
	fs.StringVar(&f.rdzv, "rdzv", "", "rendezvous: host:port served by rank 0, or file://DIR (overrides the launcher's)")
	fs.IntVar(&f.rank, "rank", -1, "this process's rank (with --world-size: no launcher)")
	fs.IntVar(&f.size, "world-size", 0, "the number of ranks (with --rank)")
	fs.StringVar(&f.jobID, "job-id", "", "the job's name (all ranks alike)")
	fs.StringVar(&f.addr, "addr", "", "this rank's data-plane address (default: per rank on loopback, else the route to the rendezvous)")
	fs.IntVar(&f.procs, "gomaxprocs", 0, "GOMAXPROCS of each rank (0: the Go default; -np sets 1 when ranks outnumber CPUs)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: goroce coll all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|sendrecv [nccl-tests flags] [-np N | under torchrun, mpirun, srun]")
		fmt.Fprintln(fs.Output())
		fmt.Fprintln(fs.Output(), "nccl-tests' output (byte-compatible) from every rank launched by torchrun --no-python, mpirun, srun, or -np N on this host.")
		fmt.Fprintln(fs.Output(), "Exit status 7 if any check found a wrong element (nccl-tests' rule), 1 on a failed job, 2 on usage.")
		fmt.Fprintln(fs.Output())
		fs.PrintDefaults()
	}
	return fs
}

// collTestByName finds the test of an argument ("all_reduce",
// "all_reduce_perf").
func collTestByName(s string) (*collTest, bool) {
	s = strings.TrimSuffix(s, "_perf")
	for i := range collTests {
		if collTests[i].name == s {
			return &collTests[i], true
		}
	}
	return nil, false
}

func runColl(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		var f collFlags
		fs := collFlagSet(&f, stderr)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fs.Usage()
			return 0
		}
		fs.Usage()
		return 2
	}
	t, ok := collTestByName(args[0])
	if !ok {
		fmt.Fprintf(stderr, "goroce coll: unknown collective %q (all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv)\n", args[0])
		return 2
	}
	var f collFlags
	fs := collFlagSet(&f, stderr)
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "goroce coll: unexpected argument %q\n", pos[0])
		return 2
	}
	if msg := f.validate(); msg != "" {
		fmt.Fprintf(stderr, "goroce coll: %s\n", msg)
		return 2
	}
	if f.np > 0 {
		return spawnRanks(t, &f, args, stdout, stderr)
	}
	return runRank(t, &f, args[1:], stdout, stderr)
}

// validate checks the flags; it returns a message for a usage error.
func (f *collFlags) validate() string {
	var err error
	if f.algo, err = coll.ParseAlgorithm(f.algoName); err != nil {
		return err.Error()
	}
	if _, err := coll.ParseSourcePortMode(f.sport); err != nil {
		return err.Error()
	}
	if _, err := coll.ParseProgress(f.progress); err != nil {
		return err.Error()
	}
	if _, err := parseCC(f.ccMode); err != nil {
		return err.Error()
	}
	switch {
	case f.minBytes > f.maxBytes:
		return fmt.Sprintf("invalid sizes for 'minbytes' and 'maxbytes': %d > %d", f.minBytes, f.maxBytes)
	case f.stepFactor < 1:
		return "-f must be at least 1"
	case f.stepFactor == 1 && f.stepBytes <= 0:
		return "-i must be positive"
	case f.iters < 1 || f.agg < 1 || f.warmup < 0 || f.check < 0:
		return "-n and -m must be at least 1, -w and -c not negative"
	case f.average < 0 || f.average > 3:
		return "-a must be 0, 1, 2 or 3"
	case f.blocking < 0 || f.blocking > 3:
		return "-z must be 0, 1, 2 or 3"
	case f.nthreads != 1 || f.ngpus != 1:
		return "-t and -g: one rank per process (launch more processes instead)"
	case f.tclass < 0 || f.tclass > 255:
		return "--tclass must be 0 … 255"
	case f.np < 0 || f.np > 1024:
		return "-np must be 1 … 1024"
	case (f.wrap != "" || f.addrs != "" || f.fabric != "" || f.report != "") && f.np == 0:
		return "--wrap, --addrs, --fabric and --report go with -np"
	case f.fabric != "" && (f.wrap != "" || f.addrs != "" || f.rdzv != ""):
		return "--fabric places the ranks itself: no --wrap, --addrs or --rdzv"
	case f.fabric != "" && !fabric.ValidName(f.fabric):
		return fmt.Sprintf("--fabric %q: 1 to %d lower-case letters and digits", f.fabric, fabric.MaxNameLen)
	case f.sampleEvery < 0 || f.sampleEvery > 1<<20 || f.series < 0:
		return "--sample-every must be 1 … 1048576, --series positive"
	}
	if _, _, err := fabric.ParsePlacement(f.placement); err != nil {
		return "--placement: " + err.Error()
	}
	if _, err := f.types(); err != nil {
		return err.Error()
	}
	if _, err := f.ops(); err != nil {
		return err.Error()
	}
	if _, err := f.order(); err != nil {
		return err.Error()
	}
	if f.impair != "" {
		if _, err := impair.Parse(f.impair); err != nil {
			return "--impair: " + err.Error()
		}
	}
	if f.addr != "" {
		if _, err := parseAddr(f.addr); err != nil {
			return "--addr: " + err.Error()
		}
	}
	return ""
}

// types returns the -d types (all: nccl-tests' list).
func (f *collFlags) types() ([]coll.DataType, error) {
	if f.dtype == "all" {
		return coll.AllDataTypes(), nil
	}
	t, err := coll.ParseDataType(f.dtype)
	return []coll.DataType{t}, err
}

// ops returns the -o operations (all: nccl-tests' list without mulsum).
func (f *collFlags) ops() ([]coll.Op, error) {
	if f.op == "all" {
		return coll.AllOps(), nil
	}
	o, err := coll.ParseOp(f.op)
	return []coll.Op{o}, err
}

// order parses --rank-order.
func (f *collFlags) order() ([]int, error) {
	if f.rankOrder == "" {
		return nil, nil
	}
	var out []int
	for _, s := range strings.Split(f.rankOrder, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--rank-order %q: %v", f.rankOrder, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseAddr parses an address with an optional port (default 4791).
func parseAddr(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a, 4791), nil
}

// parseCC parses --cc: auto, default, off, or a line rate (tc units) to
// fit DCQCN to (incast.Profile: the namespace fabric's reaction point).
// auto is default here; the --fabric spawner resolves it to the fabric's
// rate before its ranks see it.
func parseCC(s string) (roce.CCConfig, error) {
	switch s {
	case "auto", "default", "":
		return roce.CCConfig{}, nil
	case "off":
		return roce.CCConfig{DisableRP: true, DisableNP: true}, nil
	}
	r, err := fabric.ParseRate(s)
	if err != nil || r < fabric.Mbit || r > 10000*fabric.Gbit {
		return roce.CCConfig{}, fmt.Errorf("--cc %q: auto, default, off, or a line rate from 1mbit to 10tbit such as 1gbit", s)
	}
	rp := incast.Profile(cc.Bitrate(r))
	return roce.CCConfig{RP: &rp}, nil
}
