package flow_test

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/capture/flow"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/cap/impaired.pcap")

// root is the module root, for testdata.
const root = "../.."

// impairedPath is the committed capture of goroce's own traffic.
var impairedPath = filepath.Join(root, "testdata/cap/impaired.pcap")

// capEndpoint is one side of a virtual-time RC connection (a trimmed copy
// of qp/harness_test.go's endpoint): memory, CQs, a QP and the link to the
// peer. Packets get their ICRC over the IP/UDP headers they are captured
// with.
type capEndpoint struct {
	t    *testing.T
	tbl  *mr.Table
	pd   *mr.PD
	scq  *cq.CQ
	rcq  *cq.CQ
	qp   *qp.QP
	out  *testutil.Link
	self netip.AddrPort
	peer netip.AddrPort
	buf  []byte
	pkt  wire.Packet
	tap  func(now time.Time, from *capEndpoint, b []byte) // capture of sent packets
	// The transmitter sends at bw bit/s like a NIC: it takes a packet from
	// the QP only when the previous one is on the wire.
	bw     float64
	txFree time.Time
	wantTx bool
}

func newCapEndpoint(t *testing.T, qpn bth.QPN, self, peer string) *capEndpoint {
	tbl, err := mr.NewTable(mr.TableConfig{})
	require.NoError(t, err)
	scq, err := cq.New(cq.Config{Capacity: 4096})
	require.NoError(t, err)
	rcq, err := cq.New(cq.Config{Capacity: 4096})
	require.NoError(t, err)
	pd := tbl.AllocPD()
	q, err := qp.New(qp.Config{QPN: qpn, MRs: tbl, PD: pd, SendCQ: scq, RecvCQ: rcq, MaxSendWR: 256, MaxRecvWR: 256})
	require.NoError(t, err)
	return &capEndpoint{t: t, tbl: tbl, pd: pd, scq: scq, rcq: rcq, qp: q,
		self: netip.MustParseAddrPort(self), peer: netip.MustParseAddrPort(peer), buf: make([]byte, qp.MaxPacketLen(qp.MTU4096))}
}

func (e *capEndpoint) reg(buf []byte) *mr.Region {
	r, err := e.tbl.Register(e.pd, mr.RegisterConfig{Buf: buf, Access: mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic})
	require.NoError(e.t, err)
	return r
}

