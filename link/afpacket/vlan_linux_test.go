//go:build linux

package afpacket_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/testutil/linktest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/afpacket"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
)

// TestTagged: with Tag, frames carry an 802.1Q tag with the link's VLAN ID
// and each datagram's PCP; the peer's kernel strips it (no VLAN device)
// and the peer accepts it, reporting the PCP, the per-datagram UDP source
// port and DSCP. A whole RoCE exchange runs over the tagged links.
func TestTagged(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		name := "v4"
		if v6 {
			name = "v6"
		}
		t.Run(name, func(t *testing.T) {
			v := linktest.NewVeth(t, linktest.VethConfig{IPv6: v6})
			a, b := openPair(t, v, afpacket.Config{Tag: true, VLANID: 100})
			dgs := []link.Datagram{
				{Buf: make([]byte, 64), Src: netip.AddrPortFrom(v.Addr[0], 49593), Dst: b.LocalAddr(),
					ECN: link.ECT0, DSCP: 26, Priority: 3},
				{Buf: make([]byte, 64), Src: netip.AddrPortFrom(v.Addr[0], 49441), Dst: b.LocalAddr(),
					ECN: link.ECT0, DSCP: 48, Priority: 6},
			}
			dgs[1].Buf[0] = 1
			n, err := a.Send(dgs)
			require.NoError(t, err)
			require.Equal(t, 2, n)
			got := make([]link.Datagram, 0, 2)
			deadline := time.Now().Add(5 * time.Second)
			timer := time.AfterFunc(5*time.Second, func() { b.Close() }) // unblock Recv on failure
			for len(got) < 2 && time.Now().Before(deadline) {
				in := []link.Datagram{{Buf: make([]byte, 4200)}}
				k, err := b.Recv(in)
				require.NoError(t, err)
				got = append(got, in[:k]...)
			}
			timer.Stop()
			require.Len(t, got, 2)
			for _, g := range got {
				w := dgs[g.Buf[0]]
				assert.Equal(t, w.Src.Port(), g.Src.Port(), "per-datagram source port")
				assert.Equal(t, w.DSCP, g.DSCP)
				assert.Equal(t, w.Priority, g.Priority, "PCP from the stripped tag")
			}
			assert.Zero(t, b.Drops().VLAN)
			p := linktest.NewPair(t, a, b, qp.MTU1024, 1<<20)
			p.Exchange(t)
			// The devices send from the kernel rule's port (the ICRC covers it).
			want := rocev2.ConnSourcePort(0, p.A.QP.QPN(), p.B.QP.QPN())
			assert.Equal(t, want, p.A.QP.SourcePort())
			assert.Equal(t, want, p.B.QP.SourcePort())
			assert.Zero(t, p.A.Dev.Stats().BadICRC.Load()+p.B.Dev.Stats().BadICRC.Load())
		})
	}
}

// TestUntaggedDropsTagged: a link without Tag drops tagged frames.
func TestUntaggedDropsTagged(t *testing.T) {
	v := linktest.NewVeth(t, linktest.VethConfig{})
	a, _ := openPair(t, v, afpacket.Config{Tag: true, VLANID: 100})
	cfg := afpacket.Config{Interface: v.Dev[1], Addr: netip.AddrPortFrom(v.Addr[1], 0), NoFilter: true}
	b := linktest.Open(t, v.NS[1], func() (*afpacket.Link, error) { return afpacket.Open(cfg) })
	_, err := a.Send([]link.Datagram{{Buf: make([]byte, 64), Dst: b.LocalAddr()}})
	require.NoError(t, err)
	require.Zero(t, recvN(t, b, 1, 64))
	// The kernel strips the tag and, with no VLAN device, marks the frame
	// for another host before a socket bound to IPv4 sees it.
	d := b.Drops()
	assert.Equal(t, uint64(1), d.VLAN+d.OtherAddr, "%+v", d)
}
