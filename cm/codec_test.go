package cm_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cm"
)

func pd(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return b
}

var fullPath = cm.Path{LocalLID: 0xFFFF, RemoteLID: 0x1234,
	LocalGID:  cm.GIDFromAddr(netip.MustParseAddr("10.0.0.1")),
	RemoteGID: cm.GIDFromAddr(netip.MustParseAddr("fe80::1")),
	FlowLabel: 0xfffff, PacketRate: 0x3f, TrafficClass: 0xb8, HopLimit: 255, SL: 15,
	SubnetLocal: true, LocalACKTimeout: 31}

// TestRoundTrip checks Parse(Encode(f)).Fields() == f and
// Encode(Fields(b)) == b for every message type, with every field at a
// non-zero (mostly maximal) value.
func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		attr cm.AttrID
		enc  func(b []byte) any // encodes and returns the Fields
		dec  func(b []byte) (any, error)
	}{
		{"REQ", cm.AttrREQ, func(b []byte) any {
			f := cm.REQFields{TID: 1<<63 | 5, LocalCommID: 0xdeadbeef, ServiceID: cm.IPServiceID(cm.PortSpaceUDP, 4791),
				LocalCAGUID: 0x0102030405060708, LocalQKey: 0x80010000, LocalQPN: 0xffffff, ResponderResources: 255,
				LocalEECN: 0xabcdef, InitiatorDepth: 254, RemoteEECN: 0x123456, RemoteCMResponseTimeout: 31,
				TransportType: cm.TransportUC, E2EFlowControl: true, StartingPSN: 0xffffff,
				LocalCMResponseTimeout: 30, RetryCount: 7, PKey: 0x8001, PathMTU: cm.MTU4096, RDCExists: true,
				RNRRetryCount: 6, MaxCMRetries: 15, SRQ: true, ExtTransport: 7, PrimaryPath: fullPath,
				AlternatePath: fullPath, PrivateData: pd(cm.PrivateDataREQ, 1)}
			cm.REQ(b).Encode(&f)
			return f
		}, func(b []byte) (any, error) {
			r, err := cm.ParseREQ(b)
			if err != nil {
				return nil, err
			}
			return r.Fields(), nil
		}},
		{"REP", cm.AttrREP, func(b []byte) any {
			f := cm.REPFields{TID: 9, LocalCommID: 1, RemoteCommID: 2, LocalQKey: 3, LocalQPN: 0xffffff,
				LocalEECN: 0xffffff, StartingPSN: 0xffffff, ResponderResources: 16, InitiatorDepth: 17,
				TargetACKDelay: 31, FailoverAccepted: 3, E2EFlowControl: true, RNRRetryCount: 7, SRQ: true,
				LocalCAGUID: 42, PrivateData: pd(cm.PrivateDataREP, 2)}
			cm.REP(b).Encode(&f)
			return f
		}, func(b []byte) (any, error) {
			r, err := cm.ParseREP(b)
			if err != nil {
				return nil, err
			}
			return r.Fields(), nil
		}},
		{"RTU", cm.AttrRTU, func(b []byte) any {
			f := cm.CommFields{TID: 7, LocalCommID: 1, RemoteCommID: 2, PrivateData: pd(cm.PrivateDataRTU, 3)}
			cm.RTU(b).Encode(&f)
			return f
		}, func(b []byte) (any, error) {
			r, err := cm.ParseRTU(b)
			if err != nil {
				return nil, err
			}
			return r.Fields(), nil
		}},
		{"DREP", cm.AttrDREP, func(b []byte) any {
			f := cm.CommFields{TID: 7, LocalCommID: 1, RemoteCommID: 2, PrivateData: pd(cm.PrivateDataDREP, 4)}
			cm.DREP(b).Encode(&f)
			return f
		}, func(b []byte) (any, error) {
			r, err := cm.ParseDREP(b)
			if err != nil {
				return nil, err
			}
			return r.Fields(), nil
		}},
		{"DREQ", cm.AttrDREQ, func(b []byte) any {
			f := cm.DREQFields{TID: 7, LocalCommID: 1, RemoteCommID: 2, RemoteQPN: 0xffffff,
				PrivateData: pd(cm.PrivateDataDREQ, 5)}
			cm.DREQ(b).Encode(&f)
			return f
		}, func(b []byte) (any, error) {
			r, err := cm.ParseDREQ(b)
			if err != nil {
				return nil, err
			}
			return r.Fields(), nil
		}},
		{"MRA", cm.AttrMRA, func(b []byte) any {
			f := cm.MRAFields{TID: 7, LocalCommID: 1, RemoteCommID: 2, MsgMRAed: cm.MsgTypeOther,
				ServiceTimeout: 31, PrivateData: pd(cm.PrivateDataMRA, 6)}
			cm.MRA(b).Encode(&f)
			return f
		}, func(b []byte) (any, error) {
			r, err := cm.ParseMRA(b)
			if err != nil {
				return nil, err
			}
			return r.Fields(), nil
		}},
		{"REJ", cm.AttrREJ, func(b []byte) any {
			f := cm.REJFields{TID: 7, LocalCommID: 1, RemoteCommID: 2, MsgRejected: cm.MsgTypeREP,
				RejectInfoLen: 127, Reason: cm.RejectVendorOptionUnsupported, ARI: pd(cm.ARISize, 7),
				PrivateData: pd(cm.PrivateDataREJ, 8)}
			cm.REJ(b).Encode(&f)
			return f
		}, func(b []byte) (any, error) {
			r, err := cm.ParseREJ(b)
			if err != nil {
				return nil, err
			}
			return r.Fields(), nil
		}},
		{"SIDR_REQ", cm.AttrSIDRREQ, func(b []byte) any {
			f := cm.SIDRREQFields{TID: 7, RequestID: 1, PKey: 0xffff, ServiceID: cm.IPServiceID(cm.PortSpaceUDP, 1),
				PrivateData: pd(cm.PrivateDataSIDRREQ, 9)}
			cm.SIDRREQ(b).Encode(&f)
			return f
		}, func(b []byte) (any, error) {
			r, err := cm.ParseSIDRREQ(b)
			if err != nil {
				return nil, err
			}
			return r.Fields(), nil
		}},
		{"SIDR_REP", cm.AttrSIDRREP, func(b []byte) any {
			f := cm.SIDRREPFields{TID: 7, RequestID: 1, Status: cm.SIDRNoQP, AddInfoLen: 72, QPN: 0xffffff,
				ServiceID: 3, QKey: 0x01234567, AddInfo: pd(cm.ClassPortInfoSize, 10),
				PrivateData: pd(cm.PrivateDataSIDRREP, 11)}
			cm.SIDRREP(b).Encode(&f)
			return f
		}, func(b []byte) (any, error) {
			r, err := cm.ParseSIDRREP(b)
			if err != nil {
				return nil, err
			}
			return r.Fields(), nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Repeat([]byte{0xAA}, cm.MADSize) // Encode must clear everything
			want := tc.enc(b)
			m, err := cm.Parse(b)
			require.NoError(t, err)
			assert.Equal(t, tc.attr, m.AttrID())
			assert.EqualValues(t, cm.MethodSend, m.Method())
			got, err := tc.dec(b)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			// Encode(Fields(b)) == b.
			b2 := make([]byte, cm.MADSize)
			tc.enc(b2)
			assert.Equal(t, b, b2)
			// A different attribute is refused by the typed Parse.
			m.SetAttrID(0x7777)
			_, err = tc.dec(b)
			assert.ErrorIs(t, err, cm.ErrNotCM)
		})
	}
}

