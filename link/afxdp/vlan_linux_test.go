//go:build linux

package afxdp_test

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture/live"
	"github.com/goroce/goroce/internal/capfmt"
	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afpacket"
	"github.com/goroce/goroce/link/afxdp"
	"github.com/goroce/goroce/qp"
)

const testVLAN = 100

// capture opens a live capture of dev in namespace ns (it puts a tag the
// kernel stripped back into the frame, as on the wire).
func capture(t *testing.T, ns, dev string) *live.Handle {
	t.Helper()
	var h *live.Handle
	err := linktest.InNetns(ns, func() (err error) {
		h, err = live.Open(dev, live.Config{Wait: 50 * time.Millisecond})
		return err
	})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	return h
}

// capturedTags returns the TCI of each 802.1Q-tagged frame h captured
// (0x10000 for an untagged one) until n arrived or 5 s passed.
func capturedTags(t *testing.T, h *live.Handle, n int) []uint32 {
	t.Helper()
	var tags []uint32
	var f capfmt.Frame
	deadline := time.Now().Add(5 * time.Second)
	for len(tags) < n && time.Now().Before(deadline) {
		err := h.Next(&f)
		if errors.Is(err, live.ErrTimeout) {
			continue
		}
		require.NoError(t, err)
		if len(f.Data) < 18 {
			continue
		}
		switch binary.BigEndian.Uint16(f.Data[12:]) {
		case 0x8100:
			tags = append(tags, uint32(binary.BigEndian.Uint16(f.Data[14:])))
		default:
			tags = append(tags, 0x10000)
		}
	}
	return tags
}

// recvDgs receives on l until n datagrams arrived or 5 s passed.
func recvDgs(t *testing.T, l link.Link, n int) []link.Datagram {
	t.Helper()
	var got []link.Datagram
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(got) < n {
			dgs := []link.Datagram{{Buf: make([]byte, 4200)}}
			k, err := l.Recv(dgs)
			if err != nil {
				return
			}
			got = append(got, dgs[:k]...)
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

// TestTagged: an afxdp link with Tag and an afpacket link with the same
// tag exchange datagrams both ways; the frames carry the tag with each
// datagram's PCP (seen by a capture on the afpacket side's veth end) and
// both links report the PCP. Then a whole RoCE exchange runs across the
// two bindings, each side requesting in turn.
func TestTagged(t *testing.T) {
	tests := []struct {
		name string
		v6   bool
		mode afxdp.Mode
	}{
		{"v4-generic", false, afxdp.ModeGeneric},
		{"v4-native", false, afxdp.ModeNative},
		{"v6-generic", true, afxdp.ModeGeneric},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := linktest.NewVeth(t, linktest.VethConfig{IPv6: tc.v6})
			x := open(t, v, 0, afxdp.Config{Mode: tc.mode, Tag: true, VLANID: testVLAN})
			pcfg := afpacket.Config{Interface: v.Dev[1], Addr: netip.AddrPortFrom(v.Addr[1], 0), Tag: true, VLANID: testVLAN}
			p := linktest.Open(t, v.NS[1], func() (*afpacket.Link, error) { return afpacket.Open(pcfg) })
			t.Cleanup(func() { p.Close() })
			h := capture(t, v.NS[1], v.Dev[1])

			prios := []uint8{3, 6, 0, 7}
			send := func(from, to link.Link) {
				dgs := make([]link.Datagram, len(prios))
				for i, pr := range prios {
					dgs[i] = link.Datagram{Buf: make([]byte, 64), Dst: to.LocalAddr(), ECN: link.ECT0, Priority: pr}
					dgs[i].Buf[0] = byte(i)
				}
				n, err := from.Send(dgs)
				require.NoError(t, err)
				require.Equal(t, len(dgs), n)
			}

			// afxdp → afpacket: the tag on the wire, the PCP reported.
			send(x, p)
			got := recvDgs(t, p, len(prios))
			require.Len(t, got, len(prios))
			for _, g := range got {
				assert.Equal(t, prios[g.Buf[0]], g.Priority, "afpacket reports the PCP afxdp wrote")
			}
			tags := capturedTags(t, h, len(prios))
			require.Len(t, tags, len(prios))
			for i, tci := range tags {
				assert.Equal(t, uint32(prios[i])<<13|testVLAN, tci, "frame %d: PCP %d, DEI 0, VLAN %d", i, prios[i], testVLAN)
			}

			// afpacket → afxdp: the program redirects the tagged frames,
			// the link reports their PCP.
			send(p, x)
			got = recvDgs(t, x, len(prios))
			require.Len(t, got, len(prios))
			for _, g := range got {
				assert.Equal(t, prios[g.Buf[0]], g.Priority, "afxdp reports the PCP afpacket wrote")
			}
			// (No capture of these: afpacket bypasses the qdisc, so no tap
			// sees them leave, and generic XDP redirects them before any
			// tap on the afxdp side.)
			assert.Zero(t, x.Drops().VLAN)

			for _, xRequests := range []bool{true, false} {
				pr := linktest.NewPair(t, x, p, qp.MTU4096, 4<<20)
				if !xRequests {
					pr = &linktest.Pair{A: pr.B, B: pr.A}
				}
				pr.Exchange(t)
				pr.A.Dev.Close() // also closes the links: reopen for the next direction
				pr.B.Dev.Close()
				if xRequests {
					x = open(t, v, 0, afxdp.Config{Mode: tc.mode, Tag: true, VLANID: testVLAN})
					p = linktest.Open(t, v.NS[1], func() (*afpacket.Link, error) { return afpacket.Open(pcfg) })
					t.Cleanup(func() { p.Close() })
				}
			}
		})
	}
}

