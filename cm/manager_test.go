package cm_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
)

// Timers with rdma_cm's defaults: the REQ waits 2·4.096 µs·2^18 +
// 4.096 µs·2^20 (cm_convert_to_ms: 2·1024 + 4096 ms), the REP the REQ's
// local CM response timeout (4096 ms), time-wait the QP ACK timeout
// (4.096 µs·2^19 → 2048 ms).
const (
	reqTimeout = 6144 * time.Millisecond
	repTimeout = 4096 * time.Millisecond
	timewait   = 2048 * time.Millisecond
)

func TestTimers(t *testing.T) {
	assert.Equal(t, 4096*time.Millisecond, cm.Timeout(cm.DefaultCMResponseTimeout))
	assert.Equal(t, time.Millisecond, cm.Timeout(0))
	assert.EqualValues(t, 19, cm.ACKTimeout(15, 18)) // rping's REQ: 0x13
	assert.EqualValues(t, 19, cm.ACKTimeout(18, 17))
	assert.EqualValues(t, 31, cm.ACKTimeout(31, 31))
}

// TestIBA12_9_Establish runs REQ → REP → RTU, then DREQ → DREP and
// time-wait, and checks the QP attributes both sides get.
func TestIBA12_9_Establish(t *testing.T) {
	p := newPair(t)
	id := p.connect(connectParams())
	assert.Equal(t, cm.StateREQSent, p.a.m.State(id))
	p.run(time.Second)
	require.Equal(t, []cm.EventKind{cm.EventEstablished}, kinds(p.a))
	require.Equal(t, []cm.EventKind{cm.EventConnectRequest, cm.EventEstablished}, kinds(p.b))
	assert.Equal(t, []cm.AttrID{cm.AttrREQ, cm.AttrRTU}, p.a.sent)
	assert.Equal(t, []cm.AttrID{cm.AttrREP}, p.b.sent)

	req := p.b.events[0]
	assert.Equal(t, sid, req.ServiceID)
	assert.Equal(t, addrA, req.Peer)
	assert.Equal(t, "req", string(req.PrivateData[:3]))
	assert.Len(t, req.PrivateData, cm.PrivateDataREQ)

	qa := p.a.events[0].QP
	assert.Equal(t, cm.QPParams{Transport: cm.TransportRC, LocalQPN: 0x1c, RemoteQPN: 0x1c,
		SendPSN: 0x8a4257, RecvPSN: 0x574ee1, PathMTU: cm.MTU1024, MaxRdAtomic: 1, MaxDestRdAtomic: 1,
		RetryCount: 7, RNRRetryCount: 7, ACKTimeout: 19, Path: qa.Path}, qa)
	assert.Equal(t, "rep", string(p.a.events[0].PrivateData[:3]))
	qb := p.b.events[1].QP
	assert.Equal(t, cm.QPParams{Transport: cm.TransportRC, LocalQPN: 0x1c, RemoteQPN: 0x1c,
		SendPSN: 0x574ee1, RecvPSN: 0x8a4257, PathMTU: cm.MTU1024, MaxRdAtomic: 1, MaxDestRdAtomic: 1,
		RetryCount: 7, RNRRetryCount: 7, ACKTimeout: 19, Path: qb.Path}, qb)
	assert.Equal(t, addrB, qb.Path.LocalGID.Addr())
	assert.Equal(t, addrA, qb.Path.RemoteGID.Addr())
	assert.Equal(t, qa.Path.LocalGID, qb.Path.RemoteGID)

	bid := p.b.events[0].ID
	assert.Equal(t, cm.StateEstablished, p.a.m.State(id))
	assert.Equal(t, cm.StateEstablished, p.b.m.State(bid))

	o, err := p.a.m.Disconnect(p.now(), id, []byte("bye"))
	require.NoError(t, err)
	p.out(p.a, o)
	p.run(time.Second)
	assert.Equal(t, cm.StateTimewait, p.a.m.State(id))
	assert.Equal(t, cm.StateTimewait, p.b.m.State(bid))
	require.Equal(t, cm.EventDisconnected, p.b.events[2].Kind)
	assert.Equal(t, "bye", string(p.b.events[2].PrivateData[:3]))
	assert.Equal(t, cm.EventDisconnected, p.a.events[1].Kind)
	assert.False(t, p.a.events[1].TimedOut)

	start := p.now()
	p.run(time.Minute)
	assert.Equal(t, []cm.EventKind{cm.EventEstablished, cm.EventDisconnected, cm.EventTimewaitExit}, kinds(p.a))
	assert.Equal(t, 0, p.a.m.Len())
	assert.Equal(t, 0, p.b.m.Len())
	assert.Equal(t, timewait, p.now().Sub(start).Round(time.Millisecond))
	_, ok := p.a.m.Deadline()
	assert.False(t, ok)
}

