package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/goroce/goroce/coll"
)

// spawnRanks is goroce coll -np N: N ranks of this binary on this host,
// each given its rank through the same environment path a launcher uses
// (GOROCE_RANK, GOROCE_WORLD_SIZE, GOROCE_LOCAL_RANK, GOROCE_RDZV,
// GOROCE_JOB_ID), so that a rank runs exactly as under torchrun or
// mpirun. Unprivileged by default: rank 0 serves the rendezvous on
// 127.0.0.1 and every rank takes its own loopback address. --wrap runs
// each rank under a command ("ip netns exec ns{rank}"), --addrs gives each
// its address (GOROCE_ADDR); rank 0's standard output is this process's,
// the ranks' standard error is prefixed with their rank. The exit status
// is rank 0's if it failed, else the first failing rank's.
func spawnRanks(t *collTest, f *collFlags, args []string, stdout, stderr io.Writer) int {
	if f.fabric != "" || f.report != "" {
		return spawnReported(t, f, args, stdout, stderr)
	}
	p := spawnPlan{args: stripFlags(args, "np", "wrap", "addrs"), rdzv: f.rdzv}
	if f.wrap != "" {
		p.wrap = func(r int) []string { return strings.Fields(strings.ReplaceAll(f.wrap, "{rank}", strconv.Itoa(r))) }
	}
	if f.addrs != "" {
		p.env = func(r int) []string {
			return []string{coll.EnvAddr + "=" + strings.ReplaceAll(f.addrs, "{rank}", strconv.Itoa(r))}
		}
	}
	return spawnJob(f, p, stdout, stderr)
}

// spawnPlan is how spawnJob starts each rank: the arguments after
// "coll", the rendezvous (empty: a free port of 127.0.0.1), and per rank
// a command to run it under and variables to add.
type spawnPlan struct {
	args []string
	rdzv string
	wrap func(r int) []string
	env  func(r int) []string
}

// spawnJob starts f.np ranks of this binary as p says and waits for them.
func spawnJob(f *collFlags, p spawnPlan, stdout, stderr io.Writer) int {
	n := f.np
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "goroce coll: %v\n", err)
		return exitFailed
	}
	childArgs := append([]string{"coll"}, p.args...)
	var jb [6]byte
	rand.Read(jb[:])
	job := f.jobID
	if job == "" {
		job = "np-" + hex.EncodeToString(jb[:])
	}
	rdzv := p.rdzv
	if rdzv == "" {
		port, err := freePort()
		if err != nil {
			fmt.Fprintf(stderr, "goroce coll: rendezvous port: %v\n", err)
			return exitFailed
		}
		rdzv = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	procs := f.procs
	if procs == 0 && n >= runtime.NumCPU() {
		// As many ranks as CPUs or more: each rank's goroutines on one
		// processor (doc/coll.md §5 has the measurement).
		procs = 1
	}

	var (
		mu    sync.Mutex
		cmds  []*exec.Cmd
		wg    sync.WaitGroup
		codes = make([]int, n)
	)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var gotSig os.Signal
	stopFwd := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			mu.Lock()
			gotSig = s
			for _, c := range cmds {
				if c.Process != nil {
					c.Process.Signal(s)
				}
			}
			mu.Unlock()
		case <-stopFwd:
		}
	}()
	defer close(stopFwd)

	var outs []*prefixWriter
	for r := range n {
		argv := []string{exe}
		if p.wrap != nil {
			argv = append(p.wrap(r), exe)
		}
		cmd := exec.Command(argv[0], append(argv[1:], childArgs...)...)
		env := append(os.Environ(),
			coll.EnvRank+"="+strconv.Itoa(r), coll.EnvSize+"="+strconv.Itoa(n), coll.EnvLocalRank+"="+strconv.Itoa(r),
			coll.EnvLocalSize+"="+strconv.Itoa(n),
			coll.EnvRdzv+"="+rdzv, coll.EnvJobID+"="+job)
		if p.env != nil {
			env = append(env, p.env(r)...)
		}
		if procs > 0 {
			env = append(env, "GOMAXPROCS="+strconv.Itoa(procs))
		}
		cmd.Env = append(withQuietSysmon(env), "GOROCE_NO_REEXEC=1")
		ew := &prefixWriter{w: stderr, prefix: fmt.Sprintf("[rank %d] ", r), mu: &mu}
		outs = append(outs, ew)
		cmd.Stderr = ew
		if r == 0 {
			cmd.Stdout = stdout
		} else {
			cmd.Stdout = ew
		}
		mu.Lock()
		err := cmd.Start()
		if err == nil {
			cmds = append(cmds, cmd)
		}
		mu.Unlock()
		if err != nil {
			fmt.Fprintf(stderr, "goroce coll: starting rank %d: %v\n", r, err)
			codes[r] = exitFailed
			mu.Lock()
			for _, c := range cmds {
				c.Process.Kill()
			}
			mu.Unlock()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = 128 + int(ws.Signal())
				}
			} else if err != nil {
				code = exitFailed
			}
			codes[r] = code
		}()
	}
	wg.Wait()
	for _, o := range outs {
		o.flush()
	}
	mu.Lock()
	s := gotSig
	mu.Unlock()
	if sig, ok := s.(syscall.Signal); ok {
		return 128 + int(sig)
	}
	if codes[0] != 0 {
		return codes[0]
	}
	for _, c := range codes {
		if c != 0 {
			return c
		}
	}
	return 0
}

// stripFlags removes the named flags (and their values) from args.
func stripFlags(args []string, names ...string) []string {
	var out []string
	skip := false
	for _, a := range args {
		if skip {
			skip = false
			continue
		}
		name := strings.TrimLeft(a, "-")
		if len(name) < len(a) {
			base, _, hasValue := strings.Cut(name, "=")
			drop := false
			for _, n := range names {
				if base == n {
					drop = true
				}
			}
			if drop {
				skip = !hasValue
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// freePort returns a TCP port of 127.0.0.1 nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// prefixWriter writes whole lines to w with a prefix, under mu (the
// ranks' outputs share w).
type prefixWriter struct {
	w      io.Writer
	prefix string
	mu     *sync.Mutex
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexByte(string(p.buf), '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf)
		p.buf = nil
	}
}
