package cm_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
)

// TestCheckIPHeader: rdma_cm's checks of a request's IP-CM header for a
// listener bound to an address (cma_save_ip_info, cma_match_private_data,
// validate_net_dev), each of which the kernel answers with REJ 28.
func TestCheckIPHeader(t *testing.T) {
	local, peer := netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.1")
	local6, peer6 := netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::1")
	tests := []struct {
		name     string
		local    netip.Addr
		src, dst netip.Addr
		edit     func(h cm.IPHeader)
		ok       bool
	}{
		{"IPv4", local, peer, local, nil, true},
		{"IPv6", local6, peer6, local6, nil, true},
		{"loopback (goroce's tests; the kernel refuses it)", netip.MustParseAddr("127.0.0.2"),
			netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), nil, true},
		{"listener on any address", netip.IPv4Unspecified(), peer, netip.MustParseAddr("10.77.0.99"), nil, true},
		{"IPv4-mapped listener address", netip.AddrFrom16(local.As16()), peer, local, nil, true},
		{"version byte 0x11", local, peer, local, func(h cm.IPHeader) { h.SetVersion(0x11) }, false},
		{"IP version 5", local, peer, local, func(h cm.IPHeader) { h.SetIPVersion(5) }, false},
		{"IPv6 header over IPv4 addresses", local, peer, local, func(h cm.IPHeader) { h.SetIPVersion(6) }, false},
		{"IPv4 header to an IPv6 listener", local6, peer, local, nil, false},
		{"another destination", local, peer, netip.MustParseAddr("10.77.0.99"), nil, false},
		{"source 0.0.0.0", local, netip.IPv4Unspecified(), local, nil, false},
		{"multicast source", local, netip.MustParseAddr("224.0.0.1"), local, nil, false},
		{"broadcast source", local, netip.MustParseAddr("255.255.255.255"), local, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pd := make([]byte, cm.PrivateDataREQ)
			h := cm.IPHeader(pd[:cm.IPHeaderSize])
			h.Encode(&cm.IPHeaderFields{SrcPort: 40000, SrcAddr: tc.src, DstAddr: tc.dst})
			if tc.edit != nil {
				tc.edit(h)
			}
			got, err := cm.CheckIPHeader(pd, tc.local)
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, uint16(40000), got.SrcPort())
				return
			}
			assert.ErrorIs(t, err, cm.ErrBadIPHeader)
		})
	}
	_, err := cm.CheckIPHeader(make([]byte, 10), local)
	assert.True(t, errors.Is(err, cm.ErrTruncated))
}

// TestRejectLocalCommID: a REQ refused in REQRcvd (rdma_cm's own checks,
// before its consumer) carries Local Communication ID 0, one refused
// after the delayed MRA (MRAREQSent: the consumer's rdma_reject) the
// connection's, as cm_format_rej writes them; the delayed MRA itself is
// not sent, but answers a duplicate REQ (cm_dup_req_handler).
func TestRejectLocalCommID(t *testing.T) {
	for _, delayed := range []bool{false, true} {
		p := newPair(t)
		var rej cm.REJFields
		var local cm.CommID
		p.impair = func(_ netip.Addr, m cm.MAD) int {
			if m.AttrID() == cm.AttrREJ {
				rej = cm.REJ(m).Fields()
			}
			return 1
		}
		p.onEvent = func(s *side, e cm.Event) {
			if e.Kind != cm.EventConnectRequest {
				return
			}
			local = e.ID
			if delayed {
				o, err := s.m.SendMRA(p.now(), e.ID, cm.MRAFlagDelay|24, nil)
				require.NoError(t, err)
				p.out(s, o)
				require.Empty(t, o.Send, "a delayed MRA is not sent")
				require.Equal(t, cm.StateMRAREQSent, s.m.State(e.ID))
			}
			o, err := s.m.Reject(p.now(), e.ID, cm.RejectConsumerDefined, nil)
			require.NoError(t, err)
			p.out(s, o)
		}
		id := p.connect(connectParams())
		p.run(time.Minute)
		assert.Equal(t, id, rej.RemoteCommID)
		assert.Equal(t, cm.MsgTypeREQ, rej.MsgRejected)
		if delayed {
			assert.Equal(t, local, rej.LocalCommID, "the consumer's REJ, from MRAREQSent")
		} else {
			assert.Zero(t, rej.LocalCommID, "rdma_cm's REJ, from REQRcvd")
		}
		assert.Zero(t, count(p.b.sent, cm.AttrMRA))
	}

	// A duplicate REQ while the consumer holds the request: the MRA.
	p := newPair(t)
	p.onEvent = func(s *side, e cm.Event) {
		if e.Kind == cm.EventConnectRequest {
			o, err := s.m.SendMRA(p.now(), e.ID, cm.MRAFlagDelay|24, nil)
			require.NoError(t, err)
			p.out(s, o)
		}
	}
	p.impair = func(_ netip.Addr, m cm.MAD) int {
		if m.AttrID() == cm.AttrREQ {
			return 2
		}
		return 1
	}
	p.connect(connectParams())
	p.run(time.Second)
	assert.Equal(t, 1, count(p.b.sent, cm.AttrMRA), "the duplicate REQ is answered with the delayed MRA")
	assert.Contains(t, kinds(p.a), cm.EventMRA)
}

