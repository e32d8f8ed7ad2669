package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/internal/fabric/incast"
)

// runFabricIncast implements "goroce fabric incast": goroce devices in
// several hosts of a fabric write into one host (doc/fabric.md
// "Incast"), with DCQCN on, off, or both in turn, and the run prints
// what DCQCN did (CNPs, rate cuts) and what the fabric did (CE marks, tbf
// drops) and the transport repaired (Go-Back-N).
func runFabricIncast(args []string, stdout, stderr io.Writer) int {
	fs := fabricFlags("incast", "[NAME] [--senders h0,h1,h2] [--receiver HOST] [--dcqcn on|off|both] [-D 2s] [--json]", stderr)
	var (
		senders  = fs.String("senders", "", "sending hosts, comma-separated (default: leaf 0's hosts but the receiver, at most 7)")
		receiver = fs.String("receiver", "", "receiving host (default: the first host of the last leaf)")
		mode     = fs.String("dcqcn", "both", "on, off, or both (on then off, in one run)")
		dur      = fs.Duration("D", 2*time.Second, "how long the senders write, each run")
		qps      = fs.Int("q", 1, "QPs per sender")
		size     = fs.Int("s", incast.DefaultSize, "WRITE size in bytes")
		depth    = fs.Int("t", incast.DefaultDepth, "WRITEs outstanding per QP")
		sample   = fs.Duration("sample", 0, "print the senders' DCQCN rates, marks and drops every this often (e.g. 50ms)")
		asJS     = fs.Bool("json", false, "print the results as JSON (one object per run)")
	)
	pos, st := parseFabricArgs(fs, args)
	if st >= 0 {
		return st
	}
	name, ok := oneName("incast", pos, "", stderr)
	if !ok {
		return 2
	}
	var runs []bool
	switch *mode {
	case "on":
		runs = []bool{true}
	case "off":
		runs = []bool{false}
	case "both":
		runs = []bool{true, false}
	default:
		fmt.Fprintf(stderr, "goroce fabric incast: --dcqcn %q: on, off or both\n", *mode)
		return 2
	}
	if !needRoot("incast", stderr) {
		return 1
	}
	f, ok := loadFabric("incast", name, stderr)
	if !ok {
		return 1
	}
	cfg := incast.Config{Fabric: f, QPs: *qps, Duration: *dur, Size: *size, Depth: *depth, Sample: *sample}
	if *receiver != "" {
		h, ok := f.Host(*receiver)
		if !ok {
			fmt.Fprintf(stderr, "goroce fabric incast: no host %q in %s\n", *receiver, f.Name)
			return 2
		}
		cfg.Receiver = h
	} else {
		cfg.Receiver = f.LeafHosts(f.Config.Leaves - 1)[0]
	}
	if *senders != "" {
		for _, s := range strings.Split(*senders, ",") {
			h, ok := f.Host(strings.TrimSpace(s))
			if !ok || h.Index == cfg.Receiver.Index {
				fmt.Fprintf(stderr, "goroce fabric incast: bad sender %q (a host of %s other than the receiver)\n", s, f.Name)
				return 2
			}
			cfg.Senders = append(cfg.Senders, h)
		}
	} else {
		for _, h := range f.LeafHosts(0) {
			if h.Index != cfg.Receiver.Index && len(cfg.Senders) < 7 {
				cfg.Senders = append(cfg.Senders, h)
			}
		}
	}
	if len(cfg.Senders) == 0 {
		fmt.Fprintf(stderr, "goroce fabric incast: no senders (leaf 0 has only the receiver; name them with --senders)\n")
		return 2
	}
	var names []string
	for _, h := range cfg.Senders {
		names = append(names, h.Name)
	}
	if !*asJS {
		fmt.Fprintf(stdout, "%s\nincast: %s → %s, %d QP(s) each, %d-byte WRITEs, %d outstanding per QP, %v per run\n\n",
			f, strings.Join(names, ","), cfg.Receiver.Name, cfg.QPs, cfg.Size, cfg.Depth, cfg.Duration)
	}
	var results []*incast.Result
	for _, on := range runs {
		c := cfg
		c.DCQCN = on
		r, err := incast.Run(context.Background(), c)
		if err != nil {
			fmt.Fprintf(stderr, "goroce fabric incast: %v\n", err)
			return 1
		}
		results = append(results, r)
		if *asJS {
			if st := writeJSON(stdout, stderr, struct {
				DCQCN bool `json:"dcqcn"`
				*incast.Result
			}{on, r}); st != 0 {
				return st
			}
			continue
		}
		writeIncast(stdout, on, r)
	}
	if len(results) == 2 && !*asJS {
		on, off := results[0], results[1]
		ratio := "-"
		if off.Drops > 0 {
			ratio = fmt.Sprintf("%.3f", float64(on.Drops)/float64(off.Drops))
		}
		fmt.Fprintf(stdout, "tbf drops with DCQCN on / off: %d / %d = %s; goodput %.3f / %.3f Gb/s\n", on.Drops, off.Drops, ratio, on.TotalGbps, off.TotalGbps)
	}
	return 0
}

func writeIncast(w io.Writer, on bool, r *incast.Result) {
	state := "off"
	if on {
		state = "on"
	}
	fmt.Fprintf(w, "DCQCN %s: %.3f Gb/s in all (per sender %s)\n", state, r.TotalGbps, fmtGbps(r.Gbps))
	fmt.Fprintf(w, "  CNPs sent %d, received %d; rate cuts %d", r.CNPsSent, r.CNPsReceived, r.RateCuts)
	if r.MinRate > 0 {
		fmt.Fprintf(w, ", lowest rate %.1f Mb/s", float64(r.MinRate)/1e6)
	}
	fmt.Fprintf(w, "\n  retransmitted %d packets (Go-Back-N %d, NAK sequence errors %d)\n", r.Retransmitted, r.GoBackN, r.SeqNAKs)
	fmt.Fprintf(w, "  fabric: %d CE marks, %d tbf drops", r.Marks, r.Drops)
	var busy []string
	for _, l := range r.Fabric.Links {
		for _, e := range []struct {
			dir string
			s   fabric.EndStats
		}{{"→", l.A}, {"←", l.B}} {
			if e.s.Drops > 0 || (e.s.ECN != nil && e.s.ECN.Marks > 0) {
				marks := uint64(0)
				if e.s.ECN != nil {
					marks = e.s.ECN.Marks
				}
				busy = append(busy, fmt.Sprintf("%s %s: %d CE, %d drops", l.Name, e.dir, marks, e.s.Drops))
			}
		}
	}
	if len(busy) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(busy, "; "))
	}
	fmt.Fprintln(w)
	for _, s := range r.Samples {
		rates := "unpaced"
		if on {
			var rs []string
			for _, x := range s.Rates {
				rs = append(rs, fmt.Sprintf("%.0f", float64(x)/1e6))
			}
			rates = "[" + strings.Join(rs, " ") + "] Mb/s"
		}
		fmt.Fprintf(w, "  %7.1f ms  rates %s  CNPs %d  CE %d  drops %d\n", s.T.Seconds()*1e3, rates, s.CNPs, s.Marks, s.Drops)
	}
	fmt.Fprintln(w)
}

func fmtGbps(g []float64) string {
	var s []string
	for _, x := range g {
		s = append(s, fmt.Sprintf("%.3f", x))
	}
	return strings.Join(s, " ")
}
