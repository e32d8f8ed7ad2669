package cm

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

func checkPD(pd []byte, n int) error {
	if len(pd) > n {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrPrivateData, len(pd), n)
	}
	return nil
}

// Connect starts an active connection: it sends a REQ and arms its
// retransmission timer (REQSent). The comm ID names the connection in
// later events and calls.
func (m *Manager) Connect(now time.Time, p *ConnectParams) (CommID, Output, error) {
	if err := checkPD(p.PrivateData, PrivateDataREQ); err != nil {
		return 0, Output{}, err
	}
	if p.Transport != TransportRC && p.Transport != TransportUC || p.PathMTU.Bytes() == 0 ||
		p.RetryCount > 7 || p.RNRRetryCount > 7 || p.QPN > 0xffffff || !p.StartingPSN.Valid() || !p.Peer.IsValid() {
		return 0, Output{}, fmt.Errorf("%w: %+v", ErrInvalidParam, *p)
	}
	id, err := m.newID()
	if err != nil {
		return 0, Output{}, err
	}
	path := p.Path
	if path.LocalACKTimeout == 0 {
		path.LocalACKTimeout = ACKTimeout(m.cfg.TargetACKDelay, m.cfg.PacketLifeTime)
	}
	pkey := p.PKey
	if pkey == 0 {
		pkey = DefaultPKey
	}
	c := &conn{state: StateREQSent, local: id, peer: p.Peer, sid: p.ServiceID, tid: m.tid(id),
		maxRetries: int(m.cfg.MaxCMRetries)}
	c.qp = QPParams{Transport: p.Transport, LocalQPN: p.QPN, RecvPSN: p.StartingPSN, PathMTU: p.PathMTU,
		RetryCount: p.RetryCount, ACKTimeout: path.LocalACKTimeout, Path: path}
	// cm_send_req: the REQ waits 2·packet life time plus the peer's
	// response time per try.
	c.respTimeout = 2*Timeout(m.cfg.PacketLifeTime) + Timeout(m.cfg.CMResponseTimeout)
	msg := make([]byte, MADSize)
	REQ(msg).Encode(&REQFields{
		TID: c.tid, LocalCommID: id, ServiceID: p.ServiceID, LocalCAGUID: m.cfg.LocalCAGUID,
		LocalQPN: p.QPN, ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		RemoteCMResponseTimeout: m.cfg.CMResponseTimeout, TransportType: p.Transport,
		E2EFlowControl: p.FlowControl, StartingPSN: p.StartingPSN,
		LocalCMResponseTimeout: m.cfg.CMResponseTimeout, RetryCount: p.RetryCount, PKey: pkey,
		PathMTU: p.PathMTU, RNRRetryCount: p.RNRRetryCount, MaxCMRetries: m.cfg.MaxCMRetries,
		SRQ: p.SRQ, PrimaryPath: path, PrivateData: p.PrivateData,
	})
	m.conns[id] = c
	m.send(c.peer, msg)
	c.arm(now, msg, c.respTimeout, c.maxRetries)
	return id, m.flush(), nil
}

// Accept answers a REQ with a REP (REPSent) and returns the QP attributes
// to bring the local QP to RTR and RTS with before the REP leaves.
func (m *Manager) Accept(now time.Time, id CommID, p *AcceptParams) (QPParams, Output, error) {
	c := m.conns[id]
	if c == nil {
		return QPParams{}, Output{}, ErrUnknownID
	}
	if c.state != StateREQRcvd && c.state != StateMRAREQSent {
		return QPParams{}, Output{}, fmt.Errorf("%w: Accept in %v", ErrInvalidState, c.state)
	}
	if err := checkPD(p.PrivateData, PrivateDataREP); err != nil {
		return QPParams{}, Output{}, err
	}
	if p.QPN > 0xffffff || !p.StartingPSN.Valid() || p.RNRRetryCount > 7 {
		return QPParams{}, Output{}, fmt.Errorf("%w: %+v", ErrInvalidParam, *p)
	}
	req := REQ(c.req)
	// librdmacm's rdma_accept: never offer more than the REQ asked for.
	resp := min(p.ResponderResources, req.InitiatorDepth())
	init := min(p.InitiatorDepth, req.ResponderResources())
	c.qp.LocalQPN, c.qp.RecvPSN = p.QPN, p.StartingPSN
	c.qp.MaxRdAtomic, c.qp.MaxDestRdAtomic = init, resp
	msg := make([]byte, MADSize)
	REP(msg).Encode(&REPFields{
		TID: c.tid, LocalCommID: c.local, RemoteCommID: c.remote, LocalQPN: p.QPN,
		StartingPSN: p.StartingPSN, ResponderResources: resp, InitiatorDepth: init,
		TargetACKDelay: m.cfg.TargetACKDelay, E2EFlowControl: p.FlowControl,
		RNRRetryCount: p.RNRRetryCount, SRQ: p.SRQ, LocalCAGUID: m.cfg.LocalCAGUID,
		PrivateData: p.PrivateData,
	})
	c.state = StateREPSent
	c.reply = nil
	m.send(c.peer, msg)
	c.arm(now, msg, c.respTimeout, c.maxRetries)
	return c.qp, m.flush(), nil
}

