package rocev2_test

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/reth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// maxMTU is the largest RoCE path MTU (IBA 4096).
const maxMTU = 4096

// randomFields returns random transport fields for op: every header the
// opcode carries gets random in-range values, the others stay zero (that is
// what Packet.Fields returns for them). TVer is 0, the only version a
// receiver accepts; PadCount is random, as BuildTransport computes it.
func randomFields(r *rand.Rand, op bth.Opcode) wire.Fields {
	f := wire.Fields{BTH: bth.Fields{
		Opcode:         op,
		SolicitedEvent: r.IntN(2) == 1,
		MigReq:         r.IntN(2) == 1,
		PadCount:       r.IntN(4),
		PKey:           uint16(r.Uint32()),
		FECN:           r.IntN(2) == 1,
		BECN:           r.IntN(2) == 1,
		Resv6:          uint8(r.IntN(64)),
		DestQP:         bth.QPN(r.Uint32() & bth.QPNMask),
		AckReq:         r.IntN(2) == 1,
		Resv7:          uint8(r.IntN(128)),
		PSN:            bth.PSN(r.Uint32() & bth.PSNMask),
	}}
	m := op.Mask()
	if m.Has(bth.MaskRETH) {
		f.RETH = reth.Fields{VA: r.Uint64(), RKey: r.Uint32(), DMALength: r.Uint32()}
	}
	if m.Has(bth.MaskAETH) {
		f.AETH = aeth.Fields{Syndrome: aeth.Syndrome(r.Uint32()), MSN: r.Uint32() & 0xffffff}
	}
	if m.Has(bth.MaskImmDt) {
		f.ImmDt = r.Uint32()
	}
	if m.Has(bth.MaskIETH) {
		f.IETH = r.Uint32()
	}
	if m.Has(bth.MaskDETH) {
		f.DETH = ext.DETHFields{QKey: r.Uint32(), Reserved: uint8(r.Uint32()), SrcQP: r.Uint32() & 0xffffff}
	}
	if m.Has(bth.MaskAtomicETH) {
		f.AtomicETH = ext.AtomicETHFields{VA: r.Uint64(), RKey: r.Uint32(), SwapData: r.Uint64(), CompareData: r.Uint64()}
	}
	if m.Has(bth.MaskAtomicAckETH) {
		f.AtomicAckETH = r.Uint64()
	}
	if m.Has(bth.MaskFETH) {
		f.FETH = ext.FETHFields{Reserved: r.Uint32() & (1<<26 - 1), Selectivity: uint8(r.IntN(4)), PlacementType: uint8(r.IntN(16))}
	}
	return f
}

