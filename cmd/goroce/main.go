// Command goroce is the goroce tool: one binary with subcommands, each in
// the style of the tool RDMA users already know.
//
//	goroce perf [write|read|send|atomic] [-s SIZE] [-n N | -D SECS] [-a] [-q QPS] [--lat] [--json] [--server | SERVER]
//	goroce pingpong [-s SIZE] [-n N] [-g 1] [-m MTU] [-p PORT] [SERVER]
//	goroce rping -s|-c [-v] [-V] [-S SIZE] [-C COUNT] [-I ADDR] -a ADDR [-p PORT]
//	goroce cap -r FILE [-Y FILTER] [-T fields|json|text] [-e FIELD]... [-E OPT]...
//	goroce cap -i IFACE [-c N] [-a duration:SECONDS] [-w FILE [-P]] [-Y FILTER] [-T ...] [-e FIELD]...
//	goroce cap flows|lint (-r FILE | -i IFACE [-c N] [-a duration:SECONDS] [-w FILE] [-interval D])
//	goroce cap report -r FILE ...
//	goroce sim dcqcn [--scenario S3] [--profile P|M] [--json] [-o plot.html] [--list]
//	goroce sim ecmp [--qps 1,4,8] [--mode fixed|kernel|explicit|all] [--seeds N] [--json] [-o ecmp.html]
//	goroce coll all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|sendrecv [nccl-tests flags] [-np N]
//	goroce fabric up|down|status|stats|exec|incast [NAME] [flags]   (root)
//	goroce help [COMMAND]
//
// doc/cli.md in the repository lists every flag of every subcommand,
// grouped as each one's -h prints them (TestCLIDoc keeps the two in step).
//
// perf is perftest's ib_write_bw / ib_read_bw / ib_send_bw / ib_atomic_bw
// and the ib_*_lat tests (--lat): with neither --server nor SERVER it runs
// between two in-process devices over loopback; otherwise it speaks
// perftest 4.5's TCP exchange (port 18515) as server or client, so the
// peer can be a real perftest on rxe.
//
// pingpong is ibv_rc_pingpong: RC SENDs in strict ping-pong after the
// tool's 52-byte TCP exchange, as server (no SERVER) or client.
//
// rping is librdmacm's rping over goroce's RDMA CM (Device.Listen, Dial):
// the client advertises a source buffer that the server RDMA READs and a
// sink buffer it RDMA WRITEs the data back into, printing the same
// "ping data: rdma-ping-N: ..." lines as rping -v.
//
// cap decodes RoCEv2 captures like tshark 4.0 (display filters, -T fields
// byte-identical to tshark's, -T json, -T text) plus the ICRC check
// (roce.icrc.status). Its subcommands go beyond tshark: cap flows
// reconstructs each connection (PSN ranges, retransmissions and Go-Back-N
// episodes, NAKs, READ/ATOMIC latency, CE marks and CNPs, goodput); cap
// lint checks every packet against the RC/UC/UD rules as rdma_rxe
// implements them; cap report writes one self-contained
// HTML page with tcptrace-style PSN graphs and the linter's findings.
//
// coll is nccl-tests (all_reduce_perf, …) over package coll: run by
// torchrun --no-python, mpirun or srun, or with -np N on one host, it
// prints nccl-tests' table byte for byte, with goroce's ceiling beside it.
//
// sim dcqcn runs a DCQCN scenario (doc/dcqcn.md §5.3) in the cc/fabric
// simulator and checks its figures; sim ecmp runs a ring all-reduce over a
// leaf-spine fabric with ECMP.
//
// fabric builds a leaf-spine fabric of network namespaces on this machine,
// with ECMP, tbf rate limits and an ECN marker, runs commands in its hosts,
// counts its links and runs an incast through it (doc/fabric.md).
//
// Each subcommand lives in its own file with its own flag.FlagSet and is
// listed in commands below.
package main

import (
	"fmt"
	"io"
	"os"
)

// command is one subcommand. run gets the arguments after the subcommand
// name and returns the process exit status (0 ok, 1 failure, 2 usage or
// input error).
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands in the order "goroce help" shows them.
// Adding one: write its file (a command value and its run function) and
// add it here.
func commands() []command {
	return []command{
		capCommand,
		fabricCommand,
		simCommand,
		perfCommand,
		collCommand,
		pingpongCommand,
		rpingCommand,
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand; it is main without os.Exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			for _, c := range commands() {
				if c.name == args[1] {
					return c.run([]string{"-h"}, stdout, stdout) // asked-for help goes to stdout
				}
			}
			fmt.Fprintf(stderr, "goroce: unknown command %q\n", args[1])
			usage(stderr)
			return 2
		}
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "goroce: unknown command %q\n", name)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "goroce: a pure-Go RoCEv2 stack and tools")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: goroce COMMAND [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "  help       show this list, or a command's flags (goroce help cap)")
}
