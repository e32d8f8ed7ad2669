//go:build rxe

package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// runCMExamples runs librdmacm's example programs against the roce API
// called from the test (issue 16): udaddy, which resolves a UD service in
// the UDP port space (SIDR) and exchanges 10 SEND-with-immediate datagrams
// each way, with goroce as server (Device.ListenUD) and as client
// (Device.DialUD, after a DialUD to a port nobody listens on, which the
// guest's CM refuses with SIDR status 1); and rdma_server / rdma_client,
// one 16-byte inline SEND each way over an RC connection, then the
// disconnect, with goroce as server (Listen) and as client (Dial). Each
// cell is captured on the bridge and passes the suite's wire checks.
// -cells 'udaddy|rdma_server|rdma_client' selects them.
func runCMExamples(t *testing.T, mtu int) {
	cells := []struct {
		name string
		run  func(name string, mtu int) (string, error)
	}{
		{fmt.Sprintf("rdma_cm udaddy goroce-server mtu=%d", mtu), h.udaddyGoroceServer},
		{fmt.Sprintf("rdma_cm udaddy goroce-client mtu=%d", mtu), h.udaddyGoroceClient},
		{fmt.Sprintf("rdma_cm rdma_client goroce-server mtu=%d", mtu), h.rdmaClientGoroceServer},
		{fmt.Sprintf("rdma_cm rdma_server goroce-client mtu=%d", mtu), h.rdmaServerGoroceClient},
	}
	for _, c := range cells {
		if !selected(c.name) {
			continue
		}
		h.timed(t, shortName(c.name), c.name, func() (string, error) {
			return c.run(c.name, mtu)
		})
	}
}

// udaddy's defaults: port 7174, 10 messages of 100 bytes each way.
const (
	udaddyPort  = 7174
	udaddyCount = 10
	udaddySize  = 100
	udaddySlot  = qp.GRHLen + udaddySize
)

// rdma_server's and rdma_client's port and message size.
const (
	rdmaExPort = 7471
	rdmaExSize = 16
)

// cmDevice is what a cell's goroce side reports for the wire checks.
type cmDevice struct {
	fig string
	tx  uint64 // RoCE packets the device sent
}

// wireCell runs body (goroce in process, in netns roce0) under a capture
// of the bridge, then applies checkWire: tshark decodes every goroce
// packet, every ICRC passes icrc_check.py, goroce cap prints what tshark
// prints, and the capture holds every packet the device sent.
func (h *harness) wireCell(name string, body func() (cmDevice, string, error)) (string, error) {
	file := strings.NewReplacer(" ", "_", "/", "_", "=", "").Replace(name)
	capt, err := h.startCapture(file)
	if err != nil {
		return "", err
	}
	d, guest, runErr := body()
	if err := capt.stop(); err != nil && runErr == nil {
		runErr = err
	}
	writeLog(h.out, file+".log", fmt.Sprintf("--- goroce\n%s\n%v\n--- guest\n%s\n--- tcpdump\n%s", d.fig, runErr, guest, capt.stderr()))
	if runErr != nil {
		return "", fmt.Errorf("%v\n--- guest:\n%s", runErr, tail(guest, 10))
	}
	w, err := h.checkWire(capt.path)
	if err != nil {
		return "", err
	}
	if int(d.tx) != w.goroce {
		return "", fmt.Errorf("goroce sent %d RoCE packets but the capture holds %d (tcpdump: %s)", d.tx, w.goroce,
			strings.TrimSpace(capt.stderr()))
	}
	return fmt.Sprintf("%s [%d RoCE packets, %d from goroce, ICRC ok, tshark ok%s, goroce cap = tshark]",
		d.fig, w.roce, w.goroce, rpcNote(w)), nil
}

// deviceDone closes dev and returns its transmit count, or an error if it
// counted a bad ICRC.
func deviceDone(dev *roce.Device, d *cmDevice) error {
	dev.Close()
	st := dev.Stats()
	d.tx = st.TxPackets.Load()
	if n := st.BadICRC.Load(); n != 0 {
		return fmt.Errorf("goroce counted %d bad ICRCs", n)
	}
	return nil
}