// TestShortPrivateDataIsZeroPadded: Encode pads private data with zeros.
func TestShortPrivateDataIsZeroPadded(t *testing.T) {
	b := bytes.Repeat([]byte{0xAA}, cm.MADSize)
	cm.RTU(b).Encode(&cm.CommFields{PrivateData: []byte("hi")})
	want := make([]byte, cm.PrivateDataRTU)
	copy(want, "hi")
	assert.Equal(t, want, cm.RTU(b).PrivateData())
}

func TestSettersMaskAndKeepReserved(t *testing.T) {
	b := make([]byte, cm.MADSize)
	r := cm.REQ(b)
	r.SetRemoteCMResponseTimeout(0xff)
	assert.EqualValues(t, 31, r.RemoteCMResponseTimeout())
	assert.Equal(t, cm.TransportRC, r.TransportType())
	r.SetTransportType(3)
	r.SetE2EFlowControl(true)
	assert.EqualValues(t, 31, r.RemoteCMResponseTimeout())
	assert.Equal(t, byte(0xff), b[24+43])
	r.SetLocalQPN(0x1ffffff)
	assert.EqualValues(t, 0xffffff, r.LocalQPN())
	assert.Zero(t, r.ResponderResources())
	r.SetPathMTU(0xff)
	assert.Equal(t, cm.MTU(15), r.PathMTU())
	assert.Zero(t, r.RNRRetryCount())
}

func TestParseErrors(t *testing.T) {
	_, err := cm.Parse(make([]byte, cm.MADSize-1))
	assert.ErrorIs(t, err, cm.ErrTruncated)
	b := make([]byte, cm.MADSize+10)
	_, err = cm.Parse(b)
	assert.ErrorIs(t, err, cm.ErrNotCM)
	cm.RTU(b).Encode(&cm.CommFields{})
	m, err := cm.Parse(b)
	require.NoError(t, err)
	assert.Len(t, m, cm.MADSize)
	assert.Equal(t, cm.MADSize, cap(m), "the view cannot reach past the MAD")
	_, err = cm.ParseIPHeader(make([]byte, 35))
	assert.ErrorIs(t, err, cm.ErrTruncated)
	_, err = cm.ParseIPHeader(make([]byte, 36))
	assert.ErrorIs(t, err, cm.ErrBadIPHeader)
}

