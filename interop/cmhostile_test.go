//go:build rxe && linux

package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/roce"
)

// runCMHostile runs the hostile connection-manager cells (issue 16):
// goroce plays a peer that breaks the CM protocol against the guest's
// kernel CM (an rdma_cm listener, ucmatose), through a link that edits or
// withholds goroce's own MADs; -cells cm-hostile selects them:
//
//   - cm-hostile req-reserved-mtu: a REQ whose path MTU is the reserved
//     code 7;
//   - cm-hostile no-rtu: goroce's RTU never leaves: the guest retransmits
//     its REP as often as goroce's REQ allowed (Max CM Retries), then gives
//     up on the half-open connection;
//   - cm-hostile dial-cancel: goroce's Dial is canceled while its REQ is
//     out (the guest's REP withheld from it): goroce rejects with reason
//     Timeout and its CA GUID as ARI (cm_destroy_id), and the guest's CM
//     must find its connection by them and stop sending REPs.
func runCMHostile(t *testing.T, mtu int) {
	if mtu != 1024 {
		return // the CM does not depend on the MTU
	}
	cells := []struct {
		name string
		run  func() (string, error)
	}{
		{"cm-hostile req-reserved-mtu mtu=1024", h.cmReservedMTU},
		{"cm-hostile no-rtu mtu=1024", h.cmNoRTU},
		{"cm-hostile dial-cancel mtu=1024", h.cmDialCancel},
	}
	for _, c := range cells {
		if !selected(c.name) {
			continue
		}
		h.timed(t, shortName(c.name), c.name, func() (string, error) {
			return c.run()
		})
	}
	runCMGUIDAndSignals(t, mtu)
	runCMHostileTable(t, mtu)
}

// madSeen is a CM MAD that crossed the tap.
type madSeen struct {
	at      time.Time
	out     bool // sent by goroce
	dropped bool
	attr    cm.AttrID
	reason  cm.RejectReason // REJ
	info    int             // REJ: ARI length
}

func (m madSeen) String() string {
	dir := "in"
	if m.out {
		dir = "out"
	}
	s := fmt.Sprintf("%s %v", dir, m.attr)
	if m.attr == cm.AttrREJ {
		s += fmt.Sprintf("(%v, ARI %d)", m.reason, m.info)
	}
	if m.dropped {
		s += " dropped"
	}
	return s
}

// tapLink is goroce's link with a hook on the CM MADs (UD SEND ONLY to or
// from QP1) it sends and receives: out may edit a MAD goroce sends (the
// ICRC is then patched, testutil.PatchICRC) or withhold it; in may hide a
// received one from goroce (truncated to nothing: counted as a bad header).
type tapLink struct {
	link.Link
	out, in func(m cm.MAD) (drop bool)

	mu   sync.Mutex
	seen []madSeen
}

var _ link.Link = (*tapLink)(nil)

// gsiMAD returns the CM MAD of a UD SEND ONLY to QP1 (BTH 12 + DETH 8,
// then the 256-byte MAD), aliasing b.
func gsiMAD(b []byte) (cm.MAD, bool) {
	if len(b) < 20+cm.MADSize+4 || b[0] != 0x64 || b[5] != 0 || b[6] != 0 || b[7] != 1 {
		return nil, false
	}
	m, err := cm.Parse(b[20:])
	return m, err == nil
}

func (l *tapLink) note(out, dropped bool, m cm.MAD) {
	s := madSeen{at: time.Now(), out: out, dropped: dropped, attr: m.AttrID()}
	if s.attr == cm.AttrREJ {
		s.reason, s.info = cm.REJ(m).Reason(), int(cm.REJ(m).RejectInfoLen())
	}
	l.mu.Lock()
	l.seen = append(l.seen, s)
	l.mu.Unlock()
}

func (l *tapLink) log() []madSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]madSeen(nil), l.seen...)
}

func (l *tapLink) Send(dgs []link.Datagram) (int, error) {
	for i := range dgs {
		b := dgs[i].Buf
		if m, ok := gsiMAD(b); ok && l.out != nil {
			orig := bytes.Clone(b)
			drop := l.out(m)
			l.note(true, drop, m)
			if drop {
				continue
			}
			if !bytes.Equal(orig, b) {
				testutil.PatchICRC(b, orig)
			}
		} else if ok {
			l.note(true, false, m)
		}
		if _, err := l.Link.Send(dgs[i : i+1]); err != nil {
			return i, err
		}
	}
	return len(dgs), nil
}

func (l *tapLink) Recv(dgs []link.Datagram) (int, error) {
	n, err := l.Link.Recv(dgs)
	for i := range n {
		if m, ok := gsiMAD(dgs[i].Buf); ok {
			drop := l.in != nil && l.in(m)
			l.note(false, drop, m)
			if drop {
				dgs[i].Buf = dgs[i].Buf[:0]
			}
		}
	}
	return n, err
}

