//go:build rxe && linux

package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// runVerbs runs the pyverbs cells (issue 16) against testdata/verbspeer.py
// in the guest, one fresh peer per cell; -cells pyverbs- selects them:
//
//   - pyverbs-ud grh: UD SENDs both ways; each receiver's 40-byte GRH area
//     must hold, in its last 20 bytes, the IPv4 header the datagram came
//     in, byte for byte as captured on the bridge (rxe copies it; goroce
//     rebuilds it), the completion the sender's QPN, length and GRH flag;
//   - pyverbs-ud wrong-qkey: UD SENDs with a wrong Q_Key both ways complete
//     nothing at the receiver (goroce counts qp.CounterQKeyViolation),
//     while a correct one still arrives;
//   - pyverbs-uc write-imm: UC RDMA WRITE WITH IMMEDIATE both ways, data,
//     immediate, opcode and length checked by the receiver;
//   - pyverbs-cm reject: an rdma_cm listener rejects goroce's Dial with
//     private data (goroce's RejectError: reason 28 and the bytes), and a
//     goroce Listener rejects an rdma_cm connect with private data
//     (RDMA_CM_EVENT_REJECTED, status 28, the bytes);
//   - pyverbs-cm dreq: rdma_disconnect from the guest ends goroce's Conn
//     (Done, ErrDisconnected, QP in ERR, its receives flushed), and
//     goroce's Conn.Close gives the guest RDMA_CM_EVENT_DISCONNECTED.
func runVerbs(t *testing.T, mtu int) {
	cells := []struct {
		name string
		run  func(v *vsess) (string, error)
	}{
		{fmt.Sprintf("pyverbs-ud grh both ways mtu=%d", mtu), verbsUDGRH},
		{fmt.Sprintf("pyverbs-ud wrong-qkey both ways mtu=%d", mtu), verbsUDQKey},
		{fmt.Sprintf("pyverbs-uc write-imm both ways mtu=%d", mtu), verbsUCWriteImm},
		{fmt.Sprintf("pyverbs-cm reject private-data both ways mtu=%d", mtu), verbsCMReject},
		{fmt.Sprintf("pyverbs-cm dreq both ways mtu=%d", mtu), verbsCMDREQ},
	}
	for _, c := range cells {
		if !selected(c.name) {
			continue
		}
		h.timed(t, shortName(c.name), c.name, func() (string, error) {
			return h.verbsCell(c.name, mtu, c.run)
		})
	}
}

const verbsPort = 18518

// vsess is one cell's session with verbspeer.py.
type vsess struct {
	p     *peer
	dev   *roce.Device
	local netip.Addr // goroce's address
	guest netip.Addr
	mtu   qp.MTU
	seed  string
	// post are checks that need the capture, run after it stopped.
	post []func(pcap string) error
}

// next reads the second answer of a two-answer command.
func (p *peer) next(resp any) error {
	p.c.SetDeadline(time.Now().Add(3 * time.Minute))
	line, err := p.rd.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("verbspeer.py: no second answer: %w", err)
	}
	return json.Unmarshal(line, resp)
}

// vres is the common part of verbspeer.py's answers.
type vres struct {
	OK     bool     `json:"ok"`
	Errors []string `json:"errors"`
}

func (r *vres) err(what string) error {
	if !r.OK {
		return fmt.Errorf("verbspeer.py %s: %v", what, r.Errors)
	}
	return nil
}