// activeWithREP runs a Connect on a lone Manager and feeds it a REP from
// (qpn, guid) with remote comm ID rid; it returns the comm ID and output.
func activeWithREP(t *testing.T, m *cm.Manager, now time.Time, rid cm.CommID, qpn bth.QPN, guid uint64) (cm.CommID, cm.Output) {
	cp := connectParams()
	id, _, err := m.Connect(now, cp)
	require.NoError(t, err)
	rep := make([]byte, cm.MADSize)
	cm.REP(rep).Encode(&cm.REPFields{TID: 9, LocalCommID: rid, RemoteCommID: id, LocalQPN: qpn,
		StartingPSN: 5, TargetACKDelay: 15, RNRRetryCount: 7, LocalCAGUID: guid})
	return id, m.Receive(now, addrB, rep)
}

// TestREPStaleAndDuplicate (cm_rep_handler): a REP whose (comm ID, CA
// GUID) an established connection has is dropped without a word, its
// REQ's timer running on; a REP from an established connection's (QPN,
// CA GUID) gets REJ 10 (message rejected REP, the REP's comm IDs
// swapped), the old connection a DREQ, and the new one stays in REQSent.
func TestREPStaleAndDuplicate(t *testing.T) {
	now := testClockNow()
	m, err := cm.New(cm.Config{LocalCAGUID: 0x505400fffe770003})
	require.NoError(t, err)
	a, out := activeWithREP(t, m, now, 0x1111, 0x77, 0xaa)
	require.Equal(t, cm.StateEstablished, m.State(a))
	require.Len(t, out.Send, 1) // the RTU

	dup, out := activeWithREP(t, m, now, 0x1111, 0x78, 0xaa)
	assert.Empty(t, out.Send, "a duplicate (comm ID, CA GUID): no REJ, no RTU")
	assert.Empty(t, out.Events)
	assert.Equal(t, cm.StateREQSent, m.State(dup), "its REQ is still out")
	assert.Equal(t, cm.StateEstablished, m.State(a))

	other, out := activeWithREP(t, m, now, 0x2222, 0x77, 0xbb)
	assert.Equal(t, cm.StateEstablished, m.State(other), "the same QPN from another CA is another connection")
	require.Len(t, out.Send, 1)

	stale, out := activeWithREP(t, m, now, 0x3333, 0x77, 0xaa)
	require.Len(t, out.Send, 2)
	rej := cm.REJ(out.Send[0].MAD)
	assert.Equal(t, cm.AttrREJ, rej.MAD().AttrID())
	assert.Equal(t, cm.RejectStaleConnection, rej.Reason())
	assert.Equal(t, cm.MsgTypeREP, rej.MsgRejected())
	assert.Equal(t, stale, rej.LocalCommID())
	assert.Equal(t, cm.CommID(0x3333), rej.RemoteCommID())
	assert.Equal(t, cm.AttrDREQ, cm.MAD(out.Send[1].MAD).AttrID())
	assert.Equal(t, a, cm.DREQ(out.Send[1].MAD).LocalCommID(), "the DREQ ends the old connection")
	assert.Equal(t, cm.StateDREQSent, m.State(a))
	assert.Equal(t, cm.StateREQSent, m.State(stale), "the REQ is retried")
	assert.Empty(t, out.Events)
}
