package cmhostile

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
)

// Env is what a scenario knows of its target.
type Env struct {
	// Self is the hostile side's IP address, Target the target's.
	Self, Target netip.Addr
	// RCPort is the port of an RC listener of the target in rdma_cm's TCP
	// port space, bound to Target (a goroce Listener; rdma_listen on
	// Target:RCPort in the guest).
	RCPort uint16
	// UDPort is the port of a UD listener of the target in the UDP port
	// space (SIDR).
	UDPort uint16
	// Dial makes the target connect n times, at once, to Self:DialPort in
	// the TCP port space (the dialer-side scenarios answer its REQs). It
	// returns without waiting for the connections.
	Dial     func(n int) error
	DialPort uint16
	// Wait is how long a scenario waits for an answer the target owes
	// (default 3 s: the rxe guests run under emulation), Silence how long
	// it watches for MADs that must not come (default 1 s).
	Wait, Silence time.Duration
	// Seed seeds the scenario's comm IDs, QPNs, PSNs and ports.
	Seed uint64
}

// Session runs one scenario: it sends MADs through its Peer, reads the
// target's answers, and keeps a transcript for the error message.
type Session struct {
	Env
	p   Peer
	rng *rand.Rand
	log []string
	t0  time.Time
	// late keeps MADs read while waiting for another one of the same
	// scenario, for the next expect.
	late []cm.MAD
}

// NewSession returns a session of env on p.
func NewSession(p Peer, env Env) *Session {
	if env.Wait == 0 {
		env.Wait = 3 * time.Second
	}
	if env.Silence == 0 {
		env.Silence = time.Second
	}
	return &Session{Env: env, p: p, rng: rand.New(rand.NewPCG(env.Seed, 27)), t0: time.Now()}
}

// Transcript returns what the session sent and received, one line each.
func (s *Session) Transcript() string { return strings.Join(s.log, "\n") }

func (s *Session) note(dir string, m cm.MAD) {
	s.log = append(s.log, fmt.Sprintf("%6.3fs %s %s", time.Since(s.t0).Seconds(), dir, Describe(m)))
}

// Describe formats a CM MAD for transcripts: its attribute, comm IDs and
// the fields the scenarios look at.
func Describe(m cm.MAD) string {
	b := []byte(m)
	id := func(off int) uint32 { return binary.BigEndian.Uint32(b[cm.HeaderSize+off:]) }
	switch m.AttrID() {
	case cm.AttrREQ:
		r := cm.REQ(m)
		return fmt.Sprintf("REQ local=%#x sid=%v qpn=%#x guid=%v tt=%v mtu=%d pkey=%#x", id(0), r.ServiceID(),
			uint32(r.LocalQPN()), cm.GUID(r.LocalCAGUID()), r.TransportType(), r.PathMTU(), r.PKey())
	case cm.AttrREP:
		r := cm.REP(m)
		return fmt.Sprintf("REP local=%#x remote=%#x qpn=%#x guid=%v", id(0), id(4), uint32(r.LocalQPN()), cm.GUID(r.LocalCAGUID()))
	case cm.AttrREJ:
		r := cm.REJ(m)
		return fmt.Sprintf("REJ local=%#x remote=%#x reason=%d(%v) msg=%v ari=%d", id(0), id(4), uint16(r.Reason()), r.Reason(),
			r.MsgRejected(), r.RejectInfoLen())
	case cm.AttrMRA:
		r := cm.MRA(m)
		return fmt.Sprintf("MRA local=%#x remote=%#x msg=%v timeout=%d", id(0), id(4), r.MsgMRAed(), r.ServiceTimeout())
	case cm.AttrDREQ:
		return fmt.Sprintf("DREQ local=%#x remote=%#x qpn=%#x", id(0), id(4), uint32(cm.DREQ(m).RemoteQPN()))
	case cm.AttrSIDRREP:
		r := cm.SIDRREP(m)
		return fmt.Sprintf("SIDR_REP request=%#x status=%d(%v)", id(0), uint8(r.Status()), r.Status())
	case cm.AttrSIDRREQ:
		return fmt.Sprintf("SIDR_REQ request=%#x sid=%v", id(0), cm.SIDRREQ(m).ServiceID())
	}
	return fmt.Sprintf("%v local=%#x remote=%#x", m.AttrID(), id(0), id(4))
}

// Send sends m to the target.
func (s *Session) Send(m []byte) error {
	s.note("→", m)
	if err := s.p.Send(m); err != nil {
		return fmt.Errorf("send %v: %w", cm.MAD(m).AttrID(), err)
	}
	return nil
}

// Match selects the target's MADs a scenario waits for.
type Match func(m cm.MAD) bool

