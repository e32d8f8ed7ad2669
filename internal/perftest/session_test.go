package perftest

import (
	"bufio"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/qp"
)

// A transcript is the TCP payload of one test, message by message, as the
// real tools exchanged it between two rxe guests (testdata/*.oob, from the
// pcaps of testdata/pcaps at the repository root and from captures of the other tools; see
// testdata/README.md): "C <hex>" for the client, "S <hex>" for the server.
type line struct {
	client bool
	data   []byte
}

func loadTranscript(t *testing.T, name string) []line {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	require.NoError(t, err)
	defer f.Close()
	var out []line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		dir, h, ok := strings.Cut(sc.Text(), " ")
		require.True(t, ok)
		b, err := hex.DecodeString(h)
		require.NoError(t, err)
		out = append(out, line{client: dir == "C", data: b})
	}
	require.NoError(t, sc.Err())
	return out
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	b = <-ch
	require.NotNil(t, b)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// play acts as the recorded peer: it writes the lines of its side and reads
// as many bytes as each line of ours, checking that the kind of message
// (its size, and for fixed messages its bytes) matches. At the end it
// expects EOF: we sent nothing more.
func play(t *testing.T, c net.Conn, lines []line, peerIsClient bool) error {
	for i, l := range lines {
		if l.client == peerIsClient {
			if _, err := c.Write(l.data); err != nil {
				return err
			}
			continue
		}
		got := make([]byte, len(l.data))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil {
			return errors.New("line " + strconv.Itoa(i+1) + ": " + err.Error())
		}
		switch len(l.data) {
		case versionLen, sysDataLen, doneLen:
			if string(got) != string(l.data) {
				return errors.New("line " + strconv.Itoa(i+1) + ": got " + hex.EncodeToString(got))
			}
		case DestSize:
			if _, err := ParseDest(got); err != nil {
				return err
			}
		}
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var one [1]byte
	if n, err := c.Read(one[:]); n != 0 || err != io.EOF {
		return errors.New("expected EOF after the transcript, got more")
	}
	return nil
}

// drive runs a whole test's exchange as internal/perf does.
func drive(s *Session, qps, sizes int) error {
	if _, err := s.Hello(qp.MTU1024); err != nil {
		return err
	}
	local := make([]Dest, qps)
	for i := range local {
		local[i] = Dest{OutReads: 1, QPN: uint32(0x100 + i), PSN: 0x123456, RKey: 0x42, VAddr: 0x10000,
			GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 15: 1}}
	}
	if _, err := s.Keys(local); err != nil {
		return err
	}
	if err := s.Barrier(); err != nil {
		return err
	}
	for i := range sizes {
		if err := s.SizeDone(i == sizes-1); err != nil {
			return err
		}
	}
	if _, err := s.Results(Report{Size: 8, Iters: 5}); err != nil {
		return err
	}
	return s.Close()
}

func TestTranscripts(t *testing.T) {
	tests := []struct {
		file  string
		tool  string
		qps   int
		sizes int
	}{
		{"write_bw_s8.oob", "ib_write_bw", 1, 1},
		{"read_bw_s8.oob", "ib_read_bw", 1, 1},
		{"send_bw_s8.oob", "ib_send_bw", 1, 1},
		{"atomic_fadd.oob", "ib_atomic_bw", 1, 1},
		{"atomic_cmp_swap.oob", "ib_atomic_bw", 1, 1},
		{"rxe_write_bw_q2.oob", "ib_write_bw", 2, 1},
		{"rxe_send_bw_q2.oob", "ib_send_bw", 2, 1},
		{"rxe_write_bw_D.oob", "ib_write_bw", 1, 1},
		{"rxe_write_bw_a.oob", "ib_write_bw", 1, 23},
		{"rxe_send_bw_a.oob", "ib_send_bw", 1, 23},
		{"rxe_write_lat.oob", "ib_write_lat", 1, 1},
		{"rxe_read_lat.oob", "ib_read_lat", 1, 1},
		{"rxe_send_lat.oob", "ib_send_lat", 1, 1},
		{"rxe_write_lat_a.oob", "ib_write_lat", 1, 23},
		{"rxe_send_lat_a.oob", "ib_send_lat", 1, 23},
	}
	for _, tc := range tests {
		for _, role := range []Role{Client, Server} {
			t.Run(tc.file+"/"+role.String(), func(t *testing.T) {
				lines := loadTranscript(t, tc.file)
				tool, err := ParseTool(tc.tool)
				require.NoError(t, err)
				sizes := 0
				if tc.sizes > 1 {
					sizes = tc.sizes
				}
				ours, peer := tcpPair(t)
				errc := make(chan error, 1)
				go func() { errc <- play(t, peer, lines, role == Server) }()
				c := NewConn(ours, role)
				c.Timeout = 5 * time.Second
				require.NoError(t, drive(NewSession(c, tool), tc.qps, sizes))
				require.NoError(t, <-errc)
			})
		}
	}
}

