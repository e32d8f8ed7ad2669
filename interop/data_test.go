//go:build rxe && linux

package interop

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha3"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// runData moves data between goroce (in this process, its sockets in
// netns roce0) and a pyverbs peer in the guest (testdata/datapeer.py), and
// compares it on both sides:
//
//   - goroce WRITEs 4 MiB of a seeded pattern into a guest MR and READs
//     4 MiB back from another; SHA-256 on both sides;
//   - SEND, SEND WITH IMM and WRITE WITH IMM both ways (opcodes, lengths,
//     immediates and data checked by the receiver);
//   - FETCH_ADD and CMP_SWAP on a guest word and, the other way, on a
//     goroce word: the original values returned and the final value;
//   - the guest WRITEs 1 MiB into goroce and READs 1 MiB from it;
//   - a WRITE with a wrong rkey into rxe gives goroce REM_ACCESS_ERR and its
//     QP goes to ERR; rxe WRITing to goroce with a wrong rkey gets
//     IBV_WC_REM_ACCESS_ERR from goroce's NAK;
//   - memory windows and SEND WITH INVALIDATE both ways (dataMW): WRITE and
//     READ through a type 2 window bound by a BIND_MW WR, SEND WITH
//     INVALIDATE of its rkey (IBV_WC_WITH_INV and the key at the receiver),
//     and the invalidated rkey then refused with REM_ACCESS_ERR; rxe
//     invalidating a goroce region; goroce invalidating an rxe user MR,
//     which rxe refuses (class J);
//   - an SRQ shared by three goroce RC QPs (dataSRQ): rxe SENDs to all
//     three at once; every message lands once, byte-exact, with the
//     receiving QP's number, and the armed SRQ limit raises one event.
func runData(t *testing.T, mtu int) {
	name := fmt.Sprintf("data goroce<->pyverbs mtu=%d", mtu)
	if !selected(name) {
		return
	}
	h.timed(t, "data", name, func() (string, error) {
		return h.dataTest(mtu)
	})
}

const dataPort = 18517