// hostileCM is the CM configuration goroce's REQ advertises in these
// cells: the guest times its REP with our Local CM Response Timeout
// (4.096 µs·2^16 ≈ 268 ms, cm_convert_to_ms: 256 ms) and retries it Max
// CM Retries (3) times (cm_req_handler), so a withheld RTU shows within
// seconds rather than rdma_cm's minute.
var hostileCM = cm.Config{CMResponseTimeout: 16, MaxCMRetries: 3}

// hostileSession runs f with a goroce device on a tapLink in netns roce0
// while ucmatose (server, port cmPort) runs in the guest, with the
// bridge captured; it returns f's figure, the MADs seen and ucmatose's
// output.
func (h *harness) hostileSession(name string, tap *tapLink, f func(dev *roce.Device) (string, error)) (string, []madSeen, string, error) {
	capt, err := h.startCapture(name)
	if err != nil {
		return "", nil, "", err
	}
	if err := h.guestBg("ucmh", "", "timeout", "60", "ucmatose"); err != nil {
		capt.stop()
		return "", nil, "", err
	}
	time.Sleep(3 * time.Second) // rdma_listen under TCG
	var fig string
	runErr := inNetns(netns, func() error {
		u, err := udp.Open(udp.Config{Addr: netip.AddrPortFrom(netip.MustParseAddr(hostIP), 4791)})
		if err != nil {
			return err
		}
		tap.Link = u
		dev, err := roce.Open(roce.Config{Link: tap, CM: hostileCM})
		if err != nil {
			u.Close()
			return err
		}
		defer dev.Close()
		fig, err = f(dev)
		return err
	})
	out := h.guestKill("ucmh") // ucmatose waits for more; its output so far
	capt.stop()
	seen := tap.log()
	var ls []string
	for _, s := range seen {
		ls = append(ls, s.String())
	}
	writeLog(h.out, name+".log", fmt.Sprintf("--- goroce\n%s\n%v\n--- CM MADs\n%s\n--- ucmatose\n%s", fig, runErr, strings.Join(ls, "\n"), out))
	if runErr == nil {
		if _, err := h.checkWire(capt.path); err != nil {
			runErr = err
		}
	}
	return fig, seen, out, runErr
}

func countMAD(seen []madSeen, out bool, a cm.AttrID) int {
	n := 0
	for _, s := range seen {
		if s.out == out && s.attr == a {
			n++
		}
	}
	return n
}

func seenList(seen []madSeen) string {
	var ls []string
	for _, s := range seen {
		ls = append(ls, s.String())
	}
	return strings.Join(ls, ", ")
}

// cmReservedMTU: a REQ with path MTU code 7 (reserved, IBA 12.6.5).
func (h *harness) cmReservedMTU() (string, error) {
	tap := &tapLink{out: func(m cm.MAD) bool {
		if m.AttrID() == cm.AttrREQ {
			cm.REQ(m).SetPathMTU(7)
		}
		return false
	}}
	fig, seen, out, err := h.hostileSession("cm_hostile_reserved_mtu", tap, func(dev *roce.Device) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := dev.Dial(ctx, netip.AddrPortFrom(netip.MustParseAddr(guestIP), cmPort), roce.DialConfig{})
		if err == nil {
			c.Close()
			return "", errors.New("the guest accepted a REQ with path MTU code 7")
		}
		var re *roce.RejectError
		if !errors.As(err, &re) {
			return "", fmt.Errorf("Dial with a reserved path MTU: %v, want a REJ", err)
		}
		if re.Reason != reservedMTUReason {
			return "", fmt.Errorf("the guest rejected a REQ with path MTU code 7 with reason %v, want %v", re.Reason, reservedMTUReason)
		}
		return fmt.Sprintf("the guest rejects a REQ with path MTU code 7: %v", re), nil
	})
	if err != nil {
		return "", fmt.Errorf("%v\n--- CM MADs: %s\n--- ucmatose:\n%s", err, seenList(seen), tail(out, 6))
	}
	if n := countMAD(seen, false, cm.AttrREP) + countMAD(seen, false, cm.AttrMRA); n != 0 {
		return "", fmt.Errorf("the guest sent %d REP/MRA before its REJ: %s", n, seenList(seen))
	}
	const why = "cmatose: failure accepting: Invalid argument"
	if !strings.Contains(out, why) {
		return "", fmt.Errorf("ucmatose does not say %q:\n%s", why, tail(out, 6))
	}
	return fmt.Sprintf("%s; MADs %s; ucmatose: %q (rdma_accept's RTR refused, then rdma_reject)", fig, seenList(seen), why), nil
}

// reservedMTUReason is how the guest answers a REQ with a reserved path
// MTU, seen in this cell: a REJ with reason consumer defined, no MRA and
// no REP (goroce's Listener answers the same, roce
// TestCMListenerReservedMTU).
const reservedMTUReason = cm.RejectConsumerDefined