// Reject refuses a REQ (rdma_reject sends RejectConsumerDefined) and
// forgets the connection. As the kernel's cm_format_rej, the REJ's Local
// Communication ID is 0 in REQRcvd (the REQ was refused before the
// consumer saw it: rdma_cm's own checks) and the connection's in
// MRAREQSent (the consumer's refusal; see MRAFlagDelay).
func (m *Manager) Reject(now time.Time, id CommID, reason RejectReason, pd []byte) (Output, error) {
	c := m.conns[id]
	if c == nil {
		return Output{}, ErrUnknownID
	}
	if c.state != StateREQRcvd && c.state != StateMRAREQSent {
		return Output{}, fmt.Errorf("%w: Reject in %v", ErrInvalidState, c.state)
	}
	if err := checkPD(pd, PrivateDataREJ); err != nil {
		return Output{}, err
	}
	local := c.local
	if c.state == StateREQRcvd {
		local = 0
	}
	m.sendREJ(c.peer, &REJFields{TID: c.tid, LocalCommID: local, RemoteCommID: c.remote,
		MsgRejected: MsgTypeREQ, Reason: reason, PrivateData: pd})
	m.remove(c)
	return m.flush(), nil
}

// MRAFlagDelay, or'ed into SendMRA's service timeout, records the MRA
// without sending it (the kernel's IB_CM_MRA_FLAG_DELAY): the connection
// enters MRAREQSent, and the MRA goes out only to answer a duplicate REQ.
// rdma_cm does so for every REQ it hands its consumer (cma_ib_req_handler,
// CMA_CM_MRA_SETTING: the flag and service timeout 24), so the consumer's
// REP or REJ follows from MRAREQSent.
const MRAFlagDelay = 0x80

// SendMRA tells the active side that the consumer needs up to
// serviceTimeout (4.096 µs·2^n) more to answer its REQ (MRAREQSent);
// with MRAFlagDelay set in serviceTimeout the MRA is only recorded.
// Duplicate REQs are answered with the MRA.
func (m *Manager) SendMRA(now time.Time, id CommID, serviceTimeout uint8, pd []byte) (Output, error) {
	c := m.conns[id]
	if c == nil {
		return Output{}, ErrUnknownID
	}
	if c.state != StateREQRcvd {
		return Output{}, fmt.Errorf("%w: MRA in %v", ErrInvalidState, c.state)
	}
	if err := checkPD(pd, PrivateDataMRA); err != nil {
		return Output{}, err
	}
	delay := serviceTimeout&MRAFlagDelay != 0
	serviceTimeout &^= MRAFlagDelay
	if serviceTimeout > 31 {
		return Output{}, fmt.Errorf("%w: service timeout %d", ErrInvalidParam, serviceTimeout)
	}
	msg := make([]byte, MADSize)
	MRA(msg).Encode(&MRAFields{TID: c.tid, LocalCommID: c.local, RemoteCommID: c.remote,
		MsgMRAed: MsgTypeREQ, ServiceTimeout: serviceTimeout, PrivateData: pd})
	c.state = StateMRAREQSent
	c.reply = msg
	if !delay {
		m.send(c.peer, msg)
	}
	return m.flush(), nil
}

// Disconnect sends a DREQ (DREQSent). It is a no-op for a connection
// that is already disconnecting or in time-wait, so both sides may call
// it at once.
func (m *Manager) Disconnect(now time.Time, id CommID, pd []byte) (Output, error) {
	c := m.conns[id]
	if c == nil {
		return Output{}, ErrUnknownID
	}
	switch c.state {
	case StateDREQSent, StateDREQRcvd, StateTimewait:
		return Output{}, nil
	case StateEstablished:
	default:
		return Output{}, fmt.Errorf("%w: Disconnect in %v", ErrInvalidState, c.state)
	}
	if err := checkPD(pd, PrivateDataDREQ); err != nil {
		return Output{}, err
	}
	m.disconnect(now, c, pd)
	return m.flush(), nil
}

