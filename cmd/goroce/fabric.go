package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/goroce/goroce/internal/fabric"
)

var fabricCommand = command{
	name:    "fabric",
	summary: "a leaf-spine fabric of network namespaces (fabric up|down|status|stats|exec|incast; root)",
	run:     runFabric,
}

// defaultFabricName names the fabric when no NAME is given.
const defaultFabricName = "goroce"

func fabricUsage(w io.Writer) {
	fmt.Fprintln(w, `usage: goroce fabric up [--name NAME] [--leaves 2] [--hosts-per-leaf 1] [--spines 4] [--rate 1gbit] [--host-rate 0]
                        [--mtu 9000] [--buffer 512KiB] [--ecn-threshold 40KB] [--ecn-gamma 0.95] [--no-ecn] [--json]
       goroce fabric down [NAME ... | --all]
       goroce fabric status [NAME] [--json]
       goroce fabric stats [NAME] [--json]
       goroce fabric exec NAME HOST -- COMMAND [ARG ...]
       goroce fabric incast [NAME] [--senders h0,h1,h2] [--receiver HOST] [--dcqcn on|off|both] [-D 2s] [--json]

A leaf-spine IP fabric built of network namespaces on this machine (doc/fabric.md): every leaf linked
to every spine, ECMP over the spines with the L4 hash (fib_multipath_hash_policy=1), tbf rate limits
on the links and a phantom-queue ECN marker on every rate-limited switch egress. Hosts are h0, h1, …
(leaf by leaf); leaves l0…, spines s0…; namespaces gfab-NAME-ROLE. NAME defaults to "goroce".
Building, removing, reading counters and running commands need root.`)
}

func runFabric(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fabricUsage(stderr)
		return 2
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "up":
		return runFabricUp(rest, stdout, stderr)
	case "down":
		return runFabricDown(rest, stdout, stderr)
	case "status":
		return runFabricStatus(rest, stdout, stderr)
	case "stats":
		return runFabricStats(rest, stdout, stderr)
	case "exec":
		return runFabricExec(rest, stdout, stderr)
	case "incast":
		return runFabricIncast(rest, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fabricUsage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "goroce fabric: unknown subcommand %q\n", sub)
	fabricUsage(stderr)
	return 2
}

// fabricFlags makes a FlagSet for "goroce fabric SUB" whose usage shows
// the line and the flags, under groups' headings if any.
func fabricFlags(sub, line string, stderr io.Writer, groups ...flagGroup) *flag.FlagSet {
	fs := flag.NewFlagSet("goroce fabric "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: goroce fabric "+sub+" "+line)
		printFlags(fs.Output(), fs, groups)
	}
	return fs
}

// parseFabricArgs parses flags and positional arguments in any order;
// it returns the exit status to use, or -1 to go on.
func parseFabricArgs(fs *flag.FlagSet, args []string) ([]string, int) {
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, 0
	}
	if err != nil {
		return nil, 2
	}
	return pos, -1
}

// needRoot prints why the process cannot manage fabrics; it returns false
// if so.
func needRoot(sub string, stderr io.Writer) bool {
	if err := fabric.RequireRoot(); err != nil {
		fmt.Fprintf(stderr, "goroce fabric %s: %v\n", sub, err)
		return false
	}
	return true
}

// oneName returns the fabric named by the positional arguments (at most
// one) or --name, defaulting to defaultFabricName.
func oneName(sub string, pos []string, flagName string, stderr io.Writer) (string, bool) {
	name := flagName
	switch {
	case len(pos) > 1:
		fmt.Fprintf(stderr, "goroce fabric %s: unexpected argument %q\n", sub, pos[1])
		return "", false
	case len(pos) == 1 && flagName != "" && pos[0] != flagName:
		fmt.Fprintf(stderr, "goroce fabric %s: two names, %q and --name %q\n", sub, pos[0], flagName)
		return "", false
	case len(pos) == 1:
		name = pos[0]
	case name == "":
		name = defaultFabricName
	}
	if !fabric.ValidName(name) {
		fmt.Fprintf(stderr, "goroce fabric %s: bad name %q: 1 to %d lower-case letters and digits\n", sub, name, fabric.MaxNameLen)
		return "", false
	}
	return name, true
}

