//go:build rxe && linux

package interop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// impairSpec is the impairment of goroce's link in the impaired cells, on
// what it sends and on what it receives.
const impairSpec = "loss=1%,reorder=1%"

// Sizes of the impaired cells: each way, impairLen bytes in 8 WRITEs or
// READs, or in impairCount SENDs.
const (
	impairLen   = 2 << 20
	impairCount = 128
)

// impairTimeout is goroce's local ACK timeout in the impaired cells: code
// 17, 537 ms, so its 7 retries ride out 4.3 s of silence. The guests run
// under TCG emulation on a loaded host, and rxe then falls silent for up
// to 0.7 s at a time: the first run with the default (code 14, 67 ms,
// 0.54 s for the 7 retries) failed SEND at MTU 1024 with RETRY_EXC_ERR,
// its capture showing rxe answer none of goroce's 7 Go-Back-N resends for
// 670 ms and then ACK them all in one burst (a backlog drained, not a
// protocol fault). rxe's own timeout stays perftest's 14: its timers run
// in the guest's time.
const impairTimeout = 500 * time.Millisecond

// runImpaired moves data between goroce and the pyverbs peer
// (testdata/impairpeer.py) while goroce's link (link/impair) loses and
// reorders 1% of the packets both ways: for WRITE, READ and SEND, goroce
// does the operation on the guest's memory and then the guest on
// goroce's; SHA-256 of the data compared on both sides. rxe repairs with
// its own retransmissions (timeout 14, 7 retries, as perftest's); goroce
// waits longer for rxe (impairTimeout).
func runImpaired(t *testing.T, mtu int) {
	for i, op := range []string{"write", "read", "send"} {
		name := fmt.Sprintf("impaired data goroce<->pyverbs loss=1%% reorder=1%% %s mtu=%d", op, mtu)
		if !selected(name) {
			continue
		}
		h.timed(t, "impaired_"+op, name, func() (string, error) {
			return h.impairedTest(op, mtu, uint64(mtu+i))
		})
	}
}

func (h *harness) impairedTest(op string, mtu int, seed uint64) (string, error) {
	cell := fmt.Sprintf("impaired_%s_mtu%d", op, mtu)
	capt, err := h.startCapture(cell)
	if err != nil {
		return "", err
	}
	if err := h.guestBg("ip", filepath.Join(h.root, "interop", "testdata", "impairpeer.py"), "python3", "-", strconv.Itoa(dataPort)); err != nil {
		capt.stop()
		return "", err
	}
	var s impairedResult
	runErr := inNetns(netns, func() error {
		var err error
		s, err = impairedSession(op, mtu, seed)
		return err
	})
	if runErr != nil {
		h.guestKill("ip")
	}
	pout, perr := h.guestWait("ip", 60*time.Second)
	capt.stop()
	writeLog(h.out, cell+".log", fmt.Sprintf("--- goroce\n%s\n%s\n%v\n--- impairpeer.py\n%s\n--- tcpdump\n%s", s.fig, s.report, runErr, pout, capt.stderr()))
	if runErr != nil {
		return "", fmt.Errorf("%v (capture and log: %s)\n--- impairpeer.py:\n%s", runErr, filepath.Join(h.out, cell+".{pcap,log}"), tail(pout, 15))
	}
	if perr != nil {
		return "", fmt.Errorf("impairpeer.py: %v\n%s", perr, tail(pout, 15))
	}
	w, err := h.checkWire(capt.path)
	if err != nil {
		return "", err
	}
	// What reached the wire is what the device sent, less what the link
	// dropped, plus what it duplicated.
	if want := s.tx - s.rep.Link.Tx.Dropped + s.rep.Link.Tx.Duplicated; uint64(w.goroce) != want {
		return "", fmt.Errorf("goroce's device sent %d RoCE packets, its link dropped %d and duplicated %d, but the capture holds %d (tcpdump: %s)",
			s.tx, s.rep.Link.Tx.Dropped, s.rep.Link.Tx.Duplicated, w.goroce, strings.TrimSpace(capt.stderr()))
	}
	return fmt.Sprintf("%s [%d RoCE packets, %d from goroce, ICRC ok, tshark ok]", s.fig, w.roce, w.goroce), nil
}

// impairedResult is what impairedSession did.
type impairedResult struct {
	fig    string // the cell's figure
	report string // the peer report block, for the log
	rep    perf.PeerReport
	tx     uint64 // packets the device sent
}