func TestServiceID(t *testing.T) {
	s := cm.IPServiceID(cm.PortSpaceTCP, 7174)
	assert.EqualValues(t, uint64(0x0000000001061c06), s)
	assert.True(t, s.IsIP())
	assert.Equal(t, cm.PortSpaceTCP, s.PortSpace())
	assert.EqualValues(t, 7174, s.Port())
	assert.Equal(t, "0x0000000001061c06(TCP:7174)", s.String())
	assert.EqualValues(t, uint64(0x000000000111ffff), cm.IPServiceID(cm.PortSpaceUDP, 0xffff))
	assert.EqualValues(t, uint64(0x00000000013f0001), cm.IPServiceID(cm.PortSpaceIB, 1))
	assert.False(t, cm.ServiceID(0x1234).IsIP())
}

func TestIPHeader(t *testing.T) {
	for _, tc := range []struct{ src, dst string }{{"10.77.0.3", "10.77.0.2"}, {"fe80::1", "2001:db8::2"}} {
		b := make([]byte, cm.IPHeaderSize)
		f := cm.IPHeaderFields{SrcPort: 0x8dd9, SrcAddr: netip.MustParseAddr(tc.src), DstAddr: netip.MustParseAddr(tc.dst)}
		cm.IPHeader(b).Encode(&f)
		h, err := cm.ParseIPHeader(b)
		require.NoError(t, err)
		assert.Equal(t, f, h.Fields())
		if f.SrcAddr.Is4() {
			assert.EqualValues(t, 4, h.IPVersion())
			assert.Equal(t, make([]byte, 12), b[4:16], "IPv4 is 12 zero bytes + 4, not ::ffff-mapped")
		} else {
			assert.EqualValues(t, 6, h.IPVersion())
		}
	}
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "REQ", cm.AttrREQ.String())
	assert.Equal(t, "AttrID(0x7777)", cm.AttrID(0x7777).String())
	assert.Equal(t, "ConsumerDefined", cm.RejectConsumerDefined.String())
	assert.Equal(t, "StaleConnection", cm.RejectStaleConnection.String())
	assert.Equal(t, "RejectReason(34)", cm.RejectReason(34).String())
	assert.Equal(t, "Established", cm.StateEstablished.String())
	assert.Equal(t, "TimewaitExit", cm.EventTimewaitExit.String())
	assert.Equal(t, "1024", cm.MTU1024.String())
	assert.Equal(t, "RC", cm.TransportRC.String())
	assert.Equal(t, "10.77.0.3", cm.GIDFromAddr(netip.MustParseAddr("10.77.0.3")).String())
	assert.Equal(t, 4096, cm.MTU4096.Bytes())
}

// FuzzParse: no panic on any input, every typed view's Fields round-trips.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"rping.pcap", "write_bw_rdma_cm.pcap"} {
		for _, c := range captureMADs(f, name) {
			f.Add(c.mad)
		}
	}
	f.Add(make([]byte, 10))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := cm.Parse(b)
		if err != nil {
			return
		}
		out := make([]byte, cm.MADSize)
		var fields any
		switch m.AttrID() {
		case cm.AttrREQ:
			x := cm.REQ(m).Fields()
			cm.REQ(out).Encode(&x)
			fields = x
		case cm.AttrREP:
			x := cm.REP(m).Fields()
			cm.REP(out).Encode(&x)
			fields = x
		case cm.AttrREJ:
			x := cm.REJ(m).Fields()
			cm.REJ(out).Encode(&x)
			fields = x
		default:
			return
		}
		_ = fmt.Sprint(fields)
		m2, err := cm.Parse(out)
		require.NoError(t, err)
		assert.Equal(t, m.AttrID(), m2.AttrID())
		_ = cm.IPHeader(nil)
	})
}

// TestFuzzManager feeds the captured MADs, mutated, to a Manager: wire
// input never panics or errors.
func TestManagerSurvivesGarbage(t *testing.T) {
	m, err := cm.New(cm.Config{})
	require.NoError(t, err)
	require.NoError(t, m.Listen(sid))
	now := testClockNow()
	for _, c := range captureMADs(t, "write_bw_rdma_cm.pcap") {
		for i := 24; i < cm.MADSize; i += 7 {
			b := append([]byte(nil), c.mad...)
			b[i] ^= 0xff
			m.Receive(now, c.src, b)
		}
	}
	m.OnTimeout(now.Add(1e12))
}
