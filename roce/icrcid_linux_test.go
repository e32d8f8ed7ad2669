package roce_test

import (
	"bytes"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/reth"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// craftedPeer is a hand-made RoCEv2 requester on a plain UDP socket: it
// sends RDMA WRITE ONLY packets to one device QP with an ICRC computed over
// an IPv4 ID of its choosing. The socket is unconnected with DF set, so the
// kernel puts ID 0 in every header: a packet is "rxe-like" when its ICRC
// covers the ID the peer's counter would give, and "over another ID" when
// it covers one its counter would not.
type craftedPeer struct {
	t    *testing.T
	conn *net.UDPConn
	addr netip.AddrPort
	dev  *roce.Device
	q    *roce.QP
	m    *mr.Region
	buf  []byte
	psn  bth.PSN
}

const craftedQPN = 0x1234

func newCraftedPeer(t *testing.T, mode roce.ICRCIDRecovery) *craftedPeer {
	t.Helper()
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.3:0")))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	rc, err := conn.SyscallConn()
	require.NoError(t, err)
	var serr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
	}))
	require.NoError(t, serr, "DF set: Linux then sends ID 0 from an unconnected socket")
	p := &craftedPeer{t: t, conn: conn, addr: conn.LocalAddr().(*net.UDPAddr).AddrPort(), buf: make([]byte, 4096), psn: 100}

	l, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	p.dev, err = roce.Open(roce.Config{Link: l, DestPort: p.addr.Port(), ICRCIDRecovery: mode})
	require.NoError(t, err)
	t.Cleanup(func() { p.dev.Close() })
	pd := p.dev.AllocPD()
	c, err := p.dev.CreateCQ(64)
	require.NoError(t, err)
	p.q, err = p.dev.CreateQP(roce.QPConfig{PD: pd, SendCQ: c, RecvCQ: c})
	require.NoError(t, err)
	p.m, err = p.dev.RegisterMR(pd, p.buf, mr.LocalWrite|mr.RemoteWrite)
	require.NoError(t, err)
	require.NoError(t, p.q.Connect(roce.Info{Addr: p.addr.Addr(), QPN: craftedQPN, PSN: p.psn}, roce.ConnectOptions{}))
	return p
}

// write sends an 8-byte WRITE of pattern b at offset off with the next PSN,
// its ICRC computed over IPv4 ID id, waits until the device has processed
// it, and reports whether the data was written (the PSN then advances).
func (p *craftedPeer) write(t *testing.T, id uint16, off int, b byte) bool {
	t.Helper()
	payload := bytes.Repeat([]byte{b}, 8)
	f := wire.Fields{
		BTH:  bth.Fields{Opcode: bth.RCRDMAWriteOnly, PKey: rocev2.DefaultPKey, DestQP: p.q.QPN(), AckReq: true, PSN: p.psn},
		RETH: reth.Fields{VA: p.m.IOVA() + uint64(off), RKey: uint32(p.m.RKey()), DMALength: 8},
	}
	pkt := make([]byte, 128)
	n, err := wire.Build(pkt, &f, payload)
	require.NoError(t, err)
	pkt = pkt[:n]
	var ph [rocev2.PseudoHeaderLen]byte
	ip, u := rocev2.PseudoHeaders(&ph, p.addr, p.dev.LocalAddr(), id, n)
	rocev2.PutICRC(pkt[n-bth.ICRCSize:], rocev2.ComputeICRC(ip, u, pkt[:n-bth.ICRCSize]))
	st := p.dev.Stats()
	before := st.RxPackets.Load()
	_, err = p.conn.WriteToUDPAddrPort(pkt, p.dev.LocalAddr())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return st.RxPackets.Load() != before }, 5*time.Second, time.Millisecond)
	if !bytes.Equal(p.mem(off), payload) {
		return false
	}
	p.psn = p.psn.Add(1)
	return true
}

