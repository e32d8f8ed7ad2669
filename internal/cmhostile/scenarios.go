package cmhostile

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
)

// Side says which role of the target a scenario attacks.
type Side uint8

// Sides.
const (
	// Listener: the target listens (RCPort, UDPort); the hostile side
	// dials it.
	Listener Side = iota
	// Dialer: the target dials the hostile side (Env.Dial), which answers.
	Dialer
)

// String returns "listener" or "dialer".
func (s Side) String() string {
	if s == Dialer {
		return "dialer"
	}
	return "listener"
}

// Scenario is one hostile-peer case: what the hostile side sends, and
// what the kernel's CM and rdma_cm answer (checked by Run, which returns
// an error describing any other answer).
type Scenario struct {
	Name string
	Side Side
	// Kernel is the kernel's answer in words (doc/cm.md §2's table).
	Kernel string
	Run    func(s *Session) error
}

// Scenarios returns the table, listener side first (doc/cm.md §2).
func Scenarios() []Scenario {
	return []Scenario{
		{"req-unknown-service", Listener, "REJ 8 (invalid service ID) to the REQ, no REP (cm_match_req)", reqUnknownService},
		{"req-transport-uc", Listener, "REJ 28: rdma_cm refuses a UC REQ to an RC listener (cma_ib_check_req_qp_type), no REP", reqRejected28(func(f *cm.REQFields, h cm.IPHeader) {
			f.TransportType = cm.TransportUC
		})},
		{"req-transport-rd", Listener, "REJ 28: an RD REQ maps to no QP type (cm_req_get_qp_type: 0), no REP", reqRejected28(func(f *cm.REQFields, h cm.IPHeader) {
			f.TransportType = cm.TransportRD
		})},
		{"req-ipcm-version", Listener, "REJ 28: an IP-CM header whose version byte is not 0 (cma_save_ip_info: -EINVAL)", reqRejected28(func(f *cm.REQFields, h cm.IPHeader) {
			h.SetVersion(0x11)
		})},
		{"req-ipcm-unknown-ip-version", Listener, "REJ 28: IP version 5 (cma_save_ip_info: -EAFNOSUPPORT; no AF_IB listener matches)", reqRejected28(func(f *cm.REQFields, h cm.IPHeader) {
			h.SetIPVersion(5)
		})},
		{"req-ipcm-ipv6-with-ipv4-addresses", Listener, "REJ 28: IP version 6 over IPv4 addresses (::a.b.c.d: validate_net_dev finds no route)", reqRejected28(func(f *cm.REQFields, h cm.IPHeader) {
			h.SetIPVersion(6) // the addresses stay in the IPv4 layout: 12 zero bytes, then the 4
		})},
		{"req-ipcm-other-destination", Listener, "REJ 28: a destination address that is not the bound listener's (cma_match_private_data)", reqRejected28(func(f *cm.REQFields, h cm.IPHeader) {
			h.SetDstAddr(otherAddr(h.DstAddr()))
		})},
		{"req-to-ud-service", Listener, "REJ 28: a REQ for a UD listener's service ID (cma_ib_check_req_qp_type)", reqToUDService},
		{"sidr-to-rc-service", Listener, "SIDR_REP status 2 (reject): a SIDR_REQ for an RC listener's service ID (cma_ib_check_req_qp_type, cm_destroy_id)", sidrToRCService},
		{"req-retransmitted", Listener, "one REP; the REQ again before and after the RTU: dropped (cm_dup_req_handler); DREQ gets DREP", reqRetransmitted},
		{"req-stale-qpn-guid", Listener, "a new REQ from the (QPN, CA GUID) of an established connection: REJ 10 to it, DREQ on the old one (cm_match_req)", reqStale},
		{"req-same-qpn-other-guid", Listener, "a REQ from an established connection's QPN but another CA GUID: REP (a new connection)", reqSameQPNOtherGUID},
		{"rtu-unknown", Listener, "an RTU for unknown comm IDs: dropped", unknownDropped(cm.AttrRTU)},
		{"rep-unknown", Listener, "a REP for unknown comm IDs: dropped (cm_dup_rep_handler finds nothing)", unknownDropped(cm.AttrREP)},
		{"rej-unknown", Listener, "a REJ for unknown comm IDs: dropped", unknownDropped(cm.AttrREJ)},
		{"drep-unknown", Listener, "a DREP for unknown comm IDs: dropped", unknownDropped(cm.AttrDREP)},
		{"dreq-unknown", Listener, "a DREQ for unknown comm IDs: DREP with the IDs swapped (cm_issue_drep)", dreqUnknown},
		{"mra-for-rep", Listener, "an MRA for the REP (service timeout 23): no REP retransmission while it lasts (cm_mra_handler)", mraForREP},
		{"rtu-never-sent", Listener, "no RTU: the REP 1 + Max CM Retries times, then silence, no REJ (cm_process_send_error)", noRTU},
		{"rej-timeout-ari", Listener, "REJ Timeout with the REQ's CA GUID as ARI: the half-open connection is found and dropped, no more REPs (cm_acquire_rejected_id)", rejTimeoutARI(true)},
		{"rej-timeout-other-guid", Listener, "REJ Timeout with another CA GUID as ARI: nothing found, the REPs go on", rejTimeoutARI(false)},
		{"rep-stale-qpn-guid", Dialer, "a REP from the (QPN, CA GUID) of an established connection: REJ 10 to it, DREQ on the old one, the REQ retried (cm_rep_handler)", repStale},
		{"rep-duplicate-comm-id", Dialer, "a REP reusing an established connection's (comm ID, CA GUID): dropped, no REJ, no RTU (cm_rep_handler)", repDuplicateCommID},
		{"rep-lost-rtu", Dialer, "the REP again after the RTU: the RTU again (cm_dup_rep_handler)", repLostRTU},
		{"dreq-wrong-qpn", Dialer, "a DREQ naming another QPN: dropped; the right one gets DREP (cm_dreq_handler)", dreqWrongQPN},
	}
}

