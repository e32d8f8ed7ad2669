package cm

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/bth"
)

// SIDRParams are the parameters of a service ID resolution (rdma_cm's
// rdma_resolve_route + rdma_connect in the UDP port space).
type SIDRParams struct {
	Peer        netip.Addr
	ServiceID   ServiceID
	PKey        uint16 // 0: DefaultPKey
	PrivateData []byte // at most PrivateDataSIDRREQ bytes (rdma_cm: IPHeader first)
}

// SIDRReplyParams answer a SIDR_REQ (rdma_accept or rdma_reject on a UD
// rdma_cm ID).
type SIDRReplyParams struct {
	Status      SIDRStatus
	QPN         bth.QPN
	QKey        uint32 // rdma_cm: RDMA_UDP_QKEY 0x01234567
	PrivateData []byte // at most PrivateDataSIDRREP bytes
}

// ResolveService sends a SIDR_REQ (SIDRREQSent), retransmitted up to
// MaxCMRetries times; the answer comes as EventSIDRReply, or
// EventUnreachable. Unlike a REQ's, its timer is the CM response timeout
// alone, with no packet life time: rdma_cm's cma_resolve_ib_udp hands
// ib_send_cm_sidr_req timeout_ms = 2^(CMA_CM_RESPONSE_TIMEOUT-8) ms
// (4.096 s), which the kernel's CM uses as is.
func (m *Manager) ResolveService(now time.Time, p *SIDRParams) (CommID, Output, error) {
	if err := checkPD(p.PrivateData, PrivateDataSIDRREQ); err != nil {
		return 0, Output{}, err
	}
	if !p.Peer.IsValid() {
		return 0, Output{}, fmt.Errorf("%w: no peer", ErrInvalidParam)
	}
	id, err := m.newID()
	if err != nil {
		return 0, Output{}, err
	}
	pkey := p.PKey
	if pkey == 0 {
		pkey = DefaultPKey
	}
	c := &conn{state: StateSIDRREQSent, local: id, peer: p.Peer, sid: p.ServiceID, tid: m.tid(id),
		respTimeout: Timeout(m.cfg.CMResponseTimeout), maxRetries: int(m.cfg.MaxCMRetries)}
	msg := make([]byte, MADSize)
	SIDRREQ(msg).Encode(&SIDRREQFields{TID: c.tid, RequestID: id, PKey: pkey, ServiceID: p.ServiceID,
		PrivateData: p.PrivateData})
	m.conns[id] = c
	m.send(c.peer, msg)
	c.arm(now, msg, c.respTimeout, c.maxRetries)
	return id, m.flush(), nil
}

// CancelResolve forgets a SIDR_REQ still waiting for its SIDR_REP: no more
// retransmissions, and a late reply is dropped as unmatched (the kernel's
// ib_destroy_cm_id in SIDR_REQ_SENT).
func (m *Manager) CancelResolve(id CommID) error {
	c := m.conns[id]
	if c == nil {
		return ErrUnknownID
	}
	if c.state != StateSIDRREQSent {
		return fmt.Errorf("%w: CancelResolve in %v", ErrInvalidState, c.state)
	}
	m.remove(c)
	return nil
}

// SIDRReply answers a SIDR_REQ and forgets it (ib_send_cm_sidr_rep).
func (m *Manager) SIDRReply(now time.Time, id CommID, p *SIDRReplyParams) (Output, error) {
	c := m.conns[id]
	if c == nil {
		return Output{}, ErrUnknownID
	}
	if c.state != StateSIDRREQRcvd {
		return Output{}, fmt.Errorf("%w: SIDR reply in %v", ErrInvalidState, c.state)
	}
	if err := checkPD(p.PrivateData, PrivateDataSIDRREP); err != nil {
		return Output{}, err
	}
	m.sendSIDRREP(c.peer, &SIDRREPFields{TID: c.tid, RequestID: c.remote, Status: p.Status,
		QPN: p.QPN, ServiceID: c.sid, QKey: p.QKey, PrivateData: p.PrivateData})
	m.remove(c)
	return m.flush(), nil
}

func (m *Manager) sendSIDRREP(peer netip.Addr, f *SIDRREPFields) {
	msg := make([]byte, MADSize)
	SIDRREP(msg).Encode(f)
	m.out.Send = append(m.out.Send, Datagram{Peer: peer, MAD: msg})
}

// onSIDRREQ is cm_sidr_req_handler: duplicates of a pending request are
// dropped; a service nobody listens on is answered "unsupported".
func (m *Manager) onSIDRREQ(from netip.Addr, r SIDRREQ) {
	key := sidrKey{from, r.RequestID()}
	if m.bySIDR[key] != nil {
		m.stats.Duplicates++
		return
	}
	sid := r.ServiceID()
	if !m.listeners[sid] {
		m.sendSIDRREP(from, &SIDRREPFields{TID: r.MAD().TID(), RequestID: r.RequestID(),
			Status: SIDRUnsupported, ServiceID: sid})
		return
	}
	id, err := m.newID()
	if err != nil {
		m.sendSIDRREP(from, &SIDRREPFields{TID: r.MAD().TID(), RequestID: r.RequestID(),
			Status: SIDRReject, ServiceID: sid})
		return
	}
	c := &conn{state: StateSIDRREQRcvd, local: id, remote: r.RequestID(), passive: true, peer: from,
		sid: sid, tid: r.MAD().TID(), inSIDR: true}
	m.conns[id] = c
	m.bySIDR[key] = c
	m.event(c, EventSIDRRequest, r.PrivateData())
}

// onSIDRREP is cm_sidr_rep_handler.
func (m *Manager) onSIDRREP(r SIDRREP) {
	c := m.conns[r.RequestID()]
	if c == nil || c.state != StateSIDRREQSent {
		m.stats.Unmatched++
		return
	}
	c.qp.RemoteQPN = r.QPN()
	e := m.event(c, EventSIDRReply, r.PrivateData())
	e.SIDRStatus, e.QKey = r.Status(), r.QKey()
	m.remove(c)
}

var sidrNames = [...]string{SIDRSuccess: "Success", SIDRUnsupported: "Unsupported", SIDRReject: "Reject",
	SIDRNoQP: "NoQP", SIDRRedirect: "Redirect", SIDRUnsupportedVersn: "UnsupportedVersion"}

// String returns the status's name.
func (s SIDRStatus) String() string {
	if int(s) < len(sidrNames) {
		return sidrNames[s]
	}
	return fmt.Sprintf("SIDRStatus(%d)", uint8(s))
}
