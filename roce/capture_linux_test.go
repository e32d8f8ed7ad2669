package roce_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/roce"
)

// TestCaptureUDP captures a transfer over loopback UDP sockets, where
// the link plans GSO segments' IPv4 IDs (0, 1, 2, …): a capture whose
// every ICRC verifies carries the IDs the packets were sealed with.
func TestCaptureUDP(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	// Port 4791 on both sides, as the tools that decode the capture
	// (tshark, icrc_check.py) find RoCEv2 by it; addresses of this test's
	// own, so that other tests on 127.0.0.1/2 do not collide with it.
	la, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.18.0.1:4791")})
	if err != nil {
		t.Skipf("cannot bind 127.18.0.1:4791: %v", err)
	}
	lb, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.18.0.2:4791")})
	if err != nil {
		la.Close()
		t.Skipf("cannot bind 127.18.0.2:4791: %v", err)
	}
	var wa, wb syncBuffer
	p := newCapPair(t, la, lb, &roce.CaptureConfig{W: &wa, QueueLen: 8192}, &roce.CaptureConfig{W: &wb, QueueLen: 8192}, 1<<20)
	p.run(t, 8<<20, 64<<10, 8)
	p.readBack(t, 256<<10)
	require.NoError(t, p.a.Close())
	require.NoError(t, p.b.Close())
	for _, c := range []struct {
		name string
		d    *roce.Device
		w    *syncBuffer
	}{{"A", p.a, &wa}, {"B", p.b, &wb}} {
		t.Run(c.name, func(t *testing.T) {
			st := c.d.Stats()
			t.Logf("%s: tx %d rx %d captured %d dropped %d", c.name, st.TxPackets.Load(), st.RxPackets.Load(),
				st.CapturePackets.Load(), st.CaptureDrops.Load())
			require.Positive(t, st.RxPackets.Load())
			assert.Equal(t, expectedFrames(st), st.CapturePackets.Load())
			// Lint only a complete capture (see TestCaptureMem).
			checkCapture(t, c.w.Bytes(), expectedFrames(st), st.CaptureDrops.Load() == 0)
			ids := nonzeroIPIDs(t, c.w.Bytes())
			t.Logf("%s: %d frames with a nonzero IPv4 ID (GSO segments)", c.name, ids)
			if c.name == "A" {
				assert.Positive(t, ids, "A sends GSO runs: IDs 1, 2, … in the file")
			}
		})
	}
}

// nonzeroIPIDs counts the frames of a capture whose IPv4 ID is not 0.
func nonzeroIPIDs(t *testing.T, file []byte) int {
	ng, err := pcapgo.NewNgReader(bytes.NewReader(file), pcapgo.DefaultNgReaderOptions)
	require.NoError(t, err)
	n := 0
	for {
		data, _, err := ng.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return n
		}
		require.NoError(t, err)
		if len(data) >= 20 && binary.BigEndian.Uint16(data[18:]) != 0 {
			n++
		}
	}
}

// TestCaptureUDPAllocs is TestDataPathAllocs with the capture on: a
// 64 MiB WRITE allocates no more than a 1 MiB one.
func TestCaptureUDPAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer; skipped with -short")
	}
	la, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	lb, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	require.NoError(t, err)
	var wa, wb discardCounter
	p := newCapPair(t, la, lb, &roce.CaptureConfig{W: &wa}, &roce.CaptureConfig{W: &wb}, 64<<20)
	defer p.b.Close()
	defer p.a.Close()
	p.run(t, 64<<20, 1<<20, 16) // warm up
	allocs := func(size int) float64 {
		return testing.AllocsPerRun(3, func() { p.run(t, size, size, 1) })
	}
	small, large := allocs(1<<20), allocs(64<<20)
	st := p.a.Stats()
	t.Logf("allocations per WR: 1 MiB (256 packets) %.0f, 64 MiB (16384 packets) %.0f; A captured %d, dropped %d",
		small, large, st.CapturePackets.Load(), st.CaptureDrops.Load())
	require.LessOrEqual(t, large, small+16, "allocations must not grow with the packet count")
}

// discardCounter discards what is written to it.
type discardCounter struct{ n int64 }

func (d *discardCounter) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }
