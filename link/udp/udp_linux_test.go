//go:build linux

package udp

import (
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

// modes are the GSO/GRO combinations every loopback test runs.
var modes = []struct {
	name         string
	noGSO, noGRO bool
}{
	{"gso+gro", false, false},
	{"gso", false, true},
	{"gro", true, false},
	{"plain", true, true},
}

var families = []struct {
	name string
	a, b netip.Addr
}{
	{"ipv4", lo4, lo4b},
	{"ipv6", lo6, lo6},
}

// TestLoopbackBatches sends batches mixing GSO-able runs (RoCE-sized
// datagrams, last shorter), single datagrams and size changes over IPv4
// and IPv6 loopback, with GSO and GRO on and off, and checks every datagram
// arrives whole, in order, with the right addresses.
func TestLoopbackBatches(t *testing.T) {
	testLoopbackBatches(t, false)
}

// TestLoopbackBatchesGathered is TestLoopbackBatches with most datagrams in
// link.Datagram's two-part form (header and ICRC in Buf, the payload in a
// separate buffer, sent with one iovec per part) and the rest plain, mixed
// within GSO runs: the receiver must see the same bytes, in the same
// datagrams, and GSO must still coalesce.
func TestLoopbackBatchesGathered(t *testing.T) {
	testLoopbackBatches(t, true)
}

func testLoopbackBatches(t *testing.T, gathered bool) {
	// 4096+44 and 1024+44 runs, a short last, odd sizes, a 1-byte datagram.
	var sizes []int
	for i := 0; i < 3; i++ {
		for j := 0; j < 20; j++ {
			sizes = append(sizes, 4140)
		}
		sizes = append(sizes, 1000, 1068, 1068, 1068, 1068, 60, 1, 4140, 4140, 2000)
		for j := 0; j < 70; j++ {
			sizes = append(sizes, 1068)
		}
		sizes = append(sizes, 500)
	}
	for _, f := range families {
		for _, m := range modes {
			t.Run(f.name+"/"+m.name, func(t *testing.T) {
				tx := open(t, f.a, Config{DisableGSO: m.noGSO, DisableGRO: m.noGRO, BatchSize: 16})
				rx := open(t, f.b, Config{DisableGSO: m.noGSO, DisableGRO: m.noGRO, BatchSize: 16})
				dgs := mkDgs(sizes, rx.LocalAddr(), 0)
				if gathered {
					gatherDgs(dgs)
					require.NotEmpty(t, dgs[0].Payload)
				}
				tx.PlanIPID(dgs)
				done := make(chan []link.Datagram, 1)
				go func() { done <- recvN(t, rx, len(sizes), 64, 4200, 5*time.Second) }()
				for i := 0; i < len(dgs); i += 50 {
					n, err := tx.Send(dgs[i:min(i+50, len(dgs))])
					require.NoError(t, err)
					require.Equal(t, min(50, len(dgs)-i), n)
				}
				got := <-done
				require.Len(t, got, len(sizes))
				for i, d := range got {
					require.Len(t, d.Buf, sizes[i], "datagram %d", i)
					checkPayload(t, d.Buf, i)
					assert.Equal(t, tx.LocalAddr(), d.Src)
					assert.Equal(t, rx.LocalAddr(), d.Dst)
					assert.Equal(t, link.NotECT, d.ECN)
					assert.False(t, d.IPIDKnown)
				}
				ti, ri := tx.Info(), rx.Info()
				assert.Equal(t, !m.noGSO, ti.GSOSent > 0, "GSO super-packets sent: %d", ti.GSOSent)
				assert.Equal(t, !m.noGSO && !m.noGRO, ri.GROReceived > 0, "GRO buffers: %d", ri.GROReceived)
				assert.Zero(t, ti.GSORefused)
				st, sr := tx.Stats(), rx.Stats()
				assert.Equal(t, uint64(len(sizes)), st.SentPackets)
				assert.Equal(t, uint64(len(sizes)), sr.RecvPackets)
				assert.Equal(t, st.SentBytes, sr.RecvBytes)
				assert.Zero(t, sr.RecvDropped)
			})
		}
	}
}

// TestGROSplit checks that a coalesced buffer is cut back exactly at
// gso_size, short last segment included, across Recv calls with fewer
// slots than segments.
func TestGROSplit(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tx := open(t, f.a, Config{})
			rx := open(t, f.b, Config{})
			sizes := []int{4140, 4140, 4140, 4140, 4140, 1234}
			dgs := mkDgs(sizes, rx.LocalAddr(), 100)
			tx.PlanIPID(dgs)
			n, err := tx.Send(dgs)
			require.NoError(t, err)
			require.Equal(t, len(sizes), n)
			require.Equal(t, uint64(1), tx.Info().GSOSent, "one super-packet")
			got := recvN(t, rx, len(sizes), 4, 8192, 2*time.Second) // 4 slots: carry-over
			for i, d := range got {
				require.Len(t, d.Buf, sizes[i])
				checkPayload(t, d.Buf, 100+i)
			}
			assert.Equal(t, uint64(1), rx.Info().GROReceived, "one coalesced buffer")
		})
	}
}