// TestBadPeer: a short, garbled or silent exchange, or a peer that dies,
// gives a clear error within the step timeout. The peer plays the client
// side of write_bw_s8 up to a point, then misbehaves.
func TestBadPeer(t *testing.T) {
	good := loadTranscript(t, "write_bw_s8.oob")
	clientLines := func(n int) [][]byte {
		var out [][]byte
		for _, l := range good {
			if l.client {
				out = append(out, l.data)
			}
		}
		return out[:n]
	}
	key := clientLines(5)[4]
	tests := []struct {
		name string
		send [][]byte // written one after the other, reading nothing
		then string   // "close" or "hang"
		want error
		msg  string
	}{
		{"silent", nil, "hang", ErrTimeout, "waited 300ms for the version"},
		{"closes at once", nil, "close", ErrPeerClosed, "before sending the version"},
		{"short version", [][]byte{[]byte("6.0")}, "close", ErrPeerClosed, "after 3 of the 16 bytes"},
		{"short version, hangs", [][]byte{[]byte("6.0")}, "hang", ErrTimeout, "3 of 16 bytes"},
		{"HTTP", [][]byte{[]byte("GET / HTTP/1.1\r\n")}, "hang", ErrGarbled, "version"},
		{"old version", [][]byte{marshalVersion("5.50")}, "hang", nil, "older than 5.70"},
		{"bad MTU", append(clientLines(3), []byte("7\x00")), "hang", ErrGarbled, "MTU message"},
		{"garbled key", append(clientLines(4), []byte(strings.Repeat("z", DestSize))), "hang", ErrGarbled, "key message"},
		{"dies before the results", append(clientLines(4), key, key, key), "close", ErrPeerClosed, "key message of QP 0"},
		{"out of step (-q 2 vs 1)", append(clientLines(4), key, otherQPN(t, key)), "hang", ErrGarbled, "out of step"},
		{"link-local GID (-x 0)", append(clientLines(4), withGID(t, key, "fe80::5054:ff:fe77:2")), "hang", ErrGID, "rxe GID index 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ours, peer := tcpPair(t)
			go func() {
				for _, b := range tc.send {
					peer.Write(b)
					time.Sleep(5 * time.Millisecond)
				}
				if tc.then == "close" {
					time.Sleep(20 * time.Millisecond)
					peer.Close()
				}
				io.Copy(io.Discard, peer)
			}()
			c := NewConn(ours, Server)
			c.Timeout = 300 * time.Millisecond
			start := time.Now()
			err := drive(NewSession(c, Tool{Verb: Write}), 1, 0)
			require.Error(t, err)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			assert.ErrorContains(t, err, tc.msg)
			assert.Less(t, time.Since(start), 3*time.Second, "must fail within the step timeout, never hang")
		})
	}
}

func withGID(t *testing.T, key []byte, gid string) []byte {
	d, err := ParseDest(key)
	require.NoError(t, err)
	d.GID = netip.MustParseAddr(gid).As16()
	b, err := d.Marshal()
	require.NoError(t, err)
	return b
}

func otherQPN(t *testing.T, key []byte) []byte {
	d, err := ParseDest(key)
	require.NoError(t, err)
	d.QPN++
	b, err := d.Marshal()
	require.NoError(t, err)
	return b
}

// TestProgressKeepsAlive: while RDMA traffic moves, the wait for the
// peer's end-of-test message outlasts the step timeout.
func TestProgressKeepsAlive(t *testing.T) {
	ours, peer := tcpPair(t)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		peer.Write([]byte("x"))
	}()
	c := NewConn(ours, Server)
	c.Timeout = 500 * time.Millisecond
	calls := 0
	c.Progress = func() bool { calls++; return true }
	b, err := c.read("test", 1)
	require.NoError(t, err)
	assert.Equal(t, "x", string(b))
	assert.Positive(t, calls)

	c.Progress = func() bool { return false }
	start := time.Now()
	_, err = c.read("the end of the test", 1)
	assert.ErrorIs(t, err, ErrTimeout)
	assert.Less(t, time.Since(start), 2*time.Second)
}
