//go:build linux

package roce_test

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/rocev2"
)

// recLink is a udp.Link (its SourcePorter, IPIDPlanner and Lender
// promoted) that records, per destination QP, the source ports and TOS
// bytes of what the kernel delivered: the peer's view of the wire.
type recLink struct {
	*udp.Link
	mu   sync.Mutex
	seen map[bth.QPN]map[uint16]map[uint8]int // dest QP → source port → TOS → packets
}

func (r *recLink) record(dgs []link.Datagram) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, dg := range dgs {
		h, err := bth.Parse(dg.Buf)
		if err != nil {
			continue
		}
		byPort := r.seen[h.DestQP()]
		if byPort == nil {
			byPort = map[uint16]map[uint8]int{}
			r.seen[h.DestQP()] = byPort
		}
		if byPort[dg.Src.Port()] == nil {
			byPort[dg.Src.Port()] = map[uint8]int{}
		}
		byPort[dg.Src.Port()][dg.DSCP<<2|dg.ECN]++
	}
}

func (r *recLink) Recv(dgs []link.Datagram) (int, error) {
	n, err := r.Link.Recv(dgs)
	r.record(dgs[:n])
	return n, err
}

func (r *recLink) RecvLend(dgs []link.Datagram) (int, error) {
	n, err := r.Link.RecvLend(dgs)
	r.record(dgs[:n])
	return n, err
}

// Pump records what the device's receive loop gets through udp.Link's pump.
func (r *recLink) Pump(dgs []link.Datagram, fn func(int) bool) error {
	return r.Link.Pump(dgs, func(n int) bool {
		r.record(dgs[:n])
		return fn(n)
	})
}

// ports returns the source ports seen towards qpn and their TOS bytes.
func (r *recLink) ports(qpn bth.QPN) map[uint16]map[uint8]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[qpn]
}

type sportPair struct {
	la, lb *recLink
	a, b   *roce.Device
	qa, qb []*roce.QP
}

