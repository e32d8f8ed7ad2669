package roce_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture/lint"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/capfmt"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// capPair is two devices with one connected QP each and a registered
// buffer on each side, for the capture tests.
type capPair struct {
	a, b     *roce.Device
	qa, qb   *roce.QP
	cqa, cqb *cq.CQ
	ma, mb   *mr.Region
	bufA     []byte
	bufB     []byte
}

// newCapPair opens devices on la and lb (each sending to the other's
// port) with the given capture configurations (nil: none).
func newCapPair(t testing.TB, la, lb link.Link, capA, capB *roce.CaptureConfig, size int) *capPair {
	t.Helper()
	p := &capPair{bufA: make([]byte, size), bufB: make([]byte, size)}
	open := func(l link.Link, peerPort uint16, c *roce.CaptureConfig, buf []byte) (*roce.Device, *roce.QP, *cq.CQ, *mr.Region) {
		d, err := roce.Open(roce.Config{Link: l, DestPort: peerPort, Capture: c})
		require.NoError(t, err)
		pd := d.AllocPD()
		c2, err := d.CreateCQ(4096)
		require.NoError(t, err)
		q, err := d.CreateQP(roce.QPConfig{PD: pd, SendCQ: c2, RecvCQ: c2})
		require.NoError(t, err)
		m, err := d.RegisterMR(pd, buf, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead|mr.RemoteAtomic)
		require.NoError(t, err)
		return d, q, c2, m
	}
	p.a, p.qa, p.cqa, p.ma = open(la, lb.LocalAddr().Port(), capA, p.bufA)
	p.b, p.qb, p.cqb, p.mb = open(lb, la.LocalAddr().Port(), capB, p.bufB)
	// ACK timeout code 16 (268 ms), not 14: the slow-writer test asserts
	// that capturing never retransmits, and on the loaded 2-core CI machine
	// a starved receive goroutine alone once let a 67 ms timer fire (128
	// packets resent with the capture idle; 0 in 5 runs on their own).
	opts := roce.ConnectOptions{MTU: qp.MTU4096, Timeout: 4 * roce.DefaultTimeout}
	require.NoError(t, p.qa.Connect(p.qb.Info(), opts))
	require.NoError(t, p.qb.Connect(p.qa.Info(), opts))
	for i := range p.bufA {
		p.bufA[i] = byte(i*7 + i>>12)
	}
	return p
}

// run moves total bytes A→B in msg-byte WRITEs (depth outstanding), then
// reads the first msg bytes back, and checks both byte for byte.
func (p *capPair) run(t testing.TB, total, msg, depth int) {
	t.Helper()
	writeLoop(t, p.qa, p.cqa, p.ma, p.mb, total, msg, depth)
	if total >= len(p.bufA) {
		require.True(t, bytes.Equal(p.bufA, readMR(t, p.mb)), "WRITE data differs")
	}
}