// cmNoRTU: goroce never sends the RTU.
func (h *harness) cmNoRTU() (string, error) {
	tap := &tapLink{out: func(m cm.MAD) bool { return m.AttrID() == cm.AttrRTU }}
	var closeTook time.Duration
	fig, seen, out, err := h.hostileSession("cm_hostile_no_rtu", tap, func(dev *roce.Device) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := dev.Dial(ctx, netip.AddrPortFrom(netip.MustParseAddr(guestIP), cmPort), roce.DialConfig{})
		if err != nil {
			return "", fmt.Errorf("Dial: %w", err)
		}
		// Wait until the guest has been quiet for 5 s (its REP timer
		// is 256 ms), at most 40 s.
		end := time.Now().Add(40 * time.Second)
		for time.Now().Before(end) {
			time.Sleep(500 * time.Millisecond)
			s := tap.log()
			if last := s[len(s)-1]; time.Since(last.at) > 5*time.Second {
				break
			}
		}
		t0 := time.Now()
		err = c.Close()
		closeTook = time.Since(t0)
		return fmt.Sprintf("goroce's Dial returned (REP taken, RTU withheld), Close after the guest gave up took %v", closeTook.Round(time.Millisecond)), err
	})
	if err != nil {
		return "", fmt.Errorf("%v\n--- CM MADs: %s\n--- ucmatose:\n%s", err, seenList(seen), tail(out, 6))
	}
	reps := countMAD(seen, false, cm.AttrREP)
	if want := 1 + int(hostileCM.MaxCMRetries); reps != want {
		return "", fmt.Errorf("the guest sent %d REPs, want %d (1 + the REQ's Max CM Retries): %s", reps, want, seenList(seen))
	}
	// Out of retries, the kernel drops the half-open connection without a
	// word (cm_process_send_error: IB_CM_REP_ERROR, no REJ), and answers
	// our later DREQ for it with a DREP from no connection (cm_issue_drep).
	if n := countMAD(seen, false, cm.AttrREJ); n != 0 {
		return "", fmt.Errorf("the guest sent %d REJs: %s", n, seenList(seen))
	}
	if countMAD(seen, true, cm.AttrDREQ) != 1 || countMAD(seen, false, cm.AttrDREP) != 1 {
		return "", fmt.Errorf("goroce's Close: want one DREQ answered by one DREP: %s", seenList(seen))
	}
	const why = "RDMA_CM_EVENT_UNREACHABLE, error: -110" // IB_CM_REP_ERROR: -ETIMEDOUT
	if !strings.Contains(out, why) {
		return "", fmt.Errorf("ucmatose does not say %q:\n%s", why, tail(out, 6))
	}
	return fmt.Sprintf("%s; MADs %s; ucmatose: %q", fig, seenList(seen), why), nil
}

// cmDialCancel: a Dial canceled with its REQ out.
func (h *harness) cmDialCancel() (string, error) {
	gotREP := make(chan struct{})
	var once sync.Once
	tap := &tapLink{in: func(m cm.MAD) bool {
		if m.AttrID() == cm.AttrREP {
			once.Do(func() { close(gotREP) })
			return true
		}
		return false
	}}
	fig, seen, out, err := h.hostileSession("cm_hostile_dial_cancel", tap, func(dev *roce.Device) (string, error) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-gotREP:
			case <-time.After(30 * time.Second):
			}
			cancel()
		}()
		_, err := dev.Dial(ctx, netip.AddrPortFrom(netip.MustParseAddr(guestIP), cmPort), roce.DialConfig{})
		if !errors.Is(err, context.Canceled) {
			return "", fmt.Errorf("Dial: %v, want context.Canceled", err)
		}
		time.Sleep(4 * time.Second) // 15 of the guest's REP timeouts
		if st := dev.CMStats(); st.Destroyed != 1 || st.Rejected != 1 {
			return "", fmt.Errorf("goroce's CM counted %d destroyed, %d REJs sent; want 1 and 1", st.Destroyed, st.Rejected)
		}
		return "Dial canceled after the guest's REP (withheld from goroce)", nil
	})
	if err != nil {
		return "", fmt.Errorf("%v\n--- CM MADs: %s\n--- ucmatose:\n%s", err, seenList(seen), tail(out, 6))
	}
	var rej *madSeen
	late := 0
	for i, s := range seen {
		switch {
		case s.out && s.attr == cm.AttrREJ:
			rej = &seen[i]
		case !s.out && s.attr == cm.AttrREP && rej != nil && s.at.Sub(rej.at) > 100*time.Millisecond:
			late++
		}
	}
	if rej == nil || rej.reason != cm.RejectTimeout || rej.info != 8 {
		return "", fmt.Errorf("goroce's REJ: %v, want reason Timeout with an 8-byte ARI: %s", rej, seenList(seen))
	}
	if late != 0 {
		return "", fmt.Errorf("the guest sent %d REPs after goroce's REJ (Timeout): it did not find its connection by the ARI: %s", late, seenList(seen))
	}
	const why = "RDMA_CM_EVENT_REJECTED, error: 4" // the REJ reached the connection
	if !strings.Contains(out, why) {
		return "", fmt.Errorf("ucmatose does not say %q:\n%s", why, tail(out, 6))
	}
	return fmt.Sprintf("%s: REJ Timeout (ARI: CA GUID) sent, no REP from the guest after it in 4 s; MADs %s; ucmatose: %q",
		fig, seenList(seen), why), nil
}
