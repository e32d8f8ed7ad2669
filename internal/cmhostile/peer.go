package cmhostile

import (
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// Peer moves CM MADs between a scenario and the target's QP1.
type Peer interface {
	// Send sends one CM MAD (cm.MADSize bytes) to the target's QP1.
	Send(mad []byte) error
	// Recv returns the next CM MAD the target sent to the peer's QP1, or
	// nil when none came within d. The MAD is the caller's.
	Recv(d time.Duration) cm.MAD
}

// GSI constants (IBA 13.4.2): CM MADs travel as UD SEND ONLY from QP1 to
// QP1 with this Q_Key and the default P_Key.
const (
	gsiQPN  = 1
	gsiQKey = 0x80010000
	gsiPKey = 0xFFFF
)

// LinkPeer is a Peer on a link of its own: it builds each MAD's RoCEv2
// packet (BTH, DETH, the MAD, the ICRC) itself, as the kernel's MAD layer
// would, and takes the UD SEND ONLY packets to QP1 that arrive, so the
// scenarios' MADs reach the target exactly as written.
type LinkPeer struct {
	l      link.Link
	target netip.AddrPort

	mu  sync.Mutex // guards psn and Send
	psn bth.PSN

	in   chan cm.MAD
	done chan struct{}
	wg   sync.WaitGroup
}

var _ Peer = (*LinkPeer)(nil)

// NewLinkPeer starts a peer on l (which it closes on Close) that talks to
// the CM of the device at target (its IP and RoCE UDP port).
func NewLinkPeer(l link.Link, target netip.AddrPort) *LinkPeer {
	p := &LinkPeer{l: l, target: target, psn: 1, in: make(chan cm.MAD, 256), done: make(chan struct{})}
	p.wg.Add(1)
	go p.recv()
	return p
}

// Close closes the link and waits for the receive goroutine.
func (p *LinkPeer) Close() error {
	close(p.done)
	err := p.l.Close()
	p.wg.Wait()
	return err
}

// Send implements Peer.
func (p *LinkPeer) Send(mad []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := wire.Fields{
		BTH:  bth.Fields{Opcode: bth.UDSendOnly, PKey: gsiPKey, DestQP: gsiQPN, PSN: p.psn},
		DETH: ext.DETHFields{QKey: gsiQKey, SrcQP: gsiQPN},
	}
	p.psn = p.psn.Add(1)
	buf := make([]byte, 64+len(mad))
	n, err := wire.Build(buf, &f, mad)
	if err != nil {
		return err
	}
	dg := []link.Datagram{{Buf: buf[:n], Src: p.l.LocalAddr(), Dst: p.target}}
	if pl, ok := p.l.(link.IPIDPlanner); ok {
		pl.PlanIPID(dg)
	}
	var ph [rocev2.PseudoHeaderLen]byte
	ip, udp := rocev2.PseudoHeaders(&ph, p.l.LocalAddr(), p.target, dg[0].IPID, n)
	rocev2.PutICRC(buf[n-bth.ICRCSize:n], rocev2.ComputeICRC(ip, udp, buf[:n-bth.ICRCSize]))
	_, err = p.l.Send(dg)
	return err
}

// Recv implements Peer.
func (p *LinkPeer) Recv(d time.Duration) cm.MAD {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case m := <-p.in:
		return m
	case <-t.C:
		return nil
	}
}

// recv takes the CM MADs that arrive: UD SEND ONLY to QP1 (BTH and DETH,
// then the MAD).
func (p *LinkPeer) recv() {
	defer p.wg.Done()
	dgs := make([]link.Datagram, 16)
	for i := range dgs {
		dgs[i].Buf = make([]byte, 4096+128)
	}
	for {
		for i := range dgs {
			dgs[i].Buf = dgs[i].Buf[:cap(dgs[i].Buf)]
		}
		n, err := p.l.Recv(dgs)
		if err != nil {
			if errors.Is(err, link.ErrClosed) {
				return
			}
			select {
			case <-p.done:
				return
			default:
			}
			time.Sleep(time.Millisecond)
			continue
		}
		for i := range n {
			if m, ok := GSIMAD(dgs[i].Buf); ok {
				select {
				case p.in <- append(cm.MAD(nil), m...):
				case <-p.done:
					return
				}
			}
		}
	}
}

// GSIMAD returns the CM MAD of a UD SEND ONLY packet to QP1 (a RoCEv2 UDP
// payload: BTH 12, DETH 8, the 256-byte MAD, the ICRC), aliasing b.
func GSIMAD(b []byte) (cm.MAD, bool) {
	h, err := bth.Parse(b)
	if err != nil || h.Opcode() != bth.UDSendOnly || h.DestQP() != gsiQPN || len(b) < 20+cm.MADSize+bth.ICRCSize {
		return nil, false
	}
	m, err := cm.Parse(b[20 : 20+cm.MADSize])
	return m, err == nil
}