func capConnect(t *testing.T, a, b *capEndpoint, aPSN, bPSN bth.PSN) {
	acc := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic
	require.NoError(t, a.qp.Modify(&qp.Attr{State: qp.StateInit, AccessFlags: acc},
		qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags))
	require.NoError(t, a.qp.Modify(&qp.Attr{State: qp.StateRTR, PathMTU: qp.MTU1024, DestQPN: b.qp.QPN(), RQPSN: bPSN,
		MaxDestRdAtomic: 16, MinRNRTimer: 12, AV: qp.AddressVector{Remote: b.self.Addr()}},
		qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer))
	require.NoError(t, a.qp.Modify(&qp.Attr{State: qp.StateRTS, SQPSN: aPSN, Timeout: 8, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
		qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic))
}

func (e *capEndpoint) pump(now time.Time) {
	for {
		if e.txFree.After(now) {
			e.wantTx = true
			return
		}
		e.wantTx = false
		n, ok := e.qp.NextPacket(now, e.buf)
		if !ok {
			return
		}
		pkt := e.buf[:n]
		var ph [48]byte
		ip, udp := rocev2.PseudoHeaders(&ph, e.self, netip.AddrPortFrom(e.peer.Addr(), rocev2.UDPPort), 0, n)
		rocev2.PutICRC(pkt[n-4:], rocev2.ComputeICRC(ip, udp, pkt[:n-4]))
		if e.tap != nil {
			e.tap(now, e, pkt)
		}
		e.out.Send(now, pkt)
		if e.txFree.Before(now) {
			e.txFree = now
		}
		e.txFree = e.txFree.Add(time.Duration(float64(n*8) / e.bw * 1e9))
	}
}

// deadline is the earliest of the QP's timers and the transmitter being
// free while the QP has more to send.
func (e *capEndpoint) deadline() (time.Time, bool) {
	d, ok := e.qp.Deadline()
	if e.wantTx && (!ok || e.txFree.Before(d)) {
		return e.txFree, true
	}
	return d, ok
}

func (e *capEndpoint) deliver(now time.Time, b []byte) {
	var ph [48]byte
	ip, udp := rocev2.PseudoHeaders(&ph, e.peer, netip.AddrPortFrom(e.self.Addr(), rocev2.UDPPort), 0, len(b))
	if len(b) < bth.Size+bth.ICRCSize || rocev2.ComputeICRC(ip, udp, b[:len(b)-4]) != rocev2.ReadICRC(b[len(b)-4:]) {
		return
	}
	if e.pkt.Parse(b) != nil || e.pkt.BTH.DestQP() != e.qp.QPN() {
		return
	}
	e.qp.HandlePacket(now, &e.pkt)
	e.pump(now)
}

func (e *capEndpoint) drain() int {
	var buf [64]cq.Completion
	n := 0
	for _, c := range []*cq.CQ{e.scq, e.rcq} {
		for {
			k := c.Poll(buf[:])
			if k == 0 {
				break
			}
			for _, wc := range buf[:k] {
				require.Equal(e.t, cq.StatusSuccess, wc.Status, "WR %d %v", wc.WRID, wc.Opcode)
			}
			n += k
		}
	}
	return n
}

// makeImpairedCapture runs goroce's RC transport between two QPs over an
// impaired link in virtual time and returns a pcap of what a tcpdump on
// host A (10.0.0.1) would record: A's packets as it sends them, B's as they
// arrive. The A→B link drops a few data packets (NAK-seq and Go-Back-N),
// the B→A link drops an ACK and a READ response (retransmit timeouts, a
// READ resumed mid-message) and corrupts a few packets (ICRC failures); B
// posts its receive WQEs late (RNR NAKs). Packets from B in a window are
// CE-marked, and A answers them with CNPs, as a DCQCN notification point
// would (the QPs under test do not react to CNPs; the CNPs only go into
// the capture).
func makeImpairedCapture(t *testing.T) []byte {
	a := newCapEndpoint(t, 0x11, "10.0.0.1:49153", "10.0.0.2:49154")
	b := newCapEndpoint(t, 0x22, "10.0.0.2:49154", "10.0.0.1:49153")
	clock := testutil.NewClock()
	const bw = 1e9
	a.bw, b.bw = bw, bw
	a.out = testutil.NewLink(1, testutil.Impairment{Bandwidth: bw, Delay: 10 * time.Microsecond, DropList: []int{2, 6, 7, 40, 75}})
	b.out = testutil.NewLink(2, testutil.Impairment{Bandwidth: bw, Delay: 10 * time.Microsecond, DropList: []int{30, 33, 34},
		Corrupt: testutil.Corrupt{Rate: 0.1, Region: testutil.CorruptTail4}})
	capConnect(t, a, b, 0xfff0f0, 0x123456) // A's PSNs wrap past 2^24
	capConnect(t, b, a, 0x123456, 0xfff0f0)

	var (
		buf     bytes.Buffer
		lastCNP time.Time
		rng     = rand.New(rand.NewPCG(7, 7))
	)
	w := pcapgo.NewWriterNanos(&buf)
	require.NoError(t, w.WriteFileHeader(65536, layers.LinkTypeEthernet))
	macA, macB := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	frame := make([]byte, 0, 9000)
	var ipID [2]uint16
	write := func(now time.Time, from, to *capEndpoint, srcMAC, dstMAC [6]byte, tos uint8, transport []byte, id *uint16) {
		enc := rocev2.Encap{Ethernet: true, SrcMAC: srcMAC, DstMAC: dstMAC, Src: from.self,
			Dst: netip.AddrPortFrom(to.self.Addr(), rocev2.UDPPort), TOS: tos, ID: *id}
		*id++
		hl := enc.HeaderLen()
		frame = append(frame[:0], make([]byte, hl+len(transport))...)
		copy(frame[hl:], transport)
		icrc := rocev2.ReadICRC(transport[len(transport)-4:])
		n, err := enc.Seal(frame, len(transport))
		require.NoError(t, err)
		// Keep the ICRC the packet carried (a corrupted one stays bad): the
		// ICRC the endpoints compute has IP ID 0, the capture has real IDs.
		var orig [48]byte
		ip0, udp0 := rocev2.PseudoHeaders(&orig, from.self, netip.AddrPortFrom(to.self.Addr(), rocev2.UDPPort), 0, len(transport))
		good := rocev2.ComputeICRC(ip0, udp0, transport[:len(transport)-4]) == icrc
		if !good {
			// Corrupted on the link: spoil the resealed ICRC too, so the
			// capture's verdict is the receiver's.
			rocev2.PutICRC(frame[n-4:], rocev2.ReadICRC(frame[n-4:])^0x5a5a5a5a)
		}
		ci := gopacket.CaptureInfo{Timestamp: now, CaptureLength: n, Length: n}
		require.NoError(t, w.WritePacket(ci, frame[:n]))
	}
	a.tap = func(now time.Time, from *capEndpoint, p []byte) {
		write(now, a, b, macA, macB, 0x02, p, &ipID[0]) // ECT(0)
	}
	fromB := 0
	sim := testutil.NewSim(clock)
	for _, e := range []*capEndpoint{a, b} {
		sim.AddNode(testutil.NodeFuncs{DeadlineFunc: e.deadline, TimeoutFunc: func(now time.Time) {
			e.qp.OnTimeout(now)
			e.pump(now)
		}})
	}
	sim.AddLink(a.out, b.deliver)
	sim.AddLink(b.out, func(now time.Time, p []byte) {
		tos := uint8(0x02)
		fromB++
		if fromB >= 10 && fromB < 40 && rng.IntN(3) == 0 {
			tos = 0x03 // CE, marked by a switch on the way
		}
		write(now, b, a, macB, macA, tos, p, &ipID[1])
		if tos == 0x03 && now.Sub(lastCNP) >= 50*time.Microsecond {
			lastCNP = now
			var cnp [64]byte
			f := rocev2.CNPFields(b.qp.QPN())
			n, err := wire.Build(cnp[:], &f, nil)
			require.NoError(t, err)
			var ph [48]byte
			ip, udp := rocev2.PseudoHeaders(&ph, a.self, netip.AddrPortFrom(b.self.Addr(), rocev2.UDPPort), 0, n)
			rocev2.PutICRC(cnp[n-4:], rocev2.ComputeICRC(ip, udp, cnp[:n-4]))
			write(now, a, b, macA, macB, 0x02, cnp[:n], &ipID[0])
		}
		a.deliver(now, p)
	})

	// The workload: WRITEs, READs, SENDs (B posts its receives late, so
	// the first SENDs meet RNR NAKs) and atomics, all from A.
	remote := make([]byte, 64<<10)
	local := make([]byte, 64<<10)
	for i := range local {
		local[i] = byte(i * 7)
	}
	rm, lm := b.reg(remote), a.reg(local)
	sink := make([]byte, 16<<10)
	sm := b.reg(sink)
	var wrs []qp.SendWR
	id := uint64(0)
	add := func(wr qp.SendWR) {
		id++
		wr.WRID, wr.Flags = id, qp.SendSignaled
		wrs = append(wrs, wr)
	}
	for i := range 6 {
		off := uint64(i) * 3000
		add(qp.SendWR{Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{{Addr: lm.IOVA() + off, Length: 3000, LKey: lm.LKey()}},
			RemoteAddr: rm.IOVA() + off, RKey: rm.RKey()})
		if i%2 == 0 {
			add(qp.SendWR{Opcode: qp.WRRDMARead, SGL: []qp.SGE{{Addr: lm.IOVA() + 32<<10 + off, Length: 2500, LKey: lm.LKey()}},
				RemoteAddr: rm.IOVA() + off, RKey: rm.RKey()})
		}
		if i%3 == 1 {
			add(qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{{Addr: lm.IOVA() + off, Length: 1500, LKey: lm.LKey()}}})
		}
		add(qp.SendWR{Opcode: qp.WRAtomicFetchAdd, SGL: []qp.SGE{{Addr: lm.IOVA() + 60<<10 + uint64(i)*8, Length: 8, LKey: lm.LKey()}},
			RemoteAddr: rm.IOVA() + 63<<10, RKey: rm.RKey(), CompareAdd: 1})
	}
	for i := range wrs {
		require.NoError(t, a.qp.PostSend(&wrs[i]))
	}
	a.pump(clock.Now())
	done, posted := 0, false
	err := sim.Run(func() bool {
		if !posted && clock.Now().Sub(testutil.Epoch()) > 400*time.Microsecond {
			posted = true
			for i := range 4 {
				require.NoError(t, b.qp.PostRecv(&qp.RecvWR{WRID: uint64(1000 + i),
					SGL: []qp.SGE{{Addr: sm.IOVA() + uint64(i)*2048, Length: 2048, LKey: sm.LKey()}}}))
			}
			b.pump(clock.Now())
		}
		done += a.drain() + b.drain()
		return done == len(wrs)+2 // every send WR, and B's two receives
	}, time.Second)
	require.NoError(t, err, "a=%+v b=%+v", a.qp.Counters().Snapshot(), b.qp.Counters().Snapshot())
	return buf.Bytes()
}

