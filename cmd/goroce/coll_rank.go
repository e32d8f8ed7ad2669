package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goroce/goroce/coll"
	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// Exit statuses of a rank, nccl-tests' where it has one.
const (
	exitWrong  = 7 // testNumResults: a check found wrong elements (or the bandwidth was below NCCL_TESTS_MIN_BW)
	exitFailed = 1 // the job failed (a rank died, a timeout, ranks configured unlike each other)
	exitUsage  = 2 // a setting out of range (coll.ErrInvalidArg), as a bad flag
)

// ceilingBytes and ceilingReps size the point-to-point measurement.
const (
	ceilingBytes = 16 << 20
	ceilingReps  = 4
)

// quietSysmon is the GODEBUG setting a rank runs with. A rank sleeps in
// the network poller between messages with its one processor idle, and
// then the Go runtime's sysmon thread sleeps too, until the next system
// call wakes it (a futex wake-up per sendmsg) and it polls every 20 µs
// for a while: 9 % of the job's CPU and about 40 % of an 8-byte
// all-reduce's time with 4 ranks on 2 CPUs (doc/coll.md §5). With a
// scheduler trace period set, sysmon never sleeps that deep and backs off
// to 10 ms; a period of 2^31-1 ms (24.8 days) prints nothing unless the
// host has been up that long (then one SCHED line at start).
const quietSysmon = "schedtrace=2147483647"

// withQuietSysmon returns env with quietSysmon added to GODEBUG.
func withQuietSysmon(env []string) []string {
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if strings.Contains(v, "schedtrace=") {
				return env
			}
			out := append([]string(nil), env...)
			out[i] = kv + "," + quietSysmon
			return out
		}
	}
	return append(env, "GODEBUG="+quietSysmon)
}

// reexecQuiet restarts this rank with quietSysmon unless it has it (or
// GOROCE_NO_REEXEC is set): launchers (torchrun, mpirun, srun) start the
// binary without it. It returns only if it did not exec.
func reexecQuiet() {
	if os.Getenv("GOROCE_NO_REEXEC") != "" || strings.Contains(os.Getenv("GODEBUG"), "schedtrace=") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	env := append(withQuietSysmon(os.Environ()), "GOROCE_NO_REEXEC=1")
	syscall.Exec(exe, os.Args, env) // returns only on failure: run as we are
}