// otherAddr returns an address of a's family that is not a: a + 97 in
// the last byte.
func otherAddr(a netip.Addr) netip.Addr {
	if a.Is4() {
		b := a.As4()
		b[3] += 97
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	b[15] += 97
	return netip.AddrFrom16(b)
}

func reqUnknownService(s *Session) error {
	c, req := s.REQ(s.QPN(), GUID1, func(f *cm.REQFields, h cm.IPHeader) {
		f.ServiceID = cm.IPServiceID(cm.PortSpaceTCP, s.RCPort+100)
	})
	if err := s.Send(req); err != nil {
		return err
	}
	return s.expectREJ(c, cm.RejectInvalidServiceID)
}

// expectREJ waits for the REJ of c's REQ with the reason, as cm_issue_rej
// and the REJ of a REQ_RCVD cm_id send it: the REQ's comm ID as remote, 0
// as local, message rejected REQ; then checks that no REP or MRA follows.
func (s *Session) expectREJ(c *Conn, reason cm.RejectReason) error {
	m, err := s.Expect(cm.AttrREJ, To(c.Local), fmt.Sprintf("REJ %d", reason))
	if err != nil {
		if x := s.next(To(c.Local), 0); x != nil {
			return fmt.Errorf("%w (got %s)", err, Describe(x))
		}
		return err
	}
	r := cm.REJ(m)
	if r.Reason() != reason || r.MsgRejected() != cm.MsgTypeREQ || r.LocalCommID() != 0 {
		return fmt.Errorf("got %s, want reason %d (%v), message rejected REQ, local comm ID 0", Describe(m), reason, reason)
	}
	return s.Quiet(To(c.Local), 0, "nothing after the REJ")
}

func reqRejected28(edit func(f *cm.REQFields, h cm.IPHeader)) func(s *Session) error {
	return func(s *Session) error {
		c, req := s.REQ(s.QPN(), GUID1, edit)
		if err := s.Send(req); err != nil {
			return err
		}
		return s.expectREJ(c, cm.RejectConsumerDefined)
	}
}

func reqToUDService(s *Session) error {
	c, req := s.REQ(s.QPN(), GUID1, func(f *cm.REQFields, h cm.IPHeader) {
		f.ServiceID = cm.IPServiceID(cm.PortSpaceUDP, s.UDPort)
	})
	if err := s.Send(req); err != nil {
		return err
	}
	return s.expectREJ(c, cm.RejectConsumerDefined)
}

func sidrToRCService(s *Session) error {
	id := s.CommID()
	pd := make([]byte, cm.PrivateDataSIDRREQ)
	cm.IPHeader(pd[:cm.IPHeaderSize]).Encode(&cm.IPHeaderFields{SrcPort: 40000, SrcAddr: s.Self, DstAddr: s.Target})
	m := make([]byte, cm.MADSize)
	cm.SIDRREQ(m).Encode(&cm.SIDRREQFields{TID: s.rng.Uint64(), RequestID: id, PKey: cm.DefaultPKey,
		ServiceID: cm.IPServiceID(cm.PortSpaceTCP, s.RCPort), PrivateData: pd})
	if err := s.Send(m); err != nil {
		return err
	}
	rep, err := s.Expect(cm.AttrSIDRREP, To(id), "the SIDR_REP")
	if err != nil {
		return err
	}
	if st := cm.SIDRREP(rep).Status(); st != cm.SIDRReject {
		return fmt.Errorf("got %s, want status 2 (reject)", Describe(rep))
	}
	return nil
}

func reqRetransmitted(s *Session) error {
	c, req := s.REQ(s.QPN(), GUID1, nil)
	if err := s.Send(req); err != nil {
		return err
	}
	rep, err := s.Expect(cm.AttrREP, To(c.Local), "the REP")
	if err != nil {
		return err
	}
	c.Remote, c.PeerQPN = cm.REP(rep).LocalCommID(), cm.REP(rep).LocalQPN()
	if err := s.Send(req); err != nil {
		return err
	}
	if err := s.Quiet(To(c.Local), 0, "a duplicate REQ in REP_SENT is dropped"); err != nil {
		return err
	}
	if err := s.Send(c.RTU()); err != nil {
		return err
	}
	if err := s.Send(req); err != nil {
		return err
	}
	if err := s.Quiet(To(c.Local), 0, "a duplicate REQ once established is dropped"); err != nil {
		return err
	}
	return s.Disconnect(c)
}

func reqStale(s *Session) error {
	qpn := s.QPN()
	a, err := s.Connect(qpn, GUID1)
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond) // the RTU is in
	b, req := s.REQ(qpn, GUID1, nil)
	if err := s.Send(req); err != nil {
		return err
	}
	if err := s.expectREJStale(b); err != nil {
		return err
	}
	d, err := s.Expect(cm.AttrDREQ, To(a.Local), "the DREQ that ends the stale connection")
	if err != nil {
		return err
	}
	return s.Send(a.DREP(d))
}