// TestLostREQ: the REQ is retransmitted after the REQ timeout.
func TestLostREQ(t *testing.T) {
	p := newPair(t)
	p.impair = dropNth(cm.AttrREQ, 1)
	start := p.now()
	p.connect(connectParams())
	p.run(time.Minute)
	require.Equal(t, []cm.EventKind{cm.EventEstablished}, kinds(p.a))
	assert.Equal(t, 2, count(p.a.sent, cm.AttrREQ))
	assert.EqualValues(t, 1, p.a.m.Stats().Retransmitted)
	assert.Equal(t, reqTimeout+3*oneWay, p.now().Sub(start))
}

// TestLostREP: the passive side resends its REP when its timer expires
// (before the active side's REQ retransmission, which it then drops as a
// duplicate, as cm_dup_req_handler does in REP_SENT).
func TestLostREP(t *testing.T) {
	p := newPair(t)
	p.impair = dropNth(cm.AttrREP, 1)
	p.connect(connectParams())
	p.run(time.Minute)
	require.Equal(t, []cm.EventKind{cm.EventEstablished}, kinds(p.a))
	require.Equal(t, []cm.EventKind{cm.EventConnectRequest, cm.EventEstablished}, kinds(p.b))
	assert.Equal(t, 2, count(p.b.sent, cm.AttrREP))
	assert.Equal(t, 1, count(p.a.sent, cm.AttrREQ), "the REP came back before the REQ timer")
}

// TestDuplicateREQInREPSent: a duplicate REQ that reaches the passive
// side in REP_SENT is dropped, as cm_dup_req_handler does (the REP has its
// own retransmission timer); the consumer sees one ConnectRequest.
func TestDuplicateREQInREPSent(t *testing.T) {
	p := newPair(t)
	// Duplicate every REQ: the second copy arrives while B is in REP_SENT.
	p.impair = func(_ netip.Addr, m cm.MAD) int {
		if m.AttrID() == cm.AttrREQ {
			return 2
		}
		return 1
	}
	p.connect(connectParams())
	p.run(time.Minute)
	require.Equal(t, []cm.EventKind{cm.EventConnectRequest, cm.EventEstablished}, kinds(p.b), "one ConnectRequest only")
	assert.EqualValues(t, 1, p.b.m.Stats().Duplicates)
	assert.Equal(t, 1, count(p.b.sent, cm.AttrREP))
	assert.Equal(t, 1, p.b.m.Len())
}

// TestDuplicateREQInMRASent: in MRA_REQ_SENT a duplicate REQ gets the MRA
// again, and the MRA stretches the active side's timer.
func TestDuplicateREQInMRASent(t *testing.T) {
	p := newPair(t)
	var pending cm.CommID
	p.onEvent = func(s *side, e cm.Event) {
		if e.Kind == cm.EventConnectRequest {
			pending = e.ID
			// 4.096 µs·2^24 ≈ 68.7 s of service time.
			o, err := s.m.SendMRA(p.now(), e.ID, 24, nil)
			require.NoError(t, err)
			p.out(s, o)
		}
	}
	dup := 0
	p.impair = func(_ netip.Addr, m cm.MAD) int {
		if m.AttrID() == cm.AttrREQ && dup == 0 {
			dup++
			return 2
		}
		return 1
	}
	id := p.connect(connectParams())
	p.run(30 * time.Second)
	assert.Equal(t, 2, count(p.b.sent, cm.AttrMRA))
	assert.Equal(t, 1, count(p.a.sent, cm.AttrREQ), "the MRA stretched the REQ timer")
	assert.Equal(t, cm.StateMRAREQRcvd, p.a.m.State(id))
	assert.Equal(t, []cm.EventKind{cm.EventMRA}, kinds(p.a), "one MRA event; the resent MRA is a duplicate")

	p.accept(p.b, pending)
	p.run(time.Second)
	assert.Equal(t, cm.StateEstablished, p.a.m.State(id))
}

