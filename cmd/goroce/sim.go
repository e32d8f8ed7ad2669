package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cc/fabric"
)

var simCommand = command{
	name:    "sim",
	summary: "simulate a fabric: DCQCN (sim dcqcn --scenario S3 [--profile P|M] [--json] [-o plot.html]) or ECMP (sim ecmp [--qps 1,4,8] [--mode all])",
	run:     runSim,
}

// runSim implements "goroce sim dcqcn" and dispatches "goroce sim ecmp"
// (runSimECMP). "sim dcqcn" runs one scenario of doc/dcqcn.md
// §5.3 in the cc/fabric simulator, prints its figures against their
// thresholds (as text or one JSON object) and optionally writes an HTML
// page with the rate and queue plots. It returns 1 if a figure misses its
// threshold, 2 for usage errors.
func runSim(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("goroce sim dcqcn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		scenario    = fs.String("scenario", "S3", "scenario ID of doc/dcqcn.md §5.3 (see --list)")
		profile     = fs.String("profile", "P", "parameter profile: P (paper) or M (ConnectX-like)")
		seed        = fs.Uint64("seed", 1, "PRNG seed (RED draws, start jitter)")
		asJSON      = fs.Bool("json", false, "print the figures as one JSON object")
		out         = fs.String("o", "", "write an HTML page with rate and queue plots to this file")
		list        = fs.Bool("list", false, "list the scenarios and exit")
		cnpInterval = fs.String("cnp-interval", "", "override the profile's minimum CNP interval N per QP (e.g. 4us; 0 = a CNP per CE packet)")
	)
	fs.Usage = func() {
		simDCQCNUsage(fs.Output())
		printFlags(fs.Output(), fs, simDCQCNFlagGroups)
	}
	if len(args) > 0 && args[0] == "ecmp" {
		return runSimECMP(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "dcqcn" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			simUsage(stdout)
			return 0
		}
		simUsage(stderr)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "goroce sim dcqcn: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *list {
		for _, s := range fabric.Scenarios() {
			fmt.Fprintf(stdout, "%-8s %s\n", s.ID, s.Title)
		}
		return 0
	}
	sc, ok := fabric.LookupScenario(*scenario)
	if !ok {
		fmt.Fprintf(stderr, "goroce sim dcqcn: unknown scenario %q (try --list)\n", *scenario)
		return 2
	}
	p, err := cc.ParseProfile(*profile)
	if err != nil {
		fmt.Fprintf(stderr, "goroce sim dcqcn: %v\n", err)
		return 2
	}

	cfg := sc.Config(p, *seed)
	if *cnpInterval != "" {
		n, err := time.ParseDuration(*cnpInterval)
		if err != nil || n < 0 {
			fmt.Fprintf(stderr, "goroce sim dcqcn: bad --cnp-interval %q\n", *cnpInterval)
			return 2
		}
		cfg.NP.Interval = n
	}
	start := time.Now()
	res, err := fabric.Run(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "goroce sim dcqcn: %v\n", err)
		return 2
	}
	elapsed := time.Since(start)
	figs := sc.Figures(res, p)
	var failed []string
	for _, f := range figs {
		if !f.Pass() {
			failed = append(failed, f.Key)
		}
	}

	if *out != "" {
		page := fabric.Page{
			Title: fmt.Sprintf("DCQCN %s — %s", sc.ID, sc.Title),
			Notes: []string{
				fmt.Sprintf("profile %s, seed %d; %d flow(s), NIC %v, bottleneck %v, %d-B frames, buffer %d B, PFC %s",
					p, *seed, len(cfg.Flows), cfg.RP.LineRate, cfg.Bottleneck, res.Config.PacketSize, res.Config.Buffer,
					map[bool]string{false: "off", true: "on"}[cfg.PFC.Enabled]),
				fmt.Sprintf("RED Kmin %d B, Kmax %d B, Pmax %g; NP N = %v; RP g = %g, K = %v, T = %v, B = %d B, F = %d, R_AI = %v, R_HAI = %v, min rate %v",
					cfg.RED.Kmin, cfg.RED.Kmax, cfg.RED.Pmax, cfg.NP.Interval, cfg.RP.G, cfg.RP.AlphaPeriod, cfg.RP.RateTimer,
					cfg.RP.ByteCounter, cfg.RP.Threshold, cfg.RP.AI, cfg.RP.HAI, cfg.RP.MinRate),
				fmt.Sprintf("%v simulated, %d events; goroce sim dcqcn --scenario %s --profile %s --seed %d", cfg.Duration, res.Events, sc.ID, p, *seed),
			},
			Figures: figs,
		}
		if err := writeHTMLFile(*out, res, page); err != nil {
			fmt.Fprintf(stderr, "goroce sim dcqcn: %v\n", err)
			return 1
		}
	}

	if *asJSON {
		if err := writeFiguresJSON(stdout, sc.ID, p, *seed, figs, failed); err != nil {
			fmt.Fprintf(stderr, "goroce sim dcqcn: %v\n", err)
			return 1
		}
	} else {
		fmt.Fprintf(stdout, "%s  %s\nprofile %s, seed %d: %v simulated in %v (%d events)\n\n",
			sc.ID, sc.Title, p, *seed, cfg.Duration, elapsed.Round(time.Millisecond), res.Events)
		for _, f := range figs {
			th, verdict := "", ""
			switch f.Cmp {
			case fabric.AtLeast:
				th = fmt.Sprintf("≥ %g", f.Limit)
			case fabric.AtMost:
				th = fmt.Sprintf("≤ %g", f.Limit)
			}
			if f.Cmp != fabric.Report {
				verdict = "pass"
				if !f.Pass() {
					verdict = "FAIL"
				}
			}
			fmt.Fprintf(stdout, "  %-15s %14s  %-12s %s\n", f.Key, fmtValue(f.Value), th, verdict)
		}
		for _, v := range res.Violations {
			fmt.Fprintf(stdout, "  violation: %s\n", v)
		}
		if len(failed) == 0 {
			fmt.Fprintln(stdout, "\nPASS")
		} else {
			fmt.Fprintf(stdout, "\nFAIL: %s\n", strings.Join(failed, ", "))
		}
		if *out != "" {
			fmt.Fprintf(stdout, "plot: %s\n", *out)
		}
	}
	if len(failed) > 0 {
		return 1
	}
	return 0
}