// loadFabric loads a fabric's state, printing the error.
func loadFabric(sub, name string, stderr io.Writer) (*fabric.Fabric, bool) {
	f, err := fabric.Load(name)
	if err != nil {
		if errors.Is(err, fabric.ErrNotFound) {
			fmt.Fprintf(stderr, "goroce fabric %s: no fabric %s (goroce fabric status lists them; goroce fabric up --name %s makes it)\n", sub, name, name)
		} else {
			fmt.Fprintf(stderr, "goroce fabric %s: %v\n", sub, err)
		}
		return nil, false
	}
	return f, true
}

// rateFlag is a flag.Value of a fabric.Rate.
type rateFlag struct{ r *fabric.Rate }

var (
	_ flag.Value = rateFlag{}
	_ flag.Value = bytesFlag{}
)

func (f rateFlag) String() string {
	if f.r == nil {
		return ""
	}
	return f.r.String()
}

func (f rateFlag) Set(s string) error {
	r, err := fabric.ParseRate(s)
	if err != nil {
		return err
	}
	*f.r = r
	return nil
}

// bytesFlag is a flag.Value of a byte count: a number with an optional
// suffix K, KB (1000), KiB (1024), M, MB, MiB.
type bytesFlag struct{ n *int }

func (f bytesFlag) String() string {
	if f.n == nil {
		return ""
	}
	return strconv.Itoa(*f.n)
}

func (f bytesFlag) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

func parseBytes(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1000}, {"MB", 1000_000}, {"K", 1000}, {"M", 1000_000}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v < 0 || v*float64(mult) > 1<<40 {
		return 0, fmt.Errorf("bad size %q (e.g. 512KiB, 40KB, 1MB)", s)
	}
	return int(v * float64(mult)), nil
}

func runFabricUp(args []string, stdout, stderr io.Writer) int {
	fs := fabricFlags("up", "[--name NAME] [flags]", stderr,
		flagGroup{"the fabric", []string{"name", "leaves", "hosts-per-leaf", "spines", "mtu"}},
		flagGroup{"the links", []string{"rate", "host-rate", "buffer"}},
		flagGroup{"the ECN marker", []string{"ecn-threshold", "ecn-gamma", "no-ecn"}},
		flagGroup{"output", []string{"json"}})
	cfg := fabric.Config{Rate: fabric.Gbit}
	var (
		name  = fs.String("name", "", "the fabric's name (default \""+defaultFabricName+"\"): 1 to 11 lower-case letters and digits")
		noECN = fs.Bool("no-ecn", false, "no ECN marker")
		asJS  = fs.Bool("json", false, "print the fabric's state as JSON")
	)
	fs.IntVar(&cfg.Leaves, "leaves", fabric.DefaultLeaves, "leaves")
	fs.IntVar(&cfg.HostsPerLeaf, "hosts-per-leaf", fabric.DefaultHostsPerLeaf, "hosts on each leaf")
	fs.IntVar(&cfg.Spines, "spines", fabric.DefaultSpines, "spines")
	fs.Var(rateFlag{&cfg.Rate}, "rate", "`RATE` of each leaf–spine link, each direction (tc units: 1gbit, 250mbit; 0: unlimited)")
	fs.Var(rateFlag{&cfg.HostRate}, "host-rate", "`RATE` of each host link, each direction (0: unlimited)")
	fs.IntVar(&cfg.MTU, "mtu", fabric.DefaultMTU, "MTU of every link")
	cfg.Buffer, cfg.ECN.Threshold = fabric.DefaultBuffer, fabric.DefaultECNThreshold
	fs.Var(bytesFlag{&cfg.Buffer}, "buffer", "queue `SIZE` of each rate-limited egress (the tbf limit), e.g. 512KiB")
	fs.Var(bytesFlag{&cfg.ECN.Threshold}, "ecn-threshold", "the marker's threshold on its virtual queue, in bytes (`SIZE`: 40KB, …)")
	fs.Float64Var(&cfg.ECN.Gamma, "ecn-gamma", fabric.DefaultECNGamma, "share of the link rate that drains the marker's virtual queue (HULL's γ)")
	pos, st := parseFabricArgs(fs, args)
	if st >= 0 {
		return st
	}
	n, ok := oneName("up", pos, *name, stderr)
	if !ok {
		return 2
	}
	cfg.Name, cfg.ECN.Off = n, *noECN
	if _, err := fabric.Plan(cfg); err != nil {
		fmt.Fprintf(stderr, "goroce fabric up: %v\n", err)
		return 2
	}
	if !needRoot("up", stderr) {
		return 1
	}
	f, err := fabric.Up(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "goroce fabric up: %v\n", err)
		return 1
	}
	if *asJS {
		return writeJSON(stdout, stderr, f)
	}
	writeStatus(stdout, f)
	return 0
}