// TestLostRTU: the passive side resends the REP; the active side answers
// the duplicate REP with the RTU again (cm_dup_rep_handler).
func TestLostRTU(t *testing.T) {
	p := newPair(t)
	p.impair = dropNth(cm.AttrRTU, 1)
	p.connect(connectParams())
	p.run(time.Minute)
	require.Equal(t, []cm.EventKind{cm.EventConnectRequest, cm.EventEstablished}, kinds(p.b))
	assert.Equal(t, []cm.EventKind{cm.EventEstablished}, kinds(p.a), "no second Established")
	assert.Equal(t, 2, count(p.b.sent, cm.AttrREP))
	assert.Equal(t, 2, count(p.a.sent, cm.AttrRTU))
	assert.EqualValues(t, 1, p.a.m.Stats().Duplicates)
}

// TestListenerTimeout: the RTU never arrives; the REP is sent 1 + 15
// times, then the passive connection is dropped (Unreachable).
func TestListenerTimeout(t *testing.T) {
	p := newPair(t)
	p.impair = func(_ netip.Addr, m cm.MAD) int {
		if m.AttrID() == cm.AttrRTU {
			return 0
		}
		return 1
	}
	p.connect(connectParams())
	p.run(10 * time.Minute)
	assert.Equal(t, 1+cm.DefaultMaxCMRetries, count(p.b.sent, cm.AttrREP))
	assert.Equal(t, []cm.EventKind{cm.EventConnectRequest, cm.EventUnreachable}, kinds(p.b))
	assert.Equal(t, 0, p.b.m.Len())
	assert.EqualValues(t, cm.DefaultMaxCMRetries, p.b.m.Stats().Retransmitted)
	assert.EqualValues(t, 1, p.b.m.Stats().TimedOut)
}

// TestREQRetriesExhausted: nobody answers; after 1 + 15 REQs the active
// side reports Unreachable and forgets the connection.
func TestREQRetriesExhausted(t *testing.T) {
	p := newPair(t)
	p.impair = func(netip.Addr, cm.MAD) int { return 0 }
	start := p.now()
	p.connect(connectParams())
	p.run(10 * time.Minute)
	assert.Equal(t, 1+cm.DefaultMaxCMRetries, count(p.a.sent, cm.AttrREQ))
	assert.Equal(t, []cm.EventKind{cm.EventUnreachable}, kinds(p.a))
	assert.Equal(t, time.Duration(1+cm.DefaultMaxCMRetries)*reqTimeout, p.now().Sub(start))
	assert.Equal(t, 0, p.a.m.Len())
}

// TestRejectWithPrivateData: rdma_reject with private data.
func TestRejectWithPrivateData(t *testing.T) {
	p := newPair(t)
	p.onEvent = func(s *side, e cm.Event) {
		if e.Kind == cm.EventConnectRequest {
			o, err := s.m.Reject(p.now(), e.ID, cm.RejectConsumerDefined, []byte("go away"))
			require.NoError(t, err)
			p.out(s, o)
		}
	}
	p.connect(connectParams())
	p.run(time.Minute)
	require.Equal(t, []cm.EventKind{cm.EventRejected}, kinds(p.a))
	e := p.a.events[0]
	assert.Equal(t, cm.RejectConsumerDefined, e.Reason)
	assert.Equal(t, "go away", string(e.PrivateData[:7]))
	assert.Len(t, e.PrivateData, cm.PrivateDataREJ)
	assert.Equal(t, 0, p.a.m.Len())
	assert.Equal(t, 0, p.b.m.Len())
	assert.Equal(t, 1, count(p.a.sent, cm.AttrREQ))
}

