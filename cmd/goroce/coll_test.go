package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary be goroce itself: with GOROCE_TEST_MAIN=1
// it runs the command line, so that goroce coll -np N (which starts
// os.Executable) and the launchers' tests start ranks of this binary.
func TestMain(m *testing.M) {
	if os.Getenv("GOROCE_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// goroceCmd returns a command running this test binary as goroce.
func goroceCmd(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), "GOROCE_TEST_MAIN=1")
	return cmd
}

// runGoroce runs goroce with args and returns its output and exit status.
func runGoroce(t *testing.T, timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := goroceCmd(ctx, t, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("goroce %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("goroce %v: timed out\nstdout:\n%s\nstderr:\n%s", args, o.String(), e.String())
	}
	return o.String(), e.String(), code
}

// ncclRow is one row of nccl-tests' table, as a parser of it reads it:
// 13 whitespace-separated fields.
type ncclRow struct {
	size, count   int64
	typ, op, root string
	time          [2]float64
	algbw, busbw  [2]float64
	wrong         [2]string
	line          string
}

var rowRE = regexp.MustCompile(`^ {0,11}\d+  +\d+  +\S+  +\S+  +-?\d+  +\S+  +\S+  +\S+  +\S+  +\S+  +\S+  +\S+  +\S+$`)

// parseTable checks nccl-tests' layout (every line a '#' line, a row or
// the final empty line) and returns the rows and the footer lines.
func parseTable(t *testing.T, out string) (rows []ncclRow, footer []string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	require.GreaterOrEqual(t, len(lines), 8, out)
	require.Equal(t, "", lines[len(lines)-1], "output ends with a newline")
	require.Equal(t, "", lines[len(lines)-2], "writeErrors' empty line")
	require.True(t, strings.HasPrefix(lines[0], "# nccl-tests version "), lines[0])
	inFooter := false
	for _, l := range lines[:len(lines)-2] {
		if strings.HasPrefix(l, "# Out of bounds values") {
			inFooter = true
		}
		if inFooter {
			footer = append(footer, l)
			continue
		}
		if strings.HasPrefix(l, "#") {
			continue
		}
		require.Regexp(t, rowRE, l)
		f := strings.Fields(l)
		r := ncclRow{line: l, typ: f[2], op: f[3], root: f[4]}
		r.size, _ = strconv.ParseInt(f[0], 10, 64)
		r.count, _ = strconv.ParseInt(f[1], 10, 64)
		for h := range 2 {
			r.time[h], _ = strconv.ParseFloat(f[5+4*h], 64)
			r.algbw[h], _ = strconv.ParseFloat(f[6+4*h], 64)
			r.busbw[h], _ = strconv.ParseFloat(f[7+4*h], 64)
			r.wrong[h] = f[8+4*h]
		}
		rows = append(rows, r)
	}
	return rows, footer
}

// requireClean checks every row's #wrong (0, or N/A where nccl-tests
// reports none) and nccl-tests' footer of a clean run.
func requireClean(t *testing.T, out, program string, nRows int) []ncclRow {
	t.Helper()
	rows, footer := parseTable(t, out)
	require.Len(t, rows, nRows, out)
	for _, r := range rows {
		assert.Equal(t, "0", r.wrong[0], r.line)
		if r.wrong[1] != "N/A" {
			assert.Equal(t, "0", r.wrong[1], r.line)
		}
	}
	require.Len(t, footer, 5, out)
	assert.Equal(t, "# Out of bounds values : 0 OK", footer[0])
	assert.Regexp(t, `^# Avg bus bandwidth    : \S+ $`, footer[1])
	assert.Equal(t, "#", footer[2])
	assert.Equal(t, "# Collective test concluded: "+program, footer[3])
	assert.Equal(t, "#", footer[4])
	return rows
}

func TestCollNPAllReduce(t *testing.T) {
	out, errOut, code := runGoroce(t, 2*time.Minute, "coll", "all_reduce", "-np", "3", "-b", "8", "-e", "256K", "-f", "8", "-n", "3", "-w", "1")
	require.Equal(t, 0, code, errOut)
	rows := requireClean(t, out, "all_reduce_perf", 6)
	for i, want := range []int64{8, 64, 512, 4096, 32768, 262144} {
		assert.Equal(t, want, rows[i].size)
		assert.Equal(t, want/4, rows[i].count)
		assert.Equal(t, "float", rows[i].typ)
		assert.Equal(t, "sum", rows[i].op)
		assert.Equal(t, "-1", rows[i].root)
	}
	// Every rank in the header, with its own loopback address.
	for r := range 3 {
		assert.Regexp(t, regexp.MustCompile(`(?m)^#  Rank  `+strconv.Itoa(r)+` Group  0 Pid +\d+ on +\S+ device  `+strconv.Itoa(r)+` \[0000:00:00\] goroce 127\.\d+\.0\.`+strconv.Itoa(r+1)+`:4791$`), out)
	}
	assert.Contains(t, out, "from goroce (GOROCE_RANK, GOROCE_WORLD_SIZE, GOROCE_LOCAL_RANK)")
	assert.Regexp(t, `(?m)^# goroce: ceiling \S+ GB/s`, out)
}

// TestCollEveryCollective runs every test of nccl-tests with its
// defaults' shape on 3 ranks.
func TestCollEveryCollective(t *testing.T) {
	for _, name := range []string{"all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"} {
		t.Run(name, func(t *testing.T) {
			args := []string{"coll", name, "-np", "3", "-b", "1K", "-e", "1M", "-f", "32", "-n", "2", "-w", "1", "--ceiling=false"}
			if name == "broadcast" || name == "reduce" {
				args = append(args, "-r", "2")
			}
			out, errOut, code := runGoroce(t, 2*time.Minute, args...)
			require.Equal(t, 0, code, errOut)
			rows := requireClean(t, out, name+"_perf", 3)
			for _, r := range rows {
				switch name {
				case "broadcast", "reduce":
					assert.Equal(t, "2", r.root)
				default:
					assert.Equal(t, "-1", r.root)
				}
				if name == "alltoall" || name == "sendrecv" {
					assert.Equal(t, "N/A", r.wrong[1], "nccl-tests checks no in-place %s", name)
				}
			}
		})
	}
}

// TestCollEveryTypeAndOp: -d all -o all, each row checked.
func TestCollEveryTypeAndOp(t *testing.T) {
	out, errOut, code := runGoroce(t, 3*time.Minute, "coll", "all_reduce", "-np", "3", "-b", "8", "-e", "64K", "-f", "64",
		"-n", "1", "-w", "0", "-d", "all", "-o", "all", "--ceiling=false")
	require.Equal(t, 0, code, errOut)
	rows := requireClean(t, out, "all_reduce_perf", 10*5*3)
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.typ+"/"+r.op] = true
	}
	assert.Len(t, seen, 50)
}