// mem returns the 8 bytes at off of the device's MR, read after taking the
// engine lock (QP.State), so that the device's processing of what was
// received is done, and through the region's lock, which orders the read
// before the device's later writes (the socket between them is invisible
// to the race detector).
func (p *craftedPeer) mem(off int) []byte {
	p.q.State()
	b := make([]byte, 8)
	require.NoError(p.t, p.m.ReadAt(b, p.m.IOVA()+uint64(off)))
	return b
}

// TestICRCIDWindowUDP sends crafted WRITEs to a device on link/udp, which
// cannot see the IPv4 ID: an rxe-like sequence (IDs stepping by one from
// 0xa354, as rxe's captures show) is accepted; a packet whose ICRC covers
// an ID far from the peer's counter is dropped, counted and not written
// (issue 17, defect 1: it used to be written); the window widens with
// silence; a run of two packets from a jumped counter re-seeds it.
func TestICRCIDWindowUDP(t *testing.T) {
	p := newCraftedPeer(t, roce.ICRCIDWindow)
	st := p.dev.Stats()
	id := uint16(0xa354)
	for i := range 8 {
		require.True(t, p.write(t, id, 8*i, byte(i+1)), "rxe-like packet %d, ID %#04x", i, id)
		id++
	}
	for i := range 8 {
		assert.Equal(t, bytes.Repeat([]byte{byte(i + 1)}, 8), p.mem(8*i))
	}
	assert.EqualValues(t, 8, st.ICRCIDFixups.Load())
	assert.EqualValues(t, 1, st.ICRCIDReseeds.Load(), "the first packet seeds the window")

	// Over another ID: the ICRC is right for ID id+0x8000, not for the
	// peer's counter.
	require.False(t, p.write(t, id+0x8000, 64, 0xee), "a packet over another ID is dropped")
	assert.Equal(t, make([]byte, 8), p.mem(64), "its data is not written")
	assert.EqualValues(t, 1, st.ICRCIDOutOfWindow.Load())
	assert.EqualValues(t, 1, st.BadICRC.Load())
	assert.EqualValues(t, 1, p.q.Counters().Load(qp.CounterBadICRC))
	require.True(t, p.write(t, id, 64, 9), "the counter's next ID is still accepted")
	id++
	assert.Equal(t, bytes.Repeat([]byte{9}, 8), p.mem(64))

	// Silence widens the window by one ID per millisecond (the kernel's
	// random step per jiffy, HZ ≤ 1000).
	far := id + 256 + 1500
	require.False(t, p.write(t, far, 72, 10), "1757 IDs ahead at once: dropped")
	time.Sleep(1600 * time.Millisecond)
	require.True(t, p.write(t, far, 72, 10), "1757 IDs ahead after 1.6 s of silence: accepted")
	id = far + 1

	// A jumped counter (heavy loss, another flow in its hash bucket):
	// the first packet is dropped, the second of the run re-seeds.
	reseeds := st.ICRCIDReseeds.Load()
	jump := id + 20000
	require.False(t, p.write(t, jump, 80, 11))
	require.True(t, p.write(t, jump+1, 80, 11))
	require.True(t, p.write(t, jump+2, 88, 12))
	assert.Equal(t, reseeds+1, st.ICRCIDReseeds.Load())
	assert.EqualValues(t, 3, st.ICRCIDOutOfWindow.Load())
	assert.EqualValues(t, 3, p.q.Counters().Load(qp.CounterBadICRC))
	assert.Zero(t, st.BadHdr.Load())
}

