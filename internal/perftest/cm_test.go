package perftest

import (
	"errors"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/qp"
)

// chanMessenger is one end of an in-memory Messenger pair: each Send is
// one message to the other end.
type chanMessenger struct {
	in, out chan []byte
	closed  chan struct{} // closed by the peer's Close
	mine    chan struct{}
}

func msgPair() (a, b *chanMessenger) {
	ab, ba := make(chan []byte, 8), make(chan []byte, 8)
	ca, cb := make(chan struct{}), make(chan struct{})
	return &chanMessenger{in: ba, out: ab, closed: cb, mine: ca}, &chanMessenger{in: ab, out: ba, closed: ca, mine: cb}
}

func (m *chanMessenger) Send(b []byte) error {
	select {
	case m.out <- append([]byte(nil), b...):
		return nil
	case <-m.closed:
		return ErrPeerClosed
	}
}

func (m *chanMessenger) Recv(d time.Duration) ([]byte, error) {
	select {
	case b := <-m.in:
		return b, nil
	case <-m.closed:
		return nil, ErrPeerClosed
	case <-time.After(d):
		return nil, os.ErrDeadlineExceeded
	}
}

func (m *chanMessenger) Close() error {
	select {
	case <-m.mine:
	default:
		close(m.mine)
	}
	return nil
}

var _ Messenger = (*chanMessenger)(nil)

// playCM acts as the recorded peer over a Messenger: it sends the messages
// of its side and checks the size of each of ours (and the bytes of the
// fixed ones, and that key messages parse).
func playCM(m Messenger, lines []line, peerIsClient bool) error {
	for i, l := range lines {
		if l.client == peerIsClient {
			if err := m.Send(l.data); err != nil {
				return err
			}
			continue
		}
		got, err := m.Recv(5 * time.Second)
		if err != nil {
			return err
		}
		if len(got) != len(l.data) {
			return errors.New("line " + itoa(i+1) + ": message of " + itoa(len(got)) + " bytes, want " + itoa(len(l.data)))
		}
		switch len(l.data) {
		case versionLen, sysDataLen, mtuLen:
			if string(got) != string(l.data) {
				return errors.New("line " + itoa(i+1) + ": fixed message differs")
			}
		case DestBinarySize:
			if _, err := ParseDestBinary(got); err != nil {
				return err
			}
		}
	}
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// driveCM runs a whole -R test's exchange as internal/perf does: Hello,
// the two rdma_cm handshakes around the test connections, then the key
// exchanges and the end as over TCP.
func driveCM(s *Session, qps int) error {
	if _, err := s.Hello(qp.MTU1024); err != nil {
		return err
	}
	if err := s.CMSync(); err != nil {
		return err
	}
	if err := s.CMSync(); err != nil {
		return err
	}
	local := make([]Dest, qps)
	for i := range local {
		local[i] = Dest{OutReads: 1, QPN: uint32(0x100 + i), PSN: 0x123456, RKey: 0x42, VAddr: 0x10000,
			GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 15: 1}, GIDIndex: 1}
	}
	if _, err := s.Keys(local); err != nil {
		return err
	}
	if err := s.Barrier(); err != nil {
		return err
	}
	if _, err := s.Results(Report{Size: 8, Iters: 5}); err != nil {
		return err
	}
	return s.Close()
}

// TestCMTranscript replays ib_write_bw -R's exchange (the SENDs on the
// control connection of testdata/write_bw_rdma_cm.oob) against Session in
// both roles: binary key messages, the two rdma_cm handshakes and no
// "done".
func TestCMTranscript(t *testing.T) {
	lines := loadTranscript(t, "write_bw_rdma_cm.oob")
	require.Len(t, lines, 32)
	for _, role := range []Role{Client, Server} {
		t.Run(role.String(), func(t *testing.T) {
			ours, peer := msgPair()
			errc := make(chan error, 1)
			go func() { errc <- playCM(peer, lines, role == Server) }()
			c := NewCMConn(ours, role)
			c.Timeout = 5 * time.Second
			require.True(t, c.CM())
			require.NoError(t, driveCM(NewSession(c, Tool{Verb: Write}), 1))
			require.NoError(t, <-errc)
		})
	}
}

// TestDestBinaryGolden: the client's key message of write_bw_rdma_cm.pcap
// (frame 31) parses to its fields and marshals back to the same bytes.
func TestDestBinaryGolden(t *testing.T) {
	lines := loadTranscript(t, "write_bw_rdma_cm.oob")
	b := lines[12].data
	require.True(t, lines[12].client)
	d, err := ParseDestBinary(b)
	require.NoError(t, err)
	assert.Equal(t, Dest{OutReads: 1, QPN: 0x1e, PSN: 0xfa7a51, RKey: 0x12a6, VAddr: 0x5632_8a54_d000,
		GID: netip.MustParseAddr("::ffff:10.77.0.3").As16(), GIDIndex: 1}, d)
	again, err := d.MarshalBinary()
	require.NoError(t, err)
	assert.Equal(t, b, again)
}

func TestDestBinaryBad(t *testing.T) {
	good, err := (&Dest{QPN: 1}).MarshalBinary()
	require.NoError(t, err)
	tests := []struct {
		name string
		b    []byte
	}{
		{"short", good[:55]},
		{"long", append(good, 0)},
		{"text key message", make([]byte, DestSize)},
		{"QPN above 24 bits", func() []byte { b := append([]byte(nil), good...); b[offBinQPN] = 1; return b }()},
		{"out_reads above 16 bits", func() []byte { b := append([]byte(nil), good...); b[offBinOutReads+1] = 1; return b }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDestBinary(tc.b)
			assert.ErrorIs(t, err, ErrGarbled)
		})
	}
	_, err = (&Dest{PSN: 1 << 24}).MarshalBinary()
	assert.Error(t, err)
}

// TestCMBadPeer: over the RDMA CM, a message of the wrong size, a peer
// that disconnects and a silent one each give a clear error within the
// step timeout.
func TestCMBadPeer(t *testing.T) {
	tests := []struct {
		name string
		peer func(m *chanMessenger)
		want error
		msg  string
	}{
		{"silent", func(m *chanMessenger) {}, ErrTimeout, "waited 300ms for the version"},
		{"disconnects", func(m *chanMessenger) { m.Close() }, ErrPeerClosed, "before sending the version"},
		{"TCP-mode key size", func(m *chanMessenger) { m.Send(make([]byte, 17)) }, ErrGarbled, "the version of 17 bytes, want 16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ours, peer := msgPair()
			tc.peer(peer)
			c := NewCMConn(ours, Server)
			c.Timeout = 300 * time.Millisecond
			start := time.Now()
			err := driveCM(NewSession(c, Tool{Verb: Write}), 1)
			assert.ErrorIs(t, err, tc.want)
			assert.ErrorContains(t, err, tc.msg)
			assert.Less(t, time.Since(start), 3*time.Second)
		})
	}
	// CMSync is the rdma_cm mode's only.
	ours, _ := tcpPair(t)
	assert.Error(t, NewSession(NewConn(ours, Client), Tool{}).CMSync())
}
