package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/flow"
	"github.com/goroce/goroce/capture/lint"
	"github.com/goroce/goroce/internal/capreport"
)

// capSubcommands are "goroce cap flows|lint|report": the analyses beyond
// tshark. runCap dispatches to them on its first argument.
var capSubcommands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"flows":  runCapFlows,
	"lint":   runCapLint,
	"report": runCapReport,
}

// capInput is an opened capture with an optional progress line: a file,
// or a live capture (live set, r nil).
type capInput struct {
	name   string
	r      io.Reader
	close  func()
	prog   *progress
	stderr io.Writer

	live *liveCapture
	// table, when set for a live capture, prints the live per-flow table;
	// scanAll calls it every interval from the reading goroutine.
	table    func(an *flow.Analyzer, sc *flow.Scanner, now time.Time)
	interval time.Duration
	// out is flushed when a live capture is idle, so that what was
	// written (lint's findings) shows without delay.
	out *bufio.Writer
	// failed records a live capture that ended on an error (reported).
	failed bool
}

// liveFlags are the live-capture flags of cap flows and cap lint.
type liveFlags struct {
	opts     liveOptions
	count    int
	interval time.Duration
}

// register adds -i, -c, -a, -w, -s, -p and -interval to fs.
func (l *liveFlags) register(fs *flag.FlagSet) {
	l.opts.register(fs, &l.count)
	fs.DurationVar(&l.interval, "interval", time.Second, "live capture: print the per-flow table every `DURATION` (0: only the summary at the end)")
}

// check validates the flags after parsing: it returns the error to print.
func (l *liveFlags) check(fs *flag.FlagSet, file string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case file == "" && l.opts.iface == "":
		return errors.New("no capture file: give one with -r FILE, or capture live with -i IFACE")
	case file != "" && l.opts.iface != "":
		return errors.New("-r and -i: read a file or capture live, not both")
	case l.opts.iface == "" && (set["c"] || set["interval"]):
		return errors.New("-c and -interval apply to a live capture: give the interface with -i IFACE")
	case l.opts.write == "-":
		return errors.New("-w -: the tables go to stdout; write the capture to a file")
	case l.count < 0 || l.interval < 0:
		return errors.New("-c and -interval can't be negative")
	}
	return l.opts.check(func(n string) bool { return set[n] })
}

// openLiveInput starts the live capture of l as a capInput.
func openLiveInput(l *liveFlags, stdout, stderr io.Writer) (*capInput, error) {
	lc, err := openLive(&l.opts, l.count, stdout)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "Capturing on '%s'\n", l.opts.iface)
	return &capInput{name: l.opts.iface, live: lc, close: func() { lc.Close() }, stderr: stderr, interval: l.interval}, nil
}

// openCapture opens FILE ("-" for stdin) and, when stderr is a terminal,
// prepares a progress line.
func openCapture(cmd, file string, stderr io.Writer) (*capInput, error) {
	in := &capInput{name: file, stderr: stderr, close: func() {}}
	var (
		r    io.Reader = os.Stdin
		size int64
	)
	if file == "-" {
		in.name = "standard input"
	} else {
		f, err := os.Open(file)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("the file %q doesn't exist", file)
			}
			return nil, err
		}
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
		r, in.close = f, func() { f.Close() }
	}
	cr := &countingReader{r: r}
	in.r = cr
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			in.prog = &progress{w: stderr, cmd: cmd, size: size, read: cr, start: time.Now()}
		}
	}
	return in, nil
}

// countingReader counts the bytes read through it, for the progress line.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// progress prints a one-line status on a terminal, at most four times a
// second, from the reading goroutine (no ticker, no goroutine).
type progress struct {
	w       io.Writer
	cmd     string
	size    int64
	read    *countingReader
	start   time.Time
	next    time.Time
	packets int64
	shown   bool
}

