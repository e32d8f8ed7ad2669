package cm

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// Receive processes one MAD that arrived on QP1 from the peer at from.
// b is not retained. Anything that is not a CM Send MAD, or that matches
// no connection in a state that takes it, is dropped and counted.
func (m *Manager) Receive(now time.Time, from netip.Addr, b []byte) Output {
	mad, err := Parse(b)
	if err != nil || mad.Method() != MethodSend {
		m.stats.Malformed++
		return Output{}
	}
	m.stats.Received++
	switch mad.AttrID() {
	case AttrREQ:
		m.onREQ(now, from, REQ(mad))
	case AttrMRA:
		m.onMRA(now, MRA(mad))
	case AttrREJ:
		m.onREJ(now, REJ(mad))
	case AttrREP:
		m.onREP(now, REP(mad))
	case AttrRTU:
		m.onRTU(now, RTU(mad))
	case AttrDREQ:
		m.onDREQ(now, from, DREQ(mad))
	case AttrDREP:
		m.onDREP(now, DREP(mad))
	case AttrSIDRREQ:
		m.onSIDRREQ(from, SIDRREQ(mad))
	case AttrSIDRREP:
		m.onSIDRREP(SIDRREP(mad))
	default:
		// LAP/APR and ClassPortInfo are not handled.
		m.stats.Malformed++
	}
	return m.flush()
}

// sendREJ sends a REJ; it allocates the MAD.
func (m *Manager) sendREJ(peer netip.Addr, f *REJFields) {
	msg := make([]byte, MADSize)
	REJ(msg).Encode(f)
	m.stats.Rejected++
	m.out.Send = append(m.out.Send, Datagram{Peer: peer, MAD: msg})
}

// issueREJ answers a REQ without a connection (cm_issue_rej): the comm
// IDs are the REQ's, swapped, so the local one is the REQ's reserved 0.
func (m *Manager) issueREJ(from netip.Addr, r REQ, reason RejectReason) {
	m.sendREJ(from, &REJFields{TID: r.MAD().TID(), LocalCommID: CommID(u32(r, offRemoteCommID)),
		RemoteCommID: r.LocalCommID(), MsgRejected: MsgTypeREQ, Reason: reason})
}

// conn returns the connection a reply names: local is our comm ID as the
// peer echoes it, remote the peer's, which must match once known.
func (m *Manager) connFor(local, remote CommID) *conn {
	c := m.conns[local]
	if c == nil || c.remote != remote {
		m.stats.Unmatched++
		return nil
	}
	return c
}

// onREQ is cm_req_handler: duplicates, stale connections, listeners.
func (m *Manager) onREQ(now time.Time, from netip.Addr, r REQ) {
	guid := r.LocalCAGUID()
	if c := m.byRemote[remoteKey{r.LocalCommID(), guid}]; c != nil {
		m.dupREQ(c, r)
		return
	}
	if c := m.byQPN[qpnKey{r.LocalQPN(), guid}]; c != nil {
		// A new REQ from a QP we still think is connected: that
		// connection is stale (IBA 12.9.8.3.1). Refuse the REQ, and
		// tear the old connection down.
		m.issueREJ(from, r, RejectStaleConnection)
		if c.state == StateEstablished {
			m.disconnect(now, c, nil)
		}
		return
	}
	sid := r.ServiceID()
	if !m.listeners[sid] {
		m.issueREJ(from, r, RejectInvalidServiceID)
		return
	}
	id, err := m.newID()
	if err != nil {
		m.issueREJ(from, r, RejectNoResources)
		return
	}
	pri := r.PrimaryPath()
	path := pri
	path.LocalLID, path.RemoteLID = pri.RemoteLID, pri.LocalLID
	path.LocalGID, path.RemoteGID = pri.RemoteGID, pri.LocalGID
	c := &conn{state: StateREQRcvd, local: id, remote: r.LocalCommID(), passive: true, peer: from,
		guid: guid, sid: sid, tid: r.MAD().TID(), req: clone(r),
		maxRetries: int(r.MaxCMRetries()), respTimeout: Timeout(r.LocalCMResponseTimeout())}
	c.qp = QPParams{Transport: r.TransportType(), RemoteQPN: r.LocalQPN(), SendPSN: r.StartingPSN(),
		PathMTU: r.PathMTU(), MaxRdAtomic: r.ResponderResources(), MaxDestRdAtomic: r.InitiatorDepth(),
		RetryCount: r.RetryCount(), RNRRetryCount: r.RNRRetryCount(), ACKTimeout: pri.LocalACKTimeout,
		SRQ: r.SRQ(), Path: path}
	m.conns[id] = c
	m.byRemote[remoteKey{c.remote, guid}] = c
	m.byQPN[qpnKey{c.qp.RemoteQPN, guid}] = c
	c.inRemoteID, c.inRemoteQPN = true, true
	m.event(c, EventConnectRequest, r.PrivateData())
}