// TestRecvTruncated drops (and counts) datagrams longer than the buffer,
// with and without GRO, and keeps delivering the others.
func TestRecvTruncated(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			tx := open(t, lo4, Config{DisableGSO: m.noGSO, DisableGRO: m.noGRO})
			rx := open(t, lo4b, Config{DisableGSO: m.noGSO, DisableGRO: m.noGRO})
			big := mkDgs([]int{3000, 3000}, rx.LocalAddr(), 0)
			small := mkDgs([]int{100}, rx.LocalAddr(), 2)
			tx.PlanIPID(big)
			_, err := tx.Send(big)
			require.NoError(t, err)
			_, err = tx.Send(small)
			require.NoError(t, err)
			in := make([]link.Datagram, 8)
			for i := range in {
				in[i].Buf = make([]byte, 2048)
			}
			first := &in[0].Buf[0]
			n, err := rx.Recv(in)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Len(t, in[0].Buf, 100)
			checkPayload(t, in[0].Buf, 2)
			assert.Same(t, first, &in[0].Buf[0], "buffers stay at their index")
			assert.Equal(t, uint64(2), rx.Stats().RecvDropped)
			assert.Equal(t, uint64(2), rx.Info().Truncated)
		})
	}
}

// TestECNRoundTrip sends NotECT, ECT(1), ECT(0) and CE (as runs, so GSO
// carries them too) with two socket TOS values and checks each datagram's
// ECN bits arrive unchanged (doc/dcqcn.md §7.1).
func TestECNRoundTrip(t *testing.T) {
	codes := []uint8{link.NotECT, link.ECT1, link.ECT0, link.CE, link.ECT0, link.CE}
	for _, f := range families {
		for _, tos := range []uint8{0, 0xb8 | link.ECT0} {
			for _, m := range modes[:1:1] {
				name := f.name + "/tos=" + map[uint8]string{0: "0", 0xba: "0xba"}[tos] + "/" + m.name
				t.Run(name, func(t *testing.T) {
					tx := open(t, f.a, Config{TOS: tos})
					rx := open(t, f.b, Config{})
					var dgs []link.Datagram
					for i, c := range codes {
						run := mkDgs([]int{1068, 1068, 1068}, rx.LocalAddr(), 3*i)
						for j := range run {
							run[j].ECN = c
						}
						dgs = append(dgs, run...)
					}
					tx.PlanIPID(dgs)
					_, err := tx.Send(dgs)
					require.NoError(t, err)
					got := recvN(t, rx, len(dgs), 64, 2048, 2*time.Second)
					for i, d := range got {
						checkPayload(t, d.Buf, i)
						assert.Equal(t, codes[i/3], d.ECN, "datagram %d", i)
					}
				})
			}
		}
	}
}