// TestCollOptions: the data-plane flags change the wire, never the
// result.
func TestCollOptions(t *testing.T) {
	for _, opts := range [][]string{
		{"--algo", "ring", "--qps-per-conn", "4", "--split"},
		{"--algo", "tree", "--channels", "3", "--sport", "explicit"},
		{"--algo", "hd", "--rank-order", "3,1,0,2", "--tclass", "106", "--chunk", "4K"},
		{"--progress", "caller", "--sport", "fixed", "--steps", "4", "--qps-per-conn", "2"},
	} {
		t.Run(strings.Join(opts, " "), func(t *testing.T) {
			args := append([]string{"coll", "all_reduce", "-np", "4", "-b", "8", "-e", "2M", "-f", "16", "-n", "2", "-w", "1", "--ceiling=false", "-d", "int32"}, opts...)
			out, errOut, code := runGoroce(t, 2*time.Minute, args...)
			require.Equal(t, 0, code, errOut)
			requireClean(t, out, "all_reduce_perf", 5)
		})
	}
}

// TestCollExitRule: a wrong element makes the footer FAILED and the exit
// status 7, as nccl-tests'.
func TestCollExitRule(t *testing.T) {
	out, _, code := runGoroce(t, time.Minute, "coll", "all_reduce", "-np", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--ceiling=false", "--inject-wrong")
	require.Equal(t, 7, code, out)
	rows, footer := parseTable(t, strings.Split(out, " .. ")[0])
	require.Len(t, rows, 1)
	assert.Equal(t, "1", rows[0].wrong[0])
	assert.Equal(t, "# Out of bounds values : 2 FAILED", footer[0])
	assert.Regexp(t, `(?m)^ \.\. \S+ pid \d+: Test failure`, out)
}

// TestCollBadSettings: settings out of range end with a clear message and
// exit status 2, as a bad flag does (doc/cli.md), never a panic: a step
// factor that overflows an int panicked in the buffers' slicing (-b 3)
// or printed a 0-byte row (-b 4); coll's own range checks ended as a
// failed job (1).
func TestCollBadSettings(t *testing.T) {
	base := []string{"coll", "all_reduce", "--rank", "0", "--world-size", "1", "-n", "1", "-w", "0", "-c", "0", "--ceiling=false"}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-b", "3", "-e", "1M", "-f", "4611686018427387904"}, 0, ""},
		{[]string{"-b", "4", "-e", "1M", "-f", "4611686018427387904"}, 0, ""},
		{[]string{"-b", "8", "-e", "8", "--qps-per-conn", "1000"}, 2, "QPs per connection"},
		{[]string{"-b", "8", "-e", "8", "--rank-order", "5"}, 2, "invalid argument"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runGoroce(t, time.Minute, append(base, tc.args...)...)
			assert.NotContains(t, errOut, "panic")
			require.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.want)
			if tc.code == 0 {
				rows, _ := parseTable(t, out)
				require.Len(t, rows, 1, "one size: the next is past -e")
			}
		})
	}
}

