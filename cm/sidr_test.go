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