// TestZeroChecksumIPv6 sends zero-checksum IPv6 datagrams (as rxe does,
// doc/rxe.md §10 item 3): a link (UDP_NO_CHECK6_RX) receives them, a plain
// socket does not, and the plain socket does receive checksummed ones.
func TestZeroChecksumIPv6(t *testing.T) {
	tx := open(t, lo6, Config{Checksum: ChecksumZero})
	require.True(t, tx.Info().ZeroChecksumTx)
	rx := open(t, lo6, Config{})
	dgs := mkDgs([]int{200}, rx.LocalAddr(), 0)
	_, err := tx.Send(dgs)
	require.NoError(t, err)
	got := recvN(t, rx, 1, 1, 2048, 2*time.Second)
	checkPayload(t, got[0].Buf, 0)

	// A plain socket drops the zero checksum...
	plain, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	require.NoError(t, err)
	defer plain.Close()
	dst := plain.LocalAddr().(*net.UDPAddr).AddrPort()
	_, err = tx.Send(mkDgs([]int{200}, dst, 1))
	require.NoError(t, err)
	plain.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 2048)
	_, _, err = plain.ReadFromUDP(buf)
	require.Error(t, err, "Linux must drop zero-checksum IPv6 UDP without UDP_NO_CHECK6_RX")
	// ... but takes a checksummed one.
	full := open(t, lo6, Config{Checksum: ChecksumFull})
	require.False(t, full.Info().ZeroChecksumTx)
	_, err = full.Send(mkDgs([]int{200}, dst, 2))
	require.NoError(t, err)
	plain.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _, err := plain.ReadFromUDP(buf)
	require.NoError(t, err)
	checkPayload(t, buf[:n], 2)
}

// TestChecksumAutoToggle: in ChecksumAuto, batches with a super-packet are
// checksummed (else the kernel refuses GSO) and single datagrams are not.
func TestChecksumAutoToggle(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tx := open(t, f.a, Config{})
			rx := open(t, f.b, Config{})
			require.True(t, tx.Info().ZeroChecksumTx)
			run := mkDgs([]int{1068, 1068, 1068}, rx.LocalAddr(), 0)
			tx.PlanIPID(run)
			_, err := tx.Send(run)
			require.NoError(t, err)
			assert.False(t, tx.Info().ZeroChecksumTx)
			_, err = tx.Send(mkDgs([]int{100}, rx.LocalAddr(), 3))
			require.NoError(t, err)
			assert.True(t, tx.Info().ZeroChecksumTx)
			got := recvN(t, rx, 4, 8, 2048, 2*time.Second)
			for i, d := range got {
				checkPayload(t, d.Buf, i)
			}
			in := tx.Info()
			assert.Zero(t, in.GSORefused)
			assert.Equal(t, uint64(1), in.GSOSent)
		})
	}
}

// TestGSORefusedFallback forces a refusal (ChecksumFull would not; a zero
// checksum socket with GSO does, udp_send_skb EINVAL) and checks the link
// falls back, counts it and still delivers everything.
func TestGSORefusedFallback(t *testing.T) {
	tx := open(t, lo4, Config{})
	rx := open(t, lo4b, Config{})
	// Make the socket send checksum 0 behind the link's back, and stop
	// ChecksumAuto from fixing it by claiming it already is checksummed.
	require.NoError(t, tx.rc.Control(func(fd uintptr) {
		require.NoError(t, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1))
	}))
	tx.zeroTx.Store(false)
	dgs := mkDgs([]int{1068, 1068, 1068, 1068, 100}, rx.LocalAddr(), 0)
	tx.PlanIPID(dgs)
	n, err := tx.Send(dgs)
	require.NoError(t, err)
	require.Equal(t, len(dgs), n)
	in := tx.Info()
	assert.Equal(t, uint64(1), in.GSORefused)
	assert.False(t, in.GSO)
	got := recvN(t, rx, len(dgs), 8, 2048, 2*time.Second)
	for i, d := range got {
		checkPayload(t, d.Buf, i)
	}
}