// expectREJStale waits for REJ 10 to c's REQ.
func (s *Session) expectREJStale(c *Conn) error {
	m, err := s.Expect(cm.AttrREJ, To(c.Local), "REJ 10 (stale connection)")
	if err != nil {
		return err
	}
	if r := cm.REJ(m); r.Reason() != cm.RejectStaleConnection || r.MsgRejected() != cm.MsgTypeREQ {
		return fmt.Errorf("got %s, want REJ 10, message rejected REQ", Describe(m))
	}
	return nil
}

func reqSameQPNOtherGUID(s *Session) error {
	qpn := s.QPN()
	a, err := s.Connect(qpn, GUID1)
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	b, req := s.REQ(qpn, GUID2, nil)
	if err := s.Send(req); err != nil {
		return err
	}
	rep, err := s.Expect(cm.AttrREP, To(b.Local), "a REP: another CA's QP is another connection")
	if err != nil {
		if x := s.next(To(b.Local), 0); x != nil {
			return fmt.Errorf("%w (got %s)", err, Describe(x))
		}
		return err
	}
	b.Remote, b.PeerQPN = cm.REP(rep).LocalCommID(), cm.REP(rep).LocalQPN()
	if err := s.Quiet(To(a.Local), 0, "the first connection stays up"); err != nil {
		return err
	}
	if err := s.Send(b.RTU()); err != nil {
		return err
	}
	if err := s.Disconnect(b); err != nil {
		return err
	}
	return s.Disconnect(a)
}

// unknownDropped sends a MAD of attribute a for comm IDs the target does
// not know and checks that nothing answers.
func unknownDropped(a cm.AttrID) func(s *Session) error {
	return func(s *Session) error {
		c := &Conn{Local: s.CommID(), Remote: s.CommID(), TID: s.rng.Uint64()}
		m := make([]byte, cm.MADSize)
		switch a {
		case cm.AttrRTU:
			m = c.RTU()
		case cm.AttrREP:
			cm.REP(m).Encode(&cm.REPFields{TID: c.TID, LocalCommID: c.Local, RemoteCommID: c.Remote,
				LocalQPN: s.QPN(), LocalCAGUID: uint64(GUID1), RNRRetryCount: 7})
		case cm.AttrREJ:
			m = c.REJ(cm.RejectConsumerDefined, cm.MsgTypeREP, nil)
		case cm.AttrDREP:
			cm.DREP(m).Encode(&cm.CommFields{TID: c.TID, LocalCommID: c.Local, RemoteCommID: c.Remote})
		}
		if err := s.Send(m); err != nil {
			return err
		}
		return s.Quiet(To(c.Local), 0, fmt.Sprintf("a %v for unknown comm IDs is dropped", a))
	}
}

