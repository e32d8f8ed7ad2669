package perf

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/rocev2"
)

// TestBaselineQuick runs a short Baseline over loopback (127.0.0.1 →
// 127.0.0.2) and checks the result is sane.
func TestBaselineQuick(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("link/udp needs Linux")
	}
	res, err := Baseline(context.Background(), BaselineConfig{
		Duration: 200 * time.Millisecond, Pings: 500, PingWarmup: 50, Plain: true,
	})
	require.NoError(t, err)
	t.Logf("blast %d B: %.2f Gb/s, %.3f Mpps, loss %.1f%%; one-way p50 %v p99 %v p999 %v",
		res.Size, res.Gbps, res.Mpps, 100*res.Loss, res.Latency.P50, res.Latency.P99, res.Latency.P999)
	assert.Greater(t, res.Received, uint64(0))
	assert.LessOrEqual(t, res.Received, res.Sent)
	assert.Greater(t, res.Gbps, 0.0)
	assert.Equal(t, 500, res.Latency.Samples)
	assert.Positive(t, res.Latency.P50)
	assert.LessOrEqual(t, res.Latency.P50, res.Latency.P99)
	assert.LessOrEqual(t, res.Latency.P99, res.Latency.P999)
	assert.Greater(t, res.Sender.GSOSent, uint64(0))
	assert.Greater(t, res.Receiver.GROReceived, uint64(0))
	t.Logf("plain blast: %.3f Mpps, loss %.1f%%", res.Plain.Mpps, 100*res.Plain.Loss)
	assert.Greater(t, res.Plain.Received, uint64(0))
	assert.LessOrEqual(t, res.Plain.Received, res.Plain.Sent)
	assert.Positive(t, res.Plain.Mpps)
}

