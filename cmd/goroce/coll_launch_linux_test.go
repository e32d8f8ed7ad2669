package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The launcher tests start goroce coll (this test binary, as goroce) under
// the real launchers: torchrun (python3-torch), mpirun (openmpi-bin) and
// srun on a single-node Slurm cluster (slurm-wlm) that the test starts and
// stops as root. Each is skipped, with the reason, where its launcher is
// missing (or, for Slurm, without root). The ranks learn rank, size and
// rendezvous from the launcher's environment alone.

// collLaunchArgs is the job every launcher runs.
var collLaunchArgs = []string{"coll", "all_reduce", "-b", "8", "-e", "32K", "-f", "8", "-n", "2", "-w", "1"}

// needLauncher skips t unless name is on PATH, and returns its path.
func needLauncher(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("launcher tests skipped in -short")
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
	return p
}

// runLauncher runs cmd with this binary as goroce and returns stdout,
// stderr and the exit status.
func runLauncher(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	cmd.Env = append(cmd.Env, "GOROCE_TEST_MAIN=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, e.String())
	}
	return o.String(), e.String(), code
}

// freeTCPPorts returns n consecutive free TCP ports of 127.0.0.1 (port,
// port+1, …), or fails.
func freeTCPPorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		ok := p+n <= 65535
		for i := 1; ok && i < n; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free consecutive ports")
	return 0
}

func TestCollUnderTorchrun(t *testing.T) {
	torchrun := needLauncher(t, "torchrun")
	exe, err := os.Executable()
	require.NoError(t, err)
	port := freeTCPPorts(t, 2) // torchrun's store, and ours on the next port
	logs := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// torch 1.13's torchrun spells its options with underscores (later
	// releases take both), and with Python 3.11 needs explicit -r and -t:
	// its default "0" parses to None there. -r 1 puts each rank's stdout in
	// LOGDIR/…/attempt_0/RANK/stdout.log, byte for byte.
	args := append([]string{"--no_python", "--nproc_per_node", "3", "--master_port", strconv.Itoa(port),
		"--log_dir", logs, "-r", "1", "-t", "1", exe}, collLaunchArgs...)
	cmd := exec.CommandContext(ctx, torchrun, args...)
	cmd.Env = os.Environ()
	_, errOut, code := runLauncher(t, cmd)
	require.Equal(t, 0, code, errOut)
	files, err := filepath.Glob(filepath.Join(logs, "*", "attempt_0", "0", "stdout.log"))
	require.NoError(t, err)
	require.Len(t, files, 1, "rank 0's stdout log")
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	out := string(b)
	requireClean(t, out, "all_reduce_perf", 5)
	assert.Contains(t, out, "from torchrun (RANK, WORLD_SIZE, LOCAL_RANK)")
	assert.Contains(t, out, fmt.Sprintf("rendezvous 127.0.0.1:%d from torchrun (MASTER_ADDR, MASTER_PORT+1", port+1))
}

func TestCollUnderMpirun(t *testing.T) {
	mpirun := needLauncher(t, "mpirun")
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"--oversubscribe", "-np", "3"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	args = append(append(args, exe), collLaunchArgs...)
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir()) // the default file rendezvous lives there
	out, errOut, code := runLauncher(t, cmd)
	require.Equal(t, 0, code, errOut)
	requireClean(t, out, "all_reduce_perf", 5)
	assert.Contains(t, out, "from Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK)")
	assert.Contains(t, out, "goroce-rdzv from the default for a launcher that gives no address")
}

// slurmCluster is a single-node Slurm cluster in a temporary directory:
// slurmctld and slurmd in the foreground, authentication off (auth/none,
// which slurm-wlm 22.05 still ships), stopped by t.Cleanup.
type slurmCluster struct {
	conf string
	dir  string
}

func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	srun := needLauncher(t, "srun")
	_ = srun
	for _, d := range []string{"slurmctld", "slurmd", "sinfo"} {
		needLauncher(t, d)
	}
	if os.Geteuid() != 0 {
		t.Skip("a Slurm cluster needs root (slurmd runs the job's processes)")
	}
	host, err := os.Hostname()
	require.NoError(t, err)
	host, _, _ = strings.Cut(host, ".")
	dir := t.TempDir()
	ctlPort := freeTCPPorts(t, 2)
	conf := fmt.Sprintf(`ClusterName=gorocecoll
SlurmctldHost=%[1]s
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=%[4]s/state
SlurmdSpoolDir=%[4]s/spool
SlurmctldPidFile=%[4]s/slurmctld.pid
SlurmdPidFile=%[4]s/slurmd.pid
SlurmctldLogFile=%[4]s/slurmctld.log
SlurmdLogFile=%[4]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=%[1]s CPUs=8 State=UNKNOWN
PartitionName=gorocecoll Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
`, host, ctlPort, ctlPort+1, dir)
	c := &slurmCluster{conf: filepath.Join(dir, "slurm.conf"), dir: dir}
	require.NoError(t, os.WriteFile(c.conf, []byte(conf), 0o644))
	for _, sub := range []string{"state", "spool"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, sub), 0o755))
	}
	var daemons []*exec.Cmd
	t.Cleanup(func() {
		for _, d := range daemons {
			d.Process.Signal(syscall.SIGTERM)
		}
		for _, d := range daemons {
			done := make(chan struct{})
			go func() { d.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				d.Process.Kill()
				<-done
			}
		}
	})
	for _, name := range []string{"slurmctld", "slurmd"} {
		d := exec.Command(name, "-D", "-f", c.conf)
		d.Env = append(os.Environ(), "SLURM_CONF="+c.conf)
		var logb bytes.Buffer
		d.Stdout, d.Stderr = &logb, &logb
		require.NoError(t, d.Start(), name)
		daemons = append(daemons, d)
	}
	// Wait until the node is up for jobs.
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := exec.Command("sinfo", "-h", "-o", "%t")
		cmd.Env = append(os.Environ(), "SLURM_CONF="+c.conf)
		out, _ := cmd.Output()
		if s := strings.TrimSpace(string(out)); s == "idle" || s == "mix" || s == "alloc" {
			return c
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "slurmctld.log"))
			t.Fatalf("the Slurm node never came up (sinfo %q)\n%s", out, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestCollUnderSrun(t *testing.T) {
	c := startSlurm(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "srun", append([]string{"-n", "3", "--oversubscribe", exe}, collLaunchArgs...)...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.conf)
	out, errOut, code := runLauncher(t, cmd)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	requireClean(t, out, "all_reduce_perf", 5)
	assert.Contains(t, out, "from Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID)")
	assert.Contains(t, out, "from Slurm (first host of SLURM_STEP_NODELIST")
}