// closeCounted is deviceDone for a defer: a bad ICRC becomes *err unless
// the cell failed already.
func closeCounted(dev *roce.Device, d *cmDevice, err *error) {
	if e := deviceDone(dev, d); e != nil && *err == nil {
		*err = e
	}
}

// guestOK checks a guest tool's output for the lines that say it ran
// through.
func guestOK(tool, out string, err error, want ...string) error {
	if err != nil {
		return fmt.Errorf("%s: %v", tool, err)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			return fmt.Errorf("%s did not print %q", tool, w)
		}
	}
	return nil
}

// udaddyPayload is what goroce sends udaddy: text, so that no tshark
// payload heuristic takes it for a header.
var udaddyPayload = bytes.Repeat([]byte("goroce udaddy 0123456789 "), 4)

// udRecvs posts udaddyCount receive slots (GRH area + message).
func udRecvs(m interface{ SGE(int, int) qp.SGE }) func(*roce.QP) error {
	return func(q *roce.QP) error {
		for i := 0; i < udaddyCount; i++ {
			if err := q.PostRecv(&roce.RecvWR{WRID: uint64(i), SGL: []roce.SGE{m.SGE(i*udaddySlot, udaddySlot)}}); err != nil {
				return err
			}
		}
		return nil
	}
}

// udReceive waits for udaddyCount datagrams as udaddy sends them: 100
// bytes, SEND with immediate, the immediate data the sender's QPN (checked
// against the completion's source QP and, when known, want), from the
// guest's address in the GRH area. It returns the sender's QPN.
func udReceive(ctx context.Context, q *roce.QP, buf []byte, want bth.QPN) (bth.QPN, error) {
	wc := make([]roce.Completion, 1)
	var src bth.QPN
	for i := 0; i < udaddyCount; i++ {
		if _, err := q.RecvCQ().Wait(ctx, wc); err != nil {
			return 0, fmt.Errorf("receive %d: %w", i, err)
		}
		c := wc[0]
		if err := c.Err(); err != nil {
			return 0, fmt.Errorf("receive %d: %w", i, err)
		}
		if c.ByteLen != udaddySlot || c.Imm != c.SrcQP || (want != 0 && bth.QPN(c.SrcQP) != want) {
			return 0, fmt.Errorf("receive %d: %d bytes, immediate %#x, source QP %#x (want %d bytes, immediate = source QP %v)",
				i, c.ByteLen, c.Imm, c.SrcQP, udaddySlot, want)
		}
		slot := buf[int(c.WRID)*udaddySlot:][:udaddySlot]
		if g, ok := qp.GRHSource(slot[:qp.GRHLen]); !ok || g != netip.MustParseAddr(guestIP) {
			return 0, fmt.Errorf("receive %d: GRH source %v, want %s", i, g, guestIP)
		}
		src = bth.QPN(c.SrcQP)
	}
	return src, nil
}

// udSend sends udaddyCount datagrams to ah as udaddy does (SEND with
// immediate, the immediate data our QPN) and waits for their completions.
func udSend(ctx context.Context, q *roce.QP, m interface{ SGE(int, int) qp.SGE }, off int, ah roce.AH) error {
	for i := 0; i < udaddyCount; i++ {
		if err := q.PostSend(&roce.SendWR{WRID: uint64(100 + i), Opcode: roce.WRSendWithImm, Flags: roce.SendSignaled,
			Imm: uint32(q.QPN()), SGL: []roce.SGE{m.SGE(off, udaddySize)}, UD: ah.Dest()}); err != nil {
			return err
		}
	}
	wc := make([]roce.Completion, 1)
	for i := 0; i < udaddyCount; i++ {
		if _, err := q.SendCQ().Wait(ctx, wc); err != nil {
			return err
		}
		if err := wc[0].Err(); err != nil {
			return err
		}
	}
	return nil
}