func dreqUnknown(s *Session) error {
	c := &Conn{Local: s.CommID(), Remote: s.CommID(), TID: s.rng.Uint64()}
	if err := s.Send(c.DREQ(s.QPN())); err != nil {
		return err
	}
	m, err := s.Expect(cm.AttrDREP, To(c.Local), "cm_issue_drep's DREP")
	if err != nil {
		return err
	}
	if got := cm.CommID(binary.BigEndian.Uint32(m[cm.HeaderSize:])); got != c.Remote {
		return fmt.Errorf("got %s, want local comm ID %#x (the DREQ's remote)", Describe(m), uint32(c.Remote))
	}
	return nil
}

func mraForREP(s *Session) error {
	c, req := s.REQ(s.QPN(), GUID1, func(f *cm.REQFields, h cm.IPHeader) {
		f.LocalCMResponseTimeout = 17 // the REP's timer: 512 ms
	})
	if err := s.Send(req); err != nil {
		return err
	}
	rep, err := s.Expect(cm.AttrREP, To(c.Local), "the REP")
	if err != nil {
		return err
	}
	c.Remote, c.PeerQPN = cm.REP(rep).LocalCommID(), cm.REP(rep).LocalQPN()
	m := make([]byte, cm.MADSize)
	cm.MRA(m).Encode(&cm.MRAFields{TID: c.TID, LocalCommID: c.Local, RemoteCommID: c.Remote,
		MsgMRAed: cm.MsgTypeREP, ServiceTimeout: 23})
	if err := s.Send(m); err != nil {
		return err
	}
	if n := s.Count(Attr(cm.AttrREP, To(c.Local)), 2500*time.Millisecond); n != 0 {
		return fmt.Errorf("%d REPs in 2.5 s after the MRA (its timer was 512 ms): the MRA did not stretch it", n)
	}
	if err := s.Send(c.RTU()); err != nil {
		return err
	}
	return s.Disconnect(c)
}

func noRTU(s *Session) error {
	c, req := s.REQ(s.QPN(), GUID1, func(f *cm.REQFields, h cm.IPHeader) {
		f.LocalCMResponseTimeout, f.MaxCMRetries = 16, 2 // the REP every 256 ms, 1 + 2 times
	})
	if err := s.Send(req); err != nil {
		return err
	}
	n := s.Count(Attr(cm.AttrREP, To(c.Local)), 3*time.Second)
	if n != 3 {
		return fmt.Errorf("%d REPs in 3 s, want 1 + Max CM Retries 2", n)
	}
	return s.Quiet(To(c.Local), 0, "silence once the REP's retries ran out")
}

func rejTimeoutARI(right bool) func(s *Session) error {
	return func(s *Session) error {
		c, req := s.REQ(s.QPN(), GUID1, func(f *cm.REQFields, h cm.IPHeader) {
			f.LocalCMResponseTimeout = 17 // the REP every 512 ms
		})
		if err := s.Send(req); err != nil {
			return err
		}
		if _, err := s.Expect(cm.AttrREP, To(c.Local), "the REP"); err != nil {
			return err
		}
		guid := c.GUID
		if !right {
			guid = GUID2
		}
		// cm_destroy_id in REQ_SENT: our comm ID, remote 0, message
		// rejected Other, the node GUID as ARI.
		rej := c.REJ(cm.RejectTimeout, cm.MsgTypeOther, binary.BigEndian.AppendUint64(nil, uint64(guid)))
		if err := s.Send(rej); err != nil {
			return err
		}
		n := s.Count(Attr(cm.AttrREP, To(c.Local)), 2*time.Second)
		switch {
		case right && n != 0:
			return fmt.Errorf("%d REPs in 2 s after REJ Timeout with the REQ's CA GUID (the timer is 512 ms): the connection was not found by (comm ID, CA GUID)", n)
		case !right && n == 0:
			return fmt.Errorf("no REP in 2 s after REJ Timeout with another CA GUID: the connection was dropped by a REJ that names another CA")
		}
		if !right {
			return s.Send(c.REJ(cm.RejectTimeout, cm.MsgTypeOther, binary.BigEndian.AppendUint64(nil, uint64(c.GUID))))
		}
		return nil
	}
}

