package roce

import (
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
)

// TestIDTrackerWindow walks one peer's tracker through the rules of
// idTracker: each step is a packet (its recovered ID, the time since the
// start) and whether it is accepted and re-seeds.
func TestIDTrackerWindow(t *testing.T) {
	type step struct {
		id     uint16
		at     time.Duration
		ok     bool
		reseed bool
	}
	base := uint16(0xa354) // rxe's IDs in write_bw_s65536.pcap start here
	tests := []struct {
		name  string
		steps []step
	}{
		{"rxe burst steps by one", []step{
			{base, 0, true, true}, {base + 1, 0, true, false}, {base + 2, time.Microsecond, true, false},
		}},
		{"wraps at 2^16", []step{
			{0xfffe, 0, true, true}, {0xffff, 0, true, false}, {0, 0, true, false}, {1, 0, true, false},
		}},
		{"another ID in a burst is dropped", []step{
			{base, 0, true, true}, {base + 0x8000, 0, false, false}, {base + 1, 0, true, false},
		}},
		{"ahead edge", []step{
			{base, 0, true, true}, {base + 1 + idAhead + 1, 0, true, false},
			{base + 2 + idAhead + 1 + idAhead + 2, 0, false, false},
		}},
		{"behind edge", []step{
			{base, 0, true, true}, {base + 1, 0, true, false}, {base + 2 - idBehind, 0, true, false},
			{base + 2 - idBehind - 1, 0, false, false}, {base + 2, 0, true, false},
		}},
		{"window widens with silence", []step{
			{base, 0, true, true},
			{base + 1 + idAhead + 500, 10 * time.Millisecond, false, false},
			{base + 1 + idAhead + 500, 500 * time.Millisecond, true, false},
		}},
		{"idle gap: any ID after 65.3 s", []step{
			{base, 0, true, true},
			{base + 0x8000, 30 * time.Second, false, false},
			{base + 0x4000, 66 * time.Second, true, false},
			{base + 0x4001, 66 * time.Second, true, false},
			{base + 0xc000, 66 * time.Second, false, false},
		}},
		{"a run of two re-seeds", []step{
			{base, 0, true, true}, {base + 1, 0, true, false},
			{base + 5000, 0, false, false}, {base + 5001, 0, true, true}, {base + 5002, 0, true, false},
			{base + 2, 0, false, false},
		}},
		{"scattered out-of-window IDs never re-seed", []step{
			{base, 0, true, true},
			{base + 5000, 0, false, false}, {base + 9000, 0, false, false}, {base + 20000, 0, false, false},
			{base + 30000, 0, false, false}, {base + 1, 0, true, false},
		}},
	}
	t0 := time.Unix(1_800_000_000, 0)
	src := netip.MustParseAddr("10.77.0.3")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tr idTracker
			for i, s := range tc.steps {
				ok, reseed := tr.accept(src, s.id, t0.Add(s.at))
				assert.Equal(t, s.ok, ok, "step %d: ID %#04x accepted", i, s.id)
				assert.Equal(t, s.reseed, reseed, "step %d: ID %#04x re-seeds", i, s.id)
			}
		})
	}
}

// TestIDTrackerPeers: peers are tracked apart (an IPv4-mapped address is
// the same peer) and no more than idPeers at once, the least recently seen
// forgotten first.
func TestIDTrackerPeers(t *testing.T) {
	var tr idTracker
	t0 := time.Unix(1_800_000_000, 0)
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	_, r := tr.accept(a, 100, t0)
	require.True(t, r)
	_, r = tr.accept(b, 9000, t0)
	require.True(t, r)
	ok, _ := tr.accept(netip.AddrFrom16(a.As16()), 101, t0)
	require.True(t, ok, "mapped address is the same peer")
	ok, _ = tr.accept(b, 101, t0)
	require.False(t, ok, "a's counter is not b's")

	for i := range 2 * idPeers {
		ip := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		tr.accept(ip, 1, t0.Add(time.Duration(i+1)*time.Microsecond))
	}
	assert.Len(t, tr.peers, idPeers)
	assert.Len(t, tr.index, idPeers)
	_, r = tr.accept(a, 102, t0.Add(time.Second))
	assert.True(t, r, "a, the oldest, was forgotten")
}

// TestIDTrackerAllocs pins accept at zero allocations for known peers.
func TestIDTrackerAllocs(t *testing.T) {
	var tr idTracker
	now := time.Now()
	src := netip.MustParseAddr("10.77.0.3")
	tr.accept(src, 0, now)
	id := uint16(1)
	allocs := testing.AllocsPerRun(1000, func() {
		tr.accept(src, id, now)
		id++
		tr.accept(src, id+0x8000, now)
	})
	assert.Zero(t, allocs)
}

// TestIDTrackerReplaysRxeCaptures feeds every IPv4 RoCEv2 packet of the
// rxe captures (testdata/pcaps: real rdma_rxe senders, whose IDs come from
// the kernel's per-destination counter) through a tracker in capture order,
// timed by the capture: each ID recovered from the ICRC equals the one in
// the header, and every packet is accepted; the window re-seeds only on
// each peer's first packet of a file (the files are separate runs).
func TestIDTrackerReplaysRxeCaptures(t *testing.T) {
	files, err := filepath.Glob("../testdata/pcaps/*.pcap")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var p rocev2.Packet
	total := 0
	for _, fn := range files {
		t.Run(filepath.Base(fn), func(t *testing.T) {
			f, err := os.Open(fn)
			require.NoError(t, err)
			defer f.Close()
			r, err := pcapgo.NewReader(f)
			require.NoError(t, err)
			var tr idTracker
			peers := map[netip.Addr]bool{}
			n := 0
			for {
				data, ci, err := r.ReadPacketData()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				if p.ParseFrame(data) != nil || p.IPv6() {
					continue // the TCP out-of-band exchange
				}
				src := netip.AddrFrom4([4]byte(p.IP[12:16]))
				dst := netip.AddrFrom4([4]byte(p.IP[16:20]))
				sport, dport := binary.BigEndian.Uint16(p.UDP[0:2]), binary.BigEndian.Uint16(p.UDP[2:4])
				hdrID := binary.BigEndian.Uint16(p.IP[4:6])
				tp := p.Transport
				var ph [rocev2.PseudoHeaderLen]byte
				ip, udp := rocev2.PseudoHeaders(&ph, netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport), 0, len(tp))
				got := rocev2.ComputeICRC(ip, udp, tp[:len(tp)-bth.ICRCSize])
				id, ok := rocev2.RecoverIPv4ID(got, rocev2.ReadICRC(tp[len(tp)-bth.ICRCSize:]), len(tp))
				require.True(t, ok, "packet %d: ID not recoverable", n)
				require.Equal(t, hdrID, id, "packet %d: recovered ID", n)
				ok, reseed := tr.accept(src, id, ci.Timestamp)
				require.True(t, ok, "packet %d from %v: ID %#04x outside the window", n, src, id)
				require.Equal(t, !peers[src], reseed, "packet %d from %v: re-seed", n, src)
				peers[src] = true
				n++
			}
			require.Positive(t, n)
			total += n
		})
	}
	t.Logf("%d rxe packets in %d captures, every one inside its peer's window", total, len(files))
}
