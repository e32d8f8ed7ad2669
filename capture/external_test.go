package capture_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// externalOutput is what examples/capture prints for
// testdata/cap/impaired.pcap (the same figures as the flow and lint tests
// of that capture).
const externalOutput = `frame 1: 10.0.0.1 -> 10.0.0.2 RC_RDMA_WRITE_FIRST QP 0x000022 PSN 16773360, ICRC Good
frame 2: 10.0.0.1 -> 10.0.0.2 RC_RDMA_WRITE_MIDDLE QP 0x000022 PSN 16773361, ICRC Good
frame 3: 10.0.0.1 -> 10.0.0.2 RC_RDMA_WRITE_LAST QP 0x000022 PSN 16773362, ICRC Good
frame 4: 10.0.0.1 -> 10.0.0.2 RC_RDMA_READ_REQUEST QP 0x000022 PSN 16773363, ICRC Good
frame 5: 10.0.0.1 -> 10.0.0.2 RC_FETCH_ADD QP 0x000022 PSN 16773366, ICRC Good
93 frames, 93 RoCEv2, 1 connections
connection 1: RC 10.0.0.1 (QP 0x000011) <-> 10.0.0.2 (QP 0x000022)
  10.0.0.1 -> 10.0.0.2 QP 0x000022: 60 packets, 41676 bytes, 25 retransmissions, 6 Go-Back-N, 0 CE, 0 bad ICRC
  10.0.0.2 -> 10.0.0.1 QP 0x000011: 33 packets, 10042 bytes, 13 ACKs, 2 NAKs, 9 CE, 2 bad ICRC
3 findings
  frame 43: CNP-DSCP (warning): CNP to QP 0x000022 with DSCP 0, the DSCP of the packets it throttles (10.0.0.2 -> 10.0.0.1 QP 0x000011): it queues behind them (ConnectX sends CNPs with cnp_dscp, 48 by default)
  frame 65: ICRC (error): ICRC mismatch (wire 289aa086)
  frame 77: ICRC (error): ICRC mismatch (wire 96b85385)
`

// TestExternalModule is issue 28's acceptance test for the public capture
// packages: a module outside this repository, which requires
// github.com/goroce/goroce and replaces it with this checkout, imports
// capture, capture/flow and capture/lint (the program of
// examples/capture), reads a pcap and prints its packets, flows and lint
// findings. A package under internal/ in the program would not build
// ("use of internal package … not allowed"). It runs offline: the module
// cache holds the dependencies, and the repository's go.sum their sums.
func TestExternalModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program in a module of its own: skipped with -short")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	repo, err := filepath.Abs(root)
	require.NoError(t, err)
	prog, err := os.ReadFile(filepath.Join(repo, "examples/capture/main.go"))
	require.NoError(t, err)
	require.NotContains(t, string(prog), "goroce/internal", "the program uses the public packages only")
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	require.NoError(t, err)

	dir := t.TempDir()
	mod := "module example.com/captureuser\n\ngo 1.26.0\n\n" +
		"require github.com/goroce/goroce v0.0.0\n\n" +
		"replace github.com/goroce/goroce => " + repo + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), prog, 0o644))

	cmd := exec.Command(gobin, "run", ".", filepath.Join(repo, "testdata/cap/impaired.pcap"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go run in the outside module: %s", stderr.String())
	assert.Equal(t, externalOutput, string(out))
}