// udaddyBuf returns the receive slots followed by the message goroce sends.
func udaddyBuf() ([]byte, int) {
	buf := make([]byte, udaddyCount*udaddySlot+udaddySize)
	copy(buf[udaddyCount*udaddySlot:], udaddyPayload)
	return buf, udaddyCount * udaddySlot
}

// udaddyGoroceServer: goroce listens in the UDP port space, the guest's
// udaddy -s resolves it, sends first, and goroce answers to the QPN its
// datagrams named.
func (h *harness) udaddyGoroceServer(name string, mtu int) (string, error) {
	return h.goroceServerCell(name, "udc", "udaddy", []string{"-s", hostIP}, []string{"data transfers complete", "return status 0"},
		func(dev *roce.Device, start func() error) (string, error) {
			buf, off := udaddyBuf()
			m, err := dev.RegisterMR(nil, buf, roce.LocalWrite)
			if err != nil {
				return "", err
			}
			l, err := dev.ListenUD(udaddyPort, roce.UDListenConfig{QPConfig: roce.QPConfig{MTU: cmMTU(mtu)}, Setup: udRecvs(m)})
			if err != nil {
				return "", err
			}
			defer l.Close()
			if err := start(); err != nil {
				return "", err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, err := l.Accept(ctx)
			if err != nil {
				return "", fmt.Errorf("accept: %w", err)
			}
			defer c.Close()
			src, err := udReceive(ctx, c.QP(), buf, 0)
			if err != nil {
				return "", err
			}
			ah := c.AH()
			ah.QPN = src
			if err := udSend(ctx, c.QP(), m, off, ah); err != nil {
				return "", fmt.Errorf("sends: %w", err)
			}
			return fmt.Sprintf("SIDR from %v answered with QPN %v, Q_Key %#x; %d datagrams of %d bytes each way, immediate = sender QPN %v",
				c.RemoteAddr(), c.QP().QPN(), ah.QKey, udaddyCount, udaddySize, src), nil
		})
}

// udaddyGoroceClient: the guest's udaddy listens; goroce resolves a port
// nobody listens on (the guest's CM answers SIDR status 1), then udaddy's,
// sends first and takes udaddy's replies.
func (h *harness) udaddyGoroceClient(name string, mtu int) (string, error) {
	return h.goroceClientCell(name, "uds", "udaddy", []string{"data transfers complete", "return status 0"},
		func(dev *roce.Device) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, err := dev.DialUD(ctx, netip.AddrPortFrom(netip.MustParseAddr(guestIP), udaddyPort+1), roce.UDDialConfig{})
			var se *roce.SIDRError
			if !errors.As(err, &se) || se.Status != cm.SIDRUnsupported {
				return "", fmt.Errorf("DialUD to an unused port: %v, want SIDR status 1 (unsupported)", err)
			}
			buf, off := udaddyBuf()
			m, err := dev.RegisterMR(nil, buf, roce.LocalWrite)
			if err != nil {
				return "", err
			}
			c, err := dev.DialUD(ctx, netip.AddrPortFrom(netip.MustParseAddr(guestIP), udaddyPort),
				roce.UDDialConfig{QPConfig: roce.QPConfig{MTU: cmMTU(mtu)}, Setup: udRecvs(m)})
			if err != nil {
				return "", fmt.Errorf("DialUD: %w", err)
			}
			defer c.Close()
			if c.AH().QKey != cm.UDPQKey {
				return "", fmt.Errorf("SIDR_REP Q_Key %#x", c.AH().QKey)
			}
			if err := udSend(ctx, c.QP(), m, off, c.AH()); err != nil {
				return "", fmt.Errorf("sends: %w", err)
			}
			if _, err := udReceive(ctx, c.QP(), buf, c.AH().QPN); err != nil {
				return "", err
			}
			return fmt.Sprintf("unused port: %v; SIDR_REP QPN %v, Q_Key %#x; %d datagrams of %d bytes each way, immediate = sender QPN",
				se.Status, c.AH().QPN, c.AH().QKey, udaddyCount, udaddySize), nil
		})
}