// impairedSession is goroce's side of an impaired cell; it runs inside
// netns roce0.
func impairedSession(op string, mtu int, seed uint64) (res impairedResult, err error) {
	label := strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx := context.Background()
	nc, err := perf.Dial(ctx, net.JoinHostPort(guestIP, strconv.Itoa(dataPort)), 90*time.Second)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	p := &peer{c: nc, rd: bufio.NewReader(nc)}
	local := netip.MustParseAddrPort(nc.LocalAddr().String()).Addr().Unmap()
	info, err := perf.ActiveMTU(local)
	if err != nil {
		return res, err
	}
	cfg, err := impair.Parse(impairSpec + ",seed=" + strconv.FormatUint(seed, 10))
	if err != nil {
		return res, err
	}
	im := &perf.Impaired{Config: cfg}
	dev, err := perf.OpenDeviceLink(local, 0, im.Opener(nil))
	if err != nil {
		return res, err
	}
	var qps []*roce.QP
	var stall time.Duration
	defer func() {
		res.rep = perf.NewPeerReport(dev, qps, im.Link, stall)
		var b bytes.Buffer
		perf.WritePeerReport(&b, res.rep)
		res.report = b.String()
		res.tx = dev.Stats().TxPackets.Load()
		dev.Close()
		if err == nil {
			r := res.rep
			res.fig += fmt.Sprintf("; link tx %d/%d dropped, %d reordered, rx %d/%d dropped, %d reordered; rxe: %d duplicate requests, %d out-of-sequence, %d NAKs to goroce; goroce %d retransmitted; longest stall %.0f ms",
				r.Link.Tx.Dropped, r.Link.Tx.Packets, r.Link.Tx.Reordered, r.Link.Rx.Dropped, r.Link.Rx.Packets, r.Link.Rx.Reordered,
				r.DuplicateRequests, r.OutOfSeqRequests, r.NAKsReceived, r.Retransmitted, r.LongestStallMs)
		}
	}()
	scq, _ := dev.CreateCQ(2 * impairCount)
	rcq, _ := dev.CreateCQ(2 * impairCount)
	pd := dev.AllocPD()
	src := make([]byte, impairLen) // goroce's side of its own operation
	smr, err := dev.RegisterMR(pd, src, mr.LocalWrite)
	if err != nil {
		return res, err
	}
	hbuf := make([]byte, impairLen) // what the guest WRITEs, READs or SENDs into
	hmr, err := dev.RegisterMR(pd, hbuf, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead)
	if err != nil {
		return res, err
	}
	switch op {
	case "write":
		copy(src, pattern("G"+label, impairLen))
	case "send":
		copy(src, pattern("GS"+label, impairLen))
	case "read":
		hmr.WriteAt(pattern("H"+label, impairLen), hmr.IOVA())
	}
	q, err := dev.CreateQP(roce.QPConfig{PD: pd, SendCQ: scq, RecvCQ: rcq, MaxSendWR: 2 * impairCount, MaxRecvWR: 2 * impairCount})
	if err != nil {
		return res, err
	}
	qps = append(qps, q)
	inf := q.Info()
	var hello struct {
		GID string `json:"gid"`
		MTU int    `json:"mtu"`
		QP  peerQP `json:"qp"`
		P   peerMR `json:"P"`
	}
	if err := p.call(map[string]any{"seed": label, "gid": gidString(local), "mtu": int(info.Active), "op": op,
		"len": impairLen, "count": impairCount, "qp": peerQP{QPN: uint32(inf.QPN), PSN: uint32(inf.PSN)},
		"mr": map[string]any{"addr": hmr.IOVA(), "rkey": uint32(hmr.RKey()), "len": hmr.Len()}}, &hello); err != nil {
		return res, err
	}
	if want, _ := qp.MTUFromBytes(mtu); qp.MTU(hello.MTU) != want {
		return res, fmt.Errorf("the guest chose MTU enum %d, the test wants %d bytes (goroce's interface allows %d)", hello.MTU, mtu, info.Active.Bytes())
	}
	gaddr, err := netip.ParseAddr(hello.GID)
	if err != nil {
		return res, fmt.Errorf("guest GID %q: %v", hello.GID, err)
	}
	addr, err := perftest.GIDAddr(gaddr.As16(), "GID index")
	if err != nil {
		return res, err
	}
	if err := q.Connect(roce.Info{Addr: addr, QPN: bth.QPN(hello.QP.QPN), PSN: bth.PSN(hello.QP.PSN)},
		roce.ConnectOptions{MTU: qp.MTU(hello.MTU), MaxRdAtomic: 16, MaxDestRdAtomic: 16, Timeout: impairTimeout}); err != nil {
		return res, err
	}

	// waitN collects n successful completions from c, keeping the longest
	// gap between them.
	wcs := make([]cq.Completion, 16)
	last := time.Now()
	waitN := func(c *cq.CQ, n int, what string) ([]cq.Completion, error) {
		var out []cq.Completion
		for len(out) < n {
			wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			k, err := c.Wait(wctx, wcs[:min(len(wcs), n-len(out))])
			cancel()
			now := time.Now()
			stall, last = max(stall, now.Sub(last)), now
			if err != nil {
				return out, fmt.Errorf("%s: %d of %d completions: %w", what, len(out), n, err)
			}
			for _, wc := range wcs[:k] {
				if wc.Status != cq.StatusSuccess {
					return out, fmt.Errorf("%s: completion %d (WR %d): %w", what, len(out), wc.WRID, wc.Err())
				}
				out = append(out, wc)
			}
		}
		return out, nil
	}

	// 1. goroce → guest.
	t0 := time.Now()
	var wrs []qp.SendWR
	switch op {
	case "write", "read":
		part := impairLen / 8
		for i := range 8 {
			wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL: []qp.SGE{smr.SGE(i*part, part)}, RemoteAddr: hello.P.Addr + uint64(i*part), RKey: mr.Key(hello.P.RKey)}
			if op == "read" {
				wr.Opcode = qp.WRRDMARead
			}
			wrs = append(wrs, wr)
		}
	case "send":
		part := impairLen / impairCount
		for i := range impairCount {
			wrs = append(wrs, qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{smr.SGE(i*part, part)}})
		}
	}
	last = time.Now()
	for i := range wrs {
		if err := q.PostSend(&wrs[i]); err != nil {
			return res, err
		}
	}
	if _, err := waitN(scq, len(wrs), "goroce's "+op); err != nil {
		return res, err
	}
	el1 := time.Since(t0).Seconds()
	if err := smr.ReadAt(src, smr.IOVA()); err != nil {
		return res, err
	}
	if op == "read" && !bytes.Equal(src, pattern("P"+label, impairLen)) {
		return res, errors.New("the READ from the guest differs from its pattern")
	}
	var ck struct {
		OK     bool     `json:"ok"`
		Errors []string `json:"errors"`
		SHA    string   `json:"sha"`
	}
	if err := p.call(map[string]any{"cmd": "check"}, &ck); err != nil {
		return res, err
	}
	if !ck.OK {
		return res, fmt.Errorf("the guest's checks of goroce's %s failed: %v", op, ck.Errors)
	}
	if ck.SHA != sha(src) {
		return res, fmt.Errorf("SHA-256 of goroce's %s: goroce %s, guest %s", op, sha(src), ck.SHA)
	}

	// 2. guest → goroce.
	if op == "send" {
		part := impairLen / impairCount
		for i := range impairCount {
			if err := q.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{hmr.SGE(i*part, part)}}); err != nil {
				return res, err
			}
		}
	}
	var run struct {
		OK      bool     `json:"ok"`
		Errors  []string `json:"errors"`
		SHA     string   `json:"sha"`
		Seconds float64  `json:"seconds"`
	}
	if err := p.call(map[string]any{"cmd": "run"}, &run); err != nil {
		return res, err
	}
	if !run.OK {
		return res, fmt.Errorf("the guest's %s into goroce failed: %v", op, run.Errors)
	}
	if op == "send" {
		last = time.Now() // the guest's run is over: the link's receive gaps cover it
		rc, err := waitN(rcq, impairCount, "goroce's receives")
		if err != nil {
			return res, err
		}
		for i, wc := range rc {
			if wc.Opcode != cq.OpRecv || int(wc.ByteLen) != impairLen/impairCount || wc.WRID != uint64(i) {
				return res, fmt.Errorf("receive %d: WR %d opcode %v len %d", i, wc.WRID, wc.Opcode, wc.ByteLen)
			}
		}
	}
	if err := hmr.ReadAt(hbuf, hmr.IOVA()); err != nil {
		return res, err
	}
	if run.SHA != sha(hbuf) {
		return res, fmt.Errorf("SHA-256 of the guest's %s: guest %s, goroce %s", op, run.SHA, sha(hbuf))
	}
	wantLabel := map[string]string{"write": "L", "send": "LS", "read": "H"}[op]
	if !bytes.Equal(hbuf, pattern(wantLabel+label, impairLen)) {
		return res, fmt.Errorf("the guest's %s: data differ from the pattern", op)
	}
	var bye struct{}
	p.call(map[string]any{"cmd": "bye"}, &bye)
	if n := dev.Stats().BadICRC.Load(); n != 0 {
		return res, fmt.Errorf("goroce counted %d bad ICRCs (none was corrupted)", n)
	}
	res.fig = fmt.Sprintf("%d MiB %s each way, SHA-256 equal on both sides (goroce→rxe %.2f s, rxe→goroce %.2f s)",
		impairLen>>20, strings.ToUpper(op), el1, run.Seconds)
	return res, nil
}