// verbsCell runs body against a fresh verbspeer.py, inside netns roce0,
// with the bridge captured; every packet goroce sent must pass the wire
// checks, and the body's post checks then read the capture.
func (h *harness) verbsCell(name string, mtu int, body func(v *vsess) (string, error)) (string, error) {
	file := strings.NewReplacer(" ", "_", "=", "").Replace(name)
	capt, err := h.startCapture(file)
	if err != nil {
		return "", err
	}
	if err := h.guestBg("vp", filepath.Join(h.root, "interop", "testdata", "verbspeer.py"), "python3", "-", strconv.Itoa(verbsPort)); err != nil {
		capt.stop()
		return "", err
	}
	var fig string
	v := &vsess{seed: strconv.FormatInt(time.Now().UnixNano(), 36)}
	runErr := inNetns(netns, func() error {
		nc, err := perf.Dial(context.Background(), net.JoinHostPort(guestIP, strconv.Itoa(verbsPort)), 90*time.Second)
		if err != nil {
			return err
		}
		defer nc.Close()
		v.p = &peer{c: nc, rd: bufio.NewReader(nc)}
		v.local = netip.MustParseAddrPort(nc.LocalAddr().String()).Addr().Unmap()
		if v.dev, err = perf.OpenDevice(v.local, 0); err != nil {
			return err
		}
		defer v.dev.Close()
		var hello struct {
			vres
			GID string `json:"gid"`
			MTU int    `json:"mtu"`
		}
		if err := v.p.call(map[string]any{"cmd": "hello", "gid": gidString(v.local)}, &hello); err != nil {
			return err
		}
		g, err := netip.ParseAddr(hello.GID)
		if err != nil {
			return fmt.Errorf("guest GID %q: %v", hello.GID, err)
		}
		if v.guest, err = perftest.GIDAddr(g.As16(), "GID index"); err != nil {
			return err
		}
		v.mtu = qp.MTU(hello.MTU)
		if want, _ := qp.MTUFromBytes(mtu); v.mtu != want {
			return fmt.Errorf("the guest's active MTU is enum %d, the cell wants %d bytes", hello.MTU, mtu)
		}
		fig, err = body(v)
		var bye vres
		v.p.call(map[string]any{"cmd": "bye"}, &bye)
		return err
	})
	var pout string
	var perr error
	if runErr != nil {
		pout = h.guestKill("vp")
	} else {
		pout, perr = h.guestWait("vp", 30*time.Second)
	}
	capt.stop()
	writeLog(h.out, file+".log", fmt.Sprintf("--- goroce\n%s\n%v\n--- verbspeer.py\n%s\n--- tcpdump\n%s", fig, runErr, pout, capt.stderr()))
	if runErr != nil {
		return "", fmt.Errorf("%v\n--- verbspeer.py:\n%s", runErr, tail(pout, 15))
	}
	if perr != nil {
		return "", fmt.Errorf("verbspeer.py: %v\n%s", perr, tail(pout, 15))
	}
	w, err := h.checkWire(capt.path)
	if err != nil {
		return "", err
	}
	for _, f := range v.post {
		if err := f(capt.path); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%s [%d RoCE packets, %d from goroce, ICRC ok, tshark ok%s]", fig, w.roce, w.goroce, rpcNote(w)), nil
}

// waitCQ collects n completions of any status from c.
func waitCQ(c *cq.CQ, n int, d time.Duration) ([]cq.Completion, error) {
	var out []cq.Completion
	wcs := make([]cq.Completion, n)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for len(out) < n {
		k, err := c.Wait(ctx, wcs[:n-len(out)])
		if err != nil {
			return out, fmt.Errorf("%d of %d completions: %w", len(out), n, err)
		}
		out = append(out, wcs[:k]...)
	}
	return out, nil
}

// udHeaders returns, in capture order, the IPv4 headers of the UD SEND
// ONLY packets from src to destination QP qpn.
func udHeaders(pcap string, src netip.Addr, qpn bth.QPN) ([][]byte, error) {
	f, err := os.Open(pcap)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		pk := gopacket.NewPacket(data, r.LinkType(), gopacket.NoCopy)
		ip, _ := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		u, _ := pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip == nil || u == nil || u.DstPort != 4791 || len(u.Payload) < 20 {
			continue
		}
		b := u.Payload
		if a, _ := netip.AddrFromSlice(ip.SrcIP); a.Unmap() != src || b[0] != 0x64 ||
			bth.QPN(uint32(b[5])<<16|uint32(b[6])<<8|uint32(b[7])) != qpn {
			continue
		}
		out = append(out, bytes.Clone(ip.Contents))
	}
	return out, nil
}