// writeLoop moves total bytes from region ma to region mb through QP q in
// msg-byte WRITEs, depth outstanding, cycling over ma's length, and waits
// for every completion on c (all successful). It is the transfer loop of
// the tests' device pairs (capPair, and udpPair on Linux).
func writeLoop(t testing.TB, q *roce.QP, c *cq.CQ, ma, mb *mr.Region, total, msg, depth int) {
	t.Helper()
	n := total / msg
	round := int(ma.Len()) / msg
	posted, done := 0, 0
	wcs := make([]cq.Completion, 64)
	wr := qp.SendWR{Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: make([]qp.SGE, 1), RKey: mb.RKey()}
	for done < n {
		for posted < n && posted-done < depth {
			off := (posted % round) * msg
			wr.WRID = uint64(posted)
			wr.SGL[0] = ma.SGE(off, msg)
			wr.RemoteAddr = mb.IOVA() + uint64(off)
			require.NoError(t, q.PostSend(&wr))
			posted++
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		k, err := c.Wait(ctx, wcs)
		cancel()
		require.NoError(t, err, "posted %d done %d: %v", posted, done, q.Counters().Snapshot())
		for _, wc := range wcs[:k] {
			require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
			done++
		}
	}
}

// readBack READs B's first msg bytes into the second half of A's buffer.
func (p *capPair) readBack(t testing.TB, msg int) {
	t.Helper()
	half := uint64(len(p.bufA) / 2)
	require.NoError(t, p.qa.PostSend(&qp.SendWR{WRID: 1 << 40, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
		SGL:        []qp.SGE{{Addr: p.ma.IOVA() + half, Length: uint32(msg), LKey: p.ma.LKey()}},
		RemoteAddr: p.mb.IOVA(), RKey: p.mb.RKey()}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wc [1]cq.Completion
	n, err := p.cqa.Wait(ctx, wc[:])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, cq.StatusSuccess, wc[0].Status, wc[0].Status.String())
	require.True(t, bytes.Equal(readMR(t, p.mb)[:msg], p.bufA[half:half+uint64(msg)]), "READ data differs")
}

// expectedFrames is how many packets a device's capture holds after
// Close: sent and received, less what it dropped (CaptureConfig's doc).
func expectedFrames(st *roce.Stats) uint64 {
	return st.TxPackets.Load() - st.SendErrors.Load() + st.RxPackets.Load() - st.CaptureDrops.Load()
}

// checkCapture checks a device's capture: goroce's decoder reads every
// frame as RoCEv2 with a good ICRC, want of them; capture/lint finds
// nothing when linted is set; tshark (if installed) dissects every frame as
// InfiniBand without a malformed one; rxe's icrc_check.py (if found)
// agrees on every ICRC.
func checkCapture(t *testing.T, file []byte, want uint64, linted bool) {
	t.Helper()
	rd, err := capfmt.NewReader(bytes.NewReader(file))
	require.NoError(t, err)
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var f capfmt.Frame
	var pk capfmt.Packet
	var n, good uint64
	for {
		err := rd.Next(&f)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		dec.Decode(&f, &pk)
		n++
		if pk.RoCE && pk.ICRCChecked && pk.ICRCGood {
			good++
		} else if good+10 > n {
			t.Errorf("frame %d: roce %v icrc checked %v good %v", f.Number, pk.RoCE, pk.ICRCChecked, pk.ICRCGood)
		}
	}
	require.NoError(t, rd.Close())
	assert.Equal(t, want, n, "frames in the capture")
	assert.Equal(t, n, good, "frames with a good ICRC")

	if linted {
		src, err := capfmt.NewReader(bytes.NewReader(file))
		require.NoError(t, err)
		fs, _, err := lint.Lint(src)
		require.NoError(t, err)
		for i, fd := range fs {
			if i < 10 {
				t.Errorf("lint: frame %d: %s: %s", fd.Frame, fd.Rule, fd.Message)
			}
		}
		assert.Empty(t, fs, "lint findings")
	}

	path := filepath.Join(t.TempDir(), "cap.pcapng")
	require.NoError(t, os.WriteFile(path, file, 0o644))
	checkTshark(t, path, want)
	checkRxeICRC(t, file, want)
}

// checkTshark runs tshark over the capture when it is installed.
func checkTshark(t *testing.T, path string, want uint64) {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Log("tshark check skipped: tshark is not installed (../shared/rxe/rxe deps installs it)")
		return
	}
	out, err := exec.Command("tshark", "-r", path, "-Y", "infiniband", "-T", "fields",
		"-e", "infiniband.bth.opcode", "-e", "_ws.malformed").Output()
	require.NoError(t, err, "tshark")
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(out) == 0 {
		lines = nil
	}
	assert.Equal(t, want, uint64(len(lines)), "frames tshark dissects as InfiniBand")
	bad := 0
	for _, l := range lines {
		op, mal, _ := strings.Cut(l, "\t")
		if op == "" || mal != "" {
			bad++
		}
	}
	assert.Zero(t, bad, "frames tshark finds malformed or without an opcode")
	txt, err := exec.Command("tshark", "-r", path).Output()
	require.NoError(t, err)
	assert.NotContains(t, string(txt), "Malformed")
}

// icrcCheckScript finds rxe's harness script: ../shared/rxe/lib/icrc_check.py
// from the repository, or from a directory above it (a worktree).
func icrcCheckScript(t *testing.T) (string, bool) {
	dir, err := filepath.Abs("..") // the repository: tests run in roce/
	require.NoError(t, err)
	for {
		p := filepath.Join(dir, "..", "shared", "rxe", "lib", "icrc_check.py")
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

var icrcCheckLine = regexp.MustCompile(`: (\d+) RoCEv2 packets, (\d+) ICRC ok, (\d+) bad`)

// checkRxeICRC runs rxe's icrc_check.py over the capture. The script
// reads classic pcap with Ethernet frames only (it would read a pcapng
// file as nothing and pass), so the capture is rewritten as pcap first.
func checkRxeICRC(t *testing.T, file []byte, want uint64) {
	t.Helper()
	script, ok := icrcCheckScript(t)
	if !ok {
		t.Log("icrc_check.py check skipped: ../shared/rxe/lib/icrc_check.py not found")
		return
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Log("icrc_check.py check skipped: no python3")
		return
	}
	ng, err := pcapgo.NewNgReader(bytes.NewReader(file), pcapgo.DefaultNgReaderOptions)
	require.NoError(t, err)
	var pc bytes.Buffer
	w := pcapgo.NewWriterNanos(&pc)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	for {
		data, ci, err := ng.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.NoError(t, w.WritePacket(ci, data))
	}
	path := filepath.Join(t.TempDir(), "cap.pcap")
	require.NoError(t, os.WriteFile(path, pc.Bytes(), 0o644))
	out, err := exec.Command(py, script, path).CombinedOutput()
	require.NoError(t, err, "icrc_check.py: %s", out)
	m := icrcCheckLine.FindStringSubmatch(string(out))
	require.NotNil(t, m, "icrc_check.py: %s", out)
	n, _ := strconv.ParseUint(m[1], 10, 64)
	okN, _ := strconv.ParseUint(m[2], 10, 64)
	assert.Equal(t, want, n, "icrc_check.py: %s", out)
	assert.Equal(t, want, okN, "icrc_check.py: %s", out)
}

// syncBuffer is a bytes.Buffer a capture writer and a test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func memLinks() (link.Link, link.Link) {
	n := mem.NewNetwork()
	return n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")), n.Attach(netip.MustParseAddrPort("10.0.0.2:4791"))
}

// TestCaptureMem captures both devices of a transfer over link/mem, each
// into a file of its own.
func TestCaptureMem(t *testing.T) {
	g0 := runtime.NumGoroutine()
	la, lb := memLinks()
	var wa, wb syncBuffer
	p := newCapPair(t, la, lb, &roce.CaptureConfig{W: &wa, QueueLen: 4096}, &roce.CaptureConfig{W: &wb, QueueLen: 4096}, 1<<20)
	p.run(t, 4<<20, 64<<10, 8)
	p.readBack(t, 256<<10)
	require.NoError(t, p.a.Close())
	require.NoError(t, p.b.Close())
	requireGoroutines(t, g0)
	for _, c := range []struct {
		name string
		d    *roce.Device
		w    *syncBuffer
	}{{"A", p.a, &wa}, {"B", p.b, &wb}} {
		t.Run(c.name, func(t *testing.T) {
			st := c.d.Stats()
			require.Positive(t, st.TxPackets.Load())
			require.Positive(t, st.RxPackets.Load())
			assert.Equal(t, expectedFrames(st), st.CapturePackets.Load())
			t.Logf("%s: tx %d rx %d captured %d dropped %d", c.name, st.TxPackets.Load(), st.RxPackets.Load(),
				st.CapturePackets.Load(), st.CaptureDrops.Load())
			// The linter judges a whole conversation: a capture whose
			// writer fell behind (drops counted, as designed) lacks requests
			// and shows their ACKs "ahead" (seen once in CI at load, 9 of
			// 1113 frames dropped). The frames written are checked anyway.
			complete := st.CaptureDrops.Load() == 0
			if !complete {
				t.Logf("%s: %d frames dropped by a slow writer: not linted", c.name, st.CaptureDrops.Load())
			}
			checkCapture(t, c.w.Bytes(), expectedFrames(st), complete)
		})
	}
}

// TestCaptureSharedFile captures both devices into one file, each on its
// own interface: every packet is there twice, sent by one and received by
// the other.
func TestCaptureSharedFile(t *testing.T) {
	la, lb := memLinks()
	var w syncBuffer
	f, err := roce.NewCaptureFile(&w)
	require.NoError(t, err)
	p := newCapPair(t, la, lb, &roce.CaptureConfig{File: f, Name: "a"}, &roce.CaptureConfig{File: f, Name: "b"}, 256<<10)
	p.run(t, 1<<20, 16<<10, 8)
	require.NoError(t, p.a.Close())
	require.NoError(t, p.b.Close())
	require.NoError(t, f.Flush())
	want := expectedFrames(p.a.Stats()) + expectedFrames(p.b.Stats())
	checkCapture(t, w.Bytes(), want, false)

	ng, err := pcapgo.NewNgReader(bytes.NewReader(w.Bytes()), pcapgo.DefaultNgReaderOptions)
	require.NoError(t, err)
	var per [2]uint64
	for {
		_, ci, err := ng.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		per[ci.InterfaceIndex]++
	}
	assert.Equal(t, [2]uint64{expectedFrames(p.a.Stats()), expectedFrames(p.b.Stats())}, per)
	require.Equal(t, 2, ng.NInterfaces())
	for i, name := range []string{"a", "b"} {
		in, err := ng.Interface(i)
		require.NoError(t, err)
		assert.Equal(t, name, in.Name)
		assert.Equal(t, layers.LinkTypeEthernet, in.LinkType)
	}

}

// slowWriter takes every write, but slowly.
type slowWriter struct {
	delay time.Duration
	w     syncBuffer
}

func (s *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(s.delay)
	return s.w.Write(p)
}

// TestCaptureSlowWriter: a writer far slower than the transfer makes the
// capture drop (counted), never the transfer, which completes byte-exact;
// what was written is still a valid capture.
func TestCaptureSlowWriter(t *testing.T) {
	la, lb := memLinks()
	sw := &slowWriter{delay: 20 * time.Millisecond}
	p := newCapPair(t, la, lb, &roce.CaptureConfig{W: sw, QueueLen: 16}, nil, 1<<20)
	start := time.Now()
	p.run(t, 8<<20, 64<<10, 8)
	p.readBack(t, 64<<10)
	took := time.Since(start)
	require.NoError(t, p.a.Close())
	require.NoError(t, p.b.Close())
	st := p.a.Stats()
	t.Logf("transfer %v; tx %d rx %d captured %d dropped %d", took, st.TxPackets.Load(), st.RxPackets.Load(),
		st.CapturePackets.Load(), st.CaptureDrops.Load())
	require.Positive(t, st.CaptureDrops.Load())
	assert.Equal(t, expectedFrames(st), st.CapturePackets.Load())
	assert.Zero(t, p.qa.Counters().Snapshot()[qp.CounterRetransmittedPkts], "capture must not disturb the transfer")
	checkCapture(t, sw.w.Bytes(), expectedFrames(st), false)
}

// failWriter fails every write.
type failWriter struct{}

var errDiskFull = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// TestCaptureWriteError: a failing writer stops the capture (its packets
// counted as dropped), not the transfer; Close returns the error.
func TestCaptureWriteError(t *testing.T) {
	la, lb := memLinks()
	p := newCapPair(t, la, lb, &roce.CaptureConfig{W: failWriter{}}, nil, 1<<20)
	p.run(t, 1<<20, 64<<10, 8)
	err := p.a.Close()
	require.ErrorIs(t, err, errDiskFull)
	require.NoError(t, p.b.Close())
	st := p.a.Stats()
	assert.Zero(t, st.CapturePackets.Load())
	assert.Equal(t, st.TxPackets.Load()+st.RxPackets.Load(), st.CaptureDrops.Load())
}

// TestCaptureConfigErrors: a capture needs exactly one destination.
func TestCaptureConfigErrors(t *testing.T) {
	f, err := roce.NewCaptureFile(io.Discard)
	require.NoError(t, err)
	for _, c := range []*roce.CaptureConfig{{}, {W: io.Discard, File: f}, {W: io.Discard, QueueLen: -1}} {
		la, _ := memLinks()
		_, err := roce.Open(roce.Config{Link: la, Capture: c})
		require.ErrorIs(t, err, roce.ErrInvalidArg)
		la.Close()
	}
}

// TestCaptureAllocs pins the data path at zero allocations per packet
// with the capture on: a 64 MiB WRITE (16,384 packets and their ACKs, all
// captured on both sides) allocates no more than the same WRITE between
// devices without capture.
func TestCaptureAllocs(t *testing.T) {
	measure := func(capA, capB *roce.CaptureConfig) (float64, *roce.Stats) {
		la, lb := memLinks()
		p := newCapPair(t, la, lb, capA, capB, 64<<20)
		defer p.b.Close()
		defer p.a.Close()
		p.run(t, 64<<20, 1<<20, 16) // warm up
		return testing.AllocsPerRun(3, func() { p.run(t, 64<<20, 64<<20, 1) }), p.a.Stats()
	}
	off, _ := measure(nil, nil)
	on, st := measure(&roce.CaptureConfig{W: io.Discard}, &roce.CaptureConfig{W: io.Discard})
	t.Logf("allocations per 64 MiB WRITE (16384 packets): %.0f without capture, %.0f with (%.4f per packet); A captured %d, dropped %d",
		off, on, (on-off)/16384, st.CapturePackets.Load(), st.CaptureDrops.Load())
	require.Positive(t, st.CapturePackets.Load())
	require.LessOrEqual(t, on, off+16, "the capture must not allocate per packet")
}

// TestCaptureECN: a network that CE-marks every packet to B makes B send
// CNPs from inside its receive path; B's capture has the CE bits of what
// it received, the CNPs it sent, and every ICRC right.
func TestCaptureECN(t *testing.T) {
	b := netip.MustParseAddrPort("10.0.0.2:4791")
	n := mem.New(mem.Config{Deliver: func(dg *link.Datagram) bool {
		if dg.Dst == b {
			dg.ECN = link.CE
		}
		return true
	}})
	la, lb := n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")), n.Attach(b)
	var wb syncBuffer
	p := newCapPair(t, la, lb, nil, &roce.CaptureConfig{W: &wb, QueueLen: 8192}, 1<<20)
	p.run(t, 4<<20, 64<<10, 8)
	require.NoError(t, p.a.Close())
	require.NoError(t, p.b.Close())
	st := p.b.Stats()
	require.Positive(t, st.TxCNPs.Load())
	checkCapture(t, wb.Bytes(), expectedFrames(st), false)

	ng, err := pcapgo.NewNgReader(bytes.NewReader(wb.Bytes()), pcapgo.DefaultNgReaderOptions)
	require.NoError(t, err)
	var ce, cnps uint64
	for {
		data, _, err := ng.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Greater(t, len(data), 42)
		if data[15]&3 == link.CE {
			ce++
		}
		if data[42] == 0x81 { // BTH opcode after Ethernet, IPv4, UDP
			cnps++
		}
	}
	require.Zero(t, st.CaptureDrops.Load(), "the counts below need every packet")
	assert.Equal(t, st.RxECN[link.CE].Load(), ce, "CE-marked frames")
	assert.Equal(t, st.TxCNPs.Load(), cnps, "CNP frames")
}