// runSportPairs connects n QP pairs between two devices on loopback
// (127.77.0.1 and .2, one port), each pair with opts(i) on a's side, and
// WRITEs 64 KiB each way, byte-exact.
func runSportPairs(t *testing.T, n int, cfg udp.Config, opts func(i int) roce.ConnectOptions) *sportPair {
	if testing.Short() {
		t.Skip("real UDP sockets")
	}
	cfg.Addr = netip.MustParseAddrPort("127.77.0.1:0")
	ua, err := udp.Open(cfg)
	require.NoError(t, err)
	port := ua.LocalAddr().Port()
	cfg.Addr = netip.AddrPortFrom(netip.MustParseAddr("127.77.0.2"), port)
	ub, err := udp.Open(cfg)
	if err != nil {
		ua.Close()
		require.NoError(t, err)
	}
	p := &sportPair{la: &recLink{Link: ua, seen: map[bth.QPN]map[uint16]map[uint8]int{}},
		lb: &recLink{Link: ub, seen: map[bth.QPN]map[uint16]map[uint8]int{}}}
	p.a, err = roce.Open(roce.Config{Link: p.la, DestPort: port})
	require.NoError(t, err)
	t.Cleanup(func() { p.a.Close() })
	p.b, err = roce.Open(roce.Config{Link: p.lb, DestPort: port})
	require.NoError(t, err)
	t.Cleanup(func() { p.b.Close() })

	const size = 64 << 10
	type xfer struct {
		src, dst   []byte
		sm, dm     *mr.Region
		from, into *roce.QP
	}
	var xs []xfer
	for i := 0; i < n; i++ {
		qa, err := p.a.CreateQP(roce.QPConfig{})
		require.NoError(t, err)
		qb, err := p.b.CreateQP(roce.QPConfig{})
		require.NoError(t, err)
		o := opts(i)
		o.MTU = qp.MTU4096
		require.NoError(t, qa.Connect(qb.Info(), o))
		require.NoError(t, qb.Connect(qa.Info(), roce.ConnectOptions{MTU: qp.MTU4096, TrafficClass: o.TrafficClass}))
		p.qa, p.qb = append(p.qa, qa), append(p.qb, qb)
		for _, dir := range [][2]*roce.QP{{qa, qb}, {qb, qa}} {
			x := xfer{src: make([]byte, size), dst: make([]byte, size), from: dir[0], into: dir[1]}
			for j := range x.src {
				x.src[j] = byte(i*31 + j*7 + len(xs))
			}
			dev := func(q *roce.QP) *roce.Device {
				if q == qa {
					return p.a
				}
				return p.b
			}
			x.sm, err = dev(x.from).RegisterMR(nil, x.src, mr.LocalWrite)
			require.NoError(t, err)
			x.dm, err = dev(x.into).RegisterMR(nil, x.dst, mr.LocalWrite|mr.RemoteWrite)
			require.NoError(t, err)
			xs = append(xs, x)
		}
	}
	for i, x := range xs {
		require.NoError(t, x.from.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{{Addr: x.sm.IOVA(), Length: size, LKey: x.sm.LKey()}}, RemoteAddr: x.dm.IOVA(), RKey: x.dm.RKey()}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, x := range xs {
		var wc [1]cq.Completion
		_, err := x.from.SendCQ().Wait(ctx, wc[:])
		require.NoError(t, err)
		require.Equal(t, cq.StatusSuccess, wc[0].Status, "transfer %d", i)
		// Read the target through its region's lock: the happens-before with the
		// responder's write runs through the kernel socket, which -race cannot see.
		require.True(t, bytes.Equal(x.src, readMR(t, x.dm)), "transfer %d byte-exact", i)
	}
	for _, d := range []*roce.Device{p.a, p.b} {
		require.Zero(t, d.Stats().BadICRC.Load(), "every ICRC verifies")
		require.Zero(t, d.Stats().SendErrors.Load())
	}
	return p
}

// TestSourcePortsUDP: 16 QPs over the unprivileged UDP link send from the
// kernel rule's ports, through one send socket per port; both directions
// of a connection use the same port, and each QP's DSCP and ECN reach the
// peer's IP_RECVTOS.
func TestSourcePortsUDP(t *testing.T) {
	const n = 16
	p := runSportPairs(t, n, udp.Config{}, func(i int) roce.ConnectOptions {
		return roce.ConnectOptions{TrafficClass: uint8(i+1)<<2 | link.ECT0}
	})
	rule := map[uint16]bool{}
	for i := 0; i < n; i++ {
		qa, qb := p.qa[i], p.qb[i]
		want := rocev2.ConnSourcePort(0, qa.QPN(), qb.QPN())
		rule[want] = true
		assert.Equal(t, want, qa.SourcePort())
		assert.Equal(t, want, qb.SourcePort())
		tos := uint8(i+1)<<2 | link.ECT0
		atB, atA := p.lb.ports(qb.QPN()), p.la.ports(qa.QPN())
		assert.Equal(t, map[uint16]map[uint8]int{want: {tos: sum(atB[want])}}, atB, "a→b of pair %d: one port, the QP's TOS", i)
		assert.Equal(t, map[uint16]map[uint8]int{want: {tos: sum(atA[want])}}, atA, "b→a of pair %d (ACKs included)", i)
	}
	assert.Equal(t, len(rule), p.la.SourcePorts(), "one send socket per distinct port")
	assert.Equal(t, len(rule), p.lb.SourcePorts())
	assert.Zero(t, p.la.Stats().SourcePortShared)
	t.Logf("%d QPs, %d distinct source ports, %d send sockets per link", n, len(rule), p.la.SourcePorts())
}

func sum(m map[uint8]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s
}

// TestSourcePortsUDPBound: with MaxSourcePorts 4, 16 QPs share 4 send
// sockets; the shared ports are counted and the transfers still succeed,
// each QP's packets carrying the port the link reported.
func TestSourcePortsUDPBound(t *testing.T) {
	const n = 16
	p := runSportPairs(t, n, udp.Config{MaxSourcePorts: 4}, func(int) roce.ConnectOptions { return roce.ConnectOptions{} })
	rule := map[uint16]bool{}
	open := map[uint16]bool{}
	for i := 0; i < n; i++ {
		rule[rocev2.ConnSourcePort(0, p.qa[i].QPN(), p.qb[i].QPN())] = true
		open[p.qa[i].SourcePort()] = true
		for port := range p.lb.ports(p.qb[i].QPN()) {
			assert.Equal(t, p.qa[i].SourcePort(), port)
		}
	}
	assert.Equal(t, 4, p.la.SourcePorts())
	assert.Len(t, open, 4, "the QPs use the 4 open ports")
	assert.Equal(t, uint64(len(rule)-4), p.la.Stats().SourcePortShared)
}

// TestSourcePortsUDPOptions: an explicit port and a flow label.
func TestSourcePortsUDPOptions(t *testing.T) {
	p := runSportPairs(t, 2, udp.Config{}, func(i int) roce.ConnectOptions {
		if i == 0 {
			return roce.ConnectOptions{SourcePort: 50001}
		}
		return roce.ConnectOptions{FlowLabel: 0x54321}
	})
	assert.Equal(t, uint16(50001), p.qa[0].SourcePort())
	assert.Contains(t, p.lb.ports(p.qb[0].QPN()), uint16(50001))
	assert.Len(t, p.lb.ports(p.qb[0].QPN()), 1)
	want := rocev2.SourcePort(0x54321)
	assert.Equal(t, want, p.qa[1].SourcePort())
	assert.Contains(t, p.lb.ports(p.qb[1].QPN()), want)
	assert.Len(t, p.lb.ports(p.qb[1].QPN()), 1)
}
