//go:build linux

package afxdp_test

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afxdp"
)

// recvN receives on l until n datagrams of size bytes arrived or 5 s
// passed.
func recvN(t *testing.T, l link.Link, n, size int) int {
	t.Helper()
	got := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		dgs := make([]link.Datagram, 1)
		for got < n {
			dgs[0] = link.Datagram{Buf: make([]byte, 4200)}
			k, err := l.Recv(dgs)
			if err != nil {
				return
			}
			if len(dgs[0].Buf) != size {
				t.Logf("received an unexpected %d-byte datagram from %v", len(dgs[0].Buf), dgs[0].Src)
			}
			got += k
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		l.Close()
		<-done
	}
	return got
}

func TestBadInput(t *testing.T) {
	for _, sg := range []bool{true, false} {
		name := "multibuffer"
		if !sg {
			name = "single-buffer"
		}
		t.Run(name, func(t *testing.T) {
			v := linktest.NewVeth(t, linktest.VethConfig{})
			a := open(t, v, 0, afxdp.Config{Mode: afxdp.ModeGeneric, NoMultiBuffer: !sg})
			smac, dmac := linktest.MAC(t, v.NS[1], v.Dev[1]), linktest.MAC(t, v.NS[0], v.Dev[0])
			good := linktest.RoCEFrame(t, smac, dmac, v.Addr[1], v.Addr[0], 64)
			mut := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
			frames := [][]byte{
				// Not ours: the program passes them to the kernel.
				mut(func(b []byte) []byte { b[23] = 6; return b }),                                         // TCP
				mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[36:], 4792); return b }),          // another port
				mut(func(b []byte) []byte { b[33] = 77; return b }),                                        // another address
				mut(func(b []byte) []byte { return slices.Concat(b[:12], []byte{0x81, 0, 0, 5}, b[12:]) }), // VLAN
				mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[20:], 0x2000); return b }),        // fragment
				mut(func(b []byte) []byte { return b[:30] }),                                               // runt
				// Ours by the program, malformed: the classifier counts them.
				mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[16:], uint16(len(b)+200)); return b }),
				mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[38:], uint16(len(b))); return b }),
				// Larger than the caller's 4200-byte buffer, or than one UMEM
				// frame without multi-buffer (the kernel drops it then).
				linktest.RoCEFrame(t, smac, dmac, v.Addr[1], v.Addr[0], 6000),
			}
			for range 4 {
				frames = append(frames, good)
			}
			linktest.Inject(t, v.NS[1], v.Dev[1], frames)
			require.Equal(t, 4, recvN(t, a, 4, 80))
			time.Sleep(10 * time.Millisecond)
			d := a.Drops()
			t.Logf("drops %+v", d)
			assert.EqualValues(t, 2, d.Truncated)
			assert.Zero(t, d.VLAN+d.NotIP+d.IPOptions+d.Fragment+d.NotUDP+d.OtherAddr+d.NotRoCE, "the program passes them to the kernel")
			if sg {
				assert.EqualValues(t, 1, d.TooBig)
			} else {
				assert.EqualValues(t, 1, d.RxDropped, "a frame above one UMEM frame, dropped by the kernel")
			}
			assert.EqualValues(t, 4, a.Stats().RecvPackets)
		})
	}
}

// TestRingOverrun fills a small UMEM while nobody receives: the kernel
// drops and counts it; receiving then works.
func TestRingOverrun(t *testing.T) {
	v := linktest.NewVeth(t, linktest.VethConfig{})
	a := open(t, v, 0, afxdp.Config{Mode: afxdp.ModeGeneric, RingSize: 64, Frames: 256})
	smac, dmac := linktest.MAC(t, v.NS[1], v.Dev[1]), linktest.MAC(t, v.NS[0], v.Dev[0])
	good := linktest.RoCEFrame(t, smac, dmac, v.Addr[1], v.Addr[0], 4096)
	frames := make([][]byte, 200)
	for i := range frames {
		frames[i] = good
	}
	linktest.Inject(t, v.NS[1], v.Dev[1], frames)
	time.Sleep(20 * time.Millisecond)
	d := a.Drops()
	t.Logf("drops %+v", d)
	require.Positive(t, d.RxRingFull+d.FillRingEmpty, "overrun counted")
	require.Equal(t, 10, recvN(t, a, 10, 4112))
	linktest.Inject(t, v.NS[1], v.Dev[1], frames[:5])
	require.GreaterOrEqual(t, recvN(t, a, 5, 4112), 5)
	require.Positive(t, a.Stats().RecvDropped)
}