// runRank is one rank of a job: discover, join, run the test, print on
// rank 0.
func runRank(t *collTest, f *collFlags, args []string, stdout, stderr io.Writer) int {
	if stdout == os.Stdout { // the real process, not a test's run()
		reexecQuiet()
	}
	explicit := coll.Launch{Rendezvous: f.rdzv, JobID: f.jobID}
	if f.size > 0 {
		explicit.Rank, explicit.Size = f.rank, f.size
	}
	if f.addr != "" {
		explicit.Addr, _ = parseAddr(f.addr)
	}
	l, err := coll.Discover(explicit, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "goroce coll: %v\n", err)
		return 2
	}
	switch {
	case f.procs > 0:
		runtime.GOMAXPROCS(f.procs)
	case os.Getenv("GOMAXPROCS") == "" && l.LocalSize >= runtime.NumCPU():
		// As many ranks on this host as CPUs, or more: each rank's
		// goroutines on one processor (doc/coll.md §5).
		runtime.GOMAXPROCS(1)
	}
	cfg := l.Config()
	cfg.Channels, cfg.QPsPerConn, cfg.Split, cfg.Chunk, cfg.Steps = f.channels, f.qpc, f.split, f.chunk, f.steps
	cfg.TrafficClass = uint8(f.tclass)
	cfg.SourcePorts, _ = coll.ParseSourcePortMode(f.sport)
	cfg.RankOrder, _ = f.order()
	cfg.Algorithm = f.algo
	cfg.QPTimeout = f.qpTO
	cfg.Progress, _ = coll.ParseProgress(f.progress)
	cfg.CC, _ = parseCC(f.ccMode)
	if f.timeout > 0 {
		cfg.Timeout = time.Duration(f.timeout) * time.Second
	}
	var impaired *impair.Link
	if f.impair != "" {
		ic, _ := impair.Parse(f.impair)
		ic.Seed += uint64(l.Rank) // each rank its own losses
		tos := uint8(f.tclass)
		cfg.Configure = func(rc *roce.Config) {
			ul, err := udp.Open(udp.Config{Addr: rc.Addr, TOS: tos})
			if err != nil {
				return // Open then fails on the address itself, with its error
			}
			il, err := impair.New(ul, ic)
			if err != nil {
				ul.Close()
				return
			}
			impaired = il
			rc.Link = il
		}
	}

	// SIGINT and SIGTERM end the job: this rank aborts (every other rank's
	// call then fails naming it) and exits 130 or 143.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		sigMu  sync.Mutex
		gotSig os.Signal
		comm   *coll.Comm
	)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		sigMu.Lock()
		gotSig = s
		c := comm
		sigMu.Unlock()
		cancel()
		if c != nil {
			c.Abort(fmt.Errorf("interrupted by %v", s))
		}
	}()
	sigExit := func(code int) int {
		sigMu.Lock()
		defer sigMu.Unlock()
		if s, ok := gotSig.(syscall.Signal); ok {
			return 128 + int(s)
		}
		return code
	}

	host, _ := os.Hostname()
	outDir := os.Getenv(envCollOut) // the spawner's (--fabric, --report)
	var rf *collRankFile
	joinStart := time.Now()
	if outDir != "" {
		rf = &collRankFile{Rank: l.Rank, Host: shortHost(host), Pid: os.Getpid(), HeapBefore: heapInuse()}
	}
	c, err := coll.Join(ctx, cfg)
	if errors.Is(err, coll.ErrInvalidArg) {
		// A flag's value coll's range check refused (--qps-per-conn 1000,
		// --rank 3 of 2): a usage error, as doc/cli.md says.
		fmt.Fprintf(stderr, "goroce coll: %v\n", err)
		return sigExit(exitUsage)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: Test failure: goroce coll: %v\n", shortHost(host), err)
		if rf != nil {
			rf.Error = err.Error()
			writeRankFile(outDir, rf)
		}
		return sigExit(exitFailed)
	}
	sigMu.Lock()
	comm = c
	sigMu.Unlock()
	defer c.Close()

	me, n := c.Rank(), c.Size()
	var watch *fabricWatch
	writeRF := func() {}
	if rf != nil {
		rf.JoinSec = time.Since(joinStart).Seconds()
		rf.HeapJoin = heapInuse()
		rf.Addr = c.Device().LocalAddr().Addr().String()
		if me == 0 {
			watch = &fabricWatch{}
			if name := os.Getenv(envCollFabric); name != "" {
				if watch.f, err = fabric.Load(name); err != nil {
					fmt.Fprintf(stderr, "goroce coll: rank 0: fabric counters: %v\n", err)
				}
			}
		}
		// The file is written however the run ends, with what it got,
		// and before the communicator closes on the way out.
		var once sync.Once
		writeRF = func() {
			once.Do(func() {
				st := c.Device().Stats()
				rf.Device = collDeviceStats{TxPackets: st.TxPackets.Load(), RxPackets: st.RxPackets.Load(),
					TxCNPs: st.TxCNPs.Load(), RxCNPs: st.RxCNPs.Load(), RxCE: st.RxECN[3].Load()}
				rf.Conns, rf.QPs = connFiles(c)
				if watch != nil {
					rf.Windows = watch.windows
					if watch.err != nil && rf.Error == "" {
						rf.Error = "fabric counters: " + watch.err.Error()
					}
				}
				if err := writeRankFile(outDir, rf); err != nil {
					fmt.Fprintf(stderr, "goroce coll: rank %d: %v\n", me, err)
				}
			})
		}
		defer writeRF()
	}
	out := io.Discard
	if me == 0 && !f.jsonOut {
		out = stdout
	}
	if f.conns {
		writeConns(stderr, c)
	}
	var jsonFile *os.File
	if me == 0 && f.jsonFile != "" {
		if jsonFile, err = openJSONFile(f.jsonFile); err != nil {
			fmt.Fprintf(out, "# skipping json output; %s not accessible\n", f.jsonFile)
		} else if jsonFile != nil {
			fmt.Fprintf(out, "# Writing JSON output to %s\n", jsonFile.Name())
			defer jsonFile.Close()
		}
	}
	writeHeader(out, t, f, c, l)

	b := &bench{c: c, f: f, t: t, n: n, me: me, out: out, watch: watch}
	if f.ceiling && n > 1 {
		if b.ceiling, err = measureCeiling(c, ceilingBytes, ceilingReps); err != nil {
			fmt.Fprintf(stderr, "%s: Test failure: goroce coll: ceiling: %v\n", shortHost(host), err)
			return sigExit(exitFailed)
		}
		fmt.Fprintf(out, "# goroce: ceiling %s GB/s: point-to-point rate rank 0 -> rank 1 through this job's connections (%d × %d MiB, the other ranks idle)\n",
			cG(b.ceiling), ceilingReps, ceilingBytes>>20)
	}
	if f.wide && b.ceiling > 0 {
		fmt.Fprintf(out, "# goroce: --wide adds, for the out-of-place half: ceiling (GB/s), busbw/ceiling, and the time's minimum and maximum over the ranks (us)\n")
	}
	if me == 0 && (jsonFile != nil || f.jsonOut) {
		b.doc = newJSONDoc(f, args, c)
		b.doc.Goroce = jsonGoroce{Collective: t.name, Ranks: n, Launch: l.String(), Algorithm: f.algo.String(),
			Channels: c.Config().Channels, QPsPerConn: c.Config().QPsPerConn, Split: c.Config().Split,
			Chunk: c.Config().Chunk, Steps: c.Config().Steps, TClass: f.tclass, SourcePorts: f.sport,
			CeilingGBps: b.ceiling, Impair: f.impair, GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU()}
	}
	writeResultHeader(out)

	maxBuf := max(f.maxBytes, 64) + 64
	b.send, b.recv, b.expected = make([]byte, maxBuf), make([]byte, maxBuf), make([]byte, maxBuf)
	types, _ := f.types()
	ops, _ := f.ops()
	var runErr error
	for _, dt := range types {
		if runErr != nil {
			break
		}
		opList := ops
		if !t.hasOp {
			opList = []coll.Op{coll.Sum}
		}
		for _, op := range opList {
			opName := op.String()
			if !t.hasOp {
				opName = "none"
			}
			roots := []int{-1}
			if t.hasRoot {
				roots = []int{f.root}
				if f.root == -1 {
					roots = roots[:0]
					for r := range n {
						roots = append(roots, r)
					}
				} else if f.root < 0 || f.root >= n {
					runErr = fmt.Errorf("root %d of %d ranks", f.root, n)
					break
				}
			}
			for _, root := range roots {
				if runErr = b.run(dt, op, opName, root); runErr != nil {
					break
				}
			}
			if runErr != nil {
				break
			}
		}
	}
	if rf != nil && me == 0 {
		cc := c.Config()
		rf.Setup = &collSetup{Collective: t.name, Ranks: n, Algorithm: algoDesc(c, t, f), Channels: cc.Channels,
			QPsPerConn: cc.QPsPerConn, Split: cc.Split, Chunk: cc.Chunk, Steps: cc.Steps, SourcePorts: cc.SourcePorts.String(),
			CC: f.ccMode, MTU: cc.MTU.Bytes(), RankOrder: cc.RankOrder, AvgBusBw: b.avgBw(), Wrong: b.errors}
		rf.Rows = b.rows
	}
	if runErr != nil {
		if rf != nil {
			rf.Error = runErr.Error()
		}
		fmt.Fprintf(stderr, "%s: Test failure: goroce coll: rank %d: %v\n", shortHost(host), me, runErr)
		if b.doc != nil {
			b.doc.finish(b.errors, b.avgBw(), minBw(), runErr.Error())
			writeCollJSON(b.doc, jsonFile, f.jsonOut, stdout)
		}
		return sigExit(exitFailed)
	}
	errs, err := b.sumInt(int64(b.errors))
	if err != nil {
		fmt.Fprintf(stderr, "%s: Test failure: goroce coll: rank %d: %v\n", shortHost(host), me, err)
		return sigExit(exitFailed)
	}
	if impaired != nil {
		writeImpairReport(stderr, me, c, impaired)
	}
	if f.stats {
		st := c.Device().Stats()
		var retrans, gbn, cnps, cuts, seqnak, oos, dup uint64
		for _, ci := range c.Conns() {
			for _, q := range ci.QPs {
				cn := q.QP.Counters()
				retrans += cn.Load(qp.CounterRetransmittedPkts)
				gbn += cn.Load(qp.CounterCompleterRetryErr)
				seqnak += cn.Load(qp.CounterRcvdSeqErr)
				oos += cn.Load(qp.CounterOutOfSeqRequest)
				dup += cn.Load(qp.CounterDuplicateRequest)
				s := q.QP.CC()
				cnps += s.CNPsReceived
				cuts += s.RP.Decreases
			}
		}
		fmt.Fprintf(stderr, "# rank %d: rx packets %d, tx packets %d, rx batches %d, rx yields %d; retransmitted %d (Go-Back-N %d), CNPs sent %d, received %d, rate cuts %d; NAK-seq rcvd %d, out-of-seq %d, dup %d\n", me,
			st.RxPackets.Load(), st.TxPackets.Load(), st.RxBatches.Load(), st.RxYields.Load(), retrans, gbn, st.TxCNPs.Load(), cnps, cuts, seqnak, oos, dup)
	}
	mb := minBw()
	writeResultFooter(out, int(errs), b.avgBw(), mb, t.name+"_perf", "")
	if b.doc != nil {
		b.doc.finish(int(errs), b.avgBw(), mb, "")
		writeCollJSON(b.doc, jsonFile, f.jsonOut, stdout)
	}
	if errs != 0 || (mb >= 0 && b.avgBw() < mb*0.9) {
		if me == 0 && !f.jsonOut {
			fmt.Fprintf(stdout, " .. %s pid %d: Test failure %s\n", shortHost(host), os.Getpid(), "goroce coll (nccl-tests' exit rule)")
		}
		return exitWrong
	}
	writeRF()
	if err := c.Close(); err != nil {
		fmt.Fprintf(stderr, "goroce coll: rank %d: close: %v\n", me, err)
	}
	return 0
}

