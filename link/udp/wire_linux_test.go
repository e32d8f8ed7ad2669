//go:build linux

package udp

// Tests that look at the packets on the wire, to pin what the ICRC depends
// on: the IPv4 ID, DF, the UDP checksum and the TOS byte. They need
// CAP_NET_RAW (AF_PACKET) or CAP_NET_ADMIN (TUN) and skip without them.

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

// ipPacket is what the tests read from an IP header.
type ipPacket struct {
	v6      bool
	id      uint16
	df      bool
	tos     uint8
	dport   uint16
	csum    uint16 // UDP checksum
	payload []byte
}

func parseIP(p []byte) (ipPacket, bool) {
	if len(p) < 1 {
		return ipPacket{}, false
	}
	switch p[0] >> 4 {
	case 4:
		ihl := int(p[0]&15) * 4
		if len(p) < ihl+8 || p[9] != unix.IPPROTO_UDP {
			return ipPacket{}, false
		}
		u := p[ihl:]
		return ipPacket{
			id: binary.BigEndian.Uint16(p[4:]), df: p[6]&0x40 != 0, tos: p[1],
			dport: binary.BigEndian.Uint16(u[2:]), csum: binary.BigEndian.Uint16(u[6:]), payload: u[8:],
		}, true
	case 6:
		if len(p) < 48 || p[6] != unix.IPPROTO_UDP {
			return ipPacket{}, false
		}
		u := p[40:]
		return ipPacket{
			v6: true, tos: uint8(binary.BigEndian.Uint16(p[0:]) >> 4),
			dport: binary.BigEndian.Uint16(u[2:]), csum: binary.BigEndian.Uint16(u[6:]), payload: u[8:],
		}, true
	}
	return ipPacket{}, false
}

// capture reads IP packets to dport from an AF_PACKET socket on lo until
// want have been seen or the deadline passes. Each loopback packet is seen
// twice (outgoing and incoming); only outgoing copies are kept.
func capture(t *testing.T, fd int, dport uint16, want int) []ipPacket {
	t.Helper()
	var got []ipPacket
	buf := make([]byte, 70000)
	deadline := time.Now().Add(2 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		n, from, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
		if err == unix.EAGAIN {
			time.Sleep(time.Millisecond)
			continue
		}
		require.NoError(t, err)
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype != unix.PACKET_OUTGOING {
			continue
		}
		if n < 14 {
			continue
		}
		if p, ok := parseIP(buf[14:n]); ok && p.dport == dport {
			p.payload = append([]byte(nil), p.payload...)
			got = append(got, p)
		}
	}
	require.Len(t, got, want, "captured packets")
	return got
}

// filterPort attaches a classic BPF filter keeping only UDP packets to
// dport (IPv4 or IPv6 behind lo's 14-byte Ethernet header), so other
// loopback traffic cannot fill the socket's buffer.
func filterPort(t *testing.T, fd int, dport uint16) {
	t.Helper()
	prog := []unix.SockFilter{
		{Code: 0x28, K: 12},                          // 0: ldh [12]
		{Code: 0x15, Jt: 0, Jf: 5, K: 0x0800},        // 1: jeq IPv4
		{Code: 0x30, K: 23},                          // 2: ldb [23] protocol
		{Code: 0x15, Jt: 0, Jf: 9, K: 17},            // 3: jeq UDP
		{Code: 0xb1, K: 14},                          // 4: ldxb 4*([14]&0xf)
		{Code: 0x48, K: 16},                          // 5: ldh [x+16] dport
		{Code: 0x05, K: 4},                           // 6: ja 11
		{Code: 0x15, Jt: 0, Jf: 5, K: 0x86dd},        // 7: jeq IPv6
		{Code: 0x30, K: 20},                          // 8: ldb [20] next header
		{Code: 0x15, Jt: 0, Jf: 3, K: 17},            // 9: jeq UDP
		{Code: 0x28, K: 56},                          // 10: ldh [56] dport
		{Code: 0x15, Jt: 0, Jf: 1, K: uint32(dport)}, // 11
		{Code: 0x06, K: 1 << 18},                     // 12: accept
		{Code: 0x06, K: 0},                           // 13: drop
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	require.NoError(t, unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp))
}

// openPacketSocket opens an AF_PACKET socket on lo that sees only UDP
// packets to dport. It is created with protocol 0 (receiving nothing) and
// bound to ETH_P_ALL only after the filter is attached, so traffic of other
// processes cannot fill its buffer first.
func openPacketSocket(t *testing.T, dport uint16) int {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("AF_PACKET needs CAP_NET_RAW: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	filterPort(t, fd, dport)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: lo.Index}))
	return fd
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// TestWireLoopback captures our packets on lo: a datagram sent alone
// carries IPv4 ID 0 with DF set and UDP checksum 0 (ChecksumAuto), its
// ECN bits and the socket's DSCP; an IPv6 one has checksum 0 too. On lo a
// GSO super-packet crosses unsegmented, carrying ID 0 and a checksum.
func TestWireLoopback(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tx := open(t, f.a, Config{TOS: 0xb8 | link.ECT0}) // DSCP 46
			rx := open(t, f.b, Config{})
			dport := rx.LocalAddr().Port()
			fd := openPacketSocket(t, dport)
			single := mkDgs([]int{300, 301}, rx.LocalAddr(), 0)
			single[1].ECN = link.CE
			_, err := tx.Send(single[:1])
			require.NoError(t, err)
			_, err = tx.Send(single[1:])
			require.NoError(t, err)
			run := mkDgs([]int{1000, 1000, 1000}, rx.LocalAddr(), 2)
			for i := range run {
				run[i].ECN = link.ECT0
			}
			tx.PlanIPID(run)
			_, err = tx.Send(run)
			require.NoError(t, err)
			got := capture(t, fd, dport, 3)
			for i, p := range got {
				if !f.b.Is6() {
					assert.Zero(t, p.id, "IPv4 ID of packet %d", i)
					assert.True(t, p.df, "DF of packet %d", i)
				}
				assert.Equal(t, uint8(0xb8), p.tos&^3, "DSCP of packet %d", i)
			}
			assert.Zero(t, got[0].csum, "UDP checksum of a single datagram")
			assert.Zero(t, got[1].csum, "UDP checksum of a single datagram")
			assert.Equal(t, link.NotECT, got[0].tos&3)
			assert.Equal(t, link.CE, got[1].tos&3)
			assert.Equal(t, link.ECT0, got[2].tos&3)
			assert.Len(t, got[2].payload, 3000, "super-packet crosses lo whole")
			recvN(t, rx, 5, 8, 2048, 2*time.Second)
		})
	}
}

