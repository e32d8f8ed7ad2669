//go:build rxe

package interop

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// runCM runs the connection-manager cells against rdma_cm in the guest
// (issue 16): ucmatose as server to a goroce Dial and as client of a
// goroce Listener (10 SENDs each way after the CM handshake, then the
// disconnect), and a Dial to a port nobody listens on, which the guest's
// CM rejects with reason 8.
func runCM(t *testing.T, mtu int) {
	cells := []struct {
		name string
		run  func(mtu int, d *cmDevice) (string, error)
	}{
		{fmt.Sprintf("rdma_cm ucmatose-server goroce-dial mtu=%d", mtu), h.cmDial},
		{fmt.Sprintf("rdma_cm ucmatose-client goroce-listen mtu=%d", mtu), h.cmListen},
		{fmt.Sprintf("rdma_cm reject-invalid-service mtu=%d", mtu), h.cmReject},
	}
	for _, c := range cells {
		if !selected(c.name) {
			continue
		}
		h.timed(t, shortName(c.name), c.name, func() (string, error) {
			return h.wireCell(c.name, func() (cmDevice, string, error) {
				var d cmDevice
				fig, err := c.run(mtu, &d)
				d.fig = fig
				return d, "", err
			})
		})
	}
}

// cmMessages is ucmatose's default message count and size.
const cmMessages, cmMsgSize = 10, 100

// cmPort is ucmatose's default port.
const cmPort = 7471

// cmOpen opens a device on the harness's host address.
func cmOpen() (*roce.Device, error) {
	return roce.Open(roce.Config{Addr: netip.AddrPortFrom(netip.MustParseAddr(hostIP), 4791)})
}