// verbsUDGRH: UD SENDs both ways with the GRH area checked against the
// captured IP headers.
func verbsUDGRH(v *vsess) (string, error) {
	const (
		qkey  = 0x1234abcd // goroce's
		gqkey = 0x5678ef01 // the guest's
		slot  = qp.GRHLen + 4096
		ttl   = 33   // the guest's AH hop limit
		tc    = 0x20 // the guest's AH traffic class (DSCP 8)
	)
	lens := []int{1, 100, v.mtu.Bytes()}
	q, err := v.dev.CreateQP(roce.QPConfig{Type: roce.UD, MTU: v.mtu}) // a UD message fits one packet
	if err != nil {
		return "", err
	}
	if err := q.Ready(qkey); err != nil {
		return "", err
	}
	rbuf := make([]byte, len(lens)*slot)
	rm, err := v.dev.RegisterMR(nil, rbuf, mr.LocalWrite)
	if err != nil {
		return "", err
	}
	for k := range lens {
		if err := q.PostRecv(&qp.RecvWR{WRID: uint64(k), SGL: []qp.SGE{rm.SGE(k*slot, slot)}}); err != nil {
			return "", err
		}
	}
	var su struct {
		vres
		QPN uint32 `json:"qpn"`
	}
	if err := v.p.call(map[string]any{"cmd": "ud_setup", "qkey": gqkey}, &su); err != nil {
		return "", err
	}
	if err := su.err("ud_setup"); err != nil {
		return "", err
	}

	// goroce → rxe.
	sbuf := make([]byte, len(lens)*4096)
	sm, err := v.dev.RegisterMR(nil, sbuf, mr.LocalWrite)
	if err != nil {
		return "", err
	}
	var labels []map[string]any
	ah := roce.AH{Addr: v.guest, QPN: bth.QPN(su.QPN), QKey: gqkey}
	for k, n := range lens {
		l := fmt.Sprintf("UDg%d%s", k, v.seed)
		copy(sbuf[k*4096:], pattern(l, n))
		labels = append(labels, map[string]any{"label": l, "len": n})
	}
	if err := sm.WriteAt(sbuf, sm.IOVA()); err != nil {
		return "", err
	}
	for k, n := range lens {
		if err := q.PostSend(&qp.SendWR{WRID: uint64(k), Opcode: qp.WRSend, Flags: qp.SendSignaled,
			SGL: []qp.SGE{sm.SGE(k*4096, n)}, UD: ah.Dest()}); err != nil {
			return "", err
		}
	}
	sc, err := waitCQ(q.SendCQ(), len(lens), 30*time.Second)
	if err != nil {
		return "", fmt.Errorf("goroce's UD sends: %w", err)
	}
	for _, wc := range sc {
		if wc.Status != cq.StatusSuccess {
			return "", fmt.Errorf("goroce's UD send %d: %v", wc.WRID, wc.Status)
		}
	}
	var rr struct {
		vres
		Recvs []struct {
			Status  int    `json:"status"`
			ByteLen int    `json:"byte_len"`
			SrcQP   uint32 `json:"src_qp"`
			Flags   int    `json:"wc_flags"`
			GRH     string `json:"grh"`
			DataOK  bool   `json:"data_ok"`
		} `json:"recvs"`
	}
	if err := v.p.call(map[string]any{"cmd": "ud_recv", "labels": labels}, &rr); err != nil {
		return "", err
	}
	if err := rr.err("ud_recv"); err != nil {
		return "", err
	}
	var rxeGRH [][]byte
	for k, r := range rr.Recvs {
		g, _ := hex.DecodeString(r.GRH)
		const ibvWCGRH = 1
		if r.Status != 0 || r.ByteLen != qp.GRHLen+lens[k] || r.SrcQP != uint32(q.QPN()) || r.Flags&ibvWCGRH == 0 || !r.DataOK || len(g) != qp.GRHLen {
			return "", fmt.Errorf("rxe's receive %d of goroce's UD SEND: status %d, byte_len %d (want %d), src_qp %#x (want %#x), wc_flags %#x, data ok %v",
				k, r.Status, r.ByteLen, qp.GRHLen+lens[k], r.SrcQP, uint32(q.QPN()), r.Flags, r.DataOK)
		}
		rxeGRH = append(rxeGRH, g)
	}

	// rxe → goroce.
	var msgs []map[string]any
	for k, n := range lens {
		msgs = append(msgs, map[string]any{"label": fmt.Sprintf("UDr%d%s", k, v.seed), "len": n})
	}
	var us vres
	if err := v.p.call(map[string]any{"cmd": "ud_send", "qpn": uint32(q.QPN()), "qkey": qkey, "ttl": ttl, "tclass": tc, "msgs": msgs}, &us); err != nil {
		return "", err
	}
	if err := us.err("ud_send"); err != nil {
		return "", err
	}
	rc, err := waitCQ(q.RecvCQ(), len(lens), 30*time.Second)
	if err != nil {
		return "", fmt.Errorf("goroce's UD receives: %w", err)
	}
	if err := rm.ReadAt(rbuf, rm.IOVA()); err != nil {
		return "", err
	}
	var goGRH [][]byte
	for i, wc := range rc {
		k := int(wc.WRID)
		if wc.Status != cq.StatusSuccess || wc.Opcode != cq.OpRecv || k != i || int(wc.ByteLen) != qp.GRHLen+lens[k] ||
			wc.SrcQP != su.QPN || wc.Flags&cq.FlagGRH == 0 {
			return "", fmt.Errorf("goroce's receive %d: %v WR %d opcode %v len %d (want %d) src QP %#x (want %#x) flags %v",
				i, wc.Status, wc.WRID, wc.Opcode, wc.ByteLen, qp.GRHLen+lens[k], wc.SrcQP, su.QPN, wc.Flags)
		}
		b := rbuf[k*slot:]
		if !bytes.Equal(b[qp.GRHLen:qp.GRHLen+lens[k]], pattern(fmt.Sprintf("UDr%d%s", k, v.seed), lens[k])) {
			return "", fmt.Errorf("goroce's receive %d: data differ", k)
		}
		if src, ok := qp.GRHSource(b[:qp.GRHLen]); !ok || src != v.guest {
			return "", fmt.Errorf("goroce's receive %d: GRH source %v, want %v", k, src, v.guest)
		}
		goGRH = append(goGRH, bytes.Clone(b[:qp.GRHLen]))
	}
	gq, guestQ := q.QPN(), bth.QPN(su.QPN)
	v.post = append(v.post, func(pcap string) error {
		// Each GRH area is 20 zero bytes, then the IPv4 header the
		// datagram carried on the wire (rxe_resp.c copies it for IPv4).
		for _, c := range []struct {
			who  string
			grh  [][]byte
			src  netip.Addr
			dest bth.QPN
		}{{"rxe's", rxeGRH, v.local, guestQ}, {"goroce's", goGRH, v.guest, gq}} {
			wire, err := udHeaders(pcap, c.src, c.dest)
			if err != nil {
				return err
			}
			if len(wire) != len(c.grh) {
				return fmt.Errorf("the capture holds %d UD SENDs to %s QP, want %d", len(wire), c.who, len(c.grh))
			}
			for k, g := range c.grh {
				if !bytes.Equal(g[:20], make([]byte, 20)) || !bytes.Equal(g[20:], wire[k]) {
					return fmt.Errorf("%s GRH area of datagram %d:\n  %x\nwant 20 zero bytes, then the captured IPv4 header\n  %x", c.who, k, g, wire[k])
				}
			}
		}
		return nil
	})
	h4 := goGRH[0][20:]
	return fmt.Sprintf("UD SENDs of %v bytes both ways; both GRH areas = the captured IPv4 headers (goroce's: TOS %#02x TTL %d ID %#04x from %v); src QPNs ok",
		lens, h4[1], h4[8], uint16(h4[4])<<8|uint16(h4[5]), netip.AddrFrom4([4]byte(h4[12:16]))), nil
}