// tick counts one packet and redraws the line when it is due.
func (p *progress) tick() {
	if p == nil {
		return
	}
	p.packets++
	if p.packets&1023 != 0 {
		return
	}
	now := time.Now()
	if now.Before(p.next) {
		return
	}
	p.next = now.Add(250 * time.Millisecond)
	el := now.Sub(p.start).Seconds()
	mb := float64(p.read.n) / 1e6
	line := fmt.Sprintf("goroce cap %s: %.0f MB, %d packets, %.0f MB/s", p.cmd, mb, p.packets, mb/max(el, 1e-9))
	if p.size > 0 {
		line = fmt.Sprintf("goroce cap %s: %3.0f%% of %.0f MB, %d packets, %.0f MB/s", p.cmd,
			100*float64(p.read.n)/float64(p.size), float64(p.size)/1e6, p.packets, mb/max(el, 1e-9))
	}
	fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	p.shown = true
}

// done clears the line.
func (p *progress) done() {
	if p != nil && p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// openFlowInput opens the file, or starts the live capture, of cap flows
// or cap lint.
func openFlowInput(cmd, file string, l *liveFlags, stdout, stderr io.Writer) (*capInput, error) {
	if l.opts.iface != "" {
		return openLiveInput(l, stdout, stderr)
	}
	return openCapture(cmd, file, stderr)
}

// capSubFlagGroups are the headings of goroce cap flows|lint|report -h
// (doc/cli.md); each has some of the flags.
var capSubFlagGroups = []flagGroup{
	{"input and output", []string{"r", "o", "json", "rules"}},
	{"live capture (as dumpcap's)", []string{"i", "c", "a", "w", "s", "p", "interval"}},
}

// capFlagSet returns the flag set shared by the sub-subcommands.
func capFlagSet(name, usage string, stderr io.Writer, file *string, jsonOut *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("goroce cap "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(file, "r", "", "read packets from `FILE` (pcap or pcapng, optionally gzipped; - for stdin)")
	if jsonOut != nil {
		fs.BoolVar(jsonOut, "json", false, "write JSON instead of the human-readable tables")
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		printFlags(stderr, fs, capSubFlagGroups)
	}
	return fs
}

// parseCapFlags parses args; it returns -1 to go on, or the exit status.
func parseCapFlags(fs *flag.FlagSet, args []string, file string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2
	}
	return -1
}

// scanAll runs the flow analysis (and the linter, when l is not nil) over
// the whole capture in one pass.
func scanAll(in *capInput, cfg flow.Config, l *lint.Checker) (*flow.Result, error) {
	var src capture.Source = in.live
	if in.live == nil {
		rd, err := capture.NewReader(in.r)
		if err != nil {
			return nil, fmt.Errorf("the file %q isn't a capture file in a format goroce understands (%v)", in.name, err)
		}
		defer rd.Close()
		src = rd
	}
	sc := flow.NewScanner(src)
	an := flow.NewAnalyzer(cfg)
	if in.live != nil {
		next := time.Now().Add(in.interval)
		in.live.tick = func(now time.Time, idle bool) {
			// Called from sc.Next, between two Adds: the analyzer is
			// quiescent and may be read.
			if in.table != nil && in.interval > 0 && !now.Before(next) {
				next = now.Add(in.interval)
				in.table(an, sc, now)
			}
			if idle && in.out != nil {
				_ = in.out.Flush() // an error sticks: the final Flush reports it
			}
		}
	}
	for {
		p, ok := sc.Next()
		if !ok {
			break
		}
		d := an.Add(p)
		if l != nil {
			l.Check(p, d)
		}
		in.prog.tick()
	}
	in.prog.done()
	if in.live != nil {
		if err := in.live.Close(); err != nil {
			fmt.Fprintf(in.stderr, "goroce cap: %v\n", err)
			in.failed = true
		}
		in.live.summary(in.stderr)
	}
	st := sc.Stats()
	if l != nil {
		l.SetPauses(st.Pauses)
		l.Finish()
	}
	return an.Result(st), nil
}

// liveTable returns the table function of a live capture: each call
// writes one block to w, a line for the capture and a line per direction
// with its counters and its rate since the previous block, then flushes
// w. findings, when not nil, gives the linter's count per direction.
func liveTable(w *bufio.Writer, start time.Time, findings map[*flow.Dir]int64) func(*flow.Analyzer, *flow.Scanner, time.Time) {
	prev := map[*flow.Dir]int64{}
	last := start
	return func(an *flow.Analyzer, sc *flow.Scanner, now time.Time) {
		st := sc.Stats()
		dirs := an.Directions()
		fmt.Fprintf(w, "[%8.1f s] %d frames, %d RoCEv2, %d directions\n", now.Sub(start).Seconds(), st.Frames, st.RoCE, len(dirs))
		if len(dirs) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			head := "  direction\tpackets\tbytes\trate\tCE\tCNPs\tretx\tgap PSNs\tNAKs\tRNR\tICRC bad\t"
			if findings != nil {
				head += "findings\t"
			}
			fmt.Fprintln(tw, head)
			dt := now.Sub(last).Seconds()
			for _, d := range dirs {
				c := d.Live()
				rate := 0.0
				if dt > 0 {
					rate = float64(c.Bytes-prev[d]) * 8 / dt
				}
				prev[d] = c.Bytes
				fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t", d.Name(), c.Packets, c.Bytes, flow.Rate(rate),
					c.CE, c.CNPs, c.Retransmissions, c.GapPSNs, c.NAKs, c.RNRNAKs, c.ICRCBad)
				if findings != nil {
					fmt.Fprintf(tw, "%d\t", findings[d])
				}
				fmt.Fprintln(tw)
			}
			tw.Flush()
		}
		last = now
		_ = w.Flush() // an error sticks: the final Flush reports it
	}
}

