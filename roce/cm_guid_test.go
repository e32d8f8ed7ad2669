package roce

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/link/udp"
)

// madLog records the CM MADs a cmTap network carried.
type madLog struct {
	mu   sync.Mutex
	mads [][]byte
}

func (l *madLog) tap(b []byte, m cm.MAD) bool {
	l.mu.Lock()
	l.mads = append(l.mads, append([]byte(nil), m...))
	l.mu.Unlock()
	return true
}

// of returns the logged MADs with attribute a.
func (l *madLog) of(a cm.AttrID) []cm.MAD {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []cm.MAD
	for _, b := range l.mads {
		if m := cm.MAD(b); m.AttrID() == a {
			out = append(out, m)
		}
	}
	return out
}

// TestCMNodeGUIDOnTheWire (issue 27, part 1): every REQ and REP a device
// sends carries its node GUID as Local CA GUID, not 0, as the kernel's CM
// sends the device's node_guid (cm_format_req, cm_format_rep); two devices
// without a MAC (link/mem) get different, non-zero GUIDs (cm.GUIDFromAddr
// of their address), and a REJ with reason Timeout from a canceled Dial
// carries the dialer's GUID as its ARI (cm_destroy_id).
func TestCMNodeGUIDOnTheWire(t *testing.T) {
	var log madLog
	dropREP := make(chan struct{})
	var once sync.Once
	n := cmTap(func(b []byte, m cm.MAD) bool {
		log.tap(b, m)
		if m.AttrID() == cm.AttrREP {
			select {
			case <-dropREP: // the second Dial never hears its REP
				once.Do(func() {})
				return false
			default:
			}
		}
		return true
	})
	dd, ld := openCMPair(t, n, cm.Config{CMResponseTimeout: 12, PacketLifeTime: 10, MaxCMRetries: 2})
	l, err := ld.Listen(7174, ListenConfig{})
	require.NoError(t, err)
	defer l.Close()
	c, err := dd.Dial(context.Background(), netip.MustParseAddrPort("10.0.0.2:7174"), DialConfig{})
	require.NoError(t, err)
	defer c.Close()

	reqs, reps := log.of(cm.AttrREQ), log.of(cm.AttrREP)
	require.Len(t, reqs, 1)
	require.Len(t, reps, 1)
	reqGUID, repGUID := cm.REQ(reqs[0]).LocalCAGUID(), cm.REP(reps[0]).LocalCAGUID()
	assert.NotZero(t, reqGUID, "the REQ's Local CA GUID")
	assert.NotZero(t, repGUID, "the REP's Local CA GUID")
	assert.NotEqual(t, reqGUID, repGUID, "two devices, two GUIDs")
	assert.Equal(t, uint64(dd.NodeGUID()), reqGUID)
	assert.Equal(t, uint64(ld.NodeGUID()), repGUID)
	assert.Equal(t, cm.GUIDFromAddr(netip.MustParseAddrPort("10.0.0.1:4791")), dd.NodeGUID(), "no interface owns a link/mem address")

	// A Dial canceled with its REQ out: REJ Timeout, ARI = the GUID.
	close(dropREP)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(log.of(cm.AttrREP)) < 2 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err = dd.Dial(ctx, netip.MustParseAddrPort("10.0.0.2:7174"), DialConfig{})
	require.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool { return len(log.of(cm.AttrREJ)) == 1 }, 2*time.Second, time.Millisecond)
	rej := cm.REJ(log.of(cm.AttrREJ)[0])
	assert.Equal(t, cm.RejectTimeout, rej.Reason())
	require.EqualValues(t, 8, rej.RejectInfoLen())
	assert.Equal(t, reqGUID, binary.BigEndian.Uint64(rej.ARI()), "the ARI is the dialer's node GUID")
}

