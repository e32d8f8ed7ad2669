package bth

//go:generate stringer -type=Position -trimprefix=Position -output=position_string.go

// Position is where a packet sits in its message: the FIRST / MIDDLE / LAST
// / ONLY suffix of a SEND, RDMA WRITE or RDMA READ response opcode (IBA
// 9.8.3.1 checks the order of these; rxe encodes them as RXE_START_MASK,
// RXE_MIDDLE_MASK and RXE_END_MASK).
type Position uint8

// Positions in a message.
const (
	PositionFirst  Position = iota // first of several packets
	PositionMiddle                 // neither first nor last
	PositionLast                   // last of several packets
	PositionOnly                   // the message's single packet
)

// numPositions is the number of Position values.
const numPositions = 4

// PositionOf returns the position of a packet that is (or is not) the first
// and the last of its message.
func PositionOf(first, last bool) Position {
	switch {
	case first && last:
		return PositionOnly
	case first:
		return PositionFirst
	case last:
		return PositionLast
	}
	return PositionMiddle
}

// Position returns the position that op's mask gives; opcodes that are
// always single packets (READ request, atomics, ACKs, CNP) are ONLY. It
// returns false for an unknown opcode.
func (op Opcode) Position() (Position, bool) {
	m := op.Mask()
	switch {
	case m == 0:
		return 0, false
	case m&MaskOnly == MaskOnly:
		return PositionOnly, true
	case m&MaskFirst != 0:
		return PositionFirst, true
	case m&MaskLast != 0:
		return PositionLast, true
	case m&MaskMiddle != 0:
		return PositionMiddle, true
	}
	return 0, false
}

// noOpcode marks an empty slot of the positioned table. 0xFF is a
// manufacturer-specific opcode (IBA 9.2.1, Table 38), never in the table.
const noOpcode Opcode = 0xff

// positionFamily is the part of a mask that must be equal for two opcodes
// to be positions of the same operation: SEND, RDMA WRITE, READ request or
// READ response, sent in the same direction.
const positionFamily = MaskSend | MaskWrite | MaskRead | MaskRequest | MaskResponse

// positioned[op][pos<<1|imm] is the opcode of op's transport and operation
// at pos, with ImmDt when imm is 1, or noOpcode. It is computed once from
// table, so that adding an opcode there is enough (rxe's next_opcode_rc
// writes the same choice out by hand), and never written afterwards.
var positioned = func() (t [opcodeTableSize][2 * numPositions]Opcode) {
	for i := range t {
		for j := range t[i] {
			t[i][j] = noOpcode
		}
	}
	// The opcodes that have positions: SEND, WRITE and READ ones. SEND
	// with invalidate is left out: its IETH is a different operation
	// (the requester maps LAST/ONLY to it itself), not a position of SEND.
	has := func(op Opcode) bool {
		m := table[op].Mask
		return m&(MaskSend|MaskWrite|MaskRead) != 0 && m&MaskIETH == 0
	}
	for a := range opcodeTableSize {
		if !has(Opcode(a)) {
			continue
		}
		for b := range opcodeTableSize {
			if !has(Opcode(b)) || Opcode(a).Transport() != Opcode(b).Transport() ||
				table[a].Mask&positionFamily != table[b].Mask&positionFamily {
				continue
			}
			pos, _ := Opcode(b).Position()
			imm := 0
			if table[b].Mask&MaskImmDt != 0 {
				imm = 1
			}
			t[a][int(pos)<<1|imm] = Opcode(b)
			if pos == PositionFirst || pos == PositionMiddle {
				// The ImmDt rides in the last packet (IBA 9.3.4): a FIRST
				// or MIDDLE is the same with or without it.
				t[a][int(pos)<<1|1] = Opcode(b)
			}
		}
	}
	return t
}()

// AtPosition returns the opcode of op's transport and operation (SEND, RDMA
// WRITE, RDMA READ request or RDMA READ response) at position pos; imm asks
// for the "with immediate" form, which only LAST and ONLY have and which
// FIRST and MIDDLE ignore. For example RCSendOnly.AtPosition(PositionLast,
// true) is RCSendLastWithImmediate. It returns false when no such opcode
// exists (a READ response with immediate, a MIDDLE READ request, an ATOMIC
// or ACK opcode, SEND with invalidate). It is one table lookup, derived
// from the opcode table.
func (op Opcode) AtPosition(pos Position, imm bool) (Opcode, bool) {
	if pos >= numPositions {
		return 0, false
	}
	i := int(pos) << 1
	if imm {
		i |= 1
	}
	r := positioned[op][i]
	return r, r != noOpcode
}
