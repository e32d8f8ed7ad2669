package bth_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
)

func TestPositionOf(t *testing.T) {
	tests := []struct {
		name        string
		first, last bool
		want        bth.Position
	}{
		{"first", true, false, bth.PositionFirst},
		{"middle", false, false, bth.PositionMiddle},
		{"last", false, true, bth.PositionLast},
		{"only", true, true, bth.PositionOnly},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, bth.PositionOf(tc.first, tc.last))
		})
	}
	assert.Equal(t, "Only", bth.PositionOnly.String())
}

func TestAtPosition(t *testing.T) {
	F, M, L, O := bth.PositionFirst, bth.PositionMiddle, bth.PositionLast, bth.PositionOnly
	tests := []struct {
		name string
		from bth.Opcode
		pos  bth.Position
		imm  bool
		want bth.Opcode
		ok   bool
	}{
		{"RC SEND first", bth.RCSendOnly, F, false, bth.RCSendFirst, true},
		{"RC SEND first, imm ignored", bth.RCSendOnly, F, true, bth.RCSendFirst, true},
		{"RC SEND middle", bth.RCSendLast, M, true, bth.RCSendMiddle, true},
		{"RC SEND last", bth.RCSendFirst, L, false, bth.RCSendLast, true},
		{"RC SEND last imm", bth.RCSendFirst, L, true, bth.RCSendLastWithImmediate, true},
		{"RC SEND only", bth.RCSendMiddle, O, false, bth.RCSendOnly, true},
		{"RC SEND only imm", bth.RCSendMiddle, O, true, bth.RCSendOnlyWithImmediate, true},
		{"RC WRITE first", bth.RCRDMAWriteOnly, F, false, bth.RCRDMAWriteFirst, true},
		{"RC WRITE middle", bth.RCRDMAWriteOnly, M, true, bth.RCRDMAWriteMiddle, true},
		{"RC WRITE last", bth.RCRDMAWriteOnlyWithImmediate, L, false, bth.RCRDMAWriteLast, true},
		{"RC WRITE last imm", bth.RCRDMAWriteOnly, L, true, bth.RCRDMAWriteLastWithImmediate, true},
		{"RC WRITE only imm", bth.RCRDMAWriteFirst, O, true, bth.RCRDMAWriteOnlyWithImmediate, true},
		{"UC SEND stays UC", bth.UCSendOnly, F, false, bth.UCSendFirst, true},
		{"UC WRITE last imm", bth.UCRDMAWriteOnly, L, true, bth.UCRDMAWriteLastWithImmediate, true},
		{"UD SEND only", bth.UDSendOnly, O, true, bth.UDSendOnlyWithImmediate, true},
		{"UD has no first", bth.UDSendOnly, F, false, 0, false},
		{"READ response first", bth.RCRDMAReadResponseOnly, F, false, bth.RCRDMAReadResponseFirst, true},
		{"READ response middle", bth.RCRDMAReadResponseOnly, M, false, bth.RCRDMAReadResponseMiddle, true},
		{"READ response last", bth.RCRDMAReadResponseOnly, L, false, bth.RCRDMAReadResponseLast, true},
		{"READ response only", bth.RCRDMAReadResponseFirst, O, false, bth.RCRDMAReadResponseOnly, true},
		{"READ response has no imm", bth.RCRDMAReadResponseOnly, L, true, 0, false},
		{"READ request only", bth.RCRDMAReadRequest, O, false, bth.RCRDMAReadRequest, true},
		{"READ request has no middle", bth.RCRDMAReadRequest, M, false, 0, false},
		{"ACK has no positions", bth.RCAcknowledge, O, false, 0, false},
		{"atomic has no positions", bth.RCFetchAdd, O, false, 0, false},
		{"SEND with invalidate is not a SEND position", bth.RCSendOnlyWithInvalidate, F, false, 0, false},
		{"unknown opcode", bth.Opcode(0x15), O, false, 0, false},
		{"bad position", bth.RCSendOnly, bth.Position(4), false, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.from.AtPosition(tc.pos, tc.imm)
			require.Equal(t, tc.ok, ok)
			if ok {
				assert.Equal(t, tc.want, got, "got %v", got)
			}
		})
	}
}

// TestAtPositionRoundTrip checks every opcode of the table: an opcode with a
// position is its own answer at that position, and the answer keeps the
// transport and operation.
func TestAtPositionRoundTrip(t *testing.T) {
	for _, op := range bth.Opcodes() {
		pos, ok := op.Position()
		require.True(t, ok, "%v", op)
		imm := op.Mask()&bth.MaskImmDt != 0
		got, ok := op.AtPosition(pos, imm)
		m := op.Mask()
		if m&(bth.MaskSend|bth.MaskWrite|bth.MaskRead) == 0 || m&bth.MaskIETH != 0 {
			assert.False(t, ok, "%v has no positions", op)
			continue
		}
		require.True(t, ok, "%v", op)
		assert.Equal(t, op, got)
		for p := bth.PositionFirst; p <= bth.PositionOnly; p++ {
			for _, imm := range []bool{false, true} {
				o, ok := op.AtPosition(p, imm)
				if !ok {
					continue
				}
				assert.Equal(t, op.Transport(), o.Transport(), "%v at %v", op, p)
				fam := bth.MaskSend | bth.MaskWrite | bth.MaskRead | bth.MaskRequest | bth.MaskResponse
				assert.Equal(t, m&fam, o.Mask()&fam, "%v at %v = %v", op, p, o)
				op2, _ := o.Position()
				assert.Equal(t, p, op2, "%v at %v = %v", op, p, o)
			}
		}
	}
}

func TestOpcodePosition(t *testing.T) {
	for _, tc := range []struct {
		op   bth.Opcode
		want bth.Position
	}{
		{bth.RCSendFirst, bth.PositionFirst},
		{bth.RCRDMAWriteMiddle, bth.PositionMiddle},
		{bth.RCRDMAReadResponseLast, bth.PositionLast},
		{bth.RCSendOnlyWithImmediate, bth.PositionOnly},
		{bth.RCAcknowledge, bth.PositionOnly},
		{bth.CNP, bth.PositionOnly},
	} {
		got, ok := tc.op.Position()
		assert.True(t, ok, "%v", tc.op)
		assert.Equal(t, tc.want, got, "%v", tc.op)
	}
	_, ok := bth.Opcode(0x15).Position()
	assert.False(t, ok)
}