// readStatus is the exit status and warning for a capture read to its end
// or cut short: the analysis covers the frames before the damage, and the
// status says the file was damaged, as "goroce cap" does.
func readStatus(cmd string, res *flow.Result, stderr io.Writer, name string) int {
	if res.Capture.Error == "" {
		return 0
	}
	fmt.Fprintf(stderr, "goroce cap %s: the file %q is damaged or cut short (%s); the frames before it were analysed\n", cmd, name, res.Capture.Error)
	return 2
}

// runCapFlows implements "goroce cap flows".
func runCapFlows(args []string, stdout, stderr io.Writer) int {
	var (
		file    string
		jsonOut bool
		live    liveFlags
	)
	fs := capFlagSet("flows", "usage: goroce cap flows -r FILE [--json]\n"+
		"       goroce cap flows -i IFACE [-c N] [-a duration:SECONDS] [-w FILE] [-interval 1s] [--json]\n\n"+
		"Reconstructs every RC/UC/UD connection (both directions paired): packets and bytes per opcode, PSN range,\n"+
		"gaps, retransmissions and Go-Back-N episodes with their trigger, NAKs, RNR NAKs and the wait after them,\n"+
		"ACK coalescing, READ and ATOMIC request/response pairs with latency, MSN, ECN CE marks, CNPs, goodput over\n"+
		"time and ICRC failures. Per host pair, the distinct 5-tuples (the ECMP entropy a leaf-spine fabric can\n"+
		"spread the pair's QPs with); the 802.3x PAUSE and PFC frames per priority, with the pauses over time.\n\n"+
		"With -i it captures live (see goroce help cap): a table of every direction with its counters\n"+
		"and rate goes to stdout each -interval, and the full analysis when the capture ends (-c, -a,\n"+
		"Ctrl-C). With --json only the final document is written.", stderr, &file, &jsonOut)
	live.register(fs)
	if st := parseCapFlags(fs, args, file); st >= 0 {
		return st
	}
	if err := live.check(fs, file); err != nil {
		fmt.Fprintf(stderr, "goroce cap flows: %v\n", err)
		return 2
	}
	in, err := openFlowInput("flows", file, &live, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap flows: %v\n", err)
		return 2
	}
	defer in.close()
	if in.live != nil && !jsonOut {
		in.out = bufio.NewWriter(stdout)
		in.table = liveTable(in.out, in.live.start, nil)
	}
	res, err := scanAll(in, flow.Config{}, nil)
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap flows: %v\n", err)
		return 2
	}
	if jsonOut {
		err = flow.WriteJSON(stdout, res)
	} else {
		err = flow.WriteText(stdout, in.name, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap flows: writing output: %v\n", err)
		return 2
	}
	if in.failed {
		return 1
	}
	return readStatus("flows", res, stderr, in.name)
}