// TestUnknownServiceID: a REQ nobody listens for gets REJ reason 8 from
// cm_issue_rej (local comm ID 0, MsgRejected REQ).
func TestUnknownServiceID(t *testing.T) {
	p := newPair(t)
	cp := connectParams()
	cp.ServiceID = cm.IPServiceID(cm.PortSpaceTCP, 9999)
	var rej cm.REJFields
	p.impair = func(_ netip.Addr, m cm.MAD) int {
		if m.AttrID() == cm.AttrREJ {
			rej = cm.REJ(m).Fields()
		}
		return 1
	}
	id := p.connect(cp)
	p.run(time.Minute)
	require.Equal(t, []cm.EventKind{cm.EventRejected}, kinds(p.a))
	assert.Equal(t, cm.RejectInvalidServiceID, p.a.events[0].Reason)
	assert.Equal(t, "InvalidServiceID", p.a.events[0].Reason.String())
	assert.Equal(t, id, rej.RemoteCommID)
	assert.Zero(t, rej.LocalCommID)
	assert.Equal(t, cm.MsgTypeREQ, rej.MsgRejected)
	assert.Empty(t, p.b.events)
	assert.Equal(t, 0, p.b.m.Len())
}

// TestSimultaneousDREQ: both sides call Disconnect at once; each gets one
// Disconnected, answers the other's DREQ, and both leave time-wait.
func TestSimultaneousDREQ(t *testing.T) {
	p := newPair(t)
	ida := p.connect(connectParams())
	p.run(time.Second)
	idb := p.b.events[0].ID
	oa, err := p.a.m.Disconnect(p.now(), ida, nil)
	require.NoError(t, err)
	ob, err := p.b.m.Disconnect(p.now(), idb, nil)
	require.NoError(t, err)
	p.out(p.a, oa)
	p.out(p.b, ob)
	p.run(time.Minute)
	assert.Equal(t, []cm.EventKind{cm.EventEstablished, cm.EventDisconnected, cm.EventTimewaitExit}, kinds(p.a))
	assert.Equal(t, []cm.EventKind{cm.EventConnectRequest, cm.EventEstablished, cm.EventDisconnected,
		cm.EventTimewaitExit}, kinds(p.b))
	assert.Equal(t, 1, count(p.a.sent, cm.AttrDREQ))
	assert.Equal(t, 1, count(p.a.sent, cm.AttrDREP))
	assert.Equal(t, 1, count(p.b.sent, cm.AttrDREP))
	assert.Equal(t, 0, p.a.m.Len()+p.b.m.Len())
	// Disconnect again is harmless.
	_, err = p.a.m.Disconnect(p.now(), ida, nil)
	assert.ErrorIs(t, err, cm.ErrUnknownID)
}

// TestLostDREQ: the DREQ is retransmitted; if it is never answered the
// active side still leaves (Disconnected with TimedOut, then time-wait).
func TestLostDREQ(t *testing.T) {
	p := newPair(t)
	id := p.connect(connectParams())
	p.run(time.Second)
	p.impair = func(_ netip.Addr, m cm.MAD) int {
		if m.AttrID() == cm.AttrDREQ {
			return 0
		}
		return 1
	}
	o, err := p.a.m.Disconnect(p.now(), id, nil)
	require.NoError(t, err)
	p.out(p.a, o)
	p.run(10 * time.Minute)
	assert.Equal(t, 1+cm.DefaultMaxCMRetries, count(p.a.sent, cm.AttrDREQ))
	require.Equal(t, []cm.EventKind{cm.EventEstablished, cm.EventDisconnected, cm.EventTimewaitExit}, kinds(p.a))
	assert.True(t, p.a.events[1].TimedOut)
}

// TestDuplicateDREQ: a retransmitted DREQ in time-wait gets the DREP again.
func TestDuplicateDREQ(t *testing.T) {
	p := newPair(t)
	id := p.connect(connectParams())
	p.run(time.Second)
	p.impair = dropNth(cm.AttrDREP, 1)
	o, err := p.a.m.Disconnect(p.now(), id, nil)
	require.NoError(t, err)
	p.out(p.a, o)
	p.run(time.Minute)
	assert.Equal(t, 2, count(p.a.sent, cm.AttrDREQ))
	assert.Equal(t, 2, count(p.b.sent, cm.AttrDREP))
	assert.Equal(t, []cm.EventKind{cm.EventEstablished, cm.EventDisconnected, cm.EventTimewaitExit}, kinds(p.a))
	assert.Equal(t, 0, p.a.m.Len()+p.b.m.Len())
}

