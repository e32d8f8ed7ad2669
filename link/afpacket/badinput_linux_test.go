//go:build linux

package afpacket_test

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afpacket"
)

// badFrames returns frames that are not RoCEv2 datagrams for dst (each
// named by the Drops field that must count it), built from a good one.
func badFrames(t *testing.T, smac, dmac [6]byte, src, dst netip.Addr) (good []byte, bad map[string][]byte) {
	good = linktest.RoCEFrame(t, smac, dmac, src, dst, 64) // 80-byte UDP payload
	mut := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	fixsum := func(b []byte) []byte {
		ip := b[14:34]
		ip[10], ip[11] = 0, 0
		var s uint32
		for i := 0; i < 20; i += 2 {
			s += uint32(binary.BigEndian.Uint16(ip[i:]))
		}
		for s>>16 != 0 {
			s = s&0xffff + s>>16
		}
		binary.BigEndian.PutUint16(ip[10:], ^uint16(s))
		return b
	}
	bad = map[string][]byte{
		"NotUDP":    mut(func(b []byte) []byte { b[23] = 6; return fixsum(b) }),
		"NotRoCE":   mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[36:], 4792); return b }),
		"OtherAddr": mut(func(b []byte) []byte { b[33] = 77; return fixsum(b) }),
		"VLAN": mut(func(b []byte) []byte {
			return slices.Concat(b[:12], []byte{0x81, 0x00, 0x00, 0x05}, b[12:])
		}),
		"Truncated": mut(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[16:], uint16(len(b)-14+200)) // IP length beyond the frame
			return fixsum(b)
		}),
		"Truncated/udp": mut(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[38:], uint16(len(b)-34+50)) // UDP length beyond the IP payload
			return b
		}),
		"Truncated/runt": mut(func(b []byte) []byte { return b[:30] }),
		"Fragment":       mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[20:], 0x2000); return fixsum(b) }),
		"IPOptions": mut(func(b []byte) []byte {
			b = slices.Concat(b[:34], []byte{1, 1, 1, 0}, b[34:]) // IHL 6: four NOPs/EOL
			b[14] = 0x46
			binary.BigEndian.PutUint16(b[16:], binary.BigEndian.Uint16(b[16:])+4)
			ip := b[14:38]
			ip[10], ip[11] = 0, 0
			return b
		}),
	}
	return good, bad
}

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
	for _, ring := range []afpacket.Ring{afpacket.RingV3, afpacket.RingV2} {
		for _, filter := range []bool{false, true} {
			name := ring.String() + "/classifier"
			if filter {
				name = ring.String() + "/bpf-filter"
			}
			t.Run(name, func(t *testing.T) {
				v := linktest.NewVeth(t, linktest.VethConfig{})
				cfg := afpacket.Config{Interface: v.Dev[0], Addr: netip.AddrPortFrom(v.Addr[0], 0), Ring: ring, NoFilter: !filter,
					FrameSlot: 4096, RetireTimeout: time.Millisecond}
				a := linktest.Open(t, v.NS[0], func() (*afpacket.Link, error) { return afpacket.Open(cfg) })
				defer a.Close()
				smac, dmac := linktest.MAC(t, v.NS[1], v.Dev[1]), linktest.MAC(t, v.NS[0], v.Dev[0])
				good, bad := badFrames(t, smac, dmac, v.Addr[1], v.Addr[0])
				jumbo := linktest.RoCEFrame(t, smac, dmac, v.Addr[1], v.Addr[0], 6000) // beyond the V2 slot / the 4200-byte buffer
				var frames [][]byte
				for _, f := range bad {
					frames = append(frames, f)
				}
				frames = append(frames, jumbo)
				for range 4 {
					frames = append(frames, good)
				}
				linktest.Inject(t, v.NS[1], v.Dev[1], frames)
				require.Equal(t, 4, recvN(t, a, 4, 80), "the good frames arrive")
				time.Sleep(10 * time.Millisecond)
				d := a.Drops()
				t.Logf("drops %+v", d)
				assert.EqualValues(t, 1, d.TooBig, "jumbo frame")
				if filter {
					// The filter checks no lengths: the two frames whose IP or
					// UDP length lies reach the classifier.
					assert.EqualValues(t, 2, d.Truncated)
					assert.Zero(t, d.VLAN+d.NotIP+d.IPOptions+d.Fragment+d.NotUDP+d.OtherAddr+d.NotRoCE,
						"the BPF filter drops the rest in the kernel")
					return
				}
				assert.EqualValues(t, 1, d.NotUDP)
				assert.EqualValues(t, 1, d.NotRoCE)
				// The kernel strips the tag of a frame for a VLAN without a
				// device and marks it for another host.
				assert.EqualValues(t, 2, d.OtherAddr+d.VLAN)
				assert.EqualValues(t, 3, d.Truncated)
				assert.EqualValues(t, 1, d.Fragment)
				assert.EqualValues(t, 1, d.IPOptions)
				assert.EqualValues(t, 4, a.Stats().RecvPackets)
			})
		}
	}
}

// TestRingOverrun fills a small ring while nobody receives: the kernel
// drops and the link counts it; receiving then works.
func TestRingOverrun(t *testing.T) {
	for _, ring := range []afpacket.Ring{afpacket.RingV3, afpacket.RingV2} {
		t.Run(ring.String(), func(t *testing.T) {
			v := linktest.NewVeth(t, linktest.VethConfig{})
			cfg := afpacket.Config{Interface: v.Dev[0], Addr: netip.AddrPortFrom(v.Addr[0], 0), Ring: ring,
				BlockSize: 64 << 10, Blocks: 2, FrameSlot: 8192, Frames: 16}
			a := linktest.Open(t, v.NS[0], func() (*afpacket.Link, error) { return afpacket.Open(cfg) })
			defer a.Close()
			smac, dmac := linktest.MAC(t, v.NS[1], v.Dev[1]), linktest.MAC(t, v.NS[0], v.Dev[0])
			good := linktest.RoCEFrame(t, smac, dmac, v.Addr[1], v.Addr[0], 4096)
			frames := make([][]byte, 200)
			for i := range frames {
				frames[i] = good
			}
			linktest.Inject(t, v.NS[1], v.Dev[1], frames)
			time.Sleep(20 * time.Millisecond)
			require.Positive(t, a.Drops().RingFull, "ring overrun counted")
			got := recvN(t, a, 10, 4112)
			require.Equal(t, 10, got, "receiving works after the overrun")
			linktest.Inject(t, v.NS[1], v.Dev[1], frames[:5])
			require.Equal(t, 5, recvN(t, a, 5, 4112))
			require.Positive(t, a.Stats().RecvDropped)
			require.False(t, errors.Is(a.Close(), link.ErrClosed))
		})
	}
}