// TestPlanIPID pins the run rules that decide the IPv4 ID of each packet.
func TestPlanIPID(t *testing.T) {
	l := open(t, lo4, Config{})
	a := netip.MustParseAddrPort("127.0.0.9:4791")
	b := netip.MustParseAddrPort("127.0.0.10:4791")
	tests := []struct {
		name  string
		sizes []int
		dst   []netip.AddrPort // per datagram; nil: all a
		ecn   []uint8
		want  []uint16
	}{
		{"equal", []int{100, 100, 100}, nil, nil, []uint16{0, 1, 2}},
		{"short last ends the run", []int{100, 100, 50, 100, 100}, nil, nil, []uint16{0, 1, 2, 0, 1}},
		{"longer starts a run", []int{100, 200, 200}, nil, nil, []uint16{0, 0, 1}},
		{"empty alone", []int{100, 0, 100}, nil, nil, []uint16{0, 0, 0}},
		{"destination change", []int{100, 100, 100}, []netip.AddrPort{a, a, b}, nil, []uint16{0, 1, 0}},
		{"ecn change", []int{100, 100, 100}, nil, []uint8{0, 3, 3}, []uint16{0, 0, 1}},
		{"byte limit", []int{30000, 30000, 30000}, nil, nil, []uint16{0, 1, 0}},
		{"segment limit", make([]int, 0), nil, nil, nil},
	}
	// 70 datagrams of 10 bytes: 64 + 6.
	tests[len(tests)-1].sizes = make([]int, 70)
	for i := range tests[len(tests)-1].sizes {
		tests[len(tests)-1].sizes[i] = 10
		tests[len(tests)-1].want = append(tests[len(tests)-1].want, uint16(i%64))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dgs := make([]link.Datagram, len(tc.sizes))
			for i, n := range tc.sizes {
				dgs[i] = link.Datagram{Buf: make([]byte, n), Dst: a, IPID: 999}
				if tc.dst != nil {
					dgs[i].Dst = tc.dst[i]
				}
				if tc.ecn != nil {
					dgs[i].ECN = tc.ecn[i]
				}
			}
			l.PlanIPID(dgs)
			var got []uint16
			for _, d := range dgs {
				got = append(got, d.IPID)
			}
			assert.Equal(t, tc.want, got)
		})
	}
	t.Run("ipv6 plans zero", func(t *testing.T) {
		l6 := open(t, lo6, Config{})
		dgs := mkDgs([]int{100, 100, 100}, netip.MustParseAddrPort("[::1]:4791"), 0)
		l6.PlanIPID(dgs)
		for _, d := range dgs {
			assert.Zero(t, d.IPID)
		}
	})
}

// TestRecvIPIDGuess: with GRO, Recv guesses the IPv4 ID of each segment of
// a coalesced buffer (its index there, which is what PlanIPID gave it) and
// 0 for a datagram that came alone, whether the segment landed in the
// caller's buffer or went through the arena (small segments, more segments
// than slots); IPIDKnown stays false.
func TestRecvIPIDGuess(t *testing.T) {
	for _, slots := range []int{64, 3} {
		tx := open(t, lo4, Config{})
		rx := open(t, lo4b, Config{})
		sizes := []int{4140, 4140, 4140, 4140, 900, 100, 1068, 1068, 1068, 1068, 1068, 1068, 1068}
		dgs := mkDgs(sizes, rx.LocalAddr(), 0)
		tx.PlanIPID(dgs)
		want := make([]uint16, len(dgs))
		for i, d := range dgs {
			want[i] = d.IPID
		}
		require.Equal(t, []uint16{0, 1, 2, 3, 4, 0, 0, 1, 2, 3, 4, 5, 6}, want)
		_, err := tx.Send(dgs)
		require.NoError(t, err)
		got := recvN(t, rx, len(dgs), slots, 4200, 2*time.Second)
		require.Len(t, got, len(dgs))
		for i, d := range got {
			checkPayload(t, d.Buf, i)
			assert.Equal(t, want[i], d.IPID, "slots %d datagram %d", slots, i)
			assert.False(t, d.IPIDKnown)
		}
	}
}

