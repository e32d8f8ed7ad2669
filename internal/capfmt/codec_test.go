package capfmt_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/capfmt"
	"github.com/goroce/goroce/rocev2"
)

// TestCodecCrossCheck decodes every golden capture twice, with capfmt's
// tshark emulation and with goroce's own codecs (rocev2.Packet.ParseFrame),
// and checks they agree wherever the codec accepts the frame: opcode, PSN,
// destination QP and the ICRC verdict.
func TestCodecCrossCheck(t *testing.T) {
	var pcaps []string
	for _, g := range []string{"testdata/pcaps/*.pcap", "testdata/tshark/probe/*.pcap"} {
		m, err := filepath.Glob(filepath.Join(root, g))
		require.NoError(t, err)
		pcaps = append(pcaps, m...)
	}
	require.NotEmpty(t, pcaps)
	checked := 0
	for _, path := range pcaps {
		frames := loadFrames(t, path)
		dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
		var p capfmt.Packet
		for i := range frames {
			fr := &frames[i]
			dec.Decode(fr, &p)
			var rp rocev2.Packet
			err := rp.ParseFrame(fr.Data)
			if err != nil {
				continue // the codec rejects what tshark shows anyway (unknown opcodes, TVer != 0, …)
			}
			require.True(t, p.RoCE, "%s frame %d: the codec parses a RoCE packet capfmt does not see", path, fr.Number)
			op, ok := p.Lookup(capfmt.IBOpcode)
			require.True(t, ok, "%s frame %d", path, fr.Number)
			assert.Equal(t, uint64(rp.Opcode()), op.Value, "%s frame %d opcode", path, fr.Number)
			psn, _ := p.Lookup(capfmt.IBPSN)
			assert.Equal(t, uint64(rp.BTH.PSN()), psn.Value, "%s frame %d PSN", path, fr.Number)
			qp, _ := p.Lookup(capfmt.IBDestQP)
			assert.Equal(t, uint64(rp.BTH.DestQP()), qp.Value, "%s frame %d QPN", path, fr.Number)
			verr := rp.VerifyICRC()
			require.True(t, p.ICRCChecked, "%s frame %d", path, fr.Number)
			assert.Equal(t, verr == nil, p.ICRCGood, "%s frame %d ICRC verdict (codec: %v)", path, fr.Number, verr)
			if verr != nil {
				assert.True(t, errors.Is(verr, rocev2.ErrBadICRC), "%s frame %d: %v", path, fr.Number, verr)
			}
			checked++
		}
	}
	assert.Greater(t, checked, 800)
}

// TestCodecComputeICRCDoesNotAllocate pins the promise in rocev2.ComputeICRC's
// doc comment ("It does not allocate"), which capfmt's zero-allocation
// fields path relies on. It caught the masked-header scratch array escaping
// to the heap (crc32.Update calls the IEEE implementation through a
// function value), one 80-byte allocation per ICRC check, fixed in roce by
// e34dcdf.
func TestCodecComputeICRCDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	frames := loadFrames(t, filepath.Join(root, "testdata/pcaps/rc_imm.pcap"))
	var rp rocev2.Packet
	var fr *capfmt.Frame
	for i := range frames {
		if rp.ParseFrame(frames[i].Data) == nil {
			fr = &frames[i]
			break
		}
	}
	require.NotNil(t, fr)
	allocs := testing.AllocsPerRun(100, func() {
		_ = rocev2.ComputeICRC(rp.IP, rp.UDP, rp.Body())
	})
	assert.Zero(t, allocs, "rocev2.ComputeICRC allocates (its doc says it does not)")
}

// TestBadICRCStillDecoded corrupts one payload byte: the packet decodes as
// before, roce.icrc.status says bad, and roce.icrc.computed differs from
// the ICRC on the wire.
func TestBadICRCStillDecoded(t *testing.T) {
	frames := loadFrames(t, filepath.Join(root, "testdata/pcaps/rc_imm.pcap"))
	good := frames[9]
	bad := good
	bad.Data = bytes.Clone(good.Data)
	bad.Data[len(bad.Data)-6] ^= 0x01 // last payload byte, before the ICRC

	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var pg, pb capfmt.Packet
	dec.Decode(&good, &pg)
	dec.Decode(&bad, &pb)
	require.True(t, pb.RoCE)
	require.True(t, pb.ICRCChecked)
	assert.False(t, pb.ICRCGood)
	st, ok := pb.Lookup(capfmt.ICRCStatus)
	require.True(t, ok)
	assert.Equal(t, "bad", string(capfmt.AppendValue(nil, &st)))
	wire, _ := pb.Lookup(capfmt.IBInvariantCRC)
	computed, _ := pb.Lookup(capfmt.ICRCComputed)
	assert.NotEqual(t, wire.Value, computed.Value)
	for _, f := range []capfmt.Field{capfmt.IBPSN, capfmt.IBOpcode, capfmt.IBRETH, capfmt.IBImmDt, capfmt.IBInvariantCRC} {
		a, _ := pg.Lookup(f)
		b, _ := pb.Lookup(f)
		assert.Equal(t, string(capfmt.AppendValue(nil, &a)), string(capfmt.AppendValue(nil, &b)), f.String())
	}

	skip := capfmt.NewDecoder(capfmt.DecoderConfig{SkipICRC: true})
	skip.Decode(&bad, &pb)
	assert.False(t, pb.ICRCChecked)
	assert.False(t, pb.Has(capfmt.ICRCStatus))
}