func randomPayload(r *rand.Rand, op bth.Opcode, max int) []byte {
	if !op.HasPayload() {
		return nil
	}
	b := make([]byte, r.IntN(max+1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func padFor(n int) int { return -n & 3 }

func randomAddr(r *rand.Rand, v6 bool) netip.AddrPort {
	port := uint16(r.Uint32())
	if v6 {
		var a [16]byte
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		a[0] = 0xfd // not an IPv4-mapped address
		return netip.AddrPortFrom(netip.AddrFrom16(a), port)
	}
	var a [4]byte
	for i := range a {
		a[i] = byte(r.Uint32())
	}
	return netip.AddrPortFrom(netip.AddrFrom4(a), port)
}

func randomEncap(r *rand.Rand, v6 bool) rocev2.Encap {
	e := rocev2.Encap{
		Ethernet: r.IntN(2) == 1,
		Src:      randomAddr(r, v6),
		Dst:      randomAddr(r, v6),
		TOS:      uint8(r.Uint32()),
		TTL:      uint8(1 + r.IntN(255)),
	}
	e.Dst = netip.AddrPortFrom(e.Dst.Addr(), rocev2.UDPPort) // receivers demand 4791
	for i := range e.SrcMAC {
		if e.Ethernet { // Packet.Encap has no MACs without Ethernet
			e.SrcMAC[i], e.DstMAC[i] = byte(r.Uint32()), byte(r.Uint32())
		}
	}
	if v6 {
		e.FlowLabel = r.Uint32() & 0xfffff
	} else {
		e.ID = uint16(r.Uint32())
		e.AllowFragment = r.IntN(2) == 1
	}
	return e
}

// TestRoundTripEveryOpcode builds random packets of every opcode of the
// table and checks Parse(Build(f)) == f and Build(Parse(b)) == b, for the
// transport alone and through Encap.Build over IPv4 and IPv6 (with and
// without Ethernet), where the ICRC must verify.
func TestRoundTripEveryOpcode(t *testing.T) {
	const perOpcode = 50
	r := rand.New(rand.NewPCG(13, 14))
	buf := make([]byte, 14+40+8+64+maxMTU+8)
	buf2 := make([]byte, len(buf))
	for _, op := range bth.Opcodes() {
		t.Run(op.String(), func(t *testing.T) {
			for i := range perOpcode {
				f := randomFields(r, op)
				payload := randomPayload(r, op, maxMTU)
				if i == 0 {
					payload = payload[:0] // always try the empty payload
				}
				want := f
				want.BTH.PadCount = padFor(len(payload))

				n, err := wire.Build(buf, &f, payload)
				require.NoError(t, err)
				require.Equal(t, wire.TransportLen(op, len(payload)), n)
				require.Zero(t, n%4, "transport is a multiple of 4 bytes")
				tr := buf[:n]

				var p rocev2.Packet
				require.NoError(t, p.ParseTransport(tr))
				require.Equal(t, want, p.Fields())
				require.Equal(t, op.HeaderLen()+len(payload)+len(p.Pad)+bth.ICRCSize, len(tr))
				require.Equal(t, len(payload), len(p.Payload))
				if len(payload) > 0 {
					require.Equal(t, payload, []byte(p.Payload))
				}
				require.Equal(t, make([]byte, padFor(len(payload))), []byte(p.Pad), "pad bytes are zero")
				assert.False(t, p.HasOuter())
				assert.Error(t, p.VerifyICRC(), "no IP/UDP headers to check against")

				got := p.Fields()
				n2, err := wire.Build(buf2, &got, p.Payload)
				require.NoError(t, err)
				require.Equal(t, tr, buf2[:n2], "BuildTransport(Fields()) == bytes")

				for _, v6 := range []bool{false, true} {
					e := randomEncap(r, v6)
					m, err := e.Build(buf2, &f, payload)
					require.NoError(t, err)
					require.Equal(t, e.HeaderLen()+n, m)
					frame := buf2[:m]
					if e.Ethernet {
						require.NoError(t, p.ParseFrame(frame))
					} else {
						require.NoError(t, p.ParseIP(frame))
					}
					require.NoError(t, p.VerifyICRC())
					require.Equal(t, v6, p.IPv6())
					require.Equal(t, e.TOS&3, p.ECN())
					require.Equal(t, want, p.Fields())
					require.Equal(t, e, p.Encap())
					// The transport part equals the one BuildTransport wrote,
					// apart from the ICRC.
					require.Equal(t, tr[:n-4], []byte(p.Transport[:n-4]))
					c, err := p.ComputedICRC()
					require.NoError(t, err)
					require.Equal(t, c, rocev2.ReadICRC(p.ICRC))

					// Seal over the same transport gives the same frame.
					hl := e.HeaderLen()
					sealed := make([]byte, m)
					copy(sealed[hl:], tr)
					sm, err := e.Seal(sealed, n)
					require.NoError(t, err)
					require.Equal(t, frame, sealed[:sm])
				}
			}
		})
	}
}

// TestBuildTransportRejects checks the builder's errors.
func TestBuildTransportRejects(t *testing.T) {
	buf := make([]byte, 256)
	tests := []struct {
		name    string
		f       wire.Fields
		payload []byte
		buf     []byte
		want    error
	}{
		{"unknown opcode", wire.Fields{BTH: bth.Fields{Opcode: 0x15}}, nil, buf, wire.ErrUnknownOpcode},
		{"payload on ACK", wire.Fields{BTH: bth.Fields{Opcode: bth.RCAcknowledge}}, []byte{1}, buf, wire.ErrBadField},
		{"payload on READ request", wire.Fields{BTH: bth.Fields{Opcode: bth.RCRDMAReadRequest}}, []byte{1}, buf, wire.ErrBadField},
		{"payload on CNP", wire.Fields{BTH: bth.Fields{Opcode: bth.CNP}}, []byte{1}, buf, wire.ErrBadField},
		{"buffer too small", wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly}}, make([]byte, 5), buf[:12+5+3+3], wire.ErrBufferTooSmall},
		{"no buffer", wire.Fields{BTH: bth.Fields{Opcode: bth.RCAcknowledge}}, nil, nil, wire.ErrBufferTooSmall},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := wire.Build(tc.buf, &tc.f, tc.payload)
			assert.ErrorIs(t, err, tc.want)
			assert.Zero(t, n)
		})
	}
	// Exactly big enough works.
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly}}
	n, err := wire.Build(buf[:12+5+3+4], &f, make([]byte, 5))
	require.NoError(t, err)
	assert.Equal(t, 24, n)

	e := rocev2.Encap{Src: netip.MustParseAddrPort("10.0.0.1:1"), Dst: netip.MustParseAddrPort("10.0.0.2:4791")}
	_, err = e.Build(buf[:10], &f, nil)
	assert.ErrorIs(t, err, wire.ErrBufferTooSmall)
	_, err = e.Build(buf[:30], &f, nil)
	assert.ErrorIs(t, err, wire.ErrBufferTooSmall)
	_, err = e.Seal(buf, 10)
	assert.ErrorIs(t, err, wire.ErrBufferTooSmall, "shorter than BTH + ICRC")
	_, err = e.Seal(buf[:40], 16)
	assert.ErrorIs(t, err, wire.ErrBufferTooSmall)
	assert.Zero(t, wire.TransportLen(0x15, 10))
}