// TestIBA12_9_8_3_StaleConnection: a new REQ from a QP the passive side
// still has connected is refused with REJ reason 10, and the old
// connection is torn down with a DREQ.
func TestIBA12_9_8_3_StaleConnection(t *testing.T) {
	p := newPair(t)
	old := p.connect(connectParams())
	p.run(time.Second)
	// The active side "forgets" the connection (a crash and restart
	// would): a second Manager with the same CA GUID reuses QPN 0x1c.
	again := p.connect(connectParams())
	p.run(time.Second)
	var reasons []cm.RejectReason
	for _, e := range p.a.events {
		if e.Kind == cm.EventRejected {
			reasons = append(reasons, e.Reason)
			assert.Equal(t, again, e.ID)
		}
	}
	assert.Equal(t, []cm.RejectReason{cm.RejectStaleConnection}, reasons)
	assert.Equal(t, 1, count(p.b.sent, cm.AttrDREQ), "the old connection is disconnected")
	assert.Equal(t, cm.StateTimewait, p.a.m.State(old))
	assert.Contains(t, kinds(p.a), cm.EventDisconnected)
}

// TestAPIErrors covers the argument and state checks.
func TestAPIErrors(t *testing.T) {
	p := newPair(t)
	now := p.now()
	cp := connectParams()
	cp.PrivateData = make([]byte, cm.PrivateDataREQ+1)
	_, _, err := p.a.m.Connect(now, cp)
	assert.ErrorIs(t, err, cm.ErrPrivateData)
	cp = connectParams()
	cp.PathMTU = 9
	_, _, err = p.a.m.Connect(now, cp)
	assert.ErrorIs(t, err, cm.ErrInvalidParam)
	cp = connectParams()
	cp.StartingPSN = bth.PSN(1 << 24)
	_, _, err = p.a.m.Connect(now, cp)
	assert.ErrorIs(t, err, cm.ErrInvalidParam)
	_, _, err = p.a.m.Accept(now, 42, &cm.AcceptParams{})
	assert.ErrorIs(t, err, cm.ErrUnknownID)
	id := p.connect(connectParams())
	_, _, err = p.a.m.Accept(now, id, &cm.AcceptParams{})
	assert.ErrorIs(t, err, cm.ErrInvalidState)
	_, err = p.a.m.Disconnect(now, id, nil)
	assert.ErrorIs(t, err, cm.ErrInvalidState)
	assert.ErrorIs(t, p.b.m.Listen(sid), cm.ErrServiceInUse)
	assert.NoError(t, p.b.m.Unlisten(sid))
	assert.ErrorIs(t, p.b.m.Unlisten(sid), cm.ErrNotListening)
	// Garbage on the wire is counted, never an error.
	o := p.b.m.Receive(now, addrA, []byte{1, 2, 3})
	assert.Empty(t, o.Send)
	assert.EqualValues(t, 1, p.b.m.Stats().Malformed)
}