// verbsUDQKey: UD SENDs with a wrong Q_Key both ways complete nothing at
// the receiver; a correct one afterwards does.
func verbsUDQKey(v *vsess) (string, error) {
	const (
		qkey  = 0x0badcafe
		gqkey = 0x11111111
		slot  = qp.GRHLen + 4096
	)
	q, err := v.dev.CreateQP(roce.QPConfig{Type: roce.UD})
	if err != nil {
		return "", err
	}
	if err := q.Ready(qkey); err != nil {
		return "", err
	}
	rbuf := make([]byte, 4*slot)
	rm, err := v.dev.RegisterMR(nil, rbuf, mr.LocalWrite)
	if err != nil {
		return "", err
	}
	for k := range 4 {
		if err := q.PostRecv(&qp.RecvWR{WRID: uint64(k), SGL: []qp.SGE{rm.SGE(k*slot, slot)}}); err != nil {
			return "", err
		}
	}
	var su struct {
		vres
		QPN  uint32 `json:"qpn"`
		Viol int    `json:"qkey_viol_cntr"`
	}
	if err := v.p.call(map[string]any{"cmd": "ud_setup", "qkey": gqkey}, &su); err != nil {
		return "", err
	}
	if err := su.err("ud_setup"); err != nil {
		return "", err
	}
	// rxe → goroce with goroce's Q_Key flipped: rxe completes its sends,
	// goroce drops and counts.
	msg := func(l string, n int) []map[string]any {
		return []map[string]any{{"label": l + v.seed, "len": n}, {"label": l + "2" + v.seed, "len": n}}
	}
	var us vres
	if err := v.p.call(map[string]any{"cmd": "ud_send", "qpn": uint32(q.QPN()), "qkey": qkey ^ 0x00ff0000, "msgs": msg("QKg", 64)}, &us); err != nil {
		return "", err
	}
	if err := us.err("ud_send with a wrong Q_Key"); err != nil {
		return "", err
	}
	if _, err := waitCQ(q.RecvCQ(), 1, 2*time.Second); err == nil {
		return "", errors.New("goroce completed a receive for a datagram with a wrong Q_Key")
	}
	viol := q.Counters().Load(qp.CounterQKeyViolation)
	if viol != 2 {
		return "", fmt.Errorf("goroce counted %d %v, want 2", viol, qp.CounterQKeyViolation)
	}
	// goroce → rxe with the guest's Q_Key flipped: nothing completes there.
	sbuf := make([]byte, 64)
	copy(sbuf, pattern("QKr"+v.seed, 64))
	sm, err := v.dev.RegisterMR(nil, sbuf, mr.LocalWrite)
	if err != nil {
		return "", err
	}
	send := func(qk uint32, n int) error {
		for k := range n {
			ah := roce.AH{Addr: v.guest, QPN: bth.QPN(su.QPN), QKey: qk}
			if err := q.PostSend(&qp.SendWR{WRID: uint64(k), Opcode: qp.WRSend, Flags: qp.SendSignaled,
				SGL: []qp.SGE{sm.SGE(0, 64)}, UD: ah.Dest()}); err != nil {
				return err
			}
		}
		sc, err := waitCQ(q.SendCQ(), n, 30*time.Second)
		if err != nil {
			return err
		}
		for _, wc := range sc {
			if wc.Status != cq.StatusSuccess {
				return fmt.Errorf("goroce's UD send: %v", wc.Status)
			}
		}
		return nil
	}
	if err := send(gqkey^0x00ff0000, 2); err != nil {
		return "", err
	}
	var none struct {
		vres
		Completions int `json:"completions"`
		Viol        int `json:"qkey_viol_cntr"`
	}
	if err := v.p.call(map[string]any{"cmd": "ud_none", "secs": 2}, &none); err != nil {
		return "", err
	}
	if none.Completions != 0 {
		return "", fmt.Errorf("rxe completed %d receives of datagrams with a wrong Q_Key", none.Completions)
	}
	// rxe's check_keys counts in the port attribute (set_qkey_viol_cntr).
	if d := none.Viol - su.Viol; d != 2 {
		return "", fmt.Errorf("rxe's qkey_viol_cntr went from %d to %d, want +2", su.Viol, none.Viol)
	}
	// The controls: the right Q_Keys get through both ways.
	if err := v.p.call(map[string]any{"cmd": "ud_send", "qpn": uint32(q.QPN()), "qkey": qkey, "msgs": msg("QKok", 32)[:1]}, &us); err != nil {
		return "", err
	}
	if wc, err := waitCQ(q.RecvCQ(), 1, 10*time.Second); err != nil || wc[0].Status != cq.StatusSuccess {
		return "", fmt.Errorf("the control datagram with the right Q_Key did not arrive at goroce: %v %v", wc, err)
	}
	if err := send(gqkey, 1); err != nil {
		return "", err
	}
	var rr struct {
		vres
		Recvs []struct {
			Status int  `json:"status"`
			DataOK bool `json:"data_ok"`
		} `json:"recvs"`
	}
	if err := v.p.call(map[string]any{"cmd": "ud_recv", "labels": []map[string]any{{"label": "QKr" + v.seed, "len": 64}}, "timeout": 10}, &rr); err != nil {
		return "", err
	}
	if err := rr.err("ud_recv of the control datagram"); err != nil || rr.Recvs[0].Status != 0 || !rr.Recvs[0].DataOK {
		return "", fmt.Errorf("the control datagram with the right Q_Key did not arrive at rxe: %v %+v", err, rr.Recvs)
	}
	if n := q.Counters().Load(qp.CounterQKeyViolation); n != viol {
		return "", fmt.Errorf("%v went from %d to %d on the control", qp.CounterQKeyViolation, viol, n)
	}
	return fmt.Sprintf("wrong Q_Key: rxe→goroce 2 dropped (goroce's QP %s = %d, no completion), goroce→rxe 2 dropped (no completion at rxe, its port %s %d → %d); right Q_Key gets through both ways",
		qp.CounterQKeyViolation, viol, qp.CounterQKeyViolation, su.Viol, none.Viol), nil
}