// TestCMStaleIsPerCAGUID (issue 27, part 1): the listener finds a stale
// connection by the REQ's (Local QPN, Local CA GUID), as the kernel's
// cm_insert_remote_qpn does, so two dialers on two hosts whose QPs happen
// to have the same number both connect. Before, every goroce REQ carried
// CA GUID 0: the second was refused as stale (REJ 10) and the first
// connection torn down with a DREQ.
func TestCMStaleIsPerCAGUID(t *testing.T) {
	var log madLog
	n := cmTap(log.tap)
	cmc := cm.Config{CMResponseTimeout: 12, PacketLifeTime: 10, MaxCMRetries: 2}
	open := func(a string) *Device {
		d, err := Open(Config{Link: n.Attach(netip.MustParseAddrPort(a)), CM: cmc})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	ld, d1, d3 := open("10.0.0.2:4791"), open("10.0.0.1:4791"), open("10.0.0.3:4791")
	const qpn = bth.QPN(0x4242)
	d1.testQPN = func() bth.QPN { return qpn }
	d3.testQPN = func() bth.QPN { return qpn }
	l, err := ld.Listen(7174, ListenConfig{})
	require.NoError(t, err)
	defer l.Close()
	raddr := netip.MustParseAddrPort("10.0.0.2:7174")
	c1, err := d1.Dial(ctxFor(t, 5*time.Second), raddr, DialConfig{})
	require.NoError(t, err)
	defer c1.Close()
	c3, err := d3.Dial(ctxFor(t, 5*time.Second), raddr, DialConfig{})
	require.NoError(t, err, "the same QPN from another CA is not stale")
	defer c3.Close()
	assert.Equal(t, qpn, c1.QP().QPN())
	assert.Equal(t, qpn, c3.QP().QPN())
	for range 2 {
		a, err := l.Accept(ctxFor(t, 2*time.Second))
		require.NoError(t, err)
		defer a.Close()
	}
	time.Sleep(50 * time.Millisecond)
	assert.Empty(t, log.of(cm.AttrREJ), "no REJ")
	assert.Empty(t, log.of(cm.AttrDREQ), "no DREQ for the first connection")
	assert.Nil(t, c1.Err())
	assert.NotEqual(t, d1.NodeGUID(), d3.NodeGUID())
}

// TestNodeGUIDSources: Config.CM.LocalCAGUID wins; a UDP device on an
// address a host interface with a MAC owns takes that MAC's EUI-64 (as
// rxe's node_guid); one on 127.0.0.1 or 127.0.0.2 (the loopback has no
// MAC) takes cm.GUIDFromAddr, different for the two.
func TestNodeGUIDSources(t *testing.T) {
	openUDP := func(a string, cmc cm.Config) *Device {
		l, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort(a)})
		require.NoError(t, err)
		d, err := Open(Config{Link: l, CM: cmc})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	d := openUDP("127.0.0.1:0", cm.Config{LocalCAGUID: 0x0002c90300fedcba})
	assert.Equal(t, cm.GUID(0x0002c90300fedcba), d.NodeGUID())

	a, b := openUDP("127.0.0.1:0", cm.Config{}), openUDP("127.0.0.2:0", cm.Config{})
	assert.Equal(t, cm.GUIDFromAddr(a.LocalAddr()), a.NodeGUID())
	assert.Equal(t, cm.GUIDFromAddr(b.LocalAddr()), b.NodeGUID())
	assert.NotEqual(t, a.NodeGUID(), b.NodeGUID())
	_, err := a.Listen(7174, ListenConfig{})
	require.NoError(t, err)
	assert.Equal(t, cm.GUIDFromAddr(a.LocalAddr()), a.NodeGUID(), "the same once the CM runs")

	ifc, ip := hostInterfaceWithMAC(t)
	if ifc == nil {
		t.Skip("no host interface with a MAC and an IPv4 address")
	}
	want, ok := cm.GUIDFromMAC(ifc.HardwareAddr)
	require.True(t, ok)
	e := openUDP(netip.AddrPortFrom(ip, 0).String(), cm.Config{})
	assert.Equal(t, want, e.NodeGUID(), "%s %v", ifc.Name, ifc.HardwareAddr)
}

// hostInterfaceWithMAC returns an up interface with a 6-byte MAC and an
// IPv4 address, if the host has one (a UDP socket bound to it sends
// nothing).
func hostInterfaceWithMAC(t *testing.T) (*net.Interface, netip.Addr) {
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	for i := range ifs {
		ifc := &ifs[i]
		if ifc.Flags&net.FlagUp == 0 || len(ifc.HardwareAddr) != 6 {
			continue
		}
		if _, ok := cm.GUIDFromMAC(ifc.HardwareAddr); !ok {
			continue
		}
		as, _ := ifc.Addrs()
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() {
					return ifc, ip.Unmap()
				}
			}
		}
	}
	return nil, netip.Addr{}
}

// ctxFor returns a context that ends after d or with the test.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