// TestImpairedCapture makes a capture of goroce's own traffic under an
// impaired link and checks that the flow analysis shows what happened:
// retransmissions, Go-Back-N episodes triggered by NAK-seq and by
// timeouts, RNR NAKs with the wait that followed, READ and ATOMIC pairs,
// CE marks, CNPs and ICRC failures. With -update it rewrites
// testdata/cap/impaired.pcap, which the other packages' tests use.
func TestImpairedCapture(t *testing.T) {
	data := makeImpairedCapture(t)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(impairedPath), 0o755))
		require.NoError(t, os.WriteFile(impairedPath, data, 0o644))
	}
	committed, err := os.ReadFile(impairedPath)
	require.NoError(t, err, "run go test -run TestImpairedCapture -update ./capture/flow")
	// The committed file is checked in detail; a fresh capture only for
	// what any correct RC transport shows under these impairments, so a
	// change of goroce's retry timing does not break this test.
	for name, d := range map[string][]byte{"generated": data, "committed": committed} {
		t.Run(name, func(t *testing.T) {
			res, err := analyzeBytes(t, d, flow.Config{})
			require.NoError(t, err)
			checkImpaired(t, res, name == "committed")
		})
	}
}

func checkImpaired(t *testing.T, res *flow.Result, detail bool) {
	require.Len(t, res.Connections, 1)
	c := res.Connections[0]
	assert.Equal(t, "RC", c.Transport)
	assert.Equal(t, 1024, c.PathMTU)
	require.Len(t, c.Dirs, 2, "paired")
	assert.Equal(t, "psn", c.PairedBy)
	ab, ba := c.Dirs[0], c.Dirs[1]
	require.Equal(t, "10.0.0.1", ab.Src.String())
	r := ab.Requests
	require.NotNil(t, r)
	assert.Positive(t, r.Retransmissions, "retransmissions")
	assert.Positive(t, r.GoBackN, "Go-Back-N episodes")
	assert.Zero(t, r.GapPSNs, "A sent every PSN")
	resp := ba.Responses
	require.NotNil(t, resp)
	assert.Positive(t, resp.NAKSeq, "NAK-seq")
	require.NotEmpty(t, resp.NAKs)
	assert.Positive(t, resp.RNR, "RNR NAKs")
	require.NotEmpty(t, resp.RNRs)
	assert.Equal(t, uint8(12), resp.RNRs[0].TimerCode)
	assert.InDelta(t, 640, resp.RNRs[0].Timer, 0.01)
	assert.GreaterOrEqual(t, resp.RNRs[0].Wait, 640.0, "the requester waited the RNR timer")
	assert.Positive(t, resp.RNRs[0].RetryFrame)
	assert.Positive(t, resp.ACKs)
	assert.GreaterOrEqual(t, resp.Coalescing.Mean, 1.0)
	assert.Zero(t, resp.MSN.Decreases)
	require.NotNil(t, ab.Reads)
	assert.Equal(t, int64(3), ab.Reads.Requests)
	assert.Equal(t, int64(3), ab.Reads.Answered)
	require.NotNil(t, ab.Atomics)
	assert.Equal(t, int64(6), ab.Atomics.Answered)
	assert.Positive(t, ba.ECN.CE, "CE-marked packets")
	assert.Positive(t, ab.CNPs, "CNPs")
	assert.Positive(t, ba.ICRC.Bad, "ICRC failures")
	assert.Zero(t, ab.ICRC.Bad)
	if !detail {
		return
	}
	triggers := map[string]int{}
	for _, e := range r.Episodes {
		triggers[e.Trigger]++
	}
	assert.Equal(t, map[string]int{"nak-seq": 2, "rnr": 1, "response-gap": 1, "timeout": 2}, triggers)
	assert.Equal(t, []int{65, 77}, ba.ICRC.BadFrames)
	assert.Equal(t, int64(2), resp.NAKSeq)
	assert.Equal(t, int64(9), ba.ECN.CE)
	assert.Equal(t, int64(4), ab.CNPs)
}