// TestRecvLend runs TestLoopbackBatches' traffic, with an empty datagram,
// through RecvLend in every mode: each datagram arrives whole, in order,
// with its addresses and (IPv4, GSO and GRO) its planned IPv4 ID; with GRO
// the buffers are the link's (the callers' stay untouched), without it the
// callers'.
func TestRecvLend(t *testing.T) {
	var sizes []int
	for i := 0; i < 2; i++ {
		for j := 0; j < 20; j++ {
			sizes = append(sizes, 4140)
		}
		sizes = append(sizes, 4156, 4140, 4140, 1000, 0, 1068, 1068, 1068, 60, 1, 4140, 2000)
		for j := 0; j < 70; j++ {
			sizes = append(sizes, 1068)
		}
	}
	for _, f := range families {
		for _, m := range modes {
			t.Run(f.name+"/"+m.name, func(t *testing.T) {
				tx := open(t, f.a, Config{DisableGSO: m.noGSO, DisableGRO: m.noGRO})
				rx := open(t, f.b, Config{DisableGSO: m.noGSO, DisableGRO: m.noGRO, BatchSize: 8})
				dgs := mkDgs(sizes, rx.LocalAddr(), 0)
				tx.PlanIPID(dgs)
				_, err := tx.Send(dgs)
				require.NoError(t, err)
				in := make([]link.Datagram, 16)
				own := make([][]byte, len(in))
				for i := range own {
					own[i] = make([]byte, 4200)
				}
				for got := 0; got < len(sizes); {
					for i := range in {
						in[i] = link.Datagram{Buf: own[i]}
					}
					n, err := rx.RecvLend(in[:min(len(in), 1+got%5)])
					require.NoError(t, err)
					for _, d := range in[:n] {
						require.Len(t, d.Buf, sizes[got], "datagram %d", got)
						checkPayload(t, d.Buf, got)
						require.Equal(t, tx.LocalAddr(), d.Src)
						require.Equal(t, rx.LocalAddr(), d.Dst)
						require.False(t, d.IPIDKnown)
						if !m.noGSO && !m.noGRO && !f.a.Is6() {
							require.Equal(t, dgs[got].IPID, d.IPID, "datagram %d", got)
						}
						if len(d.Buf) > 0 {
							lent := false
							for _, b := range own {
								lent = lent || &b[0] == &d.Buf[0]
							}
							require.Equal(t, m.noGRO, lent, "datagram %d in the caller's buffer", got)
							if !lent {
								require.Equal(t, len(d.Buf), cap(d.Buf), "a lent buffer ends at its datagram")
							}
						}
						got++
					}
				}
				assert.Zero(t, rx.Info().GROCopied)
				assert.Equal(t, uint64(len(sizes)), rx.Stats().RecvPackets)
				assert.Equal(t, tx.Stats().SentBytes, rx.Stats().RecvBytes)
				// Recv after RecvLend still copies into the caller's buffers.
				_, err = tx.Send(mkDgs([]int{300}, rx.LocalAddr(), 7))
				require.NoError(t, err)
				got := recvN(t, rx, 1, 4, 2048, 2*time.Second)
				checkPayload(t, got[0].Buf, 7)
			})
		}
	}
}

// TestSendUnplannedNoIPv4GSO: IPv4 datagrams whose IDs were not planned are
// never coalesced, so no packet carries an ID the ICRC did not assume.
func TestSendUnplannedNoIPv4GSO(t *testing.T) {
	tx := open(t, lo4, Config{})
	rx := open(t, lo4b, Config{})
	dgs := mkDgs([]int{1068, 1068, 1068, 1068}, rx.LocalAddr(), 0)
	_, err := tx.Send(dgs)
	require.NoError(t, err)
	assert.Zero(t, tx.Info().GSOSent)
	recvN(t, rx, len(dgs), 8, 2048, 2*time.Second)
}

// TestWildcard: a link bound to 0.0.0.0 reports each datagram's real
// destination (IP_PKTINFO) and sends from the Src the caller chose.
func TestWildcard(t *testing.T) {
	for _, f := range []struct {
		name      string
		any, src  netip.Addr
		dst       netip.Addr
		noGRO     bool
		plainName string
	}{
		{"ipv4", netip.IPv4Unspecified(), netip.MustParseAddr("127.0.0.3"), lo4b, false, ""},
		{"ipv4-nogro", netip.IPv4Unspecified(), netip.MustParseAddr("127.0.0.4"), lo4b, true, ""},
		{"ipv6", netip.IPv6Unspecified(), lo6, lo6, false, ""},
	} {
		t.Run(f.name, func(t *testing.T) {
			tx := open(t, f.any, Config{DisableGRO: f.noGRO})
			rx := open(t, f.any, Config{DisableGRO: f.noGRO})
			dst := netip.AddrPortFrom(f.dst, rx.LocalAddr().Port())
			dgs := mkDgs([]int{300, 300}, dst, 0)
			for i := range dgs {
				dgs[i].Src = netip.AddrPortFrom(f.src, 9999) // port is ignored
			}
			tx.PlanIPID(dgs)
			_, err := tx.Send(dgs)
			require.NoError(t, err)
			got := recvN(t, rx, 2, 4, 2048, 2*time.Second)
			for i, d := range got {
				checkPayload(t, d.Buf, i)
				assert.Equal(t, netip.AddrPortFrom(f.src, tx.LocalAddr().Port()), d.Src)
				assert.Equal(t, dst, d.Dst)
			}
		})
	}
}

