package udp

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestRecvTTL: Recv reports the TTL / hop limit and the DSCP and ECN
// fields each datagram arrived with (IP_RECVTTL, IPV6_RECVHOPLIMIT,
// IP_RECVTOS), which a UD QP needs to rebuild the IP header in its GRH
// area; a sender's TTL 33 and TOS 0x22 (DSCP 8, ECT(0)) come back as sent.
func TestRecvTTL(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			rx := open(t, f.b, Config{})
			c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(f.a, 0)))
			require.NoError(t, err)
			defer c.Close()
			rc, err := c.SyscallConn()
			require.NoError(t, err)
			var serr error
			require.NoError(t, rc.Control(func(fd uintptr) {
				if f.a.Is4() {
					serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TTL, 33)
					if serr == nil {
						serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, 0x22)
					}
				} else {
					serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, 33)
					if serr == nil {
						serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, 0x22)
					}
				}
			}))
			require.NoError(t, serr)
			_, err = c.WriteToUDPAddrPort(make([]byte, 64), rx.LocalAddr())
			require.NoError(t, err)
			got := recvN(t, rx, 1, 4, 2048, 2*time.Second)
			require.Len(t, got, 1)
			assert.Equal(t, uint8(33), got[0].TTL)
			assert.Equal(t, uint8(8), got[0].DSCP)
			assert.Equal(t, uint8(2), got[0].ECN)
		})
	}
}