// To matches the target's answers to the given local comm IDs of the
// scenario: MADs whose Remote Communication ID (SIDR_REP: Request ID) is
// one of them. Every scenario draws fresh comm IDs, so a target's late
// retransmissions for another scenario never match.
func To(ids ...cm.CommID) Match {
	return func(m cm.MAD) bool {
		off := cm.HeaderSize + 4
		if m.AttrID() == cm.AttrSIDRREP {
			off = cm.HeaderSize
		}
		got := cm.CommID(binary.BigEndian.Uint32(m[off:]))
		for _, id := range ids {
			if got == id {
				return true
			}
		}
		return false
	}
}

// Attr matches MADs of attribute a that also match m (nil: any).
func Attr(a cm.AttrID, m Match) Match {
	return func(x cm.MAD) bool { return x.AttrID() == a && (m == nil || m(x)) }
}

// next returns the next MAD that matches, from those kept or the peer,
// or nil after d; the others are noted and dropped.
func (s *Session) next(match Match, d time.Duration) cm.MAD {
	for i, m := range s.late {
		if match(m) {
			s.late = append(s.late[:i], s.late[i+1:]...)
			return m
		}
	}
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		m := s.p.Recv(left)
		if m == nil {
			return nil
		}
		s.note("←", m)
		if match(m) {
			return m
		}
		s.late = append(s.late, m)
		if len(s.late) > 64 {
			s.late = s.late[1:]
		}
	}
}

// Expect waits up to Env.Wait for a MAD of attribute a that matches m.
func (s *Session) Expect(a cm.AttrID, m Match, what string) (cm.MAD, error) {
	if x := s.next(Attr(a, m), s.Wait); x != nil {
		return x, nil
	}
	return nil, fmt.Errorf("no %v from the target within %v: %s", a, s.Wait, what)
}

// Quiet checks that no MAD matching m comes within d (0: Env.Silence).
func (s *Session) Quiet(m Match, d time.Duration, what string) error {
	if d == 0 {
		d = s.Silence
	}
	if x := s.next(m, d); x != nil {
		return fmt.Errorf("the target sent %s: %s", Describe(x), what)
	}
	return nil
}

// Count counts the MADs matching m within d.
func (s *Session) Count(m Match, d time.Duration) int {
	n := 0
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return n
		}
		if s.next(m, left) == nil {
			return n
		}
		n++
	}
}

// Conn is one connection as the hostile side sees it.
type Conn struct {
	Local  cm.CommID // the hostile side's comm ID
	Remote cm.CommID // the target's, once known
	QPN    bth.QPN   // the hostile side's QPN
	GUID   cm.GUID   // the hostile side's CA GUID
	TID    uint64
	// PeerQPN is the target's QPN (from its REP or REQ).
	PeerQPN bth.QPN
}

// CommID draws a fresh non-zero comm ID.
func (s *Session) CommID() cm.CommID {
	for {
		if id := cm.CommID(s.rng.Uint32()); id != 0 {
			return id
		}
	}
}

// QPN draws a QPN from 16 up.
func (s *Session) QPN() bth.QPN { return bth.QPN(16 + s.rng.IntN(0xffff00)) }

// Hostile CA GUIDs: two "hosts" of the hostile side.
const (
	GUID1 cm.GUID = 0x02c0ffeefe000001
	GUID2 cm.GUID = 0x02c0ffeefe000002
)

// REQ returns a REQ to the target's RC listener as rdma_cm sends one
// (rdma_connect: the IP-CM header, RC, path MTU 1024, the RoCE path), for
// a new Conn with QPN qpn and GUID guid; edit may change the fields and
// the private data (the IP-CM header and 56 bytes) before it is encoded.
func (s *Session) REQ(qpn bth.QPN, guid cm.GUID, edit func(f *cm.REQFields, h cm.IPHeader)) (*Conn, []byte) {
	c := &Conn{Local: s.CommID(), QPN: qpn, GUID: guid, TID: s.rng.Uint64()}
	pd := make([]byte, cm.PrivateDataREQ)
	h := cm.IPHeader(pd[:cm.IPHeaderSize])
	h.Encode(&cm.IPHeaderFields{SrcPort: uint16(32768 + s.rng.IntN(28000)), SrcAddr: s.Self, DstAddr: s.Target})
	path := cm.RoCEPath(s.Self, s.Target)
	path.LocalACKTimeout = cm.ACKTimeout(cm.DefaultTargetACKDelay, cm.DefaultPacketLifeTime)
	f := &cm.REQFields{TID: c.TID, LocalCommID: c.Local, ServiceID: cm.IPServiceID(cm.PortSpaceTCP, s.RCPort),
		LocalCAGUID: uint64(guid), LocalQPN: qpn, ResponderResources: 1, InitiatorDepth: 1,
		RemoteCMResponseTimeout: 20, TransportType: cm.TransportRC, StartingPSN: bth.PSN(s.rng.Uint32() & 0xffffff),
		LocalCMResponseTimeout: 20, RetryCount: 7, PKey: cm.DefaultPKey, PathMTU: cm.MTU1024, RNRRetryCount: 7,
		MaxCMRetries: 15, PrimaryPath: path, PrivateData: pd}
	if edit != nil {
		edit(f, h)
	}
	m := make([]byte, cm.MADSize)
	cm.REQ(m).Encode(f)
	return c, m
}