// TestTaggedExchange runs WRITE / READ / SEND, verified byte-exact,
// between two devices over tagged afxdp links, and checks every RoCE
// frame on the wire carried the tag.
func TestTaggedExchange(t *testing.T) {
	tests := []struct {
		name string
		veth linktest.VethConfig
		cfg  afxdp.Config
		mtu  qp.MTU
	}{
		{"v4-generic-mtu4096", linktest.VethConfig{}, afxdp.Config{Mode: afxdp.ModeGeneric}, qp.MTU4096},
		{"v4-native-mtu4096", linktest.VethConfig{}, afxdp.Config{Mode: afxdp.ModeNative}, qp.MTU4096},
		{"v4-nosg-mtu2048", linktest.VethConfig{}, afxdp.Config{Mode: afxdp.ModeGeneric, NoMultiBuffer: true}, qp.MTU2048},
		{"v6-generic-vid0", linktest.VethConfig{IPv6: true}, afxdp.Config{Mode: afxdp.ModeGeneric, VLANID: 0}, qp.MTU4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Tag = true
			if tc.name != "v6-generic-vid0" {
				cfg.VLANID = testVLAN
			}
			v := linktest.NewVeth(t, tc.veth)
			a, b := open(t, v, 0, cfg), open(t, v, 1, cfg)
			if a.Info().MultiBuffer {
				require.Equal(t, a.Info().MTU+18, a.Info().MaxFrame, "the tag's 4 bytes on top of the MTU")
			}
			p := linktest.NewPair(t, a, b, tc.mtu, 8<<20)
			p.Exchange(t)
			t.Logf("A: %+v %+v", a.Stats(), a.Drops())
			t.Logf("B: %+v %+v", b.Stats(), b.Drops())
			assert.Zero(t, a.Drops().VLAN+b.Drops().VLAN)
		})
	}
}

// TestTagFilter: a link with Tag takes untagged frames and frames tagged
// with its VLAN ID (any PCP, DEI); a frame tagged with another VLAN ID,
// with two tags or cut short is not redirected (the kernel gets it: the
// link neither receives nor counts it). Between two tagged afxdp links the
// tag is on the wire: a link on another VLAN does not take their frames.
// A link without Tag lets every tagged frame pass (TestBadInput) and
// still works untagged (TestExchange).
func TestTagFilter(t *testing.T) {
	const otherVLAN = 200
	v := linktest.NewVeth(t, linktest.VethConfig{})
	a := open(t, v, 0, afxdp.Config{Mode: afxdp.ModeGeneric, Tag: true, VLANID: testVLAN})
	b := open(t, v, 1, afxdp.Config{Mode: afxdp.ModeGeneric, Tag: true, VLANID: otherVLAN})
	smac, dmac := linktest.MAC(t, v.NS[1], v.Dev[1]), linktest.MAC(t, v.NS[0], v.Dev[0])
	good := linktest.RoCEFrame(t, smac, dmac, v.Addr[1], v.Addr[0], 64)
	tag := func(tci ...uint16) []byte {
		f := slices.Clone(good[:12])
		for _, c := range tci {
			f = binary.BigEndian.AppendUint16(f, 0x8100)
			f = binary.BigEndian.AppendUint16(f, c)
		}
		return append(f, good[12:]...)
	}
	// Not ours: passed to the kernel.
	linktest.Inject(t, v.NS[1], v.Dev[1], [][]byte{
		tag(3<<13 | otherVLAN),
		tag(3<<13 | testVLAN + 1),
		tag(testVLAN, testVLAN), // stacked
		tag(0),                  // priority-tagged: VLAN 0 is not ours
		tag(3<<13 | testVLAN)[:30],
	})
	dg := []link.Datagram{{Buf: make([]byte, 64), Dst: a.LocalAddr(), Priority: 4}}
	n, err := b.Send(dg)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, recvN(t, a, 1, 80))
	d := a.Drops()
	assert.Zero(t, d.Truncated+d.VLAN+d.NotIP+d.OtherAddr+d.NotRoCE, "the program passed them: %+v", d)

	// Ours: untagged, any PCP, DEI set; and b's frames once on its VLAN.
	a = open(t, v, 0, afxdp.Config{Mode: afxdp.ModeGeneric, Tag: true, VLANID: otherVLAN})
	linktest.Inject(t, v.NS[1], v.Dev[1], [][]byte{good, tag(5<<13 | otherVLAN), tag(1<<12 | otherVLAN)})
	got := recvDgs(t, a, 3)
	require.Len(t, got, 3)
	prios := []uint8{got[0].Priority, got[1].Priority, got[2].Priority}
	assert.Equal(t, []uint8{0, 5, 0}, prios, "untagged, PCP 5, DEI set")
	n, err = b.Send(dg)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got = recvDgs(t, a, 1)
	require.Len(t, got, 1)
	assert.Equal(t, uint8(4), got[0].Priority, "PCP written by afxdp, read by afxdp")
	assert.EqualValues(t, 4, a.Stats().RecvPackets)
}
