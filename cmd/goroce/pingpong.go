package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/internal/pingpong"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/qp"
)

var pingpongCommand = command{
	name:    "pingpong",
	summary: "SEND ping-pong against ibv_rc_pingpong, ibv_uc_pingpong or ibv_ud_pingpong (--transport; their TCP exchange and semantics), as server or client",
	run:     runPingpong,
}

// pingpongFlagGroups are the headings of goroce pingpong -h (doc/cli.md).
var pingpongFlagGroups = []flagGroup{
	{"the test (as ibv_rc_pingpong's)", []string{"transport", "s", "n", "m", "r", "c", "g"}},
	{"the exchange", []string{"server", "p", "timeout"}},
	{"diagnostics", []string{"stats", "impair"}},
	{"accepted for compatibility", []string{"d", "e"}},
}

func runPingpong(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg     pingpong.Config
		mtu     int
		server  bool
		ignored string
		events  bool
		stats   bool
		gid     int
		imp     string
		tr      string
	)
	fs.StringVar(&tr, "transport", "rc", "rc, uc or ud: play ibv_rc_pingpong, ibv_uc_pingpong (UC QP, no ACKs: a lost packet stalls the run) or ibv_ud_pingpong (UD QP, Q_Key 0x11111111, -s at most the MTU)")
	fs.IntVar(&cfg.Port, "p", perftest.Port, "TCP port of the exchange")
	fs.IntVar(&cfg.Size, "s", 0, "size of each message (default 4096; 2048 for ud, as ibv_ud_pingpong, which must not exceed -m)")
	fs.IntVar(&cfg.Iters, "n", 1000, "number of exchanges")
	fs.IntVar(&gid, "g", -1, "GID index: goroce's only GID, ::ffff:<IPv4>, is index 1 (as on rxe); goroce always sends it")
	fs.IntVar(&mtu, "m", 1024, "path MTU: 256, 512, 1024, 2048 or 4096 (not negotiated: use the peer's -m); for ud the port MTU (ibv_ud_pingpong has no -m: rxe's is 1024 at netdev MTU 1500)")
	fs.BoolVar(&cfg.Check, "c", false, "check every message received (goroce peers only: goroce sends a pattern that changes with each message)")
	fs.IntVar(&cfg.RxDepth, "r", 500, "number of receives to post at a time")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "limit for each exchange step, for connecting and for any stretch without a completion")
	fs.BoolVar(&server, "server", false, "wait for a client (the default without SERVER, as ibv_rc_pingpong)")
	fs.BoolVar(&stats, "stats", false, "print the device's counters (ICRC, drops, retransmissions) to stderr at the end")
	fs.StringVar(&imp, "impair", "", "impair the device's link both ways, e.g. loss=1%,reorder=1%,seed=N ("+impair.SpecSyntax+"); the end of the run reports what the peer did about it on stderr")
	fs.StringVar(&ignored, "d", "", "accepted for compatibility (goroce has one device)")
	fs.BoolVar(&events, "e", false, "accepted for compatibility (goroce always polls)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: goroce pingpong [--transport rc|uc|ud] [-s SIZE] [-n ITERS] [-g 1] [-m MTU] [-p PORT] [SERVER]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Without SERVER it waits for a client, as ibv_rc_pingpong does; with SERVER it is the client.")
		fmt.Fprintln(stderr, "Against rxe: ibv_rc_pingpong -d rxe0 -g 1 [-s -n -m as here] [goroce's address];")
		fmt.Fprintln(stderr, "ibv_uc_pingpong likewise with --transport uc; ibv_ud_pingpong -d rxe0 -g 1 -s 1024 with --transport ud -s 1024.")
		printFlags(stderr, fs, pingpongFlagGroups)
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "goroce pingpong: unexpected arguments %q\n", pos[1:])
		return 2
	}
	if err := perf.CheckGIDIndex(gid, "-g"); err != nil {
		fmt.Fprintf(stderr, "goroce pingpong: %v\n", err)
		return 2
	}
	switch tr {
	case "rc":
		cfg.Type = qp.TypeRC
	case "uc":
		cfg.Type = qp.TypeUC
	case "ud":
		cfg.Type = qp.TypeUD
	default:
		fmt.Fprintf(stderr, "goroce pingpong: --transport %q: rc, uc or ud\n", tr)
		return 2
	}
	m, ok := qp.MTUFromBytes(mtu)
	if !ok {
		fmt.Fprintf(stderr, "goroce pingpong: invalid MTU %d (256, 512, 1024, 2048 or 4096)\n", mtu)
		return 2
	}
	cfg.MTU = m
	if imp != "" {
		c, err := impair.Parse(imp)
		if err != nil {
			fmt.Fprintf(stderr, "goroce pingpong: --impair: %v\n", err)
			return 2
		}
		cfg.Impair, cfg.ImpairOut = &c, stderr
	}
	cfg.Server = len(pos) == 0
	if len(pos) == 1 {
		if server {
			fmt.Fprintln(stderr, "goroce pingpong: --server and a server address exclude each other")
			return 2
		}
		cfg.Peer = pos[0]
	}
	cfg.Out = stdout
	if stats {
		cfg.Stats = stderr
	}
	return interruptible(stderr, func(ctx context.Context) int {
		if _, err := pingpong.Run(ctx, cfg); err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(stderr, "goroce pingpong: %v\n", err)
			}
			return 1
		}
		return 0
	})
}