// verbsUCWriteImm: UC RDMA WRITE WITH IMMEDIATE both ways.
func verbsUCWriteImm(v *vsess) (string, error) {
	const (
		glen, gimm = 3000, 0xa1b2c3d4 // goroce → rxe
		rlen, rimm = 5000, 0x0f1e2d3c // rxe → goroce
	)
	q, err := v.dev.CreateQP(roce.QPConfig{Type: roce.UC})
	if err != nil {
		return "", err
	}
	hbuf := make([]byte, 16<<10)
	hm, err := v.dev.RegisterMR(nil, hbuf, mr.LocalWrite|mr.RemoteWrite)
	if err != nil {
		return "", err
	}
	sbuf := make([]byte, glen)
	copy(sbuf, pattern("UCg"+v.seed, glen))
	sm, err := v.dev.RegisterMR(nil, sbuf, mr.LocalWrite)
	if err != nil {
		return "", err
	}
	inf := q.Info()
	var su struct {
		vres
		QPN  uint32 `json:"qpn"`
		PSN  uint32 `json:"psn"`
		Addr uint64 `json:"addr"`
		RKey uint32 `json:"rkey"`
	}
	if err := v.p.call(map[string]any{"cmd": "uc_setup", "qpn": uint32(inf.QPN), "psn": uint32(inf.PSN), "mtu": int(v.mtu)}, &su); err != nil {
		return "", err
	}
	if err := su.err("uc_setup"); err != nil {
		return "", err
	}
	if err := q.Connect(roce.Info{Addr: v.guest, QPN: bth.QPN(su.QPN), PSN: bth.PSN(su.PSN)},
		roce.ConnectOptions{MTU: v.mtu, Access: mr.RemoteWrite}); err != nil {
		return "", err
	}
	if err := q.PostRecv(&qp.RecvWR{WRID: 9}); err != nil { // a WRITE WITH IMM consumes a receive WQE
		return "", err
	}
	if err := q.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled,
		SGL: []qp.SGE{sm.SGE(0, glen)}, RemoteAddr: su.Addr + 512, RKey: mr.Key(su.RKey), Imm: gimm}); err != nil {
		return "", err
	}
	if sc, err := waitCQ(q.SendCQ(), 1, 30*time.Second); err != nil || sc[0].Status != cq.StatusSuccess {
		return "", fmt.Errorf("goroce's UC WRITE WITH IMM: %v %v", sc, err)
	}
	var ck struct {
		vres
		Status  int  `json:"status"`
		Opcode  int  `json:"opcode"`
		ByteLen int  `json:"byte_len"`
		Imm     any  `json:"imm"`
		DataOK  bool `json:"data_ok"`
	}
	if err := v.p.call(map[string]any{"cmd": "uc_check", "label": "UCg" + v.seed, "len": glen, "imm": gimm, "off": 512}, &ck); err != nil {
		return "", err
	}
	if !ck.OK {
		return "", fmt.Errorf("rxe's receive of goroce's UC WRITE WITH IMM: status %d opcode %d byte_len %d imm %v data ok %v %v",
			ck.Status, ck.Opcode, ck.ByteLen, ck.Imm, ck.DataOK, ck.Errors)
	}
	var wi vres
	if err := v.p.call(map[string]any{"cmd": "uc_write_imm", "rkey": uint32(hm.RKey()), "addr": hm.IOVA() + 1000,
		"label": "UCr" + v.seed, "len": rlen, "imm": rimm}, &wi); err != nil {
		return "", err
	}
	if err := wi.err("uc_write_imm"); err != nil {
		return "", err
	}
	rc, err := waitCQ(q.RecvCQ(), 1, 30*time.Second)
	if err != nil {
		return "", fmt.Errorf("goroce's receive of rxe's UC WRITE WITH IMM: %w", err)
	}
	wc := rc[0]
	if wc.Status != cq.StatusSuccess || wc.Opcode != cq.OpRecvRDMAWithImm || wc.Imm != rimm || wc.Flags&cq.FlagWithImm == 0 ||
		wc.ByteLen != rlen || wc.WRID != 9 || wc.SrcQP != 0 && wc.SrcQP != su.QPN {
		return "", fmt.Errorf("goroce's completion of rxe's UC WRITE WITH IMM: %v opcode %v imm %#x flags %v len %d WR %d",
			wc.Status, wc.Opcode, wc.Imm, wc.Flags, wc.ByteLen, wc.WRID)
	}
	hm.ReadAt(hbuf, hm.IOVA())
	if !bytes.Equal(hbuf[1000:1000+rlen], pattern("UCr"+v.seed, rlen)) {
		return "", errors.New("rxe's UC WRITE WITH IMM into goroce: data differ")
	}
	return fmt.Sprintf("UC WRITE WITH IMM %d B goroce→rxe (rxe: IBV_WC_RECV_RDMA_WITH_IMM, imm %#x, byte_len %d) and %d B rxe→goroce (imm %#x, %v)",
		glen, gimm, ck.ByteLen, rlen, wc.Imm, wc.Opcode), nil
}