// pattern is the suite's seeded data: SHAKE-128 of a label, as datapeer.py.
func pattern(label string, n int) []byte { return sha3.SumSHAKE128([]byte(label), n) }

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// inNetns runs f on an OS thread that joined the network namespace name:
// the sockets f opens live there and keep working from any thread. The
// thread is never unlocked, so it dies with the goroutine instead of
// carrying the namespace to other goroutines (or to child processes).
func inNetns(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(filepath.Join("/run/netns", name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", name, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

func (h *harness) dataTest(mtu int) (string, error) {
	capt, err := h.startCapture(fmt.Sprintf("data_mtu%d", mtu))
	if err != nil {
		return "", err
	}
	if err := h.guestBg("dp", filepath.Join(h.root, "interop", "testdata", "datapeer.py"), "python3", "-", strconv.Itoa(dataPort)); err != nil {
		capt.stop()
		return "", err
	}
	var fig string
	var tx uint64
	runErr := inNetns(netns, func() error {
		var err error
		fig, tx, err = dataSession(mtu)
		return err
	})
	if runErr != nil {
		h.guestKill("dp")
	}
	pout, perr := h.guestWait("dp", 60*time.Second)
	capt.stop()
	writeLog(h.out, fmt.Sprintf("data_mtu%d.log", mtu), fmt.Sprintf("--- goroce\n%s\n%v\n--- datapeer.py\n%s\n--- tcpdump\n%s", fig, runErr, pout, capt.stderr()))
	if runErr != nil {
		return "", fmt.Errorf("%v\n--- datapeer.py:\n%s", runErr, tail(pout, 15))
	}
	if perr != nil {
		return "", fmt.Errorf("datapeer.py: %v\n%s", perr, tail(pout, 15))
	}
	w, err := h.checkWire(capt.path)
	if err != nil {
		return "", err
	}
	if uint64(w.goroce) != tx {
		return "", fmt.Errorf("goroce sent %d RoCE packets but the capture holds %d (tcpdump: %s)", tx, w.goroce, strings.TrimSpace(capt.stderr()))
	}
	return fmt.Sprintf("%s [%d RoCE packets, %d from goroce, ICRC ok, tshark ok%s, goroce cap = tshark]", fig, w.roce, w.goroce, rpcNote(w)), nil
}

// peerMR describes a guest memory region.
type peerMR struct {
	Addr  uint64 `json:"addr"`
	RKey  uint32 `json:"rkey"`
	Len   int    `json:"len"`
	Value uint64 `json:"value"`
}

type peerQP struct {
	QPN uint32 `json:"qpn"`
	PSN uint32 `json:"psn"`
}

// peer is the command channel to datapeer.py.
type peer struct {
	c  net.Conn
	rd *bufio.Reader
}

func (p *peer) call(req map[string]any, resp any) error {
	b, _ := json.Marshal(req)
	p.c.SetDeadline(time.Now().Add(3 * time.Minute))
	if _, err := p.c.Write(append(b, '\n')); err != nil {
		return err
	}
	line, err := p.rd.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("datapeer.py: no answer to %v: %w", req["cmd"], err)
	}
	return json.Unmarshal(line, resp)
}

// gidString formats a GID as pyverbs prints and parses it.
func gidString(a netip.Addr) string {
	g := perftest.GIDFromAddr(a)
	var parts []string
	for i := 0; i < 16; i += 2 {
		parts = append(parts, fmt.Sprintf("%02x%02x", g[i], g[i+1]))
	}
	return strings.Join(parts, ":")
}

// dataSession is goroce's side of TestData; it runs inside netns roce0.
func dataSession(mtu int) (fig string, tx uint64, err error) {
	const (
		mb4   = 4 << 20
		mb1   = 1 << 20
		slot  = 8192
		w0    = 0x0102030405060708
		swap  = 0xfeedfacecafe
		gSwap = 0x99
	)
	seed := strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx := context.Background()
	nc, err := perf.Dial(ctx, net.JoinHostPort(guestIP, strconv.Itoa(dataPort)), 90*time.Second)
	if err != nil {
		return "", 0, err
	}
	defer nc.Close()
	p := &peer{c: nc, rd: bufio.NewReader(nc)}
	local := netip.MustParseAddrPort(nc.LocalAddr().String()).Addr().Unmap()
	info, err := perf.ActiveMTU(local)
	if err != nil {
		return "", 0, err
	}
	dev, err := perf.OpenDevice(local, 0)
	if err != nil {
		return "", 0, err
	}
	defer dev.Close()
	pd := dev.AllocPD()
	scq, _ := dev.CreateCQ(64)
	rcq, _ := dev.CreateCQ(64)
	reg := func(n int, acc mr.AccessFlags) (*mr.Region, []byte, error) {
		b := make([]byte, n)
		r, err := dev.RegisterMR(pd, b, acc)
		return r, b, err
	}
	// Least privilege: each region grants what the guest does to it (its
	// WRITEs and READs land in hmr, its atomics in word).
	src, srcB, err := reg(mb4, mr.LocalWrite)
	if err != nil {
		return "", 0, err
	}
	copy(srcB, pattern("A"+seed, mb4))
	dst, dstB, _ := reg(mb4, mr.LocalWrite)
	sbuf, sbufB, _ := reg(3*slot, mr.LocalWrite)
	copy(sbufB[0:], pattern("S"+seed, 3000))
	copy(sbufB[slot:], pattern("SI"+seed, 100))
	copy(sbufB[2*slot:], pattern("WI"+seed, 8192))
	hmr, hB, _ := reg(2*mb1+slot, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead) // the guest's target
	copy(hB[mb1:], pattern("HB"+seed, mb1))
	rbuf, rbufB, _ := reg(3*slot, mr.LocalWrite)
	word, wordB, _ := reg(8, mr.LocalWrite|mr.RemoteAtomic)
	binary.LittleEndian.PutUint64(wordB, w0)
	res, resB, _ := reg(16, mr.LocalWrite)
	if res == nil || word == nil || rbuf == nil || hmr == nil || sbuf == nil || dst == nil {
		return "", 0, errors.New("registering the buffers failed")
	}
	// QPs 6-8 share an SRQ and a receive CQ of their own (dataSRQ).
	srq, err := dev.CreateSRQ(roce.SRQConfig{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		return "", 0, err
	}
	srqCQ, _ := dev.CreateCQ(64)
	var qps []*roce.QP
	var hq []peerQP
	for i := range 9 {
		cfg := roce.QPConfig{PD: pd, SendCQ: scq, RecvCQ: rcq}
		if i >= 6 {
			cfg.RecvCQ, cfg.SRQ = srqCQ, srq
		}
		q, err := dev.CreateQP(cfg)
		if err != nil {
			return "", 0, err
		}
		qps = append(qps, q)
		inf := q.Info()
		hq = append(hq, peerQP{QPN: uint32(inf.QPN), PSN: uint32(inf.PSN)})
	}
	var hello struct {
		GID string          `json:"gid"`
		MTU int             `json:"mtu"`
		QPs []peerQP        `json:"qps"`
		A   peerMR          `json:"A"`
		B   peerMR          `json:"B"`
		T   peerMR          `json:"T"`
		W   peerMR          `json:"W"`
		Err json.RawMessage `json:"errors"`
	}
	if err := p.call(map[string]any{"seed": seed, "gid": gidString(local), "mtu": int(info.Active), "qps": hq,
		"mr":   map[string]any{"addr": hmr.IOVA(), "rkey": uint32(hmr.RKey()), "len": hmr.Len()},
		"word": map[string]any{"addr": word.IOVA(), "rkey": uint32(word.RKey())}}, &hello); err != nil {
		return "", 0, err
	}
	if want, _ := qp.MTUFromBytes(mtu); qp.MTU(hello.MTU) != want {
		return "", 0, fmt.Errorf("the guest chose MTU enum %d, the test wants %d bytes (goroce's interface allows %d)", hello.MTU, mtu, info.Active.Bytes())
	}
	gaddr, err := netip.ParseAddr(hello.GID)
	if err != nil {
		return "", 0, fmt.Errorf("guest GID %q: %v", hello.GID, err)
	}
	addr, err := perftest.GIDAddr(gaddr.As16(), "GID index")
	if err != nil {
		return "", 0, err
	}
	// The local ACK timeout is code 16 (268 ms) rather than the default 14
	// (67 ms): the guest runs under TCG emulation, and on a loaded host it
	// was seen to answer nothing for over 0.5 s, which spends retry_cnt 7 at
	// 67 ms (data_mtu1024.pcap of a run at load 12: seven timeouts on a
	// 3000-byte SEND, no ACK between). This test checks data, not timers
	// (qp's matrix B8 and TestStallRetryBudget do), as TestRealSocketReliability
	// does with the same code.
	//
	// Each QP enables what the guest does through it: everything on QP 0
	// (the data tests), nothing on QP 1 (goroce's WRITE with a wrong rkey),
	// WRITE on QP 2 (the guest's WRITE with a wrong rkey, which must reach
	// the rkey check: NAK 0x62, not the QP's 0x61), nothing on QP 3
	// (goroce through rxe's window), WRITE and READ on QP 4 (rxe through
	// goroce's window; SEND WITH INVALIDATE needs no access), nothing on
	// QP 5 (goroce's SEND WITH INVALIDATE of an rxe MR), nothing on QPs
	// 6-8 (the guest's SENDs into the SRQ).
	access := []mr.AccessFlags{mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic, roce.NoRemoteAccess, mr.RemoteWrite,
		roce.NoRemoteAccess, mr.RemoteWrite | mr.RemoteRead, roce.NoRemoteAccess,
		roce.NoRemoteAccess, roce.NoRemoteAccess, roce.NoRemoteAccess}
	if len(access) != len(qps) {
		return "", 0, fmt.Errorf("internal: %d access entries for %d QPs", len(access), len(qps))
	}
	for i, q := range qps {
		err := q.Connect(roce.Info{Addr: addr, QPN: bth.QPN(hello.QPs[i].QPN), PSN: bth.PSN(hello.QPs[i].PSN)},
			roce.ConnectOptions{MTU: qp.MTU(hello.MTU), Access: access[i], Timeout: 4 * roce.DefaultTimeout})
		if err != nil {
			return "", 0, err
		}
	}
	wcs := make([]cq.Completion, 8)
	// waitN collects n successful completions from c.
	waitN := func(c *cq.CQ, n int, what string) ([]cq.Completion, error) {
		var out []cq.Completion
		for len(out) < n {
			wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			k, err := c.Wait(wctx, wcs)
			cancel()
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
	q0 := qps[0]
	sge := func(r *mr.Region, off, n int) []qp.SGE {
		return []qp.SGE{{Addr: r.IOVA() + uint64(off), Length: uint32(n), LKey: r.LKey()}}
	}

	// 1. goroce → guest: WRITE 4 MiB, READ 4 MiB, SEND, SEND WITH IMM, WRITE WITH IMM.
	t0 := time.Now()
	wrs := []qp.SendWR{
		{WRID: 1, Opcode: qp.WRRDMAWrite, SGL: sge(src, 0, mb4), RemoteAddr: hello.A.Addr, RKey: mr.Key(hello.A.RKey)},
		{WRID: 2, Opcode: qp.WRRDMARead, SGL: sge(dst, 0, mb4), RemoteAddr: hello.B.Addr, RKey: mr.Key(hello.B.RKey)},
		{WRID: 3, Opcode: qp.WRSend, SGL: sge(sbuf, 0, 3000)},
		{WRID: 4, Opcode: qp.WRSendWithImm, SGL: sge(sbuf, slot, 100), Imm: 0xcafebabe},
		{WRID: 5, Opcode: qp.WRRDMAWriteWithImm, SGL: sge(sbuf, 2*slot, 8192), RemoteAddr: hello.T.Addr, RKey: mr.Key(hello.T.RKey), Imm: 0x0badf00d},
	}
	for i := range wrs {
		wrs[i].Flags = qp.SendSignaled
		if err := q0.PostSend(&wrs[i]); err != nil {
			return "", 0, err
		}
	}
	got, err := waitN(scq, len(wrs), "goroce's requests")
	if err != nil {
		return "", 0, err
	}
	for i, wc := range got {
		if wc.WRID != uint64(i+1) {
			return "", 0, fmt.Errorf("completion %d is WR %d, out of order", i, wc.WRID)
		}
	}
	el := time.Since(t0).Seconds()
	if err := dst.ReadAt(dstB, dst.IOVA()); err != nil {
		return "", 0, err
	}
	if !bytes.Equal(dstB, pattern("B"+seed, mb4)) {
		return "", 0, errors.New("the 4 MiB READ from the guest differ from its pattern")
	}
	var in struct {
		OK     bool     `json:"ok"`
		Errors []string `json:"errors"`
		ShaA   string   `json:"sha_A"`
		ShaB   string   `json:"sha_B"`
	}
	recvs := []map[string]any{
		{"label": "S" + seed, "len": 3000, "imm": nil, "write": false},
		{"label": "SI" + seed, "len": 100, "imm": 0xcafebabe, "write": false},
		{"label": "WI" + seed, "len": 8192, "imm": 0x0badf00d, "write": true, "off": 0},
	}
	if err := p.call(map[string]any{"cmd": "check_in", "recvs": recvs}, &in); err != nil {
		return "", 0, err
	}
	if !in.OK {
		return "", 0, fmt.Errorf("the guest's receive checks failed: %v", in.Errors)
	}
	if in.ShaA != sha(srcB) {
		return "", 0, fmt.Errorf("SHA-256 of the 4 MiB WRITE: goroce %s, guest %s", sha(srcB), in.ShaA)
	}
	if in.ShaB != sha(dstB) {
		return "", 0, fmt.Errorf("SHA-256 of the 4 MiB READ: goroce %s, guest %s", sha(dstB), in.ShaB)
	}

	// 2. goroce's atomics on the guest's word.
	atomics := []qp.SendWR{
		{WRID: 6, Opcode: qp.WRAtomicFetchAdd, SGL: sge(res, 0, 8), RemoteAddr: hello.W.Addr, RKey: mr.Key(hello.W.RKey), CompareAdd: 5},
		{WRID: 7, Opcode: qp.WRAtomicCmpAndSwp, SGL: sge(res, 8, 8), RemoteAddr: hello.W.Addr, RKey: mr.Key(hello.W.RKey),
			CompareAdd: hello.W.Value + 5, Swap: swap},
	}
	for i := range atomics {
		atomics[i].Flags = qp.SendSignaled
		if err := q0.PostSend(&atomics[i]); err != nil {
			return "", 0, err
		}
	}
	if _, err := waitN(scq, 2, "goroce's atomics"); err != nil {
		return "", 0, err
	}
	res.ReadAt(resB, res.IOVA())
	if v := binary.LittleEndian.Uint64(resB); v != hello.W.Value {
		return "", 0, fmt.Errorf("FETCH_ADD returned %#x, the guest's word was %#x", v, hello.W.Value)
	}
	if v := binary.LittleEndian.Uint64(resB[8:]); v != hello.W.Value+5 {
		return "", 0, fmt.Errorf("CMP_SWAP returned %#x, want %#x", v, hello.W.Value+5)
	}
	var ac struct {
		OK    bool   `json:"ok"`
		Value uint64 `json:"value"`
	}
	if err := p.call(map[string]any{"cmd": "atomic_check", "want": uint64(swap)}, &ac); err != nil {
		return "", 0, err
	}
	if !ac.OK {
		return "", 0, fmt.Errorf("the guest's word is %#x after the atomics, want %#x", ac.Value, uint64(swap))
	}

	// 3. guest → goroce: WRITE, READ, SEND, SEND WITH IMM, WRITE WITH IMM, atomics.
	for i := range 3 {
		if err := q0.PostRecv(&qp.RecvWR{WRID: uint64(100 + i), SGL: sge(rbuf, i*slot, slot)}); err != nil {
			return "", 0, err
		}
	}
	var gops struct {
		OK       bool     `json:"ok"`
		Errors   []string `json:"errors"`
		ShaRead  string   `json:"sha_read"`
		FaddOrig uint64   `json:"fadd_orig"`
		CasOrig  uint64   `json:"cas_orig"`
	}
	if err := p.call(map[string]any{"cmd": "guest_ops", "len": mb1}, &gops); err != nil {
		return "", 0, err
	}
	if !gops.OK {
		return "", 0, fmt.Errorf("the guest's requests failed: %v", gops.Errors)
	}
	if gops.ShaRead != sha(pattern("HB"+seed, mb1)) {
		return "", 0, errors.New("SHA-256 of the guest's 1 MiB READ from goroce differs")
	}
	if gops.FaddOrig != w0 || gops.CasOrig != w0+7 {
		return "", 0, fmt.Errorf("the guest's atomics on goroce's word returned %#x and %#x, want %#x and %#x", gops.FaddOrig, gops.CasOrig, uint64(w0), uint64(w0+7))
	}
	rc, err := waitN(rcq, 3, "goroce's receives")
	if err != nil {
		return "", 0, err
	}
	type want struct {
		op    cq.Opcode
		n     uint32
		imm   uint32
		label string
	}
	wants := []want{{cq.OpRecv, 3000, 0, "GS"}, {cq.OpRecv, 100, 0xdeadbeef, "GSI"}, {cq.OpRecvRDMAWithImm, 8192, 0x12345678, "GWI"}}
	rbuf.ReadAt(rbufB, rbuf.IOVA())
	hmr.ReadAt(hB, hmr.IOVA())
	for i, wc := range rc {
		w := wants[i]
		hasImm := wc.Flags&cq.FlagWithImm != 0
		if wc.Opcode != w.op || wc.ByteLen != w.n || hasImm != (w.imm != 0) || (hasImm && wc.Imm != w.imm) {
			return "", 0, fmt.Errorf("receive %d: opcode %v len %d imm %#x (flags %v), want %v len %d imm %#x", i, wc.Opcode, wc.ByteLen, wc.Imm, wc.Flags, w.op, w.n, w.imm)
		}
		data := hB[2*mb1 : 2*mb1+int(w.n)]
		if w.op == cq.OpRecv {
			k := int(wc.WRID - 100)
			data = rbufB[k*slot : k*slot+int(w.n)]
		}
		if !bytes.Equal(data, pattern(w.label+seed, int(w.n))) {
			return "", 0, fmt.Errorf("receive %d (%s): data differ", i, w.label)
		}
	}
	if !bytes.Equal(hB[:mb1], pattern("GA"+seed, mb1)) {
		return "", 0, errors.New("the guest's 1 MiB WRITE into goroce differs from its pattern")
	}
	word.ReadAt(wordB, word.IOVA())
	if v := binary.LittleEndian.Uint64(wordB); v != gSwap {
		return "", 0, fmt.Errorf("goroce's word is %#x after the guest's atomics, want %#x", v, gSwap)
	}

	// 4. A WRITE with a wrong rkey into rxe: NAK remote access error,
	// REM_ACCESS_ERR, our QP in ERR.
	bad := qp.SendWR{WRID: 8, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: sge(src, 0, 64),
		RemoteAddr: hello.A.Addr, RKey: mr.Key(hello.A.RKey ^ 0x00f00000)}
	if err := qps[1].PostSend(&bad); err != nil {
		return "", 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	k, err := scq.Wait(wctx, wcs[:1])
	cancel()
	if err != nil || k != 1 {
		return "", 0, fmt.Errorf("no completion for the WRITE with a wrong rkey: %v", err)
	}
	if wcs[0].Status != cq.StatusRemAccessErr {
		return "", 0, fmt.Errorf("WRITE with a wrong rkey into rxe completed with %v, want REM_ACCESS_ERR", wcs[0].Status)
	}
	if s := qps[1].State(); s != qp.StateErr {
		return "", 0, fmt.Errorf("after REM_ACCESS_ERR goroce's QP is %v, want ERR", s)
	}
	var qs struct {
		State int `json:"state"`
	}
	if err := p.call(map[string]any{"cmd": "qp_state", "qp": 1}, &qs); err != nil {
		return "", 0, err
	}

	// 5. rxe WRITing into goroce with a wrong rkey: goroce NAKs, rxe reports
	// IBV_WC_REM_ACCESS_ERR; goroce's responder QP goes to ERR.
	var bw struct {
		OK     bool `json:"ok"`
		Status int  `json:"status"`
		State  int  `json:"state"`
	}
	if err := p.call(map[string]any{"cmd": "bad_write", "rkey": uint32(hmr.RKey()) ^ 0x00f00000}, &bw); err != nil {
		return "", 0, err
	}
	if !bw.OK {
		return "", 0, fmt.Errorf("rxe's WRITE with a wrong rkey into goroce completed with status %d, want IBV_WC_REM_ACCESS_ERR (10)", bw.Status)
	}
	if n := qps[2].Counters().Load(qp.CounterRkeyViolation); n != 1 {
		return "", 0, fmt.Errorf("goroce counted %d rkey violations on QP 2, want 1", n)
	}
	if s := qps[2].State(); s != qp.StateErr {
		return "", 0, fmt.Errorf("after the rkey violation goroce's QP 2 is %v, want ERR (as rxe)", s)
	}
	mwFig, err := dataMW(p, dev, pd, qps, scq, rcq, waitN, seed)
	if err != nil {
		return "", 0, fmt.Errorf("memory windows: %w", err)
	}
	srqFig, err := dataSRQ(p, dev, pd, qps, srq, srqCQ, seed)
	if err != nil {
		return "", 0, fmt.Errorf("SRQ: %w", err)
	}
	var bye struct{}
	p.call(map[string]any{"cmd": "bye"}, &bye)

	st := dev.Stats()
	if n := st.BadICRC.Load(); n != 0 {
		return "", 0, fmt.Errorf("goroce counted %d bad ICRCs", n)
	}
	return fmt.Sprintf("4 MiB WRITE+READ in %.2f s (%.3f Gb/s), SHA-256 equal; SEND, SEND/WRITE WITH IMM and atomics both ways ok; "+
		"wrong rkey: goroce REM_ACCESS_ERR + QP ERR (rxe QP state %d), rxe IBV_WC_REM_ACCESS_ERR (rxe QP state %d); %s; %s; ICRC ID fixups %d",
		el, float64(2*mb4*8)/el/1e9, qs.State, bw.State, mwFig, srqFig, st.ICRCIDFixups.Load()), st.TxPackets.Load(), nil
}

// dataSRQ checks an SRQ shared by goroce's QPs 6-8 (IBA 10.2.9; rxe
// get_srq_wqe) against rxe: 12 receive WQEs in the SRQ, its limit armed
// at 4; the guest SENDs WITH IMMEDIATE four messages on each of its QPs
// 6-8, posted round robin, 1 byte to 3 packets at MTU 1024. Each message
// must complete once on srqCQ, in order per QP, with the receiving QP's
// number and its bytes in a WQE no other message used, the SRQ must be
// empty, and Device.Events must hold exactly one SRQ_LIMIT_REACHED.
func dataSRQ(p *peer, dev *roce.Device, pd *mr.PD, qps []*roce.QP, srq *roce.SRQ, srqCQ *cq.CQ, seed string) (string, error) {
	const (
		slot  = 8192
		first = 6
		nQP   = 3
		per   = 4
	)
	lens := []int{1, 1000, 3000, 2049}
	buf := make([]byte, nQP*per*slot)
	reg, err := dev.RegisterMR(pd, buf, mr.LocalWrite)
	if err != nil {
		return "", err
	}
	for k := range nQP * per {
		if err := srq.PostRecv(&qp.RecvWR{WRID: uint64(200 + k), SGL: []qp.SGE{reg.SGE(k*slot, slot)}}); err != nil {
			return "", err
		}
	}
	if err := srq.Modify(4); err != nil {
		return "", err
	}
	var sent struct {
		OK     bool     `json:"ok"`
		Errors []string `json:"errors"`
		Sent   int      `json:"sent"`
	}
	if err := p.call(map[string]any{"cmd": "srq_sends", "qps": []int{6, 7, 8}, "n": per, "lens": lens}, &sent); err != nil {
		return "", err
	}
	if !sent.OK || sent.Sent != nQP*per {
		return "", fmt.Errorf("the guest's SENDs failed (%d sent): %v", sent.Sent, sent.Errors)
	}
	var got []cq.Completion
	wcs := make([]cq.Completion, 16)
	for len(got) < nQP*per {
		wctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		k, err := srqCQ.Wait(wctx, wcs)
		cancel()
		if err != nil {
			return "", fmt.Errorf("%d of %d receive completions: %w", len(got), nQP*per, err)
		}
		got = append(got, wcs[:k]...)
	}
	reg.ReadAt(buf, reg.IOVA())
	used := map[uint64]bool{}
	next := map[int]int{}
	for n, wc := range got {
		if wc.Status != cq.StatusSuccess || wc.Opcode != cq.OpRecv || wc.Flags&cq.FlagWithImm == 0 {
			return "", fmt.Errorf("receive %d (WR %d): %v, opcode %v, flags %v", n, wc.WRID, wc.Status, wc.Opcode, wc.Flags)
		}
		i, j := int(wc.Imm>>8), int(wc.Imm&0xff)
		k := int(wc.WRID) - 200
		switch {
		case i < first || i >= first+nQP || k < 0 || k >= nQP*per || used[wc.WRID]:
			return "", fmt.Errorf("receive %d: WR %d, immediate %#x: unknown or used twice", n, wc.WRID, wc.Imm)
		case wc.QPN != uint32(qps[i].QPN()):
			return "", fmt.Errorf("message %d of QP %d completed with QPN %#x, want %#x", j, i, wc.QPN, uint32(qps[i].QPN()))
		case j != next[i]:
			return "", fmt.Errorf("QP %d completed message %d, want %d: out of order", i, j, next[i])
		}
		used[wc.WRID], next[i] = true, j+1
		n := lens[(i+j)%len(lens)]
		if int(wc.ByteLen) != n || !bytes.Equal(buf[k*slot:k*slot+n], pattern(fmt.Sprintf("Q%d.%d", i, j)+seed, n)) {
			return "", fmt.Errorf("message %d of QP %d in WR %d: %d bytes, want %d, or data differ", j, i, wc.WRID, wc.ByteLen, n)
		}
	}
	if n := srq.Len(); n != 0 {
		return "", fmt.Errorf("%d WQEs left in the SRQ, want 0", n)
	}
	events := 0
	for {
		select {
		case ev := <-dev.Events():
			if ev.Type != roce.EventSRQLimitReached || ev.SRQ != srq {
				return "", fmt.Errorf("unexpected event %v", ev.Type)
			}
			events++
			continue
		case <-time.After(100 * time.Millisecond):
		}
		break
	}
	if events != 1 {
		return "", fmt.Errorf("%d SRQ limit events, want 1", events)
	}
	return fmt.Sprintf("SRQ shared by 3 QPs: %d SENDs from rxe byte-exact, 1 limit event", len(got)), nil
}

// dataMW runs the memory-window and SEND WITH INVALIDATE tests on QPs 3-5
// (IBA 9.4.1.1, 10.6.7; rxe_mw.c, rxe_resp.c invalidate_rkey):
//
//   - QP 3, goroce → rxe: rxe binds a type 2 window with a BIND_MW WR;
//     goroce WRITEs 8 KiB through it, READs them back, then SENDs WITH
//     INVALIDATE its rkey: rxe's receive has IBV_WC_WITH_INV and the key;
//     goroce's next WRITE with that rkey gets REM_ACCESS_ERR.
//   - QP 4, rxe → goroce: goroce binds a zero-based type 2 window with a
//     BIND_MW WR; rxe WRITEs and READs through it, SENDs WITH INVALIDATE
//     its rkey and that of an invalidatable goroce region (both receives
//     IBV_WC_WITH_INV with the key, the window Free, the region refused),
//     and its next WRITE through the window gets IBV_WC_REM_ACCESS_ERR.
//   - QP 5: goroce SENDs WITH INVALIDATE the rkey of an rxe user MR, which
//     rxe_invalidate_mr refuses (not IB_MR_TYPE_MEM_REG): rxe's class J —
//     its receive completes IBV_WC_REM_INV_REQ_ERR, goroce's SEND is ACKed.
func dataMW(p *peer, dev *roce.Device, pd *mr.PD, qps []*roce.QP, scq, rcq *cq.CQ,
	waitN func(*cq.CQ, int, string) ([]cq.Completion, error), seed string) (string, error) {
	const wlen = 8192
	q3, q4, q5 := qps[3], qps[4], qps[5]
	reg := func(n int, acc mr.AccessFlags, inv bool) (*mr.Region, []byte, error) {
		b := make([]byte, n)
		r, err := dev.RegisterMRConfig(pd, mr.RegisterConfig{Buf: b, Access: acc, Invalidatable: inv})
		return r, b, err
	}
	buf, bufB, err := reg(4*wlen, mr.LocalWrite, false)
	if err != nil {
		return "", err
	}
	sge := func(off, n int) []qp.SGE {
		return []qp.SGE{{Addr: buf.IOVA() + uint64(off), Length: uint32(n), LKey: buf.LKey()}}
	}

	// QP 3: goroce through rxe's window.
	var mb struct {
		OK     bool     `json:"ok"`
		Errors []string `json:"errors"`
		Addr   uint64   `json:"addr"`
		RKey   uint32   `json:"rkey"`
		TRKey  uint32   `json:"t_rkey"`
		Opcode int      `json:"opcode"`
	}
	if err := p.call(map[string]any{"cmd": "mw_bind"}, &mb); err != nil {
		return "", err
	}
	if !mb.OK {
		return "", fmt.Errorf("rxe's BIND_MW: opcode %d, errors %v", mb.Opcode, mb.Errors)
	}
	copy(bufB, pattern("MW"+seed, wlen))
	copy(bufB[2*wlen:], pattern("MI"+seed, 100))
	if err := buf.WriteAt(bufB, buf.IOVA()); err != nil {
		return "", err
	}
	wkey := mr.Key(mb.RKey)
	wrs := []qp.SendWR{
		{WRID: 31, Opcode: qp.WRRDMAWrite, SGL: sge(0, wlen), RemoteAddr: mb.Addr, RKey: wkey},
		{WRID: 32, Opcode: qp.WRRDMARead, SGL: sge(wlen, wlen), RemoteAddr: mb.Addr, RKey: wkey},
		{WRID: 33, Opcode: qp.WRSendWithInv, SGL: sge(2*wlen, 100), InvalidateRKey: wkey},
	}
	for i := range wrs {
		wrs[i].Flags = qp.SendSignaled
		if err := q3.PostSend(&wrs[i]); err != nil {
			return "", err
		}
	}
	if _, err := waitN(scq, len(wrs), "WRITE, READ and SEND WITH INVALIDATE through rxe's window"); err != nil {
		return "", err
	}
	buf.ReadAt(bufB, buf.IOVA())
	if !bytes.Equal(bufB[wlen:2*wlen], pattern("MW"+seed, wlen)) {
		return "", errors.New("the READ through rxe's window differs from the WRITE")
	}
	var mc struct {
		OK     bool     `json:"ok"`
		Errors []string `json:"errors"`
		Flags  int      `json:"flags"`
	}
	if err := p.call(map[string]any{"cmd": "mw_check"}, &mc); err != nil {
		return "", err
	}
	if !mc.OK {
		return "", fmt.Errorf("rxe's side of goroce's SEND WITH INVALIDATE: %v", mc.Errors)
	}
	late := qp.SendWR{WRID: 34, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, SGL: sge(0, 64), RemoteAddr: mb.Addr, RKey: wkey}
	if err := q3.PostSend(&late); err != nil {
		return "", err
	}
	if wc, err := waitAny(scq); err != nil || wc.Status != cq.StatusRemAccessErr {
		return "", fmt.Errorf("WRITE with rxe's invalidated window rkey: %v %v, want REM_ACCESS_ERR", wc.Status, err)
	}

	// QP 4: rxe through goroce's window, and invalidating goroce's keys.
	tgt, tgtB, err := reg(4*wlen, mr.LocalWrite|mr.MWBind, false)
	if err != nil {
		return "", err
	}
	fr, _, err := reg(4096, mr.LocalWrite|mr.RemoteWrite, true)
	if err != nil {
		return "", err
	}
	win, err := dev.AllocMW(pd, mr.WindowType2)
	if err != nil {
		return "", err
	}
	gkey := roce.IncRKey(win.RKey())
	bind := qp.SendWR{WRID: 41, Opcode: qp.WRBindMW, Flags: qp.SendSignaled, BindMW: qp.BindMW{Window: win,
		BindConfig: mr.BindConfig{Region: tgt, Addr: tgt.IOVA() + wlen, Length: wlen,
			Access: mr.RemoteWrite | mr.RemoteRead, ZeroBased: true, RKey: gkey}}}
	if err := q4.PostSend(&bind); err != nil {
		return "", err
	}
	if wc, err := waitN(scq, 1, "goroce's BIND_MW"); err != nil || wc[0].Opcode != cq.OpBindMW {
		return "", fmt.Errorf("goroce's BIND_MW: %v %v", wc, err)
	}
	for i := range 2 {
		if err := q4.PostRecv(&qp.RecvWR{WRID: uint64(42 + i), SGL: sge(3*wlen+i*1024, 1024)}); err != nil {
			return "", err
		}
	}
	var g struct {
		OK         bool     `json:"ok"`
		Errors     []string `json:"errors"`
		ReadOK     bool     `json:"read_ok"`
		LateStatus int      `json:"late_status"`
	}
	if err := p.call(map[string]any{"cmd": "mw_guest_ops", "rkey": uint32(gkey), "len": wlen, "fr_rkey": uint32(fr.RKey())}, &g); err != nil {
		return "", err
	}
	if !g.OK {
		return "", fmt.Errorf("rxe through goroce's window: read ok %v, late WRITE status %d (want IBV_WC_REM_ACCESS_ERR 10), errors %v",
			g.ReadOK, g.LateStatus, g.Errors)
	}
	rc, err := waitN(rcq, 2, "goroce's receives of rxe's SENDs WITH INVALIDATE")
	if err != nil {
		return "", err
	}
	buf.ReadAt(bufB, buf.IOVA())
	tgt.ReadAt(tgtB, tgt.IOVA())
	for i, w := range []struct {
		key   mr.Key
		label string
		n     int
	}{{gkey, "GMI", 100}, {fr.RKey(), "GFI", 50}} {
		wc := rc[i]
		if wc.Flags&cq.FlagWithInv == 0 || mr.Key(wc.InvalidatedRKey) != w.key || wc.ByteLen != uint32(w.n) {
			return "", fmt.Errorf("receive %d: flags %v key %#x len %d, want IBV_WC_WITH_INV key %v len %d", i, wc.Flags, wc.InvalidatedRKey, wc.ByteLen, w.key, w.n)
		}
		off := 3*wlen + int(wc.WRID-42)*1024
		if !bytes.Equal(bufB[off:off+w.n], pattern(w.label+seed, w.n)) {
			return "", fmt.Errorf("receive %d: data differ", i)
		}
	}
	if !bytes.Equal(tgtB[wlen:2*wlen], pattern("GMW"+seed, wlen)) {
		return "", errors.New("rxe's WRITE through goroce's window differs")
	}
	if s := win.State(); s != mr.WindowFree {
		return "", fmt.Errorf("goroce's window is %v after rxe's SEND WITH INVALIDATE, want Free", s)
	}
	// Pin refuses an invalidated region as every lookup of its key does.
	if _, err := fr.Pin(fr.IOVA(), 8); !errors.Is(err, mr.ErrInvalidated) {
		if err == nil {
			fr.Release()
		}
		return "", fmt.Errorf("goroce's region after rxe invalidated it: %v, want ErrInvalidated", err)
	}

	// QP 5: an rxe user MR cannot be invalidated: class J at rxe.
	copy(bufB, pattern("TI"+seed, 16))
	buf.WriteAt(bufB[:16], buf.IOVA())
	inv := qp.SendWR{WRID: 51, Opcode: qp.WRSendWithInv, Flags: qp.SendSignaled, SGL: sge(0, 16), InvalidateRKey: mr.Key(mb.TRKey)}
	if err := q5.PostSend(&inv); err != nil {
		return "", err
	}
	wc5, err := waitAny(scq)
	if err != nil {
		return "", err
	}
	var rs struct {
		Status int `json:"status"`
		State  int `json:"state"`
	}
	if err := p.call(map[string]any{"cmd": "recv_status", "qp": 5}, &rs); err != nil {
		return "", err
	}
	const ibvWCRemInvReqErr, ibvQPSErr = 9, 6
	if wc5.Status != cq.StatusSuccess || rs.Status != ibvWCRemInvReqErr || rs.State != ibvQPSErr {
		return "", fmt.Errorf("SEND WITH INVALIDATE of an rxe user MR: goroce %v, rxe receive status %d, rxe QP state %d; want success, 9 (REM_INV_REQ_ERR), 6 (ERR) as rxe's class J",
			wc5.Status, rs.Status, rs.State)
	}
	// rxe reports the with-invalidate flag as the kernel's
	// IB_WC_WITH_INVALIDATE (1<<2), not IBV_WC_WITH_INV (1<<3): a quirk of
	// its user CQEs, shown in the figure.
	return fmt.Sprintf("MW type 2 + SEND WITH INVALIDATE both ways ok (rkey refused after invalidation both ways; "+
		"rxe receive wc_flags %#x; rxe user MR invalidation: class J)", mc.Flags), nil
}

// waitAny waits for one completion of any status.
func waitAny(c *cq.CQ) (cq.Completion, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wc [1]cq.Completion
	if _, err := c.Wait(ctx, wc[:]); err != nil {
		return cq.Completion{}, err
	}
	return wc[0], nil
}
