package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRpingPattern pins the client's buffer to rping's: "rdma-ping-N: ",
// characters from 'A'+N on (wrapping after 'z'), a NUL last: the line
// rping -v prints first at the default -S 64.
func TestRpingPattern(t *testing.T) {
	b := make([]byte, 64)
	rpingPattern(b, 0, 'A')
	assert.Equal(t, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr", string(cstring(b)))
	assert.Equal(t, byte(0), b[63])
	rpingPattern(b, 12, 'x')
	assert.Equal(t, "rdma-ping-12: xyzABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmn", string(cstring(b)))
}

// TestRpingLoopback runs goroce rping's server and client in-process over
// UDP on 127.0.0.2 and 127.0.0.1, -C 10 -V -v, and checks both sides'
// ping data lines.
func TestRpingLoopback(t *testing.T) {
	port := strconv.Itoa(freeUDPPort(t))
	listening := make(chan struct{})
	rpingListening = func() { close(listening) }
	defer func() { rpingListening = nil }()

	sout, serr := newSyncBuffer(""), newSyncBuffer("")
	srv := make(chan int, 1)
	go func() {
		srv <- runRping([]string{"-s", "-v", "-a", "127.0.0.2", "-p", "7174", "-roce-port", port, "-timeout", "10s"}, sout, serr)
	}()
	select {
	case <-listening:
	case code := <-srv:
		t.Fatalf("server exited %d: %s", code, serr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("server never listened")
	}
	cout, cerr := newSyncBuffer(""), newSyncBuffer("")
	code := runRping([]string{"-c", "-v", "-V", "-C", "10", "-a", "127.0.0.2", "-I", "127.0.0.1", "-p", "7174",
		"-roce-port", port, "-timeout", "10s", "-stats"}, cout, cerr)
	require.Equal(t, 0, code, "client stderr: %s", cerr.String())
	select {
	case code := <-srv:
		require.Equal(t, 0, code, "server stderr: %s", serr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("server did not end after the client disconnected")
	}

	var want []string
	b := make([]byte, 64)
	first := byte('A')
	for i := range 10 {
		rpingPattern(b, i, first)
		first++
		want = append(want, string(cstring(b)))
	}
	clines := strings.Split(strings.TrimSuffix(cout.String(), "\n"), "\n")
	slines := strings.Split(strings.TrimSuffix(sout.String(), "\n"), "\n")
	require.Len(t, clines, 10)
	require.Len(t, slines, 10)
	for i, w := range want {
		assert.Equal(t, "ping data: "+w, clines[i])
		assert.Equal(t, "server ping data: "+w, slines[i])
	}
	assert.Equal(t, "ping data: rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrs", clines[1])
	assert.Contains(t, serr.String(), "server DISCONNECT EVENT...")
	// --stats: the client's device sent the CM exchange, 10 READ requests
	// and WRITEs, their SENDs and ACKs, and counted no bad ICRC.
	m := regexp.MustCompile(`goroce: stats rx=(\d+) tx=(\d+) bad_icrc=0 `).FindStringSubmatch(cerr.String())
	require.NotNil(t, m, "client stderr: %s", cerr.String())
	tx, _ := strconv.Atoi(m[2])
	assert.Greater(t, tx, 30, "client packets sent")
	assert.NotContains(t, serr.String(), "goroce: stats", "the server ran without --stats")
}