// lintFinding is a finding as "goroce cap lint --json" writes it.
type lintFinding struct {
	lint.Finding
	Direction string `json:"direction,omitempty"`
}

// runCapLint implements "goroce cap lint". Findings are written as they
// are found (bounded memory on any capture): in frame order, except checks
// that wait for later evidence, which report when it comes.
func runCapLint(args []string, stdout, stderr io.Writer) int {
	var (
		file    string
		jsonOut bool
		live    liveFlags
	)
	fs := capFlagSet("lint", "usage: goroce cap lint -r FILE [--json]\n"+
		"       goroce cap lint -i IFACE [-c N] [-a duration:SECONDS] [-w FILE] [-interval 1s] [--json]\n\n"+
		"Checks every packet against the RC/UC/UD transport rules (IBA ch. 9 as rdma_rxe implements them) and\n"+
		"prints one finding per offending packet and rule. Exit status: 0 clean, 1 findings, 2 error.\n"+
		"The rules: goroce cap lint -rules\n\n"+
		"With -i it captures live (see goroce help cap): findings as they are found, a per-direction table\n"+
		"with the finding counts each -interval, and the summary when the capture ends (-c, -a, Ctrl-C).", stderr, &file, &jsonOut)
	live.register(fs)
	var rules bool
	fs.BoolVar(&rules, "rules", false, "list the rules with their citations and exit")
	if st := parseCapFlags(fs, args, file); st >= 0 {
		return st
	}
	bw := bufio.NewWriterSize(stdout, 1<<16)
	defer bw.Flush()
	if rules {
		if jsonOut {
			enc := json.NewEncoder(bw)
			enc.SetIndent("", "  ")
			_ = enc.Encode(lint.Rules)
			return 0
		}
		for _, r := range lint.Rules {
			fmt.Fprintf(bw, "%-17s %s: %s\n%-17s cites: %s\n", r.ID, r.Severity, r.Summary, "", r.Cite)
		}
		return 0
	}
	if err := live.check(fs, file); err != nil {
		fmt.Fprintf(stderr, "goroce cap lint: %v\n", err)
		return 2
	}
	in, err := openFlowInput("lint", file, &live, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap lint: %v\n", err)
		return 2
	}
	defer in.close()
	var perDir map[*flow.Dir]int64
	if in.live != nil {
		in.out = bw
		if !jsonOut {
			perDir = map[*flow.Dir]int64{}
			in.table = liveTable(bw, in.live.start, perDir)
		}
	}
	var (
		werr error
		jb   bytes.Buffer
	)
	je := json.NewEncoder(&jb)
	je.SetEscapeHTML(false)
	n := 0
	emit := func(f lint.Finding) {
		if in.prog != nil && in.prog.shown {
			fmt.Fprint(stderr, "\r\x1b[K")
		}
		if perDir != nil && f.Dir != nil {
			perDir[f.Dir]++
		}
		lf := lintFinding{Finding: f}
		if f.Dir != nil {
			lf.Direction = f.Dir.Name()
		}
		if jsonOut {
			sep := ",\n    "
			if n == 0 {
				sep = "\n    "
			}
			jb.Reset()
			err := je.Encode(lf)
			if err == nil {
				_, err = fmt.Fprintf(bw, "%s%s", sep, bytes.TrimSuffix(jb.Bytes(), []byte("\n")))
			}
			werr = errors.Join(werr, err)
		} else {
			dir := ""
			if lf.Direction != "" {
				dir = "  [" + lf.Direction + "]"
			}
			sev := ""
			if f.Severity == lint.SeverityWarning {
				sev = " (warning)"
			}
			_, err := fmt.Fprintf(bw, "frame %d\t%.6f\t%s%s\t%s%s\n", f.Frame, f.Time, f.Rule, sev, f.Message, dir)
			werr = errors.Join(werr, err)
		}
		n++
	}
	if jsonOut {
		name, _ := json.Marshal(in.name)
		fmt.Fprintf(bw, "{\n  \"file\": %s,\n  \"findings\": [", name)
	}
	l := lint.New(emit)
	res, err := scanAll(in, flow.Config{}, l)
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap lint: %v\n", err)
		return 2
	}
	counts := l.Counts()
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, string(id))
	}
	sort.Strings(ids)
	if jsonOut {
		c, _ := json.Marshal(counts)
		cs, _ := json.Marshal(res.Capture)
		end := "\n  ]"
		if n == 0 {
			end = "]"
		}
		fmt.Fprintf(bw, "%s,\n  \"total\": %d,\n  \"counts\": %s,\n  \"capture\": %s\n}\n", end, l.Total(), c, cs)
	} else {
		var parts []string
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf("%s %d", id, counts[lint.RuleID(id)]))
		}
		switch {
		case l.Total() == 0:
			fmt.Fprintf(bw, "%s: %d RoCEv2 packets in %d connections, no findings\n", in.name, res.Capture.RoCE, len(res.Connections))
		default:
			fmt.Fprintf(bw, "%s: %d findings in %d RoCEv2 packets (%s)\n", in.name, l.Total(), res.Capture.RoCE, strings.Join(parts, ", "))
		}
	}
	if err := errors.Join(werr, bw.Flush()); err != nil {
		fmt.Fprintf(stderr, "goroce cap lint: writing output: %v\n", err)
		return 2
	}
	if in.failed {
		return 1
	}
	if st := readStatus("lint", res, stderr, in.name); st != 0 {
		return st
	}
	if l.Total() > 0 {
		return 1
	}
	return 0
}