// minBw is NCCL_TESTS_MIN_BW (GB/s), -1 when unset.
func minBw() float64 {
	v := os.Getenv("NCCL_TESTS_MIN_BW")
	if v == "" {
		return -1
	}
	var f float64
	if _, err := fmt.Sscan(v, &f); err != nil {
		return -1
	}
	return f
}

func writeCollJSON(d *jsonDoc, file *os.File, toStdout bool, stdout io.Writer) {
	if file != nil {
		d.write(file)
	}
	if toStdout {
		d.write(stdout)
	}
}

// shortHost is nccl-tests' getHostName: the host name up to its first dot.
func shortHost(h string) string {
	h, _, _ = strings.Cut(h, ".")
	return h
}

func deviceInfo(p coll.Peer) string { return "goroce " + p.Addr.String() }

// writeHeader is nccl-tests' writeDeviceReport, with goroce's lines after
// the device list.
func writeHeader(w io.Writer, t *collTest, f *collFlags, c *coll.Comm, l coll.Launch) {
	fmt.Fprintf(w, "# nccl-tests version %s nccl-headers=0 nccl-library=0 (goroce coll: RoCEv2 over UDP, no NCCL)\n", ncclTestsVersion)
	fmt.Fprintf(w, "# Collective test starting: %s_perf\n", t.name)
	step, unit := f.stepBytes, "bytes"
	if f.stepFactor > 1 {
		step, unit = f.stepFactor, "factor"
	}
	fmt.Fprintf(w, "# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
		1, 1, f.minBytes, f.maxBytes, step, unit, f.warmup, f.iters, f.agg, f.check, 0, 0)
	switch f.blocking {
	case 1:
		fmt.Fprintf(w, "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n")
	case 2:
		fmt.Fprintf(w, "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n")
	case 3:
		fmt.Fprintf(w, "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n")
	}
	fmt.Fprintf(w, "#\n")
	fmt.Fprintf(w, "# Using devices\n")
	for _, p := range c.Peers() {
		fmt.Fprintf(w, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n",
			p.Rank, 0, p.Pid, shortHost(p.Host), p.LocalRank, 0, 0, 0, deviceInfo(p))
	}
	cfg := c.Config()
	fmt.Fprintf(w, "# goroce: %s\n", l)
	mode := "whole messages round robin"
	if cfg.Split {
		mode = "messages split across them"
	}
	fmt.Fprintf(w, "# goroce: algorithm %s; %d channels; %d QPs per connection, %s; chunk %d B, %d in flight; tclass %d; UDP source ports %s; MTU %d; GOMAXPROCS %d of %d CPUs\n",
		algoDesc(c, t, f), cfg.Channels, cfg.QPsPerConn, mode, cfg.Chunk, cfg.Steps, cfg.TrafficClass, cfg.SourcePorts, cfg.MTU.Bytes(),
		runtime.GOMAXPROCS(0), runtime.NumCPU())
	if f.impair != "" {
		fmt.Fprintf(w, "# goroce: every rank's link impaired both ways: %s\n", f.impair)
	}
}

