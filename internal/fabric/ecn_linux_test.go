package fabric_test

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/internal/fabric/fabrictest"
)

// ecnReceiver counts received datagrams by the codepoint they were sent
// with (their first byte) and the IP ECN field they arrived with
// (IP_RECVTOS).
type ecnReceiver struct {
	c    *net.UDPConn
	wg   sync.WaitGroup
	mu   sync.Mutex
	got  [4][4]int // [sent][received]
	stop chan struct{}
}

func newECNReceiver(t *testing.T, ns string, addr netip.Addr) *ecnReceiver {
	r := &ecnReceiver{stop: make(chan struct{})}
	require.NoError(t, fabric.InNetns(ns, func() (err error) {
		r.c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		return err
	}))
	rc, err := r.c.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, rc.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
	}))
	require.NoError(t, err)
	require.NoError(t, r.c.SetReadBuffer(8<<20))
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		b, oob := make([]byte, 2048), make([]byte, 128)
		for {
			n, oobn, _, _, err := r.c.ReadMsgUDPAddrPort(b, oob)
			if err != nil {
				return
			}
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if n == 0 || err != nil {
				continue
			}
			for _, m := range msgs {
				if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) >= 1 {
					r.mu.Lock()
					r.got[b[0]&3][m.Data[0]&3]++
					r.mu.Unlock()
				}
			}
		}
	}()
	return r
}

func (r *ecnReceiver) counts() [4][4]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}

func (r *ecnReceiver) close() { r.c.Close(); r.wg.Wait() }

// blast sends 1000-byte datagrams from host ns to dst for d at rate
// (bits/s), cycling through the ECN codepoints ecns (one socket each, with
// IP_TOS set); a token bucket of 2 ms at the rate paces it, so a late
// wake-up never sends more than that at once (12.5 KB at 50 Mbit/s, well
// under the marker's 40 KB threshold). It returns the datagrams sent per
// codepoint.
func blast(t *testing.T, ns string, dst netip.AddrPort, ecns []byte, rate float64, d time.Duration) [4]int {
	socks := make([]*net.UDPConn, len(ecns))
	require.NoError(t, fabric.InNetns(ns, func() error {
		for i, e := range ecns {
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
			if err != nil {
				return err
			}
			socks[i] = c
			rc, _ := c.SyscallConn()
			var serr error
			rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, int(26<<2|e)) })
			if serr != nil {
				return serr
			}
		}
		return nil
	}))
	defer func() {
		for _, c := range socks {
			c.Close()
		}
	}()
	const size = 1000
	burst := max(8000, rate/8*0.002)
	var sent [4]int
	buf := make([]byte, size)
	start := time.Now()
	credit, last := float64(burst), start
	for i := 0; ; {
		now := time.Now()
		if now.Sub(start) >= d {
			break
		}
		credit = min(credit+rate/8*now.Sub(last).Seconds(), burst)
		last = now
		if credit < size {
			time.Sleep(200 * time.Microsecond)
			continue
		}
		credit -= size
		e := ecns[i%len(ecns)]
		buf[0] = e
		if _, err := socks[i%len(ecns)].Write(buf); err == nil {
			sent[e]++
		}
		i++
	}
	return sent
}