// cmPD makes private data: the label, then its pattern.
func cmPD(label string, n int) []byte {
	b := append([]byte(label), pattern(label, n)...)
	return b[:n]
}

// verbsCMReject: rejects with private data both ways.
func verbsCMReject(v *vsess) (string, error) {
	const gport, lport = 7480, 7481
	// 1. The guest rejects goroce's Dial.
	gpd := cmPD("pyverbs says no ", 148) // the whole REJ private data field
	dpd := cmPD("goroce asks ", 56)      // the whole user part of a REQ's
	var ls vres
	if err := v.p.call(map[string]any{"cmd": "cm_reject", "port": gport, "pd": hex.EncodeToString(gpd)}, &ls); err != nil {
		return "", err
	}
	if err := ls.err("cm_reject"); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := v.dev.Dial(ctx, netip.AddrPortFrom(v.guest, gport), roce.DialConfig{MTU: v.mtu, PrivateData: dpd})
	var re *roce.RejectError
	if !errors.As(err, &re) {
		return "", fmt.Errorf("Dial to the rejecting rdma_cm listener: %v, want a RejectError", err)
	}
	var rj struct {
		vres
		ReqPD string `json:"req_pd"`
	}
	if err := v.p.next(&rj); err != nil {
		return "", err
	}
	if err := rj.err("cm_reject"); err != nil {
		return "", err
	}
	if re.Reason != cm.RejectConsumerDefined || !bytes.Equal(re.PrivateData, gpd) {
		return "", fmt.Errorf("goroce's RejectError: reason %v, private data %x; want ConsumerDefined (28) and %x", re.Reason, re.PrivateData, gpd)
	}
	if rj.ReqPD != hex.EncodeToString(dpd) {
		return "", fmt.Errorf("the REQ's private data at rdma_cm: %s, want %x", rj.ReqPD, dpd)
	}

	// 2. goroce's Listener rejects the guest's connect.
	lpd := cmPD("goroce says no ", 148)
	cpd := cmPD("pyverbs asks ", 56)
	var seen []byte
	l, err := v.dev.Listen(lport, roce.ListenConfig{Accept: func(r roce.ConnRequest) ([]byte, error) {
		seen = bytes.Clone(r.PrivateData)
		return nil, &roce.RejectError{Reason: cm.RejectConsumerDefined, PrivateData: lpd}
	}})
	if err != nil {
		return "", err
	}
	defer l.Close()
	var cr struct {
		vres
		Event  string `json:"event"`
		Status int    `json:"status"`
		PD     string `json:"pd"`
	}
	if err := v.p.call(map[string]any{"cmd": "cm_connect", "addr": v.local.String(), "port": lport, "pd": hex.EncodeToString(cpd)}, &cr); err != nil {
		return "", err
	}
	if err := cr.err("cm_connect"); err != nil {
		return "", err
	}
	if cr.Event != "REJECTED" || cr.Status != int(cm.RejectConsumerDefined) || cr.PD != hex.EncodeToString(lpd) {
		return "", fmt.Errorf("rdma_cm's connect to goroce's rejecting Listener: %s status %d private data %s; want REJECTED, 28, %x",
			cr.Event, cr.Status, cr.PD, lpd)
	}
	if !bytes.Equal(seen, cpd) {
		return "", fmt.Errorf("goroce's Accept function saw private data %x, want %x", seen, cpd)
	}
	return fmt.Sprintf("rdma_cm rejects Dial: %v with its %d bytes; goroce rejects rdma_connect: RDMA_CM_EVENT_REJECTED status %d with %d bytes; REQ private data delivered both ways",
		re, len(re.PrivateData), cr.Status, len(lpd)), nil
}