// dial starts the target's n connections and returns their REQs.
func (s *Session) dial(n int) ([]*Conn, []cm.REQ, error) {
	if err := s.Dial(n); err != nil {
		return nil, nil, fmt.Errorf("dial: %w", err)
	}
	seen := map[cm.CommID]bool{}
	var cs []*Conn
	var rs []cm.REQ
	for range n {
		c, r, err := s.REQFrom(seen)
		if err != nil {
			return nil, nil, err
		}
		cs, rs = append(cs, c), append(rs, r)
	}
	return cs, rs, nil
}

// accept answers the target's REQ r with a REP and waits for its RTU.
func (s *Session) accept(c *Conn, r cm.REQ, qpn bth.QPN, guid cm.GUID) error {
	if err := s.Send(c.REP(r, qpn, guid, bth.PSN(s.rng.Uint32()&0xffffff))); err != nil {
		return err
	}
	_, err := s.Expect(cm.AttrRTU, To(c.Local), "the RTU to our REP")
	return err
}

func repStale(s *Session) error {
	cs, rs, err := s.dial(2)
	if err != nil {
		return err
	}
	a, b := cs[0], cs[1]
	qpn := s.QPN()
	if err := s.accept(a, rs[0], qpn, GUID1); err != nil {
		return err
	}
	if err := s.Send(b.REP(rs[1], qpn, GUID1, 1)); err != nil {
		return err
	}
	m, err := s.Expect(cm.AttrREJ, To(b.Local), "REJ 10 to the stale REP")
	if err != nil {
		if x := s.next(To(b.Local), 0); x != nil {
			return fmt.Errorf("%w (got %s)", err, Describe(x))
		}
		return err
	}
	if r := cm.REJ(m); r.Reason() != cm.RejectStaleConnection || r.MsgRejected() != cm.MsgTypeREP || r.LocalCommID() != b.Remote {
		return fmt.Errorf("got %s, want REJ 10, message rejected REP, local comm ID %#x", Describe(m), uint32(b.Remote))
	}
	d, err := s.Expect(cm.AttrDREQ, To(a.Local), "the DREQ that ends the older connection")
	if err != nil {
		return err
	}
	if err := s.Send(a.DREP(d)); err != nil {
		return err
	}
	// The second REQ is still out (the REP was dropped): refuse it.
	return s.Send(b.REJ(cm.RejectConsumerDefined, cm.MsgTypeREQ, nil))
}

func repDuplicateCommID(s *Session) error {
	cs, rs, err := s.dial(2)
	if err != nil {
		return err
	}
	a, b := cs[0], cs[1]
	if err := s.accept(a, rs[0], s.QPN(), GUID1); err != nil {
		return err
	}
	b.Local = a.Local // the same (comm ID, CA GUID) as the established one
	if err := s.Send(b.REP(rs[1], s.QPN(), GUID1, 1)); err != nil {
		return err
	}
	if err := s.Quiet(Attr(cm.AttrRTU, To(b.Local)), 0, "no second RTU for the reused comm ID"); err != nil {
		return err
	}
	if err := s.Quiet(Attr(cm.AttrREJ, func(m cm.MAD) bool { return cm.REJ(m).LocalCommID() == b.Remote }), 0,
		"no REJ: the kernel drops a REP whose (comm ID, CA GUID) it knows"); err != nil {
		return err
	}
	if err := s.Disconnect(a); err != nil {
		return err
	}
	b.Local = s.CommID()
	return s.Send(b.REJ(cm.RejectConsumerDefined, cm.MsgTypeREQ, nil))
}

func repLostRTU(s *Session) error {
	cs, rs, err := s.dial(1)
	if err != nil {
		return err
	}
	c := cs[0]
	rep := c.REP(rs[0], s.QPN(), GUID1, 1)
	if err := s.Send(rep); err != nil {
		return err
	}
	if _, err := s.Expect(cm.AttrRTU, To(c.Local), "the RTU"); err != nil {
		return err
	}
	if err := s.Send(rep); err != nil {
		return err
	}
	if _, err := s.Expect(cm.AttrRTU, To(c.Local), "the RTU again, for the REP again"); err != nil {
		return err
	}
	return s.Disconnect(c)
}

func dreqWrongQPN(s *Session) error {
	cs, rs, err := s.dial(1)
	if err != nil {
		return err
	}
	c := cs[0]
	if err := s.accept(c, rs[0], s.QPN(), GUID1); err != nil {
		return err
	}
	if err := s.Send(c.DREQ(c.PeerQPN ^ 0x5a5a)); err != nil {
		return err
	}
	if err := s.Quiet(To(c.Local), 0, "a DREQ for another QP is dropped"); err != nil {
		return err
	}
	return s.Disconnect(c)
}
