package roce_test

import (
	"encoding/binary"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/rocev2"
)

// TestUDGRHOverUDP: over loopback UDP sockets, a UD receive's GRH area
// holds the IPv4 header as it was on the wire: the sender's DSCP (its
// socket TOS 0x20) with the ECN bits it sent (ECT(0)), the TTL the kernel
// gave it (net.ipv4.ip_default_ttl, reported by IP_RECVTTL), DF, protocol
// UDP, the addresses, total length and a valid checksum; rxe copies the
// received header there (rxe_resp.c), which the pyverbs-ud grh interop
// cell compares byte for byte with a capture.
func TestUDGRHOverUDP(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	la, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0"), TOS: 0x20})
	require.NoError(t, err)
	lb, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	require.NoError(t, err)
	a, err := roce.Open(roce.Config{Link: la, DestPort: lb.LocalAddr().Port()})
	require.NoError(t, err)
	defer a.Close()
	b, err := roce.Open(roce.Config{Link: lb, DestPort: la.LocalAddr().Port()})
	require.NoError(t, err)
	defer b.Close()
	qa, err := a.CreateQP(roce.QPConfig{Type: roce.UD})
	require.NoError(t, err)
	qb, err := b.CreateQP(roce.QPConfig{Type: roce.UD})
	require.NoError(t, err)
	require.NoError(t, qa.Ready(0x11111111))
	require.NoError(t, qb.Ready(0x11111111))
	rbuf := make([]byte, qp.GRHLen+64)
	rm, err := b.RegisterMR(nil, rbuf, mr.LocalWrite)
	require.NoError(t, err)
	require.NoError(t, qb.PostRecv(&qp.RecvWR{WRID: 1, SGL: []qp.SGE{rm.SGE(0, len(rbuf))}}))
	sm, err := a.RegisterMR(nil, []byte("grh over udp"), 0)
	require.NoError(t, err)
	ah := roce.AH{Addr: netip.MustParseAddr("127.0.0.2"), QPN: qb.QPN(), QKey: 0x11111111}
	require.NoError(t, qa.PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{sm.SGE(0, 12)}, UD: ah.Dest()}))
	wc := waitOne(t, qb.RecvCQ())
	require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
	require.NoError(t, rm.ReadAt(rbuf, rm.IOVA()))

	ttl := 64
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_default_ttl"); err == nil {
		ttl, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	g := rbuf[:qp.GRHLen]
	assert.Equal(t, make([]byte, 20), g[:20])
	h := g[20:]
	assert.Equal(t, byte(0x45), h[0])
	assert.Equal(t, byte(0x20|link.ECT0), h[1], "TOS: the sender's DSCP and ECN")
	assert.EqualValues(t, 20+8+12+8+12+4, binary.BigEndian.Uint16(h[2:]), "total length: IP, UDP, BTH, DETH, payload, ICRC")
	assert.Equal(t, uint16(0x4000), binary.BigEndian.Uint16(h[6:]), "DF")
	assert.EqualValues(t, ttl, h[8], "TTL")
	assert.Equal(t, byte(17), h[9])
	assert.Zero(t, rocev2.IPv4Checksum(h), "the header checksum verifies")
	assert.Equal(t, []byte{127, 0, 0, 1, 127, 0, 0, 2}, h[12:20])
}
