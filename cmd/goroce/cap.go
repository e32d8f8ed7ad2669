package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/internal/capfmt"
)

var capCommand = command{
	name:    "cap",
	summary: "decode a capture file or a live interface like tshark (-r FILE | -i IFACE, -Y, -T fields -e …)",
	run:     runCap,
}

// stringList is a repeatable string flag (-e, -E).
type stringList []string

// String implements flag.Value.
func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value; each use of the flag adds one value.
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

var _ flag.Value = (*stringList)(nil)

// capValueFlags are the single-letter flags that take a value; tshark
// accepts them glued to their value ("-Tfields", "-eframe.number").
const capValueFlags = "rYTeEcGiaws"

// splitGlued turns "-Tfields" into "-T", "fields" for the value flags.
func splitGlued(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.IndexByte(capValueFlags, a[1]) >= 0 && a[2] != '=' {
			out = append(out, a[:2], a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

// capFlagGroups are the headings of goroce cap -h (doc/cli.md).
var capFlagGroups = []flagGroup{
	{"input", []string{"r", "i"}},
	{"output (as tshark's)", []string{"Y", "T", "e", "E", "G", "c", "l", "n"}},
	{"live capture (as dumpcap's)", []string{"a", "w", "P", "s", "p"}},
	{"accepted, not supported", []string{"V", "2", "R"}},
}

// runCap implements "goroce cap".
func runCap(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 { // goroce cap flows|lint|report (cap_flows.go)
		if sub := capSubcommands[args[0]]; sub != nil {
			return sub(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("goroce cap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		file, filter, format, list string
		count                      int
		fields, opts               stringList
		noResolve, flushEach       bool
		verbose, twoPass           bool
		readFilter                 string
		live                       liveOptions
		printWhileWriting          bool
	)
	fs.StringVar(&file, "r", "", "read packets from `FILE` (pcap or pcapng, optionally gzipped; - for stdin)")
	fs.StringVar(&filter, "Y", "", "display `FILTER`, tshark syntax (infiniband, roce, field == value, &&, ||, !, ...)")
	fs.StringVar(&format, "T", "", "output `FORMAT`: text (default), fields or json")
	fs.Var(&fields, "e", "`FIELD` to print with -T fields or -T json (repeatable), e.g. infiniband.bth.psn")
	fs.Var(&opts, "E", "-T fields `OPTION`: header=y|n, separator=/t|/s|C, occurrence=f|l|a, aggregator=,|/s|C, quote=d|s|n, bom=y|n")
	fs.IntVar(&count, "c", 0, "stop after reading (or capturing) `N` packets")
	live.register(fs, nil)
	fs.BoolVar(&printWhileWriting, "P", false, "with -w: also decode and print the packets")
	fs.StringVar(&list, "G", "", "print a `REPORT` instead of decoding: fields")
	fs.BoolVar(&noResolve, "n", false, "no name resolution (accepted for tshark compatibility; goroce never resolves)")
	fs.BoolVar(&flushEach, "l", false, "flush the output after each packet")
	fs.BoolVar(&verbose, "V", false, "packet details (not supported: use -T json)")
	fs.BoolVar(&twoPass, "2", false, "two-pass analysis (not supported)")
	fs.StringVar(&readFilter, "R", "", "read filter (not supported: use -Y)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: goroce cap -r FILE [-Y FILTER] [-T fields|json|text] [-e FIELD]... [-E OPTION]...")
		fmt.Fprintln(stderr, "       goroce cap -i IFACE [-c N] [-a duration:SECONDS] [-w FILE [-P]] [-Y FILTER] [-T ...] [-e FIELD]...")
		fmt.Fprintln(stderr, "       goroce cap flows|lint|report -r FILE ...   (flow analysis, linter, HTML report; -h for each)")
		fmt.Fprintln(stderr, "       goroce cap flows|lint -i IFACE ...         (the same live, with a per-flow table each second)")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Decodes RoCEv2 captures the way tshark 4.0 does: -T fields output is byte-identical")
		fmt.Fprintln(stderr, "to tshark -T fields for the same -e and -E options. Extra fields: roce.icrc.status")
		fmt.Fprintln(stderr, "(good/bad) and roce.icrc.computed. Extra filter name: roce (= infiniband; tshark")
		fmt.Fprintln(stderr, "rejects it). -T json -e matches tshark; -T json alone has tshark's layout with goroce's")
		fmt.Fprintln(stderr, "fields only; -T text is tshark's summary line for RoCE packets plus the PSN, shorter")
		fmt.Fprintln(stderr, "for others.")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "-i captures live with an AF_PACKET socket (root or CAP_NET_RAW; Ethernet interfaces).")
		fmt.Fprintln(stderr, "A BPF filter in the kernel passes only RoCEv2 (UDP port 4791, IPv4 or IPv6, with or")
		fmt.Fprintln(stderr, "without one 802.1Q tag) and MAC Control frames (PAUSE, PFC). The packets are printed as")
		fmt.Fprintln(stderr, "they arrive; -w writes pcapng instead (add -P to print as well). The capture ends at -c,")
		fmt.Fprintln(stderr, "-a, or Ctrl-C (SIGINT/SIGTERM), and stderr then gets \"N packets captured, M dropped\"")
		fmt.Fprintln(stderr, "(M: frames the kernel dropped because goroce could not keep up).")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "example:")
		fmt.Fprintln(stderr, "  goroce cap -r x.pcap -Y infiniband -T fields -e frame.number -e infiniband.bth.psn -e roce.icrc.status")
		fmt.Fprintln(stderr, "  goroce cap -i eth0 -a duration:10 -w x.pcapng")
		printFlags(stderr, fs, capFlagGroups)
	}
	if err := fs.Parse(splitGlued(args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // flag has printed the error and the usage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "goroce cap: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q (a display filter goes after -Y)", fs.Arg(0))
	}
	switch {
	case verbose:
		return fail("-V (packet details) is not supported; use -T json for the decoded fields")
	case twoPass:
		return fail("-2 (two-pass analysis) is not supported; goroce decodes in one pass like tshark without -2")
	case readFilter != "":
		return fail("-R is not supported; use -Y %q", readFilter)
	}
	if list != "" {
		if list != "fields" {
			return fail("-G %q: the only report is \"fields\"", list)
		}
		return listFields(stdout)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case file == "" && live.iface == "":
		return fail("no capture file: give one with -r FILE, or capture live with -i IFACE (goroce help cap for all flags)")
	case file != "" && live.iface != "":
		return fail("-r and -i: read a file or capture live, not both")
	case printWhileWriting && live.write == "":
		return fail("-P prints the packets while writing them: it needs -w FILE")
	case live.write == "-" && printWhileWriting:
		return fail("-w - writes the capture to stdout: it can't print the packets there too (-P)")
	case live.write != "" && !printWhileWriting && (filter != "" || len(fields) > 0 || format != ""):
		return fail("-Y, -T and -e apply to printed packets; with -w add -P to print them (the file gets every captured frame)")
	}
	if err := live.check(func(n string) bool { return set[n] }); err != nil {
		return fail("%v", err)
	}

	cols, err := parseFieldList(fields)
	if err != nil {
		return fail("%v", err)
	}
	switch format {
	case "":
		format = "text"
		if len(cols) > 0 {
			format = "fields"
		}
	case "fields":
		if len(cols) == 0 {
			return fail("\"-T fields\" was specified, but no fields were specified with \"-e\"")
		}
	case "json", "text":
	case "ek", "pdml", "psml", "ps", "tabs", "jsonraw":
		return fail("-T %s is not supported; use fields, json or text", format)
	default:
		return fail("invalid -T %q: use fields, json or text", format)
	}
	fopt := capfmt.DefaultFieldsOptions()
	for _, o := range opts {
		if err := fopt.ParseFieldsOption(o); err != nil {
			return fail("-E %v", err)
		}
	}
	flt, err := capfmt.CompileFilter(filter)
	if err != nil {
		return fail("-Y %q: %v", filter, err)
	}

	var (
		src   capture.Source
		name  string
		nanos bool
		lc    *liveCapture
		show  = true // decode and print the packets
	)
	if live.iface != "" {
		lc, err = openLive(&live, count, stdout)
		if err != nil {
			return fail("%v", err)
		}
		defer lc.Close() // on an early return; the end of the capture closes it first
		src, name, nanos = lc, live.iface, true
		show = live.write == "" || printWhileWriting
		count = 0 // the capture counts -c itself, with -a packets:N
		fmt.Fprintf(stderr, "Capturing on '%s'\n", live.iface)
	} else {
		var in io.Reader = os.Stdin
		name = file
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return fail("the file %q doesn't exist", file)
				}
				return fail("%v", err)
			}
			defer f.Close()
			in = f
		} else {
			name = "standard input"
		}
		rd, err := capture.NewReader(in)
		if err != nil {
			return fail("the file %q isn't a capture file in a format goroce understands (%v)", name, err)
		}
		defer rd.Close()
		src, nanos = rd, rd.NanosecondTimestamps()
	}

	bw := bufio.NewWriterSize(stdout, 1<<16)
	var write func(*capfmt.Packet) error
	finish := func() error { return nil }
	switch {
	case !show:
	case format == "fields":
		fw := capfmt.NewFieldsWriter(bw, cols, fopt)
		if err := fw.WriteHeader(); err != nil {
			return fail("%v", err)
		}
		write = fw.Write
	case format == "json":
		jw := capfmt.NewJSONWriter(bw, cols, nil)
		write, finish = jw.Write, jw.Close
	default:
		write = capfmt.NewTextWriter(bw, nanos).Write
	}
	if lc != nil && show {
		// Live output goes out when the capture is idle, and at least
		// every 100 ms while packets keep coming.
		last := time.Now()
		lc.tick = func(now time.Time, idle bool) {
			if (idle && bw.Buffered() > 0) || now.Sub(last) >= 100*time.Millisecond {
				_ = bw.Flush() // an error sticks in bw: the final Flush reports it
				last = now
			}
		}
	}

	// The ICRC check costs a CRC per packet; skip it when nothing shows it.
	needICRC := format == "text" || (format == "json" && len(cols) == 0) ||
		flt.Uses(capfmt.ICRCStatus) || flt.Uses(capfmt.ICRCComputed)
	for _, c := range cols {
		needICRC = needICRC || c == capfmt.ICRCStatus || c == capfmt.ICRCComputed
	}
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{SkipICRC: !needICRC})
	roceOnly := flt.RoCEOnly()
	var (
		fr   capfmt.Frame
		p    capfmt.Packet
		rerr error
	)
	for n := 0; count <= 0 || n < count; n++ {
		if rerr = src.Next(&fr); rerr != nil {
			break
		}
		if !show {
			continue
		}
		dec.Decode(&fr, &p)
		if roceOnly {
			if !p.RoCE {
				continue
			}
		} else if !flt.Match(&p) {
			continue
		}
		if err := write(&p); err != nil {
			return fail("writing output: %v", err)
		}
		if flushEach {
			if err := bw.Flush(); err != nil {
				return fail("writing output: %v", err)
			}
		}
	}
	if err := finish(); err != nil {
		return fail("writing output: %v", err)
	}
	if err := bw.Flush(); err != nil {
		return fail("writing output: %v", err)
	}
	if lc != nil {
		err := lc.Close()
		lc.summary(stderr)
		if err != nil {
			fmt.Fprintf(stderr, "goroce cap: %v\n", err)
			return 1
		}
		return 0
	}
	switch {
	case rerr == nil || errors.Is(rerr, io.EOF):
		return 0
	case errors.Is(rerr, capture.ErrCutShort):
		return fail("the file %q appears to have been cut short in the middle of a packet", name)
	default:
		return fail("the file %q appears to be damaged or corrupt (%v)", name, rerr)
	}
}