// RTU returns the RTU of an answered REQ.
func (c *Conn) RTU() []byte {
	m := make([]byte, cm.MADSize)
	cm.RTU(m).Encode(&cm.CommFields{TID: c.TID, LocalCommID: c.Local, RemoteCommID: c.Remote})
	return m
}

// DREQ returns a DREQ for the connection, naming the target's QP qpn.
func (c *Conn) DREQ(qpn bth.QPN) []byte {
	m := make([]byte, cm.MADSize)
	cm.DREQ(m).Encode(&cm.DREQFields{TID: c.TID + 1, LocalCommID: c.Local, RemoteCommID: c.Remote, RemoteQPN: qpn})
	return m
}

// DREP returns the DREP answering the target's DREQ d.
func (c *Conn) DREP(d cm.MAD) []byte {
	m := make([]byte, cm.MADSize)
	cm.DREP(m).Encode(&cm.CommFields{TID: d.TID(), LocalCommID: c.Local, RemoteCommID: c.Remote})
	return m
}

// REJ returns a REJ from the connection with the given reason, message
// rejected and ARI.
func (c *Conn) REJ(reason cm.RejectReason, msg cm.MsgType, ari []byte) []byte {
	m := make([]byte, cm.MADSize)
	cm.REJ(m).Encode(&cm.REJFields{TID: c.TID, LocalCommID: c.Local, RemoteCommID: c.Remote, MsgRejected: msg,
		Reason: reason, RejectInfoLen: uint8(len(ari)), ARI: ari})
	return m
}

// Connect runs a REQ to the established state: REQ, the target's REP, RTU.
func (s *Session) Connect(qpn bth.QPN, guid cm.GUID) (*Conn, error) {
	c, req := s.REQ(qpn, guid, nil)
	if err := s.Send(req); err != nil {
		return nil, err
	}
	rep, err := s.Expect(cm.AttrREP, To(c.Local), "the REP to a well-formed REQ")
	if err != nil {
		return nil, err
	}
	c.Remote, c.PeerQPN = cm.REP(rep).LocalCommID(), cm.REP(rep).LocalQPN()
	return c, s.Send(c.RTU())
}

// Disconnect ends an established connection with a DREQ and checks the
// target's DREP.
func (s *Session) Disconnect(c *Conn) error {
	if err := s.Send(c.DREQ(c.PeerQPN)); err != nil {
		return err
	}
	_, err := s.Expect(cm.AttrDREP, To(c.Local), "the DREP to our DREQ")
	return err
}

// REQFrom waits for a REQ of the target (a dialer-side scenario) not seen
// before, up to 4·Env.Wait (the target's program starts first), and
// returns its connection, with Local our new comm ID.
func (s *Session) REQFrom(seen map[cm.CommID]bool) (*Conn, cm.REQ, error) {
	m := s.next(func(m cm.MAD) bool {
		return m.AttrID() == cm.AttrREQ && !seen[cm.REQ(m).LocalCommID()]
	}, 4*s.Wait)
	if m == nil {
		return nil, nil, fmt.Errorf("no REQ from the target within %v", 4*s.Wait)
	}
	r := cm.REQ(m)
	seen[r.LocalCommID()] = true
	return &Conn{Local: s.CommID(), Remote: r.LocalCommID(), TID: m.TID(), PeerQPN: r.LocalQPN()}, r, nil
}

// REP returns a REP answering the target's REQ r for connection c, with
// QPN qpn and GUID guid.
func (c *Conn) REP(r cm.REQ, qpn bth.QPN, guid cm.GUID, psn bth.PSN) []byte {
	c.QPN, c.GUID = qpn, guid
	m := make([]byte, cm.MADSize)
	cm.REP(m).Encode(&cm.REPFields{TID: c.TID, LocalCommID: c.Local, RemoteCommID: c.Remote, LocalQPN: qpn,
		StartingPSN: psn, ResponderResources: min(1, r.InitiatorDepth()), InitiatorDepth: min(1, r.ResponderResources()),
		TargetACKDelay: cm.DefaultTargetACKDelay, RNRRetryCount: 7, LocalCAGUID: uint64(guid)})
	return m
}