// algoDesc says which algorithm each size of the run uses.
func algoDesc(c *coll.Comm, t *collTest, f *collFlags) string {
	lo := c.Choose(t.kind, f.minBytes, f.algo)
	hi := c.Choose(t.kind, f.maxBytes, f.algo)
	name := func(a coll.Algorithm) string {
		if a == coll.AlgoAuto {
			return "direct"
		}
		return a.String()
	}
	if lo == hi {
		return name(lo)
	}
	return fmt.Sprintf("%s (auto: %s for the small sizes, %s for the large)", f.algo, name(lo), name(hi))
}

// writeConns lists a rank's connections with their QPs and source ports.
func writeConns(w io.Writer, c *coll.Comm) {
	for _, ci := range c.Conns() {
		var b strings.Builder
		for _, q := range ci.QPs {
			fmt.Fprintf(&b, " qp%d %#x->%#x sport %d", q.Index, q.QPN, q.PeerQPN, q.SourcePort)
		}
		fmt.Fprintf(w, "# rank %d -> rank %d channel %d:%s\n", c.Rank(), ci.Peer, ci.Channel, b.String())
	}
}

// writeImpairReport prints what the impairment did to a rank's link and
// what its QPs did about it.
func writeImpairReport(w io.Writer, rank int, c *coll.Comm, l *impair.Link) {
	r := l.Report()
	var retrans uint64
	for _, ci := range c.Conns() {
		for _, q := range ci.QPs {
			cn := q.QP.Counters()
			retrans += cn.Load(qp.CounterRetransmittedPkts)
		}
	}
	fmt.Fprintf(w, "# rank %d: impaired link: sent %d packets (%d dropped, %d duplicated, %d reordered, %d corrupted), received %d (%d dropped)%s\n",
		rank, r.Tx.Packets, r.Tx.Dropped, r.Tx.Duplicated, r.Tx.Reordered, r.Tx.Corrupted, r.Rx.Packets, r.Rx.Dropped,
		func() string {
			if retrans > 0 {
				return fmt.Sprintf(", %d retransmitted", retrans)
			}
			return ""
		}())
}
