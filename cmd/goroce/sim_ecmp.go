package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cc/fabric"
)

// ecmpGoal is issue 14's goal: with the kernel rule and 8 QPs per pair,
// median completion ≤ 1.25 × the balanced ideal.
const (
	ecmpGoalQPs   = 8
	ecmpGoalRatio = 1.25
)

// runSimECMP implements "goroce sim ecmp": the ring all-reduce of
// cc/fabric's ECMP model for each source-port mode and QP count over
// several seeds. It prints a table (or JSON) and optionally writes the
// HTML page; it returns 1 if the goal (kernel rule, 8 QPs: median
// completion ≤ 1.25 × ideal) is in the matrix and missed, 2 for usage
// errors.
func runSimECMP(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("goroce sim ecmp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		qpsFlag   = fs.String("qps", "1,4,8", "QPs per neighbour pair, comma-separated")
		modeFlag  = fs.String("mode", "all", "source-port mode: fixed, kernel, explicit or all")
		seeds     = fs.Int("seeds", 0, "seeds per configuration (default 20, 100 with -long)")
		long      = fs.Bool("long", false, "100 seeds")
		asJSON    = fs.Bool("json", false, "print the results as one JSON object")
		out       = fs.String("o", "", "write an HTML page with the plots to this file")
		placement = fs.String("placement", "block", "ring placement: block (hosts 0–7 on leaf 0) or interleaved (host i on leaf i mod 2)")
		leaves    = fs.Int("leaves", 2, "leaves")
		hosts     = fs.Int("hosts", 8, "hosts per leaf")
		spines    = fs.Int("spines", 8, "spines")
		hostGbps  = fs.Float64("host-gbps", 100, "host link rate in Gb/s")
		spineGbps = fs.Float64("spine-gbps", 50, "leaf–spine link rate in Gb/s")
		dataMB    = fs.Float64("data-mb", 32, "MiB each host all-reduces")
		ports     = fs.String("ports", "", "explicit mode's source ports, comma-separated (default 49152, 49153, … one per QP)")
		profile   = fs.String("profile", "P", "DCQCN profile for overloaded links: P (paper) or M (ConnectX-like)")
		noDCQCN   = fs.Bool("no-dcqcn", false, "pure max-min sharing: no packet-level DCQCN on overloaded links")
	)
	fs.Usage = func() {
		simECMPUsage(fs.Output())
		printFlags(fs.Output(), fs, simECMPFlagGroups)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "goroce sim ecmp: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	qps, err := parseInts(*qpsFlag)
	if err != nil || len(qps) == 0 || slices.ContainsFunc(qps, func(q int) bool { return q < 1 || q > 1024 }) {
		return usage("bad --qps %q (QP counts 1..1024)", *qpsFlag)
	}
	var modes []fabric.PortMode
	if *modeFlag == "all" {
		modes = []fabric.PortMode{fabric.PortFixed, fabric.PortKernel, fabric.PortExplicit}
	} else {
		m, err := fabric.ParsePortMode(*modeFlag)
		if err != nil {
			return usage("bad --mode %q (want fixed, kernel, explicit or all)", *modeFlag)
		}
		modes = []fabric.PortMode{m}
	}
	n := *seeds
	if n == 0 {
		n = 20
		if *long {
			n = 100
		}
	}
	if n < 1 || n > 100_000 {
		return usage("bad --seeds %d", n)
	}
	pl, err := fabric.ParsePlacement(*placement)
	if err != nil {
		return usage("%v", err)
	}
	p, err := cc.ParseProfile(*profile)
	if err != nil {
		return usage("%v", err)
	}
	var portSet []uint16
	if *ports != "" {
		ps, err := parseInts(*ports)
		if err != nil {
			return usage("bad --ports %q", *ports)
		}
		for _, v := range ps {
			if v < 1 || v > 0xFFFF {
				return usage("bad port %d", v)
			}
			portSet = append(portSet, uint16(v))
		}
	}
	if !(*dataMB > 0) || *dataMB > 1<<20 {
		return usage("bad --data-mb %g", *dataMB)
	}
	base := fabric.ECMPConfig{
		Leaves: *leaves, HostsPerLeaf: *hosts, Spines: *spines,
		Placement: pl, Ports: portSet,
		HostRate: cc.Bitrate(*hostGbps * 1e9), SpineRate: cc.Bitrate(*spineGbps * 1e9),
		Data: int64(*dataMB * (1 << 20)), Profile: p, NoDCQCN: *noDCQCN,
	}
	seedList := make([]uint64, n)
	for i := range seedList {
		seedList[i] = uint64(i + 1)
	}

	start := time.Now()
	var sim fabric.ECMPSim
	var stats []fabric.ECMPStats
	for _, m := range modes {
		for _, q := range qps {
			cfg := base
			cfg.Mode, cfg.QPs = m, q
			st, err := sim.Sweep(cfg, seedList)
			if err != nil {
				fmt.Fprintf(stderr, "goroce sim ecmp: %v\n", err)
				return 2
			}
			stats = append(stats, st)
		}
	}
	elapsed := time.Since(start)
	c := stats[0].Runs[0].Config
	ideal := stats[0].Runs[0].Ideal
	desc := fmt.Sprintf("ring all-reduce over %d leaves × %d hosts (%s placement), %d spines; hosts %v, leaf–spine links %v; %g MiB per host, %d steps",
		c.Leaves, c.HostsPerLeaf, c.Placement, c.Spines, c.HostRate, c.SpineRate, float64(c.Data)/(1<<20), 2*(c.Leaves*c.HostsPerLeaf-1))
	dcqcn := "DCQCN profile " + p.String() + " on overloaded spine links (packet-level runs)"
	if *noDCQCN {
		dcqcn = "no DCQCN: overloaded links shared max-min at full rate"
	}
	goal, goalPass := "", true
	for _, st := range stats {
		if st.Mode == fabric.PortKernel && st.QPs == ecmpGoalQPs {
			goalPass = st.RatioMedian <= ecmpGoalRatio
			goal = fmt.Sprintf("goal: kernel rule, %d QPs per pair, median completion/ideal %.3f ≤ %g: %s",
				ecmpGoalQPs, st.RatioMedian, ecmpGoalRatio, map[bool]string{true: "pass", false: "FAIL"}[goalPass])
		}
	}
	cmdline := "goroce sim ecmp " + strings.Join(args, " ")

	if *out != "" {
		notes := []string{desc, dcqcn, fmt.Sprintf("ideal (every cross-leaf pair spread evenly over the spines) %v; %d seeds; %s", ideal, n, strings.TrimSpace(cmdline))}
		if goal != "" {
			notes = append(notes, goal)
		}
		for _, k := range sim.Calibrations() {
			notes = append(notes, fmt.Sprintf("DCQCN: %d QPs at %v each into a %v link for %v: utilisation %.3f, peak queue %d B, %d CNPs, %d drops",
				k.Flows, k.LineRate, k.Rate, k.Duration, k.U, k.Qpeak, k.CNPs, k.Drops))
		}
		page := fabric.Page{Title: "ECMP: ring all-reduce on a leaf-spine fabric", Notes: notes}
		if err := writeFile(*out, func(w io.Writer) error { return fabric.WriteECMPHTML(w, stats, page) }); err != nil {
			fmt.Fprintf(stderr, "goroce sim ecmp: %v\n", err)
			return 1
		}
	}

	if *asJSON {
		if err := writeECMPJSON(stdout, c, n, ideal, stats, sim.Calibrations(), goal != "", goalPass); err != nil {
			fmt.Fprintf(stderr, "goroce sim ecmp: %v\n", err)
			return 1
		}
	} else {
		fmt.Fprintf(stdout, "%s\n%s\nideal %v; %d seeds; %v\n\n", desc, dcqcn, ideal, n, elapsed.Round(time.Millisecond))
		fmt.Fprintf(stdout, "%-9s %8s  %-22s  %-22s\n", "", "QPs per", "spine load max/mean", "completion/ideal")
		fmt.Fprintf(stdout, "%-9s %8s  %10s %10s  %10s %10s\n", "mode", "pair", "median", "worst", "median", "worst")
		for _, st := range stats {
			fmt.Fprintf(stdout, "%-9s %8d  %10.2f %10.2f  %10.3f %10.3f\n",
				st.Mode, st.QPs, st.LoadMedian, st.LoadWorst, st.RatioMedian, st.RatioWorst)
		}
		if cals := sim.Calibrations(); len(cals) > 0 {
			fmt.Fprintln(stdout, "\noverloaded spine links, packet-level DCQCN:")
			for _, k := range cals {
				fmt.Fprintf(stdout, "  %2d QPs at %v into %v for %v: utilisation %.3f, peak queue %d B, %d CNPs, %d drops\n",
					k.Flows, k.LineRate, k.Rate, k.Duration, k.U, k.Qpeak, k.CNPs, k.Drops)
			}
		}
		if goal != "" {
			fmt.Fprintf(stdout, "\n%s\n", goal)
		}
		if *out != "" {
			fmt.Fprintf(stdout, "plot: %s\n", *out)
		}
	}
	if !goalPass {
		return 1
	}
	return 0
}

func parseInts(s string) ([]int, error) {
	var xs []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		xs = append(xs, v)
	}
	return xs, nil
}