// dupREQ is cm_dup_req_handler. The kernel answers a duplicate REQ only
// in MRA_REQ_SENT (the MRA again) and in time-wait (REJ stale
// connection); in REQ_RCVD, REP_SENT and Established it drops it, since
// the REP has its own retransmission timer.
func (m *Manager) dupREQ(c *conn, r REQ) {
	m.stats.Duplicates++
	switch c.state {
	case StateMRAREQSent:
		m.send(c.peer, c.reply)
	case StateTimewait:
		m.sendREJ(c.peer, &REJFields{TID: r.MAD().TID(), LocalCommID: c.local, RemoteCommID: c.remote,
			MsgRejected: MsgTypeOther, Reason: RejectStaleConnection})
	}
}

// onMRA is cm_mra_handler: the peer needs longer; stretch the timer of
// the message it acknowledges to its service timeout plus the path's.
func (m *Manager) onMRA(now time.Time, r MRA) {
	c := m.conns[r.RemoteCommID()]
	if c == nil {
		m.stats.Unmatched++
		return
	}
	switch {
	case c.state == StateREQSent && r.MsgMRAed() == MsgTypeREQ:
		c.state = StateMRAREQRcvd
	case c.state == StateREPSent && r.MsgMRAed() == MsgTypeREP && c.remote == r.LocalCommID():
		c.state = StateMRAREPRcvd
	case c.state == StateMRAREQRcvd || c.state == StateMRAREPRcvd:
		m.stats.Duplicates++
		return
	default:
		m.stats.WrongState++
		return
	}
	c.timeout = Timeout(r.ServiceTimeout()) + Timeout(c.qp.ACKTimeout)
	c.deadline = now.Add(c.timeout)
	m.event(c, EventMRA, r.PrivateData())
}

// onREJ is cm_rej_handler.
func (m *Manager) onREJ(now time.Time, r REJ) {
	var c *conn
	if r.Reason() == RejectTimeout {
		// The peer gave up on its REQ (cm_destroy_id in REQ_SENT) before
		// it learned our comm ID: it names the connection by its own comm
		// ID and its CA GUID in the ARI (cm_acquire_rejected_id).
		if r.RejectInfoLen() >= 8 {
			c = m.byRemote[remoteKey{r.LocalCommID(), binary.BigEndian.Uint64(r.ARI())}]
		}
	} else {
		c = m.conns[r.RemoteCommID()]
		// A REJ of our REQ comes before we know the peer's comm ID.
		if c != nil && r.MsgRejected() != MsgTypeREQ && c.remote != r.LocalCommID() {
			c = nil
		}
	}
	if c == nil {
		m.stats.Unmatched++
		return
	}
	switch c.state {
	case StateREQSent, StateMRAREQRcvd, StateREPSent, StateMRAREPRcvd, StateREQRcvd, StateMRAREQSent:
		e := m.event(c, EventRejected, r.PrivateData())
		e.Reason = r.Reason()
		if r.Reason() == RejectStaleConnection {
			m.timewait(now, c)
		} else {
			m.remove(c)
		}
	case StateDREQSent, StateREPRcvd, StateMRAREPSent, StateEstablished:
		e := m.event(c, EventRejected, r.PrivateData())
		e.Reason = r.Reason()
		m.timewait(now, c)
	default:
		m.stats.WrongState++
	}
}