// TestICRCIDRecoveryModesUDP: with ICRCIDOff only the ID the link guesses
// (0 for a datagram alone) verifies, a full 32-bit check; ICRCIDAny keeps
// the old behaviour and accepts any recovered ID.
func TestICRCIDRecoveryModesUDP(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		p := newCraftedPeer(t, roce.ICRCIDOff)
		require.True(t, p.write(t, 0, 0, 1), "ID 0, the socket's: accepted")
		require.False(t, p.write(t, 0xa354, 8, 2), "another ID: dropped")
		assert.Equal(t, make([]byte, 8), p.mem(8))
		st := p.dev.Stats()
		assert.EqualValues(t, 1, st.BadICRC.Load())
		assert.Zero(t, st.ICRCIDFixups.Load())
		assert.Zero(t, st.ICRCIDOutOfWindow.Load())
	})
	t.Run("any", func(t *testing.T) {
		p := newCraftedPeer(t, roce.ICRCIDAny)
		require.True(t, p.write(t, 0xa354, 0, 1))
		require.True(t, p.write(t, 0x2354, 8, 2), "any ID: accepted (16-bit check)")
		assert.Equal(t, bytes.Repeat([]byte{2}, 8), p.mem(8))
		assert.EqualValues(t, 2, p.dev.Stats().ICRCIDFixups.Load())
	})
	t.Run("invalid", func(t *testing.T) {
		l, _ := newChanPair("10.0.0.1:4791", "10.0.0.2:4791")
		_, err := roce.Open(roce.Config{Link: l, ICRCIDRecovery: roce.ICRCIDAny + 1})
		require.ErrorIs(t, err, roce.ErrInvalidArg)
	})
}

// TestICRCIDWindowUDPGRO sends rxe-like WRITEs (IDs stepping by one across
// the wrap) as one UDP GSO super-packet, which loopback hands whole to the
// device's GRO socket, where link/udp guesses ID k for segment k: each
// segment's ID is recovered from that guess and falls in the window.
func TestICRCIDWindowUDPGRO(t *testing.T) {
	p := newCraftedPeer(t, roce.ICRCIDWindow)
	const segs, size = 8, 40 // BTH 12 + RETH 16 + 8 bytes + ICRC 4
	rc, err := p.conn.SyscallConn()
	require.NoError(t, err)
	var serr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, size)
	}))
	if serr != nil {
		t.Skipf("UDP_SEGMENT: %v", serr)
	}
	id := uint16(0xfffc) // wraps inside the burst
	var super []byte
	for k := range segs {
		f := wire.Fields{
			BTH:  bth.Fields{Opcode: bth.RCRDMAWriteOnly, PKey: rocev2.DefaultPKey, DestQP: p.q.QPN(), AckReq: true, PSN: p.psn.Add(uint32(k))},
			RETH: reth.Fields{VA: p.m.IOVA() + uint64(8*k), RKey: uint32(p.m.RKey()), DMALength: 8},
		}
		pkt := make([]byte, size)
		n, err := wire.Build(pkt, &f, bytes.Repeat([]byte{byte(k + 1)}, 8))
		require.NoError(t, err)
		require.Equal(t, size, n)
		var ph [rocev2.PseudoHeaderLen]byte
		ip, u := rocev2.PseudoHeaders(&ph, p.addr, p.dev.LocalAddr(), id+uint16(k), n)
		rocev2.PutICRC(pkt[n-bth.ICRCSize:], rocev2.ComputeICRC(ip, u, pkt[:n-bth.ICRCSize]))
		super = append(super, pkt...)
	}
	_, err = p.conn.WriteToUDPAddrPort(super, p.dev.LocalAddr())
	require.NoError(t, err)
	st := p.dev.Stats()
	require.Eventually(t, func() bool { return st.RxPackets.Load() == segs }, 5*time.Second, time.Millisecond)
	for k := range segs {
		assert.Equal(t, bytes.Repeat([]byte{byte(k + 1)}, 8), p.mem(8*k), "segment %d", k)
	}
	assert.EqualValues(t, segs, st.ICRCIDFixups.Load())
	assert.Zero(t, st.ICRCIDOutOfWindow.Load())
	assert.EqualValues(t, 1, st.ICRCIDReseeds.Load())
}