type ecmpRowJSON struct {
	Mode        string   `json:"mode"`
	QPs         int      `json:"qps"`
	LoadMedian  *float64 `json:"spine_load_max_mean_median"`
	LoadWorst   *float64 `json:"spine_load_max_mean_worst"`
	RatioMedian float64  `json:"completion_ideal_median"`
	RatioWorst  float64  `json:"completion_ideal_worst"`
}

type ecmpCalJSON struct {
	QPs      int     `json:"qps"`
	LineBps  float64 `json:"line_bps"`
	LinkBps  float64 `json:"link_bps"`
	Duration float64 `json:"duration_ms"`
	U        float64 `json:"utilisation"`
	Qpeak    int     `json:"qpeak_bytes"`
	CNPs     int64   `json:"cnps"`
	Drops    uint64  `json:"drops"`
}

// writeECMPJSON prints the run as one JSON object: the fabric, the ideal,
// one row per mode and QP count, the DCQCN runs, and the goal's verdict
// (null when the matrix does not hold it).
func writeECMPJSON(w io.Writer, c fabric.ECMPConfig, seeds int, ideal time.Duration, stats []fabric.ECMPStats,
	cals []fabric.Calibration, haveGoal, goalPass bool) error {
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	v := struct {
		Leaves       int           `json:"leaves"`
		HostsPerLeaf int           `json:"hosts_per_leaf"`
		Spines       int           `json:"spines"`
		Placement    string        `json:"placement"`
		HostBps      float64       `json:"host_bps"`
		SpineBps     float64       `json:"spine_bps"`
		Data         int64         `json:"data_bytes"`
		Seeds        int           `json:"seeds"`
		IdealMs      float64       `json:"ideal_ms"`
		Rows         []ecmpRowJSON `json:"rows"`
		DCQCN        []ecmpCalJSON `json:"dcqcn"`
		Goal         *bool         `json:"goal_pass"`
	}{
		Leaves: c.Leaves, HostsPerLeaf: c.HostsPerLeaf, Spines: c.Spines, Placement: c.Placement.String(),
		HostBps: float64(c.HostRate), SpineBps: float64(c.SpineRate), Data: c.Data, Seeds: seeds,
		IdealMs: float64(ideal) / float64(time.Millisecond), Rows: []ecmpRowJSON{}, DCQCN: []ecmpCalJSON{},
	}
	for _, st := range stats {
		v.Rows = append(v.Rows, ecmpRowJSON{Mode: st.Mode.String(), QPs: st.QPs,
			LoadMedian: num(st.LoadMedian), LoadWorst: num(st.LoadWorst),
			RatioMedian: st.RatioMedian, RatioWorst: st.RatioWorst})
	}
	for _, k := range cals {
		v.DCQCN = append(v.DCQCN, ecmpCalJSON{QPs: k.Flows, LineBps: float64(k.LineRate), LinkBps: float64(k.Rate),
			Duration: float64(k.Duration) / float64(time.Millisecond), U: k.U, Qpeak: k.Qpeak, CNPs: k.CNPs, Drops: k.Drops})
	}
	if haveGoal {
		v.Goal = &goalPass
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeFile creates path and writes it with fn, reporting the first error
// of either or of closing it.
func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