// TestCloseUnblocksRecv: Close wakes a Recv blocked in the netpoller.
func TestCloseUnblocksRecv(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			l := open(t, lo4, Config{DisableGSO: m.noGSO, DisableGRO: m.noGRO})
			done := make(chan error, 1)
			go func() {
				_, err := l.Recv([]link.Datagram{{Buf: make([]byte, 100)}})
				done <- err
			}()
			time.Sleep(20 * time.Millisecond)
			require.NoError(t, l.Close())
			select {
			case err := <-done:
				require.ErrorIs(t, err, link.ErrClosed)
			case <-time.After(2 * time.Second):
				t.Fatal("Recv still blocked after Close")
			}
			_, err := l.Send(mkDgs([]int{10}, netip.MustParseAddrPort("127.0.0.1:9"), 0))
			require.ErrorIs(t, err, link.ErrClosed)
			_, err = l.Recv([]link.Datagram{{Buf: make([]byte, 100)}})
			require.ErrorIs(t, err, link.ErrClosed)
			require.ErrorIs(t, l.Close(), link.ErrClosed)
		})
	}
}

// TestPortInUse: the error names the address and matches EADDRINUSE.
func TestPortInUse(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			a := open(t, f.a, Config{})
			_, err := Open(Config{Addr: a.LocalAddr()})
			require.Error(t, err)
			assert.ErrorIs(t, err, syscall.EADDRINUSE)
			assert.Contains(t, err.Error(), a.LocalAddr().String())
			t.Log(err)
		})
	}
}

// TestDefaultConfig: the zero Config means 0.0.0.0:4791, batches of 64,
// 16 MiB buffers (checked without binding 4791, which other packages'
// tests may use concurrently).
func TestDefaultConfig(t *testing.T) {
	c := Config{}.withDefaults()
	assert.Equal(t, netip.MustParseAddrPort("0.0.0.0:4791"), c.Addr)
	assert.Equal(t, DefaultBatchSize, c.BatchSize)
	assert.Equal(t, DefaultSndBuf, c.SndBuf)
	assert.Equal(t, DefaultRcvBuf, c.RcvBuf)
	assert.NotNil(t, c.Logger)
	assert.Equal(t, ChecksumAuto, c.Checksum)
	kept := Config{Addr: netip.MustParseAddrPort("[::1]:0"), BatchSize: 8, SndBuf: -1}.withDefaults()
	assert.Equal(t, netip.MustParseAddrPort("[::1]:0"), kept.Addr, "port 0 stays: any free port")
	assert.Equal(t, 8, kept.BatchSize)
	assert.Equal(t, -1, kept.SndBuf)
}

// TestSendErrors: wrong family and oversized datagrams fail with errors
// naming the destination, after the datagrams before them went out.
func TestSendErrors(t *testing.T) {
	tx := open(t, lo4, Config{})
	rx := open(t, lo4b, Config{})
	dgs := mkDgs([]int{100, 100}, rx.LocalAddr(), 0)
	dgs = append(dgs, link.Datagram{Buf: make([]byte, 10), Dst: netip.MustParseAddrPort("[::1]:4791")})
	n, err := tx.Send(dgs)
	assert.Equal(t, 2, n)
	require.ErrorIs(t, err, ErrAddress)

	dgs = mkDgs([]int{100, 65508}, rx.LocalAddr(), 2)
	n, err = tx.Send(dgs)
	assert.Equal(t, 1, n)
	require.ErrorIs(t, err, syscall.EMSGSIZE)
	assert.True(t, strings.Contains(err.Error(), rx.LocalAddr().String()), err.Error())
	assert.Equal(t, uint64(2), tx.Stats().SendErrors)
	recvN(t, rx, 3, 4, 2048, 2*time.Second)
}