func runFabricDown(args []string, stdout, stderr io.Writer) int {
	fs := fabricFlags("down", "[NAME ... | --all]", stderr)
	all := fs.Bool("all", false, "remove every fabric (all state files and gfab-* namespaces)")
	pos, st := parseFabricArgs(fs, args)
	if st >= 0 {
		return st
	}
	names := pos
	switch {
	case *all && len(pos) > 0:
		fmt.Fprintln(stderr, "goroce fabric down: names and --all")
		return 2
	case *all:
		var err error
		if names, err = fabric.Names(); err != nil {
			fmt.Fprintf(stderr, "goroce fabric down: %v\n", err)
			return 1
		}
	case len(names) == 0:
		names = []string{defaultFabricName}
	}
	for _, n := range names {
		if !fabric.ValidName(n) {
			fmt.Fprintf(stderr, "goroce fabric down: bad name %q\n", n)
			return 2
		}
	}
	if !needRoot("down", stderr) {
		return 1
	}
	status := 0
	for _, n := range names {
		removed, err := fabric.Down(n)
		if err != nil {
			fmt.Fprintf(stderr, "goroce fabric down %s: %v\n", n, err)
			status = 1
		}
		fmt.Fprintf(stdout, "fabric %s: removed %d namespaces\n", n, len(removed))
	}
	return status
}

func runFabricStatus(args []string, stdout, stderr io.Writer) int {
	fs := fabricFlags("status", "[NAME] [--json]", stderr)
	asJS := fs.Bool("json", false, "print the fabric's state (or the list of fabrics) as JSON")
	pos, st := parseFabricArgs(fs, args)
	if st >= 0 {
		return st
	}
	if len(pos) == 0 {
		// Every fabric: the default one in full if it is the only one.
		names, err := fabric.Names()
		if err != nil {
			fmt.Fprintf(stderr, "goroce fabric status: %v\n", err)
			return 1
		}
		if len(names) != 1 {
			type entry struct {
				Name     string `json:"name"`
				Complete bool   `json:"complete"`
				Hosts    int    `json:"hosts"`
				Summary  string `json:"summary"`
			}
			var list []entry
			for _, n := range names {
				e := entry{Name: n, Summary: "no state file: leftovers (goroce fabric down " + n + ")"}
				if f, err := fabric.Load(n); err == nil {
					e.Complete, e.Hosts, e.Summary = f.Complete, len(f.Hosts), f.String()
					if !f.Complete {
						e.Summary += " — incomplete (goroce fabric down " + n + ")"
					}
				}
				list = append(list, e)
			}
			if *asJS {
				return writeJSON(stdout, stderr, list)
			}
			if len(list) == 0 {
				fmt.Fprintln(stdout, "no fabrics (goroce fabric up makes one)")
			}
			for _, e := range list {
				fmt.Fprintln(stdout, e.Summary)
			}
			return 0
		}
		pos = names
	}
	name, ok := oneName("status", pos, "", stderr)
	if !ok {
		return 2
	}
	f, ok := loadFabric("status", name, stderr)
	if !ok {
		return 1
	}
	if *asJS {
		return writeJSON(stdout, stderr, f)
	}
	writeStatus(stdout, f)
	return 0
}