// TestCollImpairedLoss: 1 % loss on every rank's link both ways, no wrong
// element.
func TestCollImpairedLoss(t *testing.T) {
	out, errOut, code := runGoroce(t, 3*time.Minute, "coll", "all_reduce", "-np", "3", "-b", "8", "-e", "256K", "-f", "32",
		"-n", "2", "-w", "1", "--impair", "loss=1%,seed=5", "-d", "all", "--ceiling=false")
	require.Equal(t, 0, code, errOut)
	requireClean(t, out, "all_reduce_perf", 10*4)
	assert.Regexp(t, `rank \d: impaired link: sent \d+ packets \([1-9]\d* dropped`, errOut)
}

// TestCollJSON: --json prints nccl-tests' JSON document, -J writes it.
func TestCollJSON(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "out.json")
	out, errOut, code := runGoroce(t, time.Minute, "coll", "reduce_scatter", "-np", "2", "-b", "4K", "-e", "16K", "-f", "4", "-n", "2", "-w", "1",
		"--json", "-J", file)
	require.Equal(t, 0, code, errOut)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	for _, k := range []string{"version", "start_time", "args", "env", "nccl_version", "config", "results", "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"} {
		assert.Contains(t, doc, k)
	}
	results := doc["results"].([]any)
	require.Len(t, results, 2)
	r0 := results[0].(map[string]any)
	for _, k := range []string{"size", "count", "type", "redop", "root", "out_of_place", "in_place", "actual_iterations", "experiment_name"} {
		assert.Contains(t, r0, k)
	}
	assert.Equal(t, "    -1", r0["root"])
	oop := r0["out_of_place"].(map[string]any)
	for _, k := range []string{"time", "alg_bw", "bus_bw", "nwrong", "goroce_bus_bw_ceiling"} {
		assert.Contains(t, oop, k)
	}
	assert.Equal(t, 0.0, oop["nwrong"])
	assert.Equal(t, map[string]any{"count": 0.0, "okay": "true"}, doc["out_of_bounds"])
	devs := doc["config"].(map[string]any)["devices"].([]any)
	assert.Len(t, devs, 2)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var fdoc map[string]any
	require.NoError(t, json.Unmarshal(b, &fdoc))
	assert.Len(t, fdoc["results"], 2)
}

// TestCollKilledRank kills one rank of a running job: every other rank
// fails naming it, well before the timeout, and the job's status says so.
func TestCollKilledRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := goroceCmd(ctx, t, "coll", "all_reduce", "-np", "3", "-b", "4M", "-e", "4M", "-n", "100000", "-w", "0", "-c", "0", "--ceiling=false", "-T", "60")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	pid := 0
	re := regexp.MustCompile(`^#  Rank  2 Group  0 Pid +(\d+) `)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			pid, _ = strconv.Atoi(m[1])
		}
		if strings.HasPrefix(sc.Text(), "#        (B)") {
			break // the table started: the ranks run
		}
	}
	require.NotZero(t, pid)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	go io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	require.Error(t, err)
	assert.Less(t, time.Since(start), 20*time.Second, "the others noticed long before -T 60")
	for _, r := range []string{"0", "1"} {
		assert.Regexp(t, regexp.MustCompile(`\[rank `+r+`\] \S+: Test failure: goroce coll: .*rank 2 \(\S+ pid `+strconv.Itoa(pid)+`.*died`), errOut.String())
	}
}

// TestCollInterrupt: SIGINT to goroce coll -np ends every rank; the
// status is 130.
func TestCollInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := goroceCmd(ctx, t, "coll", "all_reduce", "-np", "2", "-b", "1M", "-e", "1M", "-n", "100000", "-w", "0", "-c", "0", "--ceiling=false")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#        (B)") {
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 130, ee.ExitCode())
}
