package fabric_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

func TestParseFrame(t *testing.T) {
	e := rocev2.Encap{Ethernet: true,
		Src: netip.MustParseAddrPort("10.201.0.2:49593"), Dst: netip.MustParseAddrPort("10.202.0.2:4791")}
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCAcknowledge, DestQP: 0x15, PSN: 77, PKey: rocev2.DefaultPKey}}
	buf := make([]byte, 256)
	n, err := e.Build(buf, &f, nil)
	require.NoError(t, err)
	p, ok := fabric.ParseFrame(buf[:n])
	require.True(t, ok)
	assert.Equal(t, fabric.Packet{Src: e.Src, Dst: e.Dst, Opcode: bth.RCAcknowledge, DestQP: 0x15, PSN: 77}, p)
	_, ok = fabric.ParseFrame(buf[:40])
	assert.False(t, ok, "truncated")
}

// TestConns pairs two connections between the same hosts by PSN: the
// responder of the first acknowledges PSNs 100–102 of requests to QP 0x15.
func TestConns(t *testing.T) {
	a, b := netip.MustParseAddr("10.201.0.2"), netip.MustParseAddr("10.202.0.2")
	pk := func(from netip.Addr, sport uint16, to netip.Addr, op bth.Opcode, qpn bth.QPN, psn bth.PSN) fabric.Packet {
		return fabric.Packet{Src: netip.AddrPortFrom(from, sport), Dst: netip.AddrPortFrom(to, 4791), Opcode: op, DestQP: qpn, PSN: psn}
	}
	pkts := []fabric.Packet{
		pk(a, 49593, b, bth.RCRDMAWriteFirst, 0x15, 100),
		pk(a, 49593, b, bth.RCRDMAWriteLast, 0x15, 101),
		pk(a, 50000, b, bth.RCRDMAWriteOnly, 0x99, 5000),
		pk(b, 49593, a, bth.RCAcknowledge, 0x15, 101),
		pk(b, 4791, a, bth.RCAcknowledge, 0x42, 5000),
		pk(b, 4791, a, bth.RCAcknowledge, 0x77, 999), // acknowledges nothing seen
	}
	got := fabric.Conns(pkts)
	require.Len(t, got, 2)
	assert.Equal(t, fabric.Conn{Requester: a, Responder: b, ReqQPN: 0x15, RespQPN: 0x15,
		ReqPorts: []uint16{49593}, RespPorts: []uint16{49593}, Requests: 2, Responses: 1}, got[0])
	assert.Equal(t, uint16(49593), got[0].KernelPort(), "rxe's 0x15 ↔ 0x15 (write_bw_s65536.pcap)")
	assert.Equal(t, fabric.Conn{Requester: a, Responder: b, ReqQPN: 0x42, RespQPN: 0x99,
		ReqPorts: []uint16{50000}, RespPorts: []uint16{4791}, Requests: 1, Responses: 1}, got[1])
	assert.Equal(t, []uint16{4791, 49593}, fabric.SourcePorts(pkts, b))
}

func TestPerSpine(t *testing.T) {
	a, b := netip.MustParseAddr("10.201.0.2"), netip.MustParseAddr("10.202.0.2")
	req := fabric.Packet{Src: netip.AddrPortFrom(a, 50000), Dst: netip.AddrPortFrom(b, 4791), Opcode: bth.RCRDMAWriteOnly, DestQP: 0x99}
	ack := fabric.Packet{Src: netip.AddrPortFrom(b, 4791), Dst: netip.AddrPortFrom(a, 4791), Opcode: bth.RCAcknowledge, DestQP: 0x42}
	perSpine := [][]fabric.Packet{{ack}, {req, req}, {}, {ack}}
	fromB := func(p fabric.Packet) bool { return fabric.HostPrefix(1).Contains(p.Src.Addr()) }
	assert.Equal(t, []uint64{1, 0, 0, 1}, fabric.PerSpine(perSpine, fromB))
	assert.Equal(t, []uint64{0, 2, 0, 0}, fabric.PerSpine(perSpine, func(p fabric.Packet) bool { return !fromB(p) }))
	c := fabric.Conn{Requester: a, Responder: b, ReqQPN: 0x42, RespQPN: 0x99}
	assert.Equal(t, []int{1}, c.Spines(perSpine))
}