// TestInfo reports the buffers obtained and nothing refused on this kernel.
func TestInfo(t *testing.T) {
	for _, f := range families {
		l := open(t, f.a, Config{SndBuf: 1 << 20, RcvBuf: 2 << 20})
		in := l.Info()
		t.Logf("%s: %+v", f.name, in)
		assert.Empty(t, in.Refused)
		assert.True(t, in.GSO)
		assert.True(t, in.GRO)
		assert.GreaterOrEqual(t, in.SndBuf, 1<<20)
		if in.BufForced {
			assert.Equal(t, 4<<20, in.RcvBuf, "getsockopt reports twice the forced size")
		}
	}
	l := open(t, lo4, Config{Checksum: ChecksumZero})
	assert.False(t, l.Info().GSO, "zero checksum excludes GSO")
	_, err := Open(Config{Addr: netip.MustParseAddrPort("127.0.0.1:0"), Checksum: 7})
	require.Error(t, err)
}

// TestGrowRcvBuf: GrowRcvBuf raises the receive buffer, reports it in
// Info, and never shrinks it.
func TestGrowRcvBuf(t *testing.T) {
	l := open(t, lo4, Config{RcvBuf: 2 << 20})
	if !l.Info().BufForced {
		t.Skip("socket buffers not forced (no CAP_NET_ADMIN): the kernel caps them at rmem_max")
	}
	got, err := l.GrowRcvBuf(8 << 20)
	require.NoError(t, err)
	assert.Equal(t, 16<<20, got, "getsockopt reports twice the forced size")
	assert.Equal(t, got, l.Info().RcvBuf)
	got, err = l.GrowRcvBuf(4 << 20)
	require.NoError(t, err)
	assert.Equal(t, 16<<20, got, "a smaller size leaves the buffer")
	assert.Equal(t, 16<<20, l.Info().RcvBuf)
	require.NoError(t, l.Close())
	_, err = l.GrowRcvBuf(32 << 20)
	require.Error(t, err, "a closed link")
}

// TestNoLeaks opens and closes links (with and without traffic and blocked
// receivers) and checks fds and goroutines return to their baseline.
func TestNoLeaks(t *testing.T) {
	fds0 := countFDs()
	for i := 0; i < 20; i++ {
		a, err := Open(Config{Addr: netip.AddrPortFrom(lo4, 0)})
		require.NoError(t, err)
		b, err := Open(Config{Addr: netip.AddrPortFrom(lo6, 0), DisableGRO: i%2 == 0})
		require.NoError(t, err)
		_, err = a.Send(mkDgs([]int{100}, netip.AddrPortFrom(lo4, a.LocalAddr().Port()), 0))
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			dgs := []link.Datagram{{Buf: make([]byte, 10)}}
			for {
				if _, err := b.Recv(dgs); err != nil {
					return
				}
			}
		}()
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		<-done
	}
	assert.Equal(t, fds0, countFDs())
}

// TestGROScatterSteadyState: once Recv has seen a flow's gso_size, the
// kernel splits its coalesced buffers straight into the caller's buffers
// (no copy) for RoCE MTU 4096; the first round, read before the size was
// known, is copied.
func TestGROScatterSteadyState(t *testing.T) {
	tx := open(t, lo4, Config{})
	rx := open(t, lo4b, Config{})
	sizes := make([]int, 60)
	for i := range sizes {
		sizes[i] = 4140
	}
	const rounds = 10
	for r := 0; r < rounds; r++ {
		dgs := mkDgs(sizes, rx.LocalAddr(), r*len(sizes))
		tx.PlanIPID(dgs)
		_, err := tx.Send(dgs)
		require.NoError(t, err)
		got := recvN(t, rx, len(sizes), 64, 4200, 2*time.Second)
		for i, d := range got {
			checkPayload(t, d.Buf, r*len(sizes)+i)
		}
	}
	in := rx.Info()
	assert.Equal(t, uint64(4*rounds), in.GROReceived)
	assert.LessOrEqual(t, in.GROCopied, uint64(len(sizes)), "only the first round is copied")
	t.Logf("%d datagrams, %d copied", rounds*len(sizes), in.GROCopied)
}