// TestGSOSegmentIPID sends a planned GSO run out of a TUN device, which has
// no UDP segmentation offload, so the kernel cuts it in software as a NIC
// would; it checks that each segment carries the ID PlanIPID gave it, DF
// and a valid UDP checksum, and that a datagram sent alone carries ID 0
// and checksum 0.
func TestGSOSegmentIPID(t *testing.T) {
	tun := openTUN(t, [4]byte{198, 18, 247, 1}, 30)
	tx := open(t, netip.AddrFrom4([4]byte{198, 18, 247, 1}), Config{})
	dst := netip.MustParseAddrPort("198.18.247.2:4791")
	dgs := mkDgs([]int{1200, 1200, 1200, 1200, 700}, dst, 0)
	tx.PlanIPID(dgs)
	for i, d := range dgs {
		require.Equal(t, uint16(i), d.IPID)
	}
	_, err := tx.Send(dgs)
	require.NoError(t, err)
	require.Equal(t, uint64(1), tx.Info().GSOSent)
	alone := mkDgs([]int{100}, dst, 5)
	_, err = tx.Send(alone)
	require.NoError(t, err)

	var got []ipPacket
	var raw [][]byte
	buf := make([]byte, 70000)
	deadline := time.Now().Add(2 * time.Second)
	for len(got) < 6 && time.Now().Before(deadline) {
		n, err := unix.Read(tun, buf)
		if err == unix.EAGAIN {
			time.Sleep(time.Millisecond)
			continue
		}
		require.NoError(t, err)
		if p, ok := parseIP(buf[:n]); ok && p.dport == 4791 {
			p.payload = append([]byte(nil), p.payload...)
			got = append(got, p)
			raw = append(raw, append([]byte(nil), buf[:n]...))
		}
	}
	require.Len(t, got, 6)
	for i, p := range got {
		assert.Equal(t, uint16(i%5), p.id, "IPv4 ID of segment %d", i)
		assert.True(t, p.df)
		checkPayload(t, p.payload, i)
	}
	for i := 0; i < 5; i++ {
		assert.NotZero(t, got[i].csum, "GSO segments are checksummed")
		assert.True(t, udp4ChecksumOK(raw[i]), "segment %d checksum", i)
	}
	assert.Zero(t, got[5].csum, "a datagram alone has checksum 0")
}

// udp4ChecksumOK verifies the UDP checksum of an IPv4 packet.
func udp4ChecksumOK(p []byte) bool {
	ihl := int(p[0]&15) * 4
	u := p[ihl:]
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(p[12:20])
	sum += unix.IPPROTO_UDP + uint32(len(u))
	add(u)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

// openTUN creates a TUN device (no packet info, so reads return bare IP
// packets) with addr/prefix, up, MTU 9000. Closing its fd, at cleanup,
// deletes it with its routes.
func openTUN(t *testing.T, addr [4]byte, prefix int) int {
	t.Helper()
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Skipf("no TUN: %v", err)
	}
	ifr, err := unix.NewIfreq("grtest%d")
	require.NoError(t, err)
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		t.Skipf("TUNSETIFF needs CAP_NET_ADMIN: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	name := ifr.Name()
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(s)
	do := func(req uint, set func(*unix.Ifreq)) {
		r, err := unix.NewIfreq(name)
		require.NoError(t, err)
		set(r)
		require.NoError(t, unix.IoctlIfreq(s, req, r), "ioctl %#x on %s", req, name)
	}
	do(unix.SIOCSIFADDR, func(r *unix.Ifreq) { require.NoError(t, r.SetInet4Addr(addr[:])) })
	mask := net.CIDRMask(prefix, 32)
	do(unix.SIOCSIFNETMASK, func(r *unix.Ifreq) { require.NoError(t, r.SetInet4Addr(mask)) })
	do(unix.SIOCSIFMTU, func(r *unix.Ifreq) { r.SetUint32(9000) })
	fl, err := unix.NewIfreq(name)
	require.NoError(t, err)
	require.NoError(t, unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, fl))
	do(unix.SIOCSIFFLAGS, func(r *unix.Ifreq) { r.SetUint16(fl.Uint16() | unix.IFF_UP) })
	t.Logf("TUN %s up with %v/%d (pid %d)", name, netip.AddrFrom4(addr), prefix, os.Getpid())
	return fd
}