// cmExchange plays cmatose's data phase on c: receive first (client) or
// send first (server), cmMessages each way. It returns how many of its
// SENDs were flushed because the peer disconnected before acknowledging
// them: the client's last SENDs race ucmatose's server, which disconnects
// as soon as it has received them all, and rxe then moves its QP to the
// error state without sending the ACKs still due (seen in CI: the 10th
// SEND's ACK never left the guest, the DREQ came instead). Such a SEND
// reached ucmatose if ucmatose says its transfers completed; the caller
// checks that. Any other error fails.
func cmExchange(ctx context.Context, c *roce.Conn, m interface{ SGE(int, int) qp.SGE }, sendFirst bool) (flushed int, err error) {
	wc := make([]roce.Completion, 1)
	wait := func(q interface {
		Wait(context.Context, []roce.Completion) (int, error)
	}, sends bool) error {
		for i := 0; i < cmMessages; i++ {
			if _, err := q.Wait(ctx, wc); err != nil {
				return err
			}
			err := wc[0].Err()
			if err != nil && sends && !sendFirst && wc[0].Status == roce.StatusWRFlushErr &&
				errors.Is(c.Err(), roce.ErrDisconnected) {
				flushed++
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	send := func() error {
		for i := 0; i < cmMessages; i++ {
			if err := c.QP().PostSend(&roce.SendWR{WRID: uint64(100 + i), Opcode: roce.WRSend, Flags: roce.SendSignaled,
				SGL: []roce.SGE{m.SGE(cmMessages*128+i*cmMsgSize, cmMsgSize)}}); err != nil {
				return err
			}
		}
		return wait(c.QP().SendCQ(), true)
	}
	// The QP's own CQ takes both queues: count completions, not queues.
	if sendFirst {
		if err := send(); err != nil {
			return 0, fmt.Errorf("sends: %w", err)
		}
		return 0, wait(c.QP().RecvCQ(), false)
	}
	if err := wait(c.QP().RecvCQ(), false); err != nil {
		return 0, fmt.Errorf("receives: %w", err)
	}
	err = send()
	return flushed, err
}

// cmRecvs posts cmMessages receives (Setup: before the peer can send).
func cmRecvs(m interface{ SGE(int, int) qp.SGE }) func(*roce.QP) error {
	return func(q *roce.QP) error {
		for i := 0; i < cmMessages; i++ {
			if err := q.PostRecv(&roce.RecvWR{WRID: uint64(i), SGL: []roce.SGE{m.SGE(i*128, 128)}}); err != nil {
				return err
			}
		}
		return nil
	}
}

func cmMTU(mtu int) qp.MTU {
	if mtu == 4096 {
		return qp.MTU4096
	}
	return qp.MTU1024
}

// cmDial: ucmatose (server) in the guest, goroce dials.
func (h *harness) cmDial(mtu int, d *cmDevice) (string, error) {
	if err := h.guestBg("ucms", "", "timeout", "90", "ucmatose"); err != nil {
		return "", err
	}
	time.Sleep(3 * time.Second) // rdma_listen under TCG
	var fig string
	runErr := inNetns(netns, func() (err error) {
		dev, err := cmOpen()
		if err != nil {
			return err
		}
		defer closeCounted(dev, d, &err)
		buf := make([]byte, 2*cmMessages*128)
		m, err := dev.RegisterMR(nil, buf, roce.LocalWrite)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := dev.Dial(ctx, netip.AddrPortFrom(netip.MustParseAddr(guestIP), cmPort),
			roce.DialConfig{MTU: cmMTU(mtu), Setup: cmRecvs(m)})
		if err != nil {
			return fmt.Errorf("dial: %w", err)
		}
		flushed, err := cmExchange(ctx, c, m, false)
		if err != nil {
			return err
		}
		select { // ucmatose's server disconnects
		case <-c.Done():
		case <-ctx.Done():
			return errors.New("no DREQ from ucmatose")
		}
		fig = fmt.Sprintf("QPN %v: %d SENDs each way, DREQ from rdma_cm: %v", c.QP().QPN(), cmMessages, c.Err())
		if flushed > 0 {
			fig += fmt.Sprintf(" (the last %d SENDs flushed: the DREQ came before rxe's ACK)", flushed)
		}
		return c.Close()
	})
	var out string
	var err error
	if runErr != nil {
		// Keep ucmatose's output if it ended; stop it if not.
		if out, err = h.guestWait("ucms", 5*time.Second); err != nil {
			h.guestKill("ucms")
		}
	} else {
		out, err = h.guestWait("ucms", 60*time.Second)
		// ucmatose received every SEND, flushed ones too.
		err = guestOK("ucmatose", out, err, "data transfers complete", "return status 0")
	}
	writeLog(h.out, fmt.Sprintf("cm_dial_mtu%d.log", mtu), fmt.Sprintf("--- goroce\n%s\n%v\n--- ucmatose\n%s", fig, runErr, out))
	if runErr != nil {
		return "", fmt.Errorf("%v\n--- ucmatose:\n%s", runErr, tail(out, 10))
	}
	if err != nil {
		return "", fmt.Errorf("ucmatose: %v\n%s", err, tail(out, 10))
	}
	return fig, nil
}

// cmListen: goroce listens, ucmatose (client) in the guest connects.
func (h *harness) cmListen(mtu int, d *cmDevice) (string, error) {
	var fig, out string
	var werr error
	runErr := inNetns(netns, func() (err error) {
		dev, err := cmOpen()
		if err != nil {
			return err
		}
		defer closeCounted(dev, d, &err)
		buf := make([]byte, 2*cmMessages*128)
		m, err := dev.RegisterMR(nil, buf, roce.LocalWrite)
		if err != nil {
			return err
		}
		l, err := dev.Listen(cmPort, roce.ListenConfig{Setup: cmRecvs(m)})
		if err != nil {
			return err
		}
		defer l.Close()
		if err := h.guestBg("ucmc", "", "timeout", "90", "ucmatose", "-s", hostIP); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := l.Accept(ctx)
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		if _, err := cmExchange(ctx, c, m, true); err != nil {
			return err
		}
		// cmatose's server disconnects; its client waits for that.
		t0 := time.Now()
		if err := c.Close(); err != nil {
			return err
		}
		fig = fmt.Sprintf("QPN %v from %v: %d SENDs each way, DREQ/DREP in %v", c.QP().QPN(), c.RemoteAddr(),
			cmMessages, time.Since(t0).Round(time.Millisecond))
		out, werr = h.guestWait("ucmc", 60*time.Second)
		return nil
	})
	if runErr != nil {
		h.guestKill("ucmc")
		out, _ = h.guestWait("ucmc", 30*time.Second)
	}
	writeLog(h.out, fmt.Sprintf("cm_listen_mtu%d.log", mtu), fmt.Sprintf("--- goroce\n%s\n%v\n--- ucmatose\n%s", fig, runErr, out))
	if runErr != nil {
		return "", fmt.Errorf("%v\n--- ucmatose:\n%s", runErr, tail(out, 10))
	}
	if werr != nil {
		return "", fmt.Errorf("ucmatose: %v\n%s", werr, tail(out, 10))
	}
	return fig, nil
}

// cmReject: a Dial to a port nobody listens on in the guest.
func (h *harness) cmReject(mtu int, d *cmDevice) (string, error) {
	var fig string
	err := inNetns(netns, func() (err error) {
		dev, err := cmOpen()
		if err != nil {
			return err
		}
		defer closeCounted(dev, d, &err)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, err = dev.Dial(ctx, netip.AddrPortFrom(netip.MustParseAddr(guestIP), 9), roce.DialConfig{MTU: cmMTU(mtu)})
		var re *roce.RejectError
		if !errors.As(err, &re) || re.Reason != cm.RejectInvalidServiceID {
			return fmt.Errorf("Dial to an unused port: %v, want reject reason 8", err)
		}
		fig = err.Error()
		return nil
	})
	return fig, err
}