// parseFieldList resolves -e names, reporting every unknown one at once
// (tshark: "Some fields aren't valid").
func parseFieldList(names []string) ([]capfmt.Field, error) {
	var (
		cols []capfmt.Field
		bad  []string
	)
	for _, n := range names {
		f, ok := capfmt.FieldByName(n)
		if !ok || f.IsProtocol() {
			bad = append(bad, strconv.Quote(n))
			continue
		}
		cols = append(cols, f)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("some fields aren't valid: %s (list them with: goroce cap -G fields)", strings.Join(bad, ", "))
	}
	return cols, nil
}

// listFields prints the fields and protocols goroce cap knows, one per
// line: name, then "tshark" or "goroce" for where the name comes from.
func listFields(w io.Writer) int {
	bw := bufio.NewWriter(w)
	for _, f := range capfmt.Fields() {
		kind := "field"
		if f.IsProtocol() {
			kind = "protocol"
		}
		origin := "tshark"
		if !f.InTshark() {
			origin = "goroce"
		}
		fmt.Fprintf(bw, "%s\t%s\t%s\n", f, kind, origin)
	}
	fmt.Fprintf(bw, "roce\tprotocol\tgoroce (alias of infiniband, -Y only)\n")
	if err := bw.Flush(); err != nil {
		return 1
	}
	return 0
}