// TestBuildTransportClearsBuffer checks that stale bytes in the buffer
// (pad, ICRC placeholder, the CNP's reserved bytes) do not leak into a
// built packet.
func TestBuildTransportClearsBuffer(t *testing.T) {
	for _, op := range bth.Opcodes() {
		var payload []byte
		if op.HasPayload() {
			payload = []byte{1, 2, 3, 4, 5}
		}
		f := wire.Fields{BTH: bth.Fields{Opcode: op}}
		clean := make([]byte, 128)
		dirty := bytes.Repeat([]byte{0xee}, 128)
		n1, err := wire.Build(clean, &f, payload)
		require.NoError(t, err)
		n2, err := wire.Build(dirty, &f, payload)
		require.NoError(t, err)
		assert.Equal(t, clean[:n1], dirty[:n2], op.String())
	}
}

// TestCNPFields checks the CNP builder against Annex A17.9.2.
func TestCNPFields(t *testing.T) {
	f := rocev2.CNPFields(0x123456)
	buf := make([]byte, 64)
	n, err := wire.Build(buf, &f, nil)
	require.NoError(t, err)
	assert.Equal(t, 12+16+4, n)
	var p rocev2.Packet
	require.NoError(t, p.ParseTransport(buf[:n]))
	assert.Equal(t, bth.CNP, p.Opcode())
	assert.True(t, p.BTH.BECN())
	assert.False(t, p.BTH.FECN())
	assert.Equal(t, bth.PSN(0), p.BTH.PSN())
	assert.Equal(t, bth.QPN(0x123456), p.BTH.DestQP())
	assert.Equal(t, uint16(rocev2.DefaultPKey), p.BTH.PKey())
	assert.Equal(t, make([]byte, 16), []byte(p.CNPPad))
	assert.Empty(t, p.Payload)
}
