package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/perf"
)

// TestPerfRDMACM runs `goroce perf --server -R` and `goroce perf -R
// SERVER` against each other in-process (127.0.0.2 and 127.0.0.1): the
// flags reach the -R mode, and the client's JSON row is the server's.
func TestPerfRDMACM(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	port := strconv.Itoa(freeUDPPort(t))
	listening := make(chan struct{})
	perfListening = func() { close(listening) }
	defer func() { perfListening = nil }()
	common := []string{"-s", "4096", "-n", "50", "-p", "18600", "--roce-port", port, "--timeout", "10s", "-x", "1", "-F"}
	var sout, serr bytes.Buffer
	srv := make(chan int, 1)
	go func() {
		srv <- runPerf(append([]string{"read", "--server", "-R", "--source_ip", "127.0.0.2", "--json"}, common...), &sout, &serr)
	}()
	select {
	case <-listening:
	case code := <-srv:
		t.Fatalf("server exited %d: %s", code, serr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("server never listened")
	}
	var cout, cerr bytes.Buffer
	code := runPerf(append([]string{"read", "--rdma_cm", "--source_ip", "127.0.0.1", "--json", "127.0.0.2"}, common...), &cout, &cerr)
	require.Equal(t, 0, code, "client: %s", cerr.String())
	select {
	case code := <-srv:
		require.Equal(t, 0, code, "server: %s", serr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("server did not end")
	}
	var c, s perf.Result
	require.NoError(t, json.Unmarshal(cout.Bytes(), &c), cout.String())
	require.NoError(t, json.Unmarshal(sout.Bytes(), &s), sout.String())
	assert.Equal(t, 50, c.Iters)
	assert.Equal(t, 4096, c.Size)
	assert.Equal(t, c.Iters, s.Iters)
	assert.Positive(t, c.Gbps)
}

// TestPerfRDMACMUsage: -R needs a peer.
func TestPerfRDMACMUsage(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 2, runPerf([]string{"write", "-R"}, &out, &errb))
	assert.Contains(t, errb.String(), "-R runs against a peer")
}