// simDCQCNFlagGroups and simECMPFlagGroups are the headings of goroce sim
// dcqcn -h and goroce sim ecmp -h (doc/cli.md).
var (
	simDCQCNFlagGroups = []flagGroup{
		{"the scenario", []string{"scenario", "profile", "cnp-interval", "seed", "list"}},
		{"output", []string{"json", "o"}},
	}
	simECMPFlagGroups = []flagGroup{
		{"the runs", []string{"mode", "qps", "ports", "seeds", "long", "placement"}},
		{"the fabric", []string{"leaves", "hosts", "spines", "host-gbps", "spine-gbps", "data-mb", "profile", "no-dcqcn"}},
		{"output", []string{"json", "o"}},
	}
)

// simUsage is goroce sim's help: both simulators, each with its -h.
func simUsage(w io.Writer) {
	simDCQCNUsage(w)
	fmt.Fprintln(w)
	simECMPUsage(w)
	fmt.Fprintln(w, "\ngoroce sim dcqcn -h and goroce sim ecmp -h list their flags.")
}

// simDCQCNUsage is the usage line and description of goroce sim dcqcn.
func simDCQCNUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: goroce sim dcqcn [--scenario S3] [--profile P|M] [--seed N] [--json] [-o plot.html] [--list]")
	fmt.Fprintln(w, "\nRuns a DCQCN scenario of doc/dcqcn.md §5.3 in the cc/fabric simulator and prints its figures.")
	fmt.Fprintln(w, "Exit status 1 if a figure misses its threshold.")
}

// simECMPUsage is the usage line and description of goroce sim ecmp.
func simECMPUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: goroce sim ecmp [--qps 1,4,8] [--mode fixed|kernel|explicit|all] [--seeds N] [--long] [--json] [-o plot.html]")
	fmt.Fprintln(w, "\nA ring all-reduce over a leaf-spine fabric with ECMP: per-spine load and completion against the balanced ideal.")
	fmt.Fprintln(w, "Exit status 1 if the goal (kernel rule, 8 QPs per pair: median completion ≤ 1.25 × ideal) is run and missed.")
}

func writeHTMLFile(path string, res *fabric.Result, page fabric.Page) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fabric.WriteHTML(f, res, page); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeFiguresJSON prints one JSON object: scenario, profile, seed, every
// figure under its key (null when not applicable or infinite), pass and
// the keys that failed.
func writeFiguresJSON(w io.Writer, id string, p cc.Profile, seed uint64, figs []fabric.Figure, failed []string) error {
	var b strings.Builder
	field := func(k string, v any) {
		if b.Len() > 1 {
			b.WriteString(",")
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(v)
		if err != nil {
			vb = []byte("null")
		}
		fmt.Fprintf(&b, "\n  %s: %s", kb, vb)
	}
	b.WriteString("{")
	field("scenario", id)
	field("profile", p.String())
	field("seed", seed)
	for _, f := range figs {
		if math.IsNaN(f.Value) || math.IsInf(f.Value, 0) {
			field(f.Key, nil)
		} else {
			field(f.Key, f.Value)
		}
	}
	field("pass", len(failed) == 0)
	if failed == nil {
		failed = []string{}
	}
	field("failed", failed)
	b.WriteString("\n}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case math.IsInf(v, 1):
		return "never"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}