// disconnect sends a DREQ for an established connection.
func (m *Manager) disconnect(now time.Time, c *conn, pd []byte) {
	msg := make([]byte, MADSize)
	DREQ(msg).Encode(&DREQFields{TID: m.tid(c.local), LocalCommID: c.local, RemoteCommID: c.remote,
		RemoteQPN: c.qp.RemoteQPN, PrivateData: pd})
	c.state = StateDREQSent
	m.send(c.peer, msg)
	c.arm(now, msg, c.respTimeout, c.maxRetries)
}

// OnTimeout retransmits the messages whose timer expired, gives up on
// those out of retries, and ends time-waits. Call it at Deadline.
func (m *Manager) OnTimeout(now time.Time) Output {
	var due []*conn
	for _, c := range m.conns {
		if !c.deadline.IsZero() && !c.deadline.After(now) {
			due = append(due, c)
		}
	}
	// Map order is random; handle expiries in deadline, then ID, order.
	slices.SortFunc(due, func(a, b *conn) int {
		if r := a.deadline.Compare(b.deadline); r != 0 {
			return r
		}
		return cmp.Compare(a.local, b.local)
	})
	for _, c := range due {
		if c.state == StateTimewait {
			m.event(c, EventTimewaitExit, nil)
			m.remove(c)
			continue
		}
		if c.retries > 0 {
			c.retries--
			m.stats.Retransmitted++
			m.send(c.peer, c.msg)
			c.deadline = now.Add(c.timeout)
			continue
		}
		// cm_process_send_error.
		switch c.state {
		case StateREQSent, StateMRAREQRcvd, StateREPSent, StateMRAREPRcvd, StateSIDRREQSent:
			m.stats.TimedOut++
			m.event(c, EventUnreachable, nil)
			m.remove(c)
		case StateDREQSent:
			m.event(c, EventDisconnected, nil).TimedOut = true
			m.timewait(now, c)
		default:
			c.cancel()
		}
	}
	return m.flush()
}

// Destroy forgets a connection the consumer gives up on, telling the
// peer as the kernel's cm_destroy_id does for each state:
//
//   - REQSent, MRAREQRcvd (a Dial canceled while the REQ is out): the
//     retransmissions stop and a REJ with reason Timeout goes to the
//     peer, its ARI the local CA GUID (8 bytes), so the listener drops
//     its half-open connection at once instead of waiting out its REP's
//     retransmissions;
//   - REQRcvd, MRAREQSent, REPRcvd, MRAREPSent, and REPSent, MRAREPRcvd
//     (whose REP timer stops): a REJ with reason ConsumerDefined;
//   - Established: a DREQ, and the connection is forgotten without
//     waiting for the DREP (a late DREP is dropped as unmatched);
//   - DREQSent, DREQRcvd, Timewait, SIDR states: forgotten, nothing sent.
//
// No event is reported for the destroyed connection. It returns
// ErrUnknownID for an ID the Manager does not know.
func (m *Manager) Destroy(now time.Time, id CommID) (Output, error) {
	c := m.conns[id]
	if c == nil {
		return Output{}, ErrUnknownID
	}
	// cm_format_rej: MsgRejected names the message being refused, the
	// REQ (local comm ID 0 while it was only received) or the REP, and is
	// Other once ours is out.
	rej := &REJFields{TID: c.tid, LocalCommID: c.local, RemoteCommID: c.remote,
		MsgRejected: MsgTypeOther, Reason: RejectConsumerDefined}
	switch c.state {
	case StateREQSent, StateMRAREQRcvd:
		// The peer has not told us its comm ID: it finds the connection
		// by our comm ID and the CA GUID in the ARI (cm_acquire_rejected_id).
		rej.Reason, rej.RejectInfoLen = RejectTimeout, 8
		rej.ARI = binary.BigEndian.AppendUint64(nil, m.cfg.LocalCAGUID)
		m.sendREJ(c.peer, rej)
	case StateREQRcvd:
		rej.LocalCommID, rej.MsgRejected = 0, MsgTypeREQ
		m.sendREJ(c.peer, rej)
	case StateMRAREQSent:
		rej.MsgRejected = MsgTypeREQ
		m.sendREJ(c.peer, rej)
	case StateREPRcvd, StateMRAREPSent:
		rej.MsgRejected = MsgTypeREP
		m.sendREJ(c.peer, rej)
	case StateREPSent, StateMRAREPRcvd:
		m.sendREJ(c.peer, rej)
	case StateEstablished:
		m.disconnect(now, c, nil)
	}
	m.stats.Destroyed++
	m.remove(c)
	return m.flush(), nil
}