// rdmaExPayload is goroce's 16-byte message; rdma_server and rdma_client
// send their static, zeroed send_msg.
var rdmaExPayload = []byte("goroce->rdma_cm!")

// rdmaExRecv returns the Setup that posts the one 16-byte receive, at the
// start of rdmaExBuf's memory.
func rdmaExRecv(m interface{ SGE(int, int) qp.SGE }) func(*roce.QP) error {
	return func(q *roce.QP) error {
		return q.PostRecv(&roce.RecvWR{WRID: 1, SGL: []roce.SGE{m.SGE(0, rdmaExSize)}})
	}
}

// rdmaExWait waits for one completion on cq and checks it.
func rdmaExWait(ctx context.Context, cq interface {
	Wait(context.Context, []roce.Completion) (int, error)
}, what string) (roce.Completion, error) {
	wc := make([]roce.Completion, 1)
	if _, err := cq.Wait(ctx, wc); err != nil {
		return wc[0], fmt.Errorf("%s: %w", what, err)
	}
	if err := wc[0].Err(); err != nil {
		return wc[0], fmt.Errorf("%s: %w", what, err)
	}
	return wc[0], nil
}

// rdmaExBuf returns the receive buffer followed by goroce's message.
func rdmaExBuf() []byte { return append(make([]byte, rdmaExSize), rdmaExPayload...) }