// writeStatus prints a fabric: its hosts, then its links.
func writeStatus(w io.Writer, f *fabric.Fabric) {
	fmt.Fprintln(w, f)
	state := "up"
	if !f.Complete {
		state = "INCOMPLETE (an up failed or was killed: goroce fabric down " + f.Name + ")"
	}
	fmt.Fprintf(w, "%s since %s; state %s\n\n", state, f.Created.Format("2006-01-02 15:04:05 MST"), fabric.StateDir+"/"+f.Name+".json")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "host\tleaf\taddress\tgateway\tnamespace")
	for _, h := range f.Hosts {
		fmt.Fprintf(tw, "%s\tl%d\t%v\t%v\t%s\n", h.Name, h.Leaf, h.Addr, h.Gateway, h.NS)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "link\tleaf end\t\tfar end\t\trate\tECN marker")
	for _, l := range f.Links {
		marker := "-"
		switch {
		case l.A.Slot >= 0 && l.B.Slot >= 0:
			marker = "both ends"
		case l.A.Slot >= 0:
			marker = "leaf end"
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%v\t%s %s\t%v\t%v\t%s\n", l.Name, strings.TrimPrefix(l.A.NS, fabric.NamespacePrefix(f.Name)), l.A.Dev, l.A.Addr,
			strings.TrimPrefix(l.B.NS, fabric.NamespacePrefix(f.Name)), l.B.Dev, l.B.Addr, l.Rate, marker)
	}
	tw.Flush()
	if len(f.Hosts) > 0 {
		fmt.Fprintf(w, "\nrun a command on a host: goroce fabric exec %s %s -- COMMAND\n", f.Name, f.Hosts[0].Name)
	}
}

func runFabricStats(args []string, stdout, stderr io.Writer) int {
	fs := fabricFlags("stats", "[NAME] [--json]", stderr)
	asJS := fs.Bool("json", false, "print the counters as JSON")
	pos, st := parseFabricArgs(fs, args)
	if st >= 0 {
		return st
	}
	name, ok := oneName("stats", pos, "", stderr)
	if !ok {
		return 2
	}
	if !needRoot("stats", stderr) {
		return 1
	}
	f, ok := loadFabric("stats", name, stderr)
	if !ok {
		return 1
	}
	s, err := f.Stats()
	if err != nil {
		fmt.Fprintf(stderr, "goroce fabric stats: %v\n", err)
		return 1
	}
	if *asJS {
		return writeJSON(stdout, stderr, s)
	}
	fmt.Fprintf(stdout, "fabric %s, counters since up (tx of each end; drops: its tbf; CE marks: its marker)\n\n", f.Name)
	s.WriteTable(stdout)
	return 0
}

func runFabricExec(args []string, stdout, stderr io.Writer) int {
	var cmd []string
	for i, a := range args {
		if a == "--" {
			args, cmd = args[:i], args[i+1:]
			break
		}
	}
	fs := fabricFlags("exec", "NAME HOST -- COMMAND [ARG ...]", stderr)
	pos, st := parseFabricArgs(fs, args)
	if st >= 0 {
		return st
	}
	if cmd == nil && len(pos) > 2 {
		pos, cmd = pos[:2], pos[2:]
	}
	if len(pos) != 2 || len(cmd) == 0 {
		fmt.Fprintln(stderr, "usage: goroce fabric exec NAME HOST -- COMMAND [ARG ...]  (HOST: h0…, or l0…, s0…)")
		return 2
	}
	if !needRoot("exec", stderr) {
		return 1
	}
	f, ok := loadFabric("exec", pos[0], stderr)
	if !ok {
		return 1
	}
	ns, ok := f.NS(pos[1])
	if !ok {
		fmt.Fprintf(stderr, "goroce fabric exec: fabric %s has no host or router %q (goroce fabric status %s)\n", f.Name, pos[1], f.Name)
		return 2
	}
	c := fabric.Command(context.Background(), ns, cmd[0], cmd[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, stdout, stderr
	if err := c.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if code := ee.ExitCode(); code >= 0 {
				return code
			}
			return 1
		}
		fmt.Fprintf(stderr, "goroce fabric exec: %v\n", err)
		return 1
	}
	return 0
}

func writeJSON(stdout, stderr io.Writer, v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "goroce fabric: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, string(b))
	return 0
}