// TestDestroyREQSent: a connection the active side gives up on while its
// REQ is out (a canceled Dial) is rejected with reason Timeout and the
// local CA GUID as ARI, as cm_destroy_id does in REQ_SENT; the passive
// side finds it by that GUID and comm ID (cm_acquire_rejected_id) and
// drops it, whether its consumer had not answered yet or its REP was
// lost, and sends no more REPs.
func TestDestroyREQSent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer bool // the passive consumer accepts (REP lost on the wire)
		state  cm.State
	}{
		{"consumer-slow", false, cm.StateREQRcvd},
		{"rep-lost", true, cm.StateREPSent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			var bid cm.CommID
			p.onEvent = func(s *side, e cm.Event) {
				if e.Kind == cm.EventConnectRequest {
					bid = e.ID
					if tc.answer {
						p.accept(s, e.ID)
					}
				}
			}
			p.impair = dropNth(cm.AttrREP, 1)
			id := p.connect(connectParams())
			p.run(time.Second)
			require.Equal(t, tc.state, p.b.m.State(bid))
			require.Equal(t, cm.StateREQSent, p.a.m.State(id))

			o, err := p.a.m.Destroy(p.now(), id)
			require.NoError(t, err)
			require.Len(t, o.Send, 1)
			rej, err := cm.Parse(o.Send[0].MAD)
			require.NoError(t, err)
			f := cm.REJ(rej).Fields()
			assert.Equal(t, cm.RejectTimeout, f.Reason)
			assert.Equal(t, cm.MsgTypeOther, f.MsgRejected)
			assert.Equal(t, id, f.LocalCommID)
			assert.Zero(t, f.RemoteCommID, "the REP never came")
			assert.EqualValues(t, 8, f.RejectInfoLen)
			assert.Equal(t, []byte{0x50, 0x54, 0x00, 0xff, 0xfe, 0x77, 0x00, 0x03}, f.ARI[:8], "A's CA GUID")
			assert.Empty(t, o.Events)
			assert.Equal(t, 0, p.a.m.Len())
			assert.EqualValues(t, 1, p.a.m.Stats().Destroyed)
			p.out(p.a, o)
			p.run(10 * time.Minute)

			assert.Equal(t, []cm.EventKind{cm.EventConnectRequest, cm.EventRejected}, kinds(p.b))
			assert.Equal(t, cm.RejectTimeout, p.b.events[1].Reason)
			assert.Equal(t, 0, p.b.m.Len(), "the passive side forgot it")
			assert.Equal(t, btoi(tc.answer), count(p.b.sent, cm.AttrREP), "no REP retransmission after the REJ")
			assert.Zero(t, p.b.m.Stats().Unmatched)
			assert.Equal(t, 1, count(p.a.sent, cm.AttrREQ), "no REQ retransmission after Destroy")
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDestroyStates: what Destroy sends in the other states
// (cm_destroy_id): ConsumerDefined REJs before establishment, a DREQ
// once established, nothing in time-wait; the ID is forgotten each time.
func TestDestroyStates(t *testing.T) {
	// REQRcvd on the passive side: REJ, MsgRejected REQ, local comm ID 0.
	p := newPair(t)
	var bid cm.CommID
	p.onEvent = func(s *side, e cm.Event) {
		if e.Kind == cm.EventConnectRequest {
			bid = e.ID
		}
	}
	p.connect(connectParams())
	p.run(time.Second)
	o, err := p.b.m.Destroy(p.now(), bid)
	require.NoError(t, err)
	require.Len(t, o.Send, 1)
	f := cm.REJ(o.Send[0].MAD).Fields()
	assert.Equal(t, cm.RejectConsumerDefined, f.Reason)
	assert.Equal(t, cm.MsgTypeREQ, f.MsgRejected)
	assert.Zero(t, f.LocalCommID)
	p.out(p.b, o)
	p.run(time.Minute)
	assert.Equal(t, []cm.EventKind{cm.EventRejected}, kinds(p.a))
	assert.Equal(t, 0, p.a.m.Len())
	assert.Equal(t, 0, p.b.m.Len())

	// Established: a DREQ; the peer disconnects and answers with a DREP,
	// which finds nothing here.
	p = newPair(t)
	id := p.connect(connectParams())
	p.run(time.Second)
	require.Equal(t, cm.StateEstablished, p.a.m.State(id))
	o, err = p.a.m.Destroy(p.now(), id)
	require.NoError(t, err)
	require.Len(t, o.Send, 1)
	m, _ := cm.Parse(o.Send[0].MAD)
	assert.Equal(t, cm.AttrDREQ, m.AttrID())
	p.out(p.a, o)
	p.run(time.Minute)
	assert.Equal(t, []cm.EventKind{cm.EventConnectRequest, cm.EventEstablished, cm.EventDisconnected, cm.EventTimewaitExit}, kinds(p.b))
	assert.Equal(t, 0, p.a.m.Len())
	assert.EqualValues(t, 1, p.a.m.Stats().Unmatched, "the DREP")

	_, err = p.a.m.Destroy(p.now(), id)
	assert.ErrorIs(t, err, cm.ErrUnknownID)
}
