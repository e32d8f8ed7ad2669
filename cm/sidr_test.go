package cm_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cm"
)

var udpSID = cm.IPServiceID(cm.PortSpaceUDP, 7174)

func (p *pair) resolve(s cm.ServiceID) cm.CommID {
	id, o, err := p.a.m.ResolveService(p.now(), &cm.SIDRParams{Peer: addrB, ServiceID: s, PrivateData: []byte("sidr")})
	require.NoError(p.t, err)
	p.out(p.a, o)
	return id
}

func sidrPair(t *testing.T) *pair {
	p := newPair(t)
	require.NoError(t, p.b.m.Listen(udpSID))
	p.onEvent = func(s *side, e cm.Event) {
		if e.Kind == cm.EventSIDRRequest {
			o, err := s.m.SIDRReply(p.now(), e.ID, &cm.SIDRReplyParams{QPN: 0x33, QKey: 0x01234567})
			require.NoError(t, err)
			p.out(s, o)
		}
	}
	return p
}

// TestIBA12_11_SIDR resolves a UD service (rdma_cm's UDP port space).
func TestIBA12_11_SIDR(t *testing.T) {
	p := sidrPair(t)
	id := p.resolve(udpSID)
	p.run(time.Second)
	require.Equal(t, []cm.EventKind{cm.EventSIDRReply}, kinds(p.a))
	e := p.a.events[0]
	assert.Equal(t, id, e.ID)
	assert.Equal(t, cm.SIDRSuccess, e.SIDRStatus)
	assert.EqualValues(t, 0x33, e.QP.RemoteQPN)
	assert.EqualValues(t, 0x01234567, e.QKey)
	require.Equal(t, []cm.EventKind{cm.EventSIDRRequest}, kinds(p.b))
	assert.Equal(t, "sidr", string(p.b.events[0].PrivateData[:4]))
	assert.Equal(t, 0, p.a.m.Len()+p.b.m.Len())
}

func TestSIDRUnknownService(t *testing.T) {
	p := sidrPair(t)
	p.resolve(cm.IPServiceID(cm.PortSpaceUDP, 1))
	p.run(time.Second)
	require.Equal(t, []cm.EventKind{cm.EventSIDRReply}, kinds(p.a))
	assert.Equal(t, cm.SIDRUnsupported, p.a.events[0].SIDRStatus)
	assert.Equal(t, "Unsupported", p.a.events[0].SIDRStatus.String())
}

func TestSIDRLostRequest(t *testing.T) {
	p := sidrPair(t)
	p.impair = dropNth(cm.AttrSIDRREQ, 1)
	p.resolve(udpSID)
	p.run(time.Minute)
	assert.Equal(t, 2, count(p.a.sent, cm.AttrSIDRREQ))
	assert.Equal(t, []cm.EventKind{cm.EventSIDRReply}, kinds(p.a))
}

// TestSIDRDuplicate: a duplicate SIDR_REQ while the consumer has not yet
// answered is dropped.
func TestSIDRDuplicate(t *testing.T) {
	p := newPair(t)
	require.NoError(t, p.b.m.Listen(udpSID))
	p.impair = func(_ netip.Addr, m cm.MAD) int { return 2 }
	p.resolve(udpSID)
	p.run(time.Millisecond)
	assert.Equal(t, []cm.EventKind{cm.EventSIDRRequest}, kinds(p.b))
	assert.EqualValues(t, 1, p.b.m.Stats().Duplicates)
}

func TestSIDRUnanswered(t *testing.T) {
	p := newPair(t)
	p.impair = func(netip.Addr, cm.MAD) int { return 0 }
	p.resolve(udpSID)
	p.run(10 * time.Minute)
	assert.Equal(t, []cm.EventKind{cm.EventUnreachable}, kinds(p.a))
	assert.Equal(t, 1+cm.DefaultMaxCMRetries, count(p.a.sent, cm.AttrSIDRREQ))
}

// TestSIDRCancel: a canceled SIDR_REQ is not retransmitted, and its late
// SIDR_REP is dropped as unmatched (ib_destroy_cm_id in SIDR_REQ_SENT).
func TestSIDRCancel(t *testing.T) {
	p := sidrPair(t)
	p.impair = dropNth(cm.AttrSIDRREQ, 1)
	id := p.resolve(udpSID)
	p.run(time.Millisecond) // the first SIDR_REQ is lost; its timer runs
	_, armed := p.a.m.Deadline()
	require.True(t, armed)
	require.NoError(t, p.a.m.CancelResolve(id))
	_, armed = p.a.m.Deadline()
	assert.False(t, armed, "no retransmission timer after the cancel")
	p.run(time.Minute)
	assert.Equal(t, 1, count(p.a.sent, cm.AttrSIDRREQ))
	assert.Empty(t, p.a.events)
	assert.Equal(t, 0, p.a.m.Len())
	assert.ErrorIs(t, p.a.m.CancelResolve(id), cm.ErrUnknownID)

	// A reply that was already on its way is unmatched.
	p.impair = nil
	id = p.resolve(udpSID)
	p.run(oneWay + oneWay/2) // the SIDR_REQ arrived; the SIDR_REP is in flight
	require.Len(t, p.link, 1)
	require.NoError(t, p.a.m.CancelResolve(id))
	p.run(time.Second)
	assert.Empty(t, p.a.events)
	assert.EqualValues(t, 1, p.a.m.Stats().Unmatched)
}

// TestSIDRCancelWrongState: CancelResolve names only pending resolutions.
func TestSIDRCancelWrongState(t *testing.T) {
	p := newPair(t)
	id := p.connect(connectParams())
	assert.ErrorIs(t, p.a.m.CancelResolve(id), cm.ErrInvalidState)
	assert.Equal(t, cm.StateREQSent, p.a.m.State(id))
}

// TestUDPPortSpaceNumbers pins the UDP port space's numbers to cma.c's:
// RDMA_UDP_QKEY, and the service ID cma_get_service_id forms, ps << 16 +
// port (RDMA_PS_UDP 0x0111).
func TestUDPPortSpaceNumbers(t *testing.T) {
	assert.EqualValues(t, 0x01234567, cm.UDPQKey)
	assert.Equal(t, cm.ServiceID(0x0000000001111c06), cm.IPServiceID(cm.PortSpaceUDP, 7174))
}

// TestSIDRRetransmitTimer: with rdma_cm's timers a SIDR_REQ is resent
// every 4.096 s (cma_resolve_ib_udp's timeout_ms, the response timeout
// alone), not at a REQ's 2·packet life time + response timeout (6.1 s).
func TestSIDRRetransmitTimer(t *testing.T) {
	m, err := cm.New(cm.Config{})
	require.NoError(t, err)
	t0 := testClockNow()
	_, o, err := m.ResolveService(t0, &cm.SIDRParams{Peer: addrB, ServiceID: udpSID})
	require.NoError(t, err)
	require.Len(t, o.Send, 1)
	dl, ok := m.Deadline()
	require.True(t, ok)
	assert.Equal(t, 4096*time.Millisecond, dl.Sub(t0))
	o = m.OnTimeout(dl)
	require.Len(t, o.Send, 1, "the SIDR_REQ again")
	next, _ := m.Deadline()
	assert.Equal(t, 4096*time.Millisecond, next.Sub(dl))
}