// TestECNMarking sends UDP through a fabric whose one leaf–spine link is
// limited to 100 Mbit/s, host 0 (leaf 0) to host 1 (leaf 1), and reads
// the ECN field at the receiver (IP_RECVTOS). At a quarter of the rate,
// ECT(0) arrives unmarked and no marker sees its virtual queue above the
// threshold (a quarter, not nearer the rate: a softirq or a sender held
// off the CPU for some milliseconds delivers what it owes in one burst,
// and at a quarter only a stall of 13 ms makes a 40 KB one). At twice the rate, ECT(0) and ECT(1) through the marked
// leaf→spine egress arrive CE, Not-ECT never does, the marker's CE count
// covers every CE the receiver saw (the tbf drops some marked packets),
// and the tbf drops the excess.
func TestECNMarking(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric; skipped under -short")
	}
	const rate = 100 * fabric.Mbit
	f := fabrictest.Up(t, fabric.Config{Spines: 1, Rate: rate, MTU: 1500})
	a, b := f.LeafHosts(0)[0], f.LeafHosts(1)[0]
	rx := newECNReceiver(t, b.NS, b.Addr)
	defer rx.close()
	dst := rx.c.LocalAddr().(*net.UDPAddr).AddrPort()
	const up = "l0-s0" // leaf 0 → spine 0: the bottleneck's egress is its A end

	before, err := f.Stats()
	require.NoError(t, err)
	sent := blast(t, a.NS, dst, []byte{0b10}, 0.25*float64(rate), time.Second)
	time.Sleep(100 * time.Millisecond)
	mid, err := f.Stats()
	require.NoError(t, err)
	below, err := mid.Sub(before)
	require.NoError(t, err)
	got := rx.counts()
	t.Logf("a quarter of the rate: sent %d ECT(0), received %v (by received codepoint)", sent[0b10], got[0b10])
	l, _ := below.Link(up)
	require.NotNil(t, l.A.ECN, "the leaf's egress to the spine has a marker")
	t.Logf("a quarter of the rate: marker on %s %+v, tbf drops %d", up, *l.A.ECN, l.A.Drops)
	assert.Zero(t, got[0b10][0b11], "no CE below the rate")
	assert.Greater(t, got[0b10][0b10], sent[0b10]*9/10, "ECT(0) arrives")
	assert.GreaterOrEqual(t, l.A.ECN.Packets, uint64(sent[0b10]), "the marker saw every datagram")
	for _, x := range below.Links {
		for _, e := range []fabric.EndStats{x.A, x.B} {
			if e.ECN != nil {
				assert.Zero(t, e.ECN.Over, "%s %s: virtual queue above the threshold below the rate", x.Name, e.Dev)
			}
		}
	}
	assert.Zero(t, l.A.Drops, "no tbf drops below the rate")

	sent = blast(t, a.NS, dst, []byte{0b10, 0b01, 0b00}, 2*float64(rate), time.Second)
	time.Sleep(200 * time.Millisecond) // the tbf's queue drains
	end, err := f.Stats()
	require.NoError(t, err)
	above, err := end.Sub(mid)
	require.NoError(t, err)
	got2 := rx.counts()
	var d [4][4]int
	for s := range 4 {
		for r := range 4 {
			d[s][r] = got2[s][r] - got[s][r]
		}
	}
	l, _ = above.Link(up)
	t.Logf("twice the rate: sent %v (by codepoint), received ECT(0) %v, ECT(1) %v, Not-ECT %v (by received codepoint)", sent, d[0b10], d[0b01], d[0b00])
	t.Logf("twice the rate: marker on %s %+v, tbf drops %d", up, *l.A.ECN, l.A.Drops)
	assert.Positive(t, d[0b10][0b11], "ECT(0) marked CE")
	assert.Positive(t, d[0b01][0b11], "ECT(1) marked CE")
	assert.Zero(t, d[0b00][0b11], "Not-ECT never marked")
	assert.Zero(t, d[0b00][0b01]+d[0b00][0b10], "Not-ECT arrives Not-ECT")
	assert.Positive(t, d[0b00][0b00], "Not-ECT arrives")
	ce := uint64(d[0b10][0b11] + d[0b01][0b11])
	assert.GreaterOrEqual(t, l.A.ECN.Marks, ce, "every CE the receiver saw was set by the marker")
	assert.Positive(t, l.A.Drops, "the tbf drops the excess over its buffer")
	assert.Greater(t, l.A.ECN.Over, l.A.ECN.Marks, "Not-ECT packets above the threshold are counted, not marked")
}
