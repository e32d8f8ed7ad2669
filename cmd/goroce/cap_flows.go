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
	"time"

	"github.com/goroce/goroce/internal/capflow"
	"github.com/goroce/goroce/internal/caplint"
	"github.com/goroce/goroce/internal/capreport"
)

// capSubcommands are "goroce cap flows|lint|report": the analyses beyond
// tshark. runCap dispatches to them on its first argument.
var capSubcommands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"flows":  runCapFlows,
	"lint":   runCapLint,
	"report": runCapReport,
}

// capInput is an opened capture with an optional progress line.
type capInput struct {
	name   string
	r      io.Reader
	close  func()
	prog   *progress
	stderr io.Writer
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
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "flags:")
		fs.PrintDefaults()
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
func scanAll(in *capInput, cfg capflow.Config, l *caplint.Linter) (*capflow.Result, error) {
	sc, err := capflow.NewScanner(in.r)
	if err != nil {
		return nil, fmt.Errorf("the file %q isn't a capture file in a format goroce understands (%v)", in.name, err)
	}
	defer sc.Close()
	an := capflow.NewAnalyzer(cfg)
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
	if l != nil {
		l.Finish()
	}
	return an.Result(sc.Stats()), nil
}

// readStatus is the exit status and warning for a capture read to its end
// or cut short: the analysis covers the frames before the damage, and the
// status says the file was damaged, as "goroce cap" does.
func readStatus(cmd string, res *capflow.Result, stderr io.Writer, name string) int {
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
	)
	fs := capFlagSet("flows", "usage: goroce cap flows -r FILE [--json]\n\n"+
		"Reconstructs every RC/UC/UD connection (both directions paired): packets and bytes per opcode, PSN range,\n"+
		"gaps, retransmissions and Go-Back-N episodes with their trigger, NAKs, RNR NAKs and the wait after them,\n"+
		"ACK coalescing, READ and ATOMIC request/response pairs with latency, MSN, ECN CE marks, CNPs, goodput over\n"+
		"time and ICRC failures.", stderr, &file, &jsonOut)
	if st := parseCapFlags(fs, args, file); st >= 0 {
		return st
	}
	if file == "" {
		fmt.Fprintln(stderr, "goroce cap flows: no capture file: give one with -r FILE")
		return 2
	}
	in, err := openCapture("flows", file, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap flows: %v\n", err)
		return 2
	}
	defer in.close()
	res, err := scanAll(in, capflow.Config{}, nil)
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap flows: %v\n", err)
		return 2
	}
	if jsonOut {
		err = capflow.WriteJSON(stdout, res)
	} else {
		err = capflow.WriteText(stdout, in.name, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap flows: writing output: %v\n", err)
		return 2
	}
	return readStatus("flows", res, stderr, in.name)
}

// lintFinding is a finding as "goroce cap lint --json" writes it.
type lintFinding struct {
	caplint.Finding
	Direction string `json:"direction,omitempty"`
}

// runCapLint implements "goroce cap lint". Findings are written as they
// are found (bounded memory on any capture): in frame order, except checks
// that wait for later evidence, which report when it comes.
func runCapLint(args []string, stdout, stderr io.Writer) int {
	var (
		file    string
		jsonOut bool
	)
	fs := capFlagSet("lint", "usage: goroce cap lint -r FILE [--json]\n\n"+
		"Checks every packet against the RC/UC/UD transport rules (IBA ch. 9 as rdma_rxe implements them) and\n"+
		"prints one finding per offending packet and rule. Exit status: 0 clean, 1 findings, 2 error.\n"+
		"The rules: goroce cap lint -rules", stderr, &file, &jsonOut)
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
			_ = enc.Encode(caplint.Rules)
			return 0
		}
		for _, r := range caplint.Rules {
			fmt.Fprintf(bw, "%-16s %s\n%-16s cites: %s\n", r.ID, r.Summary, "", r.Cite)
		}
		return 0
	}
	if file == "" {
		fmt.Fprintln(stderr, "goroce cap lint: no capture file: give one with -r FILE")
		return 2
	}
	in, err := openCapture("lint", file, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap lint: %v\n", err)
		return 2
	}
	defer in.close()
	var (
		werr error
		jb   bytes.Buffer
	)
	je := json.NewEncoder(&jb)
	je.SetEscapeHTML(false)
	n := 0
	emit := func(f caplint.Finding) {
		if in.prog != nil && in.prog.shown {
			fmt.Fprint(stderr, "\r\x1b[K")
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
			_, err := fmt.Fprintf(bw, "frame %d\t%.6f\t%s\t%s%s\n", f.Frame, f.Time, f.Rule, f.Message, dir)
			werr = errors.Join(werr, err)
		}
		n++
	}
	if jsonOut {
		name, _ := json.Marshal(in.name)
		fmt.Fprintf(bw, "{\n  \"file\": %s,\n  \"findings\": [", name)
	}
	l := caplint.New(emit)
	res, err := scanAll(in, capflow.Config{}, l)
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
			parts = append(parts, fmt.Sprintf("%s %d", id, counts[caplint.RuleID(id)]))
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
	rep, err := capreport.Build(in.r, name, in.prog.tick)
	in.prog.done()
	if err != nil {
		fmt.Fprintf(stderr, "goroce cap report: the file %q isn't a capture file in a format goroce understands (%v)\n", in.name, err)
		return 2
	}
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
