//go:build linux

package afxdp

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture/live"
	"github.com/goroce/goroce/internal/capfmt"
	"github.com/goroce/goroce/internal/ebpf"
	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/internal/rawnet"
)

// loadVLANPush loads a tc program that calls bpf_skb_vlan_push(skb,
// 802.1Q, tci) — which puts the tag in the skb's metadata, as a VLAN
// device with transmit VLAN offload does — and attaches it to the egress
// of the interface ifindex of the calling thread's namespace (tcx, Linux
// 6.6). Closing the returned program and link detaches and frees it.
func loadVLANPush(t *testing.T, ifindex int, tci uint16) (*ebpf.Program, *ebpf.Link) {
	t.Helper()
	var a ebpf.Asm
	a.Mov(ebpf.R2, le16(rawnet.EthTypeVLAN))
	a.Mov(ebpf.R3, int32(tci))
	a.Call(ebpf.HelperSkbVLANPush)
	a.Mov(ebpf.R0, 0) // TC_ACT_OK
	a.Exit()
	insns, err := a.Assemble()
	require.NoError(t, err)
	prog, err := ebpf.LoadProgram(ebpf.SchedCLS, "goroce_vlanpush", "GPL", insns)
	require.NoError(t, err, "load the tc program")
	l, err := prog.Attach(ifindex, ebpf.AttachTCXEgress, 0)
	if err != nil {
		prog.Close()
	}
	require.NoError(t, err, "attach the tc program (tcx)")
	return prog, l
}

// TestTagInMetadata pins down what the XDP program sees of a tag that
// is not in the frame but in the skb's metadata (skb->vlan_tci), where a
// VLAN device with transmit VLAN offload puts it and veth keeps it (this
// kernel has no 802.1Q devices, CONFIG_VLAN_8021Q unset, so a tc program
// pushes it the same way): neither hook sees it, the frame looks untagged,
// and a link on VLAN 100 takes a frame of VLAN 200 as untagged, PCP 0.
// Only a tag in the frame itself is matched (TestTagged, TestTagFilter).
func TestTagInMetadata(t *testing.T) {
	for _, mode := range []Mode{ModeGeneric, ModeNative} {
		t.Run(mode.String(), func(t *testing.T) {
			v := linktest.NewVeth(t, linktest.VethConfig{})
			cfg := Config{Interface: v.Dev[0], Addr: netip.AddrPortFrom(v.Addr[0], 0), Mode: mode, Tag: true, VLANID: 100}
			a := linktest.Open(t, v.NS[0], func() (*Link, error) { return Open(cfg) })
			t.Cleanup(func() { a.Close() })
			smac, dmac := linktest.MAC(t, v.NS[1], v.Dev[1]), linktest.MAC(t, v.NS[0], v.Dev[0])
			var h *live.Handle
			require.NoError(t, linktest.InNetns(v.NS[1], func() error {
				ifc, err := net.InterfaceByName(v.Dev[1])
				if err != nil {
					return err
				}
				p, l := loadVLANPush(t, ifc.Index, 5<<13|200)
				t.Cleanup(func() { l.Close(); p.Close() })
				h, err = live.Open(v.Dev[1], live.Config{Wait: 50 * time.Millisecond})
				return err
			}))
			defer h.Close()
			linktest.Inject(t, v.NS[1], v.Dev[1], [][]byte{linktest.RoCEFrame(t, smac, dmac, v.Addr[1], v.Addr[0], 64)})

			// The sender's tap shows the tag (capture/live puts the metadata
			// tag back into the frame, as libpcap does).
			var f capfmt.Frame
			for i := 0; ; i++ {
				err := h.Next(&f)
				if errors.Is(err, live.ErrTimeout) && i < 100 {
					continue
				}
				require.NoError(t, err)
				break
			}
			require.GreaterOrEqual(t, len(f.Data), 18)
			require.Equal(t, uint16(0x8100), binary.BigEndian.Uint16(f.Data[12:]), "tag pushed")
			require.Equal(t, uint16(5<<13|200), binary.BigEndian.Uint16(f.Data[14:]))

			dgs := []link.Datagram{{Buf: make([]byte, 4200), Priority: 9}}
			done := make(chan int)
			go func() {
				n, _ := a.Recv(dgs)
				done <- n
			}()
			var n int
			select {
			case n = <-done:
			case <-time.After(5 * time.Second):
				a.Close()
				n = <-done
			}
			require.Equal(t, 1, n, "redirected as an untagged frame")
			require.Zero(t, dgs[0].Priority, "the PCP is lost")
		})
	}
}