// verbsCMDREQ: a DREQ from either side.
func verbsCMDREQ(v *vsess) (string, error) {
	const gport, lport = 7482, 7483
	// 1. goroce dials the guest, which accepts and then disconnects.
	var ls vres
	if err := v.p.call(map[string]any{"cmd": "cm_accept", "port": gport}, &ls); err != nil {
		return "", err
	}
	if err := ls.err("cm_accept"); err != nil {
		return "", err
	}
	rb := make([]byte, 4096)
	rm, err := v.dev.RegisterMR(nil, rb, mr.LocalWrite)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := v.dev.Dial(ctx, netip.AddrPortFrom(v.guest, gport), roce.DialConfig{MTU: v.mtu, Setup: func(q *roce.QP) error {
		for i := range 2 {
			if err := q.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{rm.SGE(i*1024, 1024)}}); err != nil {
				return err
			}
		}
		return nil
	}})
	if err != nil {
		return "", fmt.Errorf("Dial to rdma_cm: %w", err)
	}
	defer c.Close()
	var est vres
	if err := v.p.next(&est); err != nil {
		return "", err
	}
	if err := est.err("cm_accept"); err != nil {
		return "", err
	}
	var dc struct {
		vres
		Secs float64 `json:"secs"`
	}
	if err := v.p.call(map[string]any{"cmd": "cm_disconnect"}, &dc); err != nil {
		return "", err
	}
	if err := dc.err("cm_disconnect (waiting for DISCONNECTED after goroce's DREP)"); err != nil {
		return "", err
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		return "", errors.New("goroce's Conn did not end after rdma_cm's DREQ")
	}
	if !errors.Is(c.Err(), roce.ErrDisconnected) {
		return "", fmt.Errorf("goroce's Conn.Err after the DREQ: %v, want ErrDisconnected", c.Err())
	}
	if s := c.QP().State(); s != qp.StateErr {
		return "", fmt.Errorf("goroce's QP after the DREQ: %v, want ERR", s)
	}
	fl, err := waitCQ(c.QP().RecvCQ(), 2, 10*time.Second)
	if err != nil {
		return "", fmt.Errorf("goroce's posted receives after the DREQ: %w", err)
	}
	for _, wc := range fl {
		if wc.Status != cq.StatusWRFlushErr {
			return "", fmt.Errorf("goroce's receive WR %d after the DREQ: %v, want WR_FLUSH_ERR", wc.WRID, wc.Status)
		}
	}
	if err := c.Close(); err != nil {
		return "", err
	}

	// 2. The guest connects to goroce's Listener; goroce's Close.
	l, err := v.dev.Listen(lport, roce.ListenConfig{})
	if err != nil {
		return "", err
	}
	defer l.Close()
	var cr struct {
		vres
		Event  string `json:"event"`
		Status int    `json:"status"`
	}
	if err := v.p.call(map[string]any{"cmd": "cm_connect", "addr": v.local.String(), "port": lport, "pd": ""}, &cr); err != nil {
		return "", err
	}
	if err := cr.err("cm_connect"); err != nil || cr.Event != "ESTABLISHED" {
		return "", fmt.Errorf("rdma_cm's connect to goroce's Listener: %s (status %d) %v", cr.Event, cr.Status, err)
	}
	lc, err := l.Accept(ctx)
	if err != nil {
		return "", fmt.Errorf("Accept: %w", err)
	}
	closed := make(chan error, 1)
	var took time.Duration
	go func() {
		time.Sleep(500 * time.Millisecond)
		t0 := time.Now()
		err := lc.Close()
		took = time.Since(t0)
		closed <- err
	}()
	var w struct {
		vres
		Event string  `json:"event"`
		Secs  float64 `json:"secs"`
	}
	if err := v.p.call(map[string]any{"cmd": "cm_wait", "event": "DISCONNECTED", "timeout": 30}, &w); err != nil {
		return "", err
	}
	if err := <-closed; err != nil {
		return "", fmt.Errorf("goroce's Conn.Close: %w", err)
	}
	if !w.OK {
		return "", fmt.Errorf("rdma_cm after goroce's Close: event %s, want DISCONNECTED %v", w.Event, w.Errors)
	}
	if !errors.Is(lc.Err(), roce.ErrClosed) {
		return "", fmt.Errorf("goroce's Conn.Err after Close: %v", lc.Err())
	}
	if took > 10*time.Second {
		return "", fmt.Errorf("goroce's Close took %v: no DREP from rdma_cm", took)
	}
	return fmt.Sprintf("rdma_disconnect → goroce Conn done (%v), QP ERR, 2 receives WR_FLUSH_ERR, rdma_cm DISCONNECTED in %.2f s; goroce Close → rdma_cm DISCONNECTED, Close returned in %v",
		c.Err(), dc.Secs, took.Round(time.Millisecond)), nil
}