// rdmaExExchange sends goroce's message inline, as the examples send
// theirs, and waits for the peer's, in the order given, and checks the
// peer's is 16 zero bytes.
func rdmaExExchange(ctx context.Context, c *roce.Conn, buf []byte, m interface{ SGE(int, int) qp.SGE }, sendFirst bool) error {
	send := func() error {
		if err := c.QP().PostSend(&roce.SendWR{WRID: 2, Opcode: roce.WRSend, Flags: roce.SendSignaled | roce.SendInline,
			SGL: []roce.SGE{m.SGE(rdmaExSize, rdmaExSize)}}); err != nil {
			return err
		}
		_, err := rdmaExWait(ctx, c.QP().SendCQ(), "send")
		return err
	}
	recv := func() error {
		wc, err := rdmaExWait(ctx, c.QP().RecvCQ(), "receive")
		if err != nil {
			return err
		}
		if wc.ByteLen != rdmaExSize || !bytes.Equal(buf[:rdmaExSize], make([]byte, rdmaExSize)) {
			return fmt.Errorf("received %d bytes %x, want rdma_cm's 16 zero bytes", wc.ByteLen, buf[:rdmaExSize])
		}
		return nil
	}
	steps := []func() error{recv, send}
	if sendFirst {
		steps = []func() error{send, recv}
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

// rdmaClientGoroceServer: goroce listens on 7471, the guest's rdma_client
// connects, sends first, takes goroce's reply and disconnects.
func (h *harness) rdmaClientGoroceServer(name string, mtu int) (string, error) {
	return h.goroceServerCell(name, "rcli", "rdma_client", []string{"-s", hostIP}, []string{"rdma_client: end 0"},
		func(dev *roce.Device, start func() error) (string, error) {
			buf := rdmaExBuf()
			m, err := dev.RegisterMR(nil, buf, roce.LocalWrite)
			if err != nil {
				return "", err
			}
			l, err := dev.Listen(rdmaExPort, roce.ListenConfig{Setup: rdmaExRecv(m)})
			if err != nil {
				return "", err
			}
			defer l.Close()
			if err := start(); err != nil {
				return "", err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, err := l.Accept(ctx)
			if err != nil {
				return "", fmt.Errorf("accept: %w", err)
			}
			defer c.Close()
			if err := rdmaExExchange(ctx, c, buf, m, false); err != nil {
				return "", err
			}
			select { // rdma_client disconnects once it has our message
			case <-c.Done():
			case <-ctx.Done():
				return "", errors.New("no DREQ from rdma_client")
			}
			return fmt.Sprintf("QPN %v from %v: 16 bytes each way (rdma_client's zeros in, ours inline out), DREQ from rdma_client: %v",
				c.QP().QPN(), c.RemoteAddr(), c.Err()), nil
		})
}

// rdmaServerGoroceClient: the guest's rdma_server listens on 7471; goroce
// dials, sends first, takes rdma_server's reply, and rdma_server
// disconnects.
func (h *harness) rdmaServerGoroceClient(name string, mtu int) (string, error) {
	return h.goroceClientCell(name, "rsrv", "rdma_server", []string{"rdma_server: end 0"},
		func(dev *roce.Device) (string, error) {
			buf := rdmaExBuf()
			m, err := dev.RegisterMR(nil, buf, roce.LocalWrite)
			if err != nil {
				return "", err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, err := dev.Dial(ctx, netip.AddrPortFrom(netip.MustParseAddr(guestIP), rdmaExPort),
				roce.DialConfig{MTU: cmMTU(mtu), Setup: rdmaExRecv(m)})
			if err != nil {
				return "", fmt.Errorf("dial: %w", err)
			}
			defer c.Close()
			if err := rdmaExExchange(ctx, c, buf, m, true); err != nil {
				return "", err
			}
			select { // rdma_server disconnects once its send completes
			case <-c.Done():
			case <-ctx.Done():
				return "", errors.New("no DREQ from rdma_server")
			}
			return fmt.Sprintf("QPN %v: 16 bytes each way (ours inline out, rdma_server's zeros in), DREQ from rdma_server: %v",
				c.QP().QPN(), c.Err()), nil
		})
}

// goroceServerCell runs a cell whose goroce side listens and whose guest
// tool connects: body runs in netns roce0 on a device of its own under
// wireCell's checks, and calls start (which starts the tool, job name job)
// once it listens; then the tool must end printing want. body returns the
// cell's figure.
func (h *harness) goroceServerCell(name, job, tool string, args, want []string,
	body func(dev *roce.Device, start func() error) (string, error)) (string, error) {
	return h.wireCell(name, func() (cmDevice, string, error) {
		var d cmDevice
		var out string
		var werr error
		started := false
		start := func() error {
			err := h.guestBg(job, "", append([]string{"timeout", "90", tool}, args...)...)
			started = err == nil
			return err
		}
		runErr := inNetns(netns, func() (err error) {
			dev, err := cmOpen()
			if err != nil {
				return err
			}
			defer closeCounted(dev, &d, &err)
			if d.fig, err = body(dev, start); err != nil {
				return err
			}
			out, werr = h.guestWait(job, 60*time.Second)
			return nil
		})
		if runErr != nil && started {
			h.guestKill(job)
			out, _ = h.guestWait(job, 30*time.Second)
		}
		if runErr == nil {
			runErr = guestOK(tool, out, werr, want...)
		}
		return d, out, runErr
	})
}

// goroceClientCell runs a cell whose guest tool listens and whose goroce
// side connects: the tool (job name job) starts first, then body runs in
// netns roce0 on a device of its own under wireCell's checks, and the tool
// must end printing want. body returns the cell's figure.
func (h *harness) goroceClientCell(name, job, tool string, want []string, body func(dev *roce.Device) (string, error)) (string, error) {
	if err := h.guestBg(job, "", "timeout", "90", tool); err != nil {
		return "", err
	}
	time.Sleep(3 * time.Second) // rdma_listen under TCG
	return h.wireCell(name, func() (cmDevice, string, error) {
		var d cmDevice
		runErr := inNetns(netns, func() (err error) {
			dev, err := cmOpen()
			if err != nil {
				return err
			}
			defer closeCounted(dev, &d, &err)
			d.fig, err = body(dev)
			return err
		})
		if runErr != nil {
			h.guestKill(job)
		}
		out, werr := h.guestWait(job, 60*time.Second)
		if runErr == nil {
			runErr = guestOK(tool, out, werr, want...)
		}
		return d, out, runErr
	})
}
