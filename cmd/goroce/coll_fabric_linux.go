//go:build linux

package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/coll"
	"github.com/goroce/goroce/internal/fabric"
)

// spawnReported is goroce coll -np N with --fabric or --report: the job
// of spawnRanks, and what the fabric did beside it. With --fabric, rank i
// runs in the namespace of host placement[i] on that host's address, the
// rendezvous is served by rank 0 on its host's address, a sampler watches
// which spine each QP's packets take, the fabric's counters are recorded
// every --series, and rank 0 snapshots them around each timed run; the
// end prints the per-spine load, the retransmissions and CNPs, the ideal
// and the model's prediction and every data connection's QPs with their
// source ports and spines, and --report draws it all.
func spawnReported(t *collTest, f *collFlags, args []string, stdout, stderr io.Writer) int {
	dir, err := os.MkdirTemp("", "goroce-coll-")
	if err != nil {
		fmt.Fprintf(stderr, "goroce coll: %v\n", err)
		return exitFailed
	}
	defer os.RemoveAll(dir)
	run := &fabricRun{cc: f.ccMode, qpTimeout: f.qpTO, cmdline: "goroce coll " + strings.Join(args, " ")}
	strip := []string{"np", "fabric", "placement", "report", "sample-every", "series"}
	p := spawnPlan{rdzv: f.rdzv}
	env := []string{envCollOut + "=" + dir}
	p.env = func(int) []string { return env }
	if f.fabric == "" {
		p.args = stripFlags(args, append(strip, "wrap", "addrs")...)
		if f.wrap != "" {
			p.wrap = func(r int) []string { return strings.Fields(strings.ReplaceAll(f.wrap, "{rank}", strconv.Itoa(r))) }
		}
		if f.addrs != "" {
			p.env = func(r int) []string {
				return append(env, coll.EnvAddr+"="+strings.ReplaceAll(f.addrs, "{rank}", strconv.Itoa(r)))
			}
		}
		run.start = time.Now()
		code := spawnJob(f, p, stdout, stderr)
		run.end = time.Now()
		run.files = readRankFiles(dir, f.np)
		return finishReport(run, f, code, stdout, stderr)
	}

	if !needRoot("coll --fabric", stderr) {
		return exitFailed
	}
	fab, ok := loadFabric("coll --fabric", f.fabric, stderr)
	if !ok {
		return exitFailed
	}
	if !fab.Complete {
		fmt.Fprintf(stderr, "goroce coll: fabric %s is incomplete (goroce fabric down %s, then up)\n", fab.Name, fab.Name)
		return exitFailed
	}
	pl, seed, _ := fabric.ParsePlacement(f.placement)
	run.placement = pl.String()
	if pl == fabric.PlaceRandom {
		if seed == 0 {
			seed = rand.Uint64N(1 << 20)
		}
		run.placement = fmt.Sprintf("random:%d", seed)
	}
	if run.hosts, err = fab.Place(f.np, pl, seed); err != nil {
		fmt.Fprintf(stderr, "goroce coll: %v\n", err)
		return 2
	}
	run.fab = fab
	// Congestion control fitted to the fabric, a longer ACK timeout.
	if run.cc == "auto" {
		line := fab.Config.HostRate
		if line == 0 || (fab.Config.Rate > 0 && fab.Config.Rate < line) {
			line = fab.Config.Rate
		}
		run.cc = "default"
		if line > 0 {
			run.cc = line.String()
		}
	}
	if run.qpTimeout == 0 {
		run.qpTimeout = fabricQPTimeout
	}
	p.args = append(stripFlags(args, append(strip, "cc", "qp-timeout")...), "--cc", run.cc, "--qp-timeout", run.qpTimeout.String())
	p.rdzv = net.JoinHostPort(run.hosts[0].Addr.String(), strconv.Itoa(20000+rand.IntN(20000)))
	p.wrap = func(r int) []string { return []string{"ip", "netns", "exec", run.hosts[r].NS} }
	p.env = func(r int) []string {
		e := append([]string{coll.EnvAddr + "=" + run.hosts[r].Addr.String()}, env...)
		if r == 0 {
			e = append(e, envCollFabric+"="+fab.Name)
		}
		return e
	}
	run.every = f.sampleEvery
	if run.every == 0 {
		run.every = defaultSampleEvery
	}
	series := f.series
	if series == 0 {
		series = defaultSeries
	}
	before, err := fab.Stats()
	if err != nil {
		fmt.Fprintf(stderr, "goroce coll: fabric %s: %v\n", fab.Name, err)
		return exitFailed
	}
	sampler, err := fab.SampleFlows(run.every)
	if err != nil {
		fmt.Fprintf(stderr, "goroce coll: fabric %s: %v\n", fab.Name, err)
		return exitFailed
	}
	rec := fab.Record(series)
	run.start = time.Now()
	code := spawnJob(f, p, stdout, stderr)
	run.end = time.Now()
	run.samples, run.sampleDrops = sampler.Stop()
	run.series, err = rec.Stop()
	if err != nil {
		fmt.Fprintf(stderr, "goroce coll: fabric %s: counters: %v\n", fab.Name, err)
	}
	if after, err := fab.Stats(); err == nil {
		run.whole, _ = after.Sub(before)
	}
	run.files = readRankFiles(dir, f.np)
	return finishReport(run, f, code, stdout, stderr)
}

// finishReport prints the fabric's summary and writes the report; it
// returns the job's exit status, or 1 if the report could not be written.
func finishReport(run *fabricRun, f *collFlags, code int, stdout, stderr io.Writer) int {
	for r, rf := range run.files {
		switch {
		case rf == nil:
			fmt.Fprintf(stderr, "goroce coll: rank %d left no report\n", r)
		case rf.Error != "" && code == 0:
			fmt.Fprintf(stderr, "goroce coll: rank %d: %s\n", r, rf.Error)
		}
	}
	run.writeSummary(stdout)
	if f.report == "" {
		return code
	}
	if err := writeCollReport(run, f.report); err != nil {
		fmt.Fprintf(stderr, "goroce coll: --report: %v\n", err)
		if code == 0 {
			code = exitFailed
		}
		return code
	}
	fmt.Fprintf(stdout, "# goroce: report %s\n", f.report)
	return code
}
