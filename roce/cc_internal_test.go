package roce

import (
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/rocev2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGoldenCNPDevicePath feeds the device's CNP path (buildCNP, what
// Device.notify sends) the addresses and IPv4 ID of the ConnectX-4 Lx
// capture of doc/dcqcn.md §7.2 (scapy test/contrib/roce.uts): the transport
// packet — BTH 81 00 ff ff 40 00 01 18 00 00 00 00, 16 reserved zero
// bytes, ICRC 82 fd 00 2a — must come out byte for byte, and with the
// capture's outer headers (TOS 0xC2: DSCP 48, ECT(0)) the whole frame.
func TestGoldenCNPDevicePath(t *testing.T) {
	frame, err := hex.DecodeString(strings.Join(strings.Fields(`
		e41d2dab2bc2 7cfe90643b32 0800
		45c2 003c 718c 4000 4011 9161 0a001101 0a001201
		0000 12b7 0028 0000
		8100ffff 40000118 00000000
		00000000000000000000000000000000
		82fd002a`), ""))
	require.NoError(t, err)
	src := netip.MustParseAddrPort("10.0.17.1:0")
	dst := netip.MustParseAddrPort("10.0.18.1:4791")
	buf := make([]byte, maxFrame)
	n := buildCNP(buf, 0x118, src, dst, 0x718c)
	require.Equal(t, cnpLen, n)
	assert.Equal(t, frame[42:], buf[:n], "transport bytes and ICRC")

	e := rocev2.Encap{Ethernet: true, DstMAC: [6]byte(frame[0:6]), SrcMAC: [6]byte(frame[6:12]),
		Src: src, Dst: dst, TOS: 0xc2, ID: 0x718c}
	out := make([]byte, 128)
	copy(out[e.HeaderLen():], buf[:n])
	m, err := e.Seal(out, n)
	require.NoError(t, err)
	assert.Equal(t, frame, out[:m], "whole frame")
}

// TestBuildCNPAllocs pins the CNP path at zero allocations.
func TestBuildCNPAllocs(t *testing.T) {
	src := netip.MustParseAddrPort("10.0.17.1:4791")
	dst := netip.MustParseAddrPort("10.0.18.1:4791")
	buf := make([]byte, 64)
	assert.Zero(t, testing.AllocsPerRun(100, func() { buildCNP(buf, 0x118, src, dst, 0) }))
}

// TestQPCCPacing: the QP's congestion control does not pace at line rate,
// engages the pacer below it after a CNP, never goes below MinRate under a
// CNP flood, and keeps releasing packets (no stall).
func TestQPCCPacing(t *testing.T) {
	clk := testutil.NewClock()
	cfg := cc.ProfileP.Config()
	cfg.LineRate, cfg.MinRate, cfg.AI, cfg.HAI = 1*cc.Gbps, 50*cc.Mbps, 5*cc.Mbps, 50*cc.Mbps
	var c qpCC
	require.NoError(t, c.init(&CCConfig{RP: &cfg}))
	c.pace.SetSize(0, 1104)
	assert.True(t, c.ready(clk.Now()))
	assert.False(t, c.paced, "line rate: not paced")

	for i := 0; i < 10000; i++ {
		c.rp.OnCNP(clk.Now())
		clk.Advance(time.Microsecond)
	}
	assert.Equal(t, cfg.MinRate, c.rp.Rate())
	sends := 0
	start := clk.Now()
	for sends < 100 {
		now := clk.Now()
		if !c.ready(now) {
			require.True(t, c.paced)
			require.True(t, c.pace.Next().After(now))
			clk.Set(c.pace.Next())
			continue
		}
		c.sent(now, 1104)
		sends++
	}
	assert.GreaterOrEqual(t, float64(c.pace.Rate()), float64(cfg.MinRate))
	el := clk.Now().Sub(start)
	// 100 packets at ≥ 50 Mb/s, the first bucket free: at most 96 gaps.
	assert.LessOrEqual(t, el, cc.Bitrate(cfg.MinRate).TxTime(96*1104)+time.Microsecond)
}