// TestBaselineCancel: a cancelled context stops Baseline with its error.
func TestBaselineCancel(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("link/udp needs Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Baseline(ctx, BaselineConfig{Duration: time.Minute})
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

func TestOneWay(t *testing.T) {
	var rtts []time.Duration
	for i := 1000; i >= 1; i-- {
		rtts = append(rtts, time.Duration(i)*2*time.Microsecond)
	}
	l := oneWay(rtts)
	assert.Equal(t, Latency{Samples: 1000, Min: time.Microsecond, P50: 500 * time.Microsecond,
		P99: 990 * time.Microsecond, P999: 999 * time.Microsecond, Max: 1000 * time.Microsecond}, l)
	assert.Equal(t, Latency{}, oneWay(nil))
}

// TestBaselineFloor runs a short floor blast over loopback: it moves data
// and every datagram's ICRC verifies at the receiver.
func TestBaselineFloor(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("link/udp needs Linux")
	}
	res, err := Baseline(context.Background(), BaselineConfig{
		Duration: 200 * time.Millisecond, NoPing: true, Floor: true,
	})
	require.NoError(t, err)
	f := res.Floor
	t.Logf("floor blast %d B: %.2f Gb/s (blast %.2f), %.3f Mpps, loss %.1f%%, ICRC ID fixups %d",
		res.Size, f.Gbps, res.Gbps, f.Mpps, 100*f.Loss, f.ICRCIDFixups)
	assert.Greater(t, f.Received, uint64(0))
	assert.LessOrEqual(t, f.Received, f.Sent)
	assert.Greater(t, f.Gbps, 0.0)
	assert.Zero(t, f.BadICRC)
	assert.Zero(t, res.Plain.Received, "Plain not asked for")
}

// TestFloorVerify feeds the floor receiver's check datagrams sealed by the
// floor sender: a good one verifies, a corrupted one counts in BadICRC and
// is not placed, one whose IPv4 ID the link guessed wrong is recovered
// (ICRCIDFixups) unless the link claims to know the ID.
func TestFloorVerify(t *testing.T) {
	src := netip.MustParseAddrPort("127.0.0.1:40000")
	dst := netip.MustParseAddrPort("127.0.0.2:4791")
	seal := func(size int, id uint16) link.Datagram {
		f := &floorSource{src: src, region: make([]byte, 1<<16)}
		for i := range f.region {
			f.region[i] = byte(i * 7)
		}
		b := f.region[:size:size]
		copy(b, floorBTH[:])
		dgs := []link.Datagram{{Buf: b, Dst: dst, IPID: id}}
		f.seal(dgs)
		// What the receiving link reports: the addresses, the ID guessed.
		return link.Datagram{Buf: b, Src: src, Dst: dst}
	}
	const size = 4096 + 16
	tests := []struct {
		name      string
		dg        func() link.Datagram
		bad, fix  uint64
		placed    bool
		wantIPID  uint16
		checkIPID bool
	}{
		{"good", func() link.Datagram { return seal(size, 0) }, 0, 0, true, 0, true},
		{"payload corrupted", func() link.Datagram {
			d := seal(size, 0)
			d.Buf[100] ^= 0x10
			return d
		}, 1, 0, false, 0, false},
		{"ICRC corrupted", func() link.Datagram {
			d := seal(size, 0)
			d.Buf[size-1] ^= 0x01
			return d
		}, 1, 0, false, 0, false},
		{"wrong ID guess", func() link.Datagram {
			d := seal(size, 5) // sent as segment 5; the link guesses 0
			return d
		}, 0, 1, true, 5, true},
		{"wrong ID guess, from another guess", func() link.Datagram {
			d := seal(size, 5)
			d.IPID = 3
			return d
		}, 0, 1, true, 5, true},
		{"wrong ID, the link knows it", func() link.Datagram {
			d := seal(size, 5)
			d.IPID, d.IPIDKnown = 0, true
			return d
		}, 1, 0, false, 0, false},
		{"no address: Dst is the link's", func() link.Datagram {
			d := seal(size, 0)
			d.Dst = netip.AddrPort{}
			return d
		}, 0, 0, true, 0, true},
		{"too short", func() link.Datagram {
			return link.Datagram{Buf: make([]byte, floorMinSize-1), Src: src, Dst: dst}
		}, 1, 0, false, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c blastCount
			s := newFloorSink(dst, &c)
			dgs := []link.Datagram{tc.dg()}
			payload := append([]byte(nil), dgs[0].Buf...)
			s.take(dgs)
			assert.Equal(t, tc.bad, c.bad.Load(), "BadICRC")
			assert.Equal(t, tc.fix, c.fixups.Load(), "ICRCIDFixups")
			if tc.placed {
				n := len(payload) - floorMinSize
				assert.Equal(t, n, s.off)
				assert.Equal(t, payload[bth.Size:len(payload)-bth.ICRCSize], s.mr[:n], "payload placed")
			} else {
				assert.Zero(t, s.off, "nothing placed")
			}
			if tc.checkIPID {
				assert.Equal(t, tc.wantIPID, dgs[0].IPID)
			}
			r := c.result(1)
			assert.Equal(t, tc.bad, r.BadICRC)
			assert.Equal(t, tc.fix, r.ICRCIDFixups)
		})
	}
}

// TestFloorSourceRotates: the floor sender's datagrams come from
// successive slices of its region, wrapping at its end, each with the BTH.
func TestFloorSourceRotates(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("link/udp needs Linux")
	}
	tx, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	defer tx.Close()
	f := newFloorSource(tx)
	const size = 4096 + 44
	dst := netip.MustParseAddrPort("127.0.0.2:4791")
	dgs := make([]link.Datagram, 256)
	seen := map[*byte]bool{}
	for round := 0; round < 2*floorRegion/(size*len(dgs))+1; round++ {
		for i := range dgs {
			dgs[i] = link.Datagram{Buf: make([]byte, size), Dst: dst}
		}
		f.prep(dgs)
		for i := range dgs {
			b := dgs[i].Buf
			require.Len(t, b, size)
			assert.Equal(t, floorBTH[:], b[:bth.Size])
			seen[&b[0]] = true
			var ph [rocev2.PseudoHeaderLen]byte
			ip, u := rocev2.PseudoHeaders(&ph, tx.LocalAddr(), dst, dgs[i].IPID, size)
			require.Equal(t, rocev2.ComputeICRC(ip, u, b[:size-4]), rocev2.ReadICRC(b[size-4:]))
		}
	}
	assert.Len(t, seen, floorRegion/size, "every slot of the region, and no other")
}