// onREP is cm_rep_handler (active side). The RTU goes out at once.
func (m *Manager) onREP(now time.Time, r REP) {
	c := m.conns[r.RemoteCommID()]
	if c == nil || c.passive {
		m.stats.Unmatched++
		return
	}
	if c.remote != 0 {
		// cm_dup_rep_handler: the RTU (or MRA) got lost.
		if c.remote != r.LocalCommID() {
			m.stats.Unmatched++
			return
		}
		m.stats.Duplicates++
		if (c.state == StateEstablished || c.state == StateMRAREPSent) && c.reply != nil {
			m.send(c.peer, c.reply)
		}
		return
	}
	if c.state != StateREQSent && c.state != StateMRAREQRcvd {
		m.stats.WrongState++
		return
	}
	guid := r.LocalCAGUID()
	if m.byRemote[remoteKey{r.LocalCommID(), guid}] != nil {
		// cm_rep_handler: a (comm ID, CA GUID) another connection has is
		// a duplicate REP; dropped, and the REQ's timer goes on.
		m.stats.Duplicates++
		return
	}
	if old := m.byQPN[qpnKey{r.LocalQPN(), guid}]; old != nil {
		// cm_rep_handler: a REP from the QP of a connection we still have
		// is stale (IBA 12.9.8.3.1): REJ it (cm_issue_rej: the REP's comm
		// IDs swapped), DREQ the old connection if it is established,
		// and keep this one in REQSent: its REQ is retransmitted.
		m.sendREJ(c.peer, &REJFields{TID: r.MAD().TID(), LocalCommID: r.RemoteCommID(), RemoteCommID: r.LocalCommID(),
			MsgRejected: MsgTypeREP, Reason: RejectStaleConnection})
		if old.state == StateEstablished {
			m.disconnect(now, old, nil)
		}
		return
	}
	c.remote, c.guid = r.LocalCommID(), guid
	c.state = StateREPRcvd
	c.cancel()
	c.qp.RemoteQPN, c.qp.SendPSN = r.LocalQPN(), r.StartingPSN()
	c.qp.MaxRdAtomic, c.qp.MaxDestRdAtomic = r.ResponderResources(), r.InitiatorDepth()
	c.qp.RNRRetryCount, c.qp.SRQ = r.RNRRetryCount(), r.SRQ()
	c.qp.ACKTimeout = ACKTimeout(r.TargetACKDelay(), c.qp.Path.LocalACKTimeout-1)
	m.byRemote[remoteKey{c.remote, guid}] = c
	m.byQPN[qpnKey{c.qp.RemoteQPN, guid}] = c
	c.inRemoteID, c.inRemoteQPN = true, true
	msg := make([]byte, MADSize)
	RTU(msg).Encode(&CommFields{TID: c.tid, LocalCommID: c.local, RemoteCommID: c.remote})
	c.state = StateEstablished
	c.reply = msg
	m.event(c, EventEstablished, r.PrivateData())
	m.send(c.peer, msg)
}

// onRTU is cm_rtu_handler (passive side).
func (m *Manager) onRTU(now time.Time, r RTU) {
	c := m.connFor(r.RemoteCommID(), r.LocalCommID())
	if c == nil {
		return
	}
	if c.state != StateREPSent && c.state != StateMRAREPRcvd {
		m.stats.Duplicates++
		return
	}
	c.state = StateEstablished
	c.cancel()
	m.event(c, EventEstablished, r.PrivateData())
}

// onDREQ is cm_dreq_handler. The DREP goes out at once (rdma_cm's
// consumer would call rdma_disconnect on the event; this stack answers
// for it) and the connection enters time-wait.
func (m *Manager) onDREQ(now time.Time, from netip.Addr, r DREQ) {
	c := m.conns[r.RemoteCommID()]
	if c == nil || c.remote != r.LocalCommID() {
		// cm_issue_drep: answer a DREQ for a connection we forgot.
		m.stats.Unmatched++
		msg := make([]byte, MADSize)
		DREP(msg).Encode(&CommFields{TID: r.MAD().TID(), LocalCommID: r.RemoteCommID(),
			RemoteCommID: r.LocalCommID()})
		m.out.Send = append(m.out.Send, Datagram{Peer: from, MAD: msg})
		return
	}
	if r.RemoteQPN() != c.qp.LocalQPN {
		m.stats.WrongState++
		return
	}
	switch c.state {
	case StateREPSent, StateDREQSent, StateMRAREPRcvd, StateEstablished:
		c.cancel()
	case StateTimewait:
		m.stats.Duplicates++
		m.sendDREP(c, r.MAD().TID())
		return
	default: // DREQRcvd and the rest
		m.stats.WrongState++
		return
	}
	c.state = StateDREQRcvd
	c.tid = r.MAD().TID()
	m.event(c, EventDisconnected, r.PrivateData())
	m.sendDREP(c, c.tid)
	m.timewait(now, c)
}

// sendDREP answers a DREQ with the given TID.
func (m *Manager) sendDREP(c *conn, tid uint64) {
	msg := make([]byte, MADSize)
	DREP(msg).Encode(&CommFields{TID: tid, LocalCommID: c.local, RemoteCommID: c.remote})
	m.out.Send = append(m.out.Send, Datagram{Peer: c.peer, MAD: msg})
}

// onDREP is cm_drep_handler.
func (m *Manager) onDREP(now time.Time, r DREP) {
	c := m.connFor(r.RemoteCommID(), r.LocalCommID())
	if c == nil {
		return
	}
	if c.state != StateDREQSent {
		m.stats.Duplicates++
		return
	}
	m.event(c, EventDisconnected, r.PrivateData())
	m.timewait(now, c)
}