// runCapReport implements "goroce cap report".
func runCapReport(args []string, stdout, stderr io.Writer) int {
	var file, out string
	fs := capFlagSet("report", "usage: goroce cap report -r FILE -o report.html\n\n"+
		"Writes one self-contained HTML page (inline SVG and CSS, no script, nothing fetched): per connection a\n"+
		"tcptrace-style PSN-over-time graph with ACKs, NAKs, retransmissions, CE marks and CNPs, throughput and\n"+
		"goodput over time, the opcode mix, the READ/ATOMIC latency distribution and the linter's findings.",
		stderr, &file, nil)
	fs.StringVar(&out, "o", "", "write the report to `FILE` (- for stdout)")
	if st := parseCapFlags(fs, args, file); st >= 0 {
		return st
	}
	if file == "" || out == "" {
		fmt.Fprintln(stderr, "goroce cap report: give the capture with -r FILE and the output with -o report.html")
		return 2
	}
	in, err := openCapture("report", file, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap report: %v\n", err)
		return 2
	}
	defer in.close()
	name := in.name
	if file != "-" {
		name = baseName(file)
	}
	rd, err := capture.NewReader(in.r)
	if err != nil {
		in.prog.done()
		fmt.Fprintf(stderr, "goroce cap report: the file %q isn't a capture file in a format goroce understands (%v)\n", in.name, err)
		return 2
	}
	rep := capreport.Build(rd, name, in.prog.tick)
	rd.Close()
	in.prog.done()
	rep.Generated = time.Now()
	w := stdout
	var f *os.File
	if out != "-" {
		if f, err = os.Create(out); err != nil {
			fmt.Fprintf(stderr, "goroce cap report: %v\n", err)
			return 2
		}
		w = f
	}
	err = capreport.Write(w, rep)
	if f != nil {
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap report: writing %s: %v\n", out, err)
		return 2
	}
	return readStatus("report", rep.Flows, stderr, in.name)
}

// baseName is the last element of a slash- or OS-separated path.
func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}
