package ebpf

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Reg is an eBPF register: R0 holds return values, R1–R5 arguments (a
// helper call clobbers them), R6–R9 are callee-saved and R10 is the
// read-only frame pointer.
type Reg uint8

// The eleven registers (RFC 9669 §2.4).
const (
	R0 Reg = iota
	R1
	R2
	R3
	R4
	R5
	R6
	R7
	R8
	R9
	R10
	FP = R10 // the frame pointer
)

// Instruction classes, the low three bits of the opcode (RFC 9669 §3.3).
const (
	classLD    = 0x00
	classLDX   = 0x01
	classST    = 0x02
	classSTX   = 0x03
	classALU   = 0x04
	classJMP   = 0x05
	classJMP32 = 0x06
	classALU64 = 0x07
)

// Source of an ALU or jump operand (RFC 9669 §4): the immediate (K) or the
// source register (X).
const (
	srcK = 0x00
	srcX = 0x08
)

// Load and store modes (RFC 9669 §5.1).
const (
	modeIMM    = 0x00
	modeMEM    = 0x60
	modeATOMIC = 0xc0
)

// Size is the width of a load, store or atomic operation (RFC 9669 §5.1).
type Size uint8

// The four widths.
const (
	W  Size = 0x00 // 4 bytes
	H  Size = 0x08 // 2 bytes
	B  Size = 0x10 // 1 byte
	DW Size = 0x18 // 8 bytes
)

// ALUOp is an arithmetic operation (RFC 9669 §4.1), the high four bits of
// an ALU opcode.
type ALUOp uint8

// The arithmetic operations.
const (
	Add  ALUOp = 0x00
	Sub  ALUOp = 0x10
	Mul  ALUOp = 0x20
	Div  ALUOp = 0x30 // unsigned; division by zero gives 0
	Or   ALUOp = 0x40
	And  ALUOp = 0x50
	Lsh  ALUOp = 0x60
	Rsh  ALUOp = 0x70 // logical
	Neg  ALUOp = 0x80
	Mod  ALUOp = 0x90
	Xor  ALUOp = 0xa0
	Mov  ALUOp = 0xb0
	Arsh ALUOp = 0xc0 // arithmetic (sign-extending)
)

// JumpOp is a jump condition (RFC 9669 §4.3).
type JumpOp uint8

// The jump conditions; JA jumps always.
const (
	JA   JumpOp = 0x00
	JEq  JumpOp = 0x10
	JGT  JumpOp = 0x20 // unsigned >
	JGE  JumpOp = 0x30 // unsigned >=
	JSet JumpOp = 0x40 // dst & src != 0
	JNE  JumpOp = 0x50
	JSGT JumpOp = 0x60 // signed >
	JSGE JumpOp = 0x70 // signed >=
	JLT  JumpOp = 0xa0 // unsigned <
	JLE  JumpOp = 0xb0 // unsigned <=
	JSLT JumpOp = 0xc0 // signed <
	JSLE JumpOp = 0xd0 // signed <=
)

const (
	opCall = 0x80
	opExit = 0x90
)

// Atomic operations, in the immediate of a BPF_ATOMIC store (RFC 9669
// §5.3): the operation, with fetch (0x01) the old value returned in the
// source register, or for compare-and-exchange in R0.
const (
	atomicAdd     = 0x00
	atomicFetch   = 0x01
	atomicCmpXchg = 0xf0 | atomicFetch
)

// PseudoMapFD in the source register of a 64-bit immediate load makes the
// kernel replace the immediate, a map's file descriptor, by the map's
// address (linux/bpf.h BPF_PSEUDO_MAP_FD).
const PseudoMapFD = 1

// Helper is a kernel helper function's number (linux/bpf.h
// __BPF_FUNC_MAPPER; the numbers are ABI and never change).
type Helper int32

// The helpers goroce's programs call. None is GPL-only: a program that
// calls only these may carry any license string.
const (
	HelperMapLookupElem Helper = 1  // bpf_map_lookup_elem(map, key) → value pointer or NULL
	HelperKtimeGetNS    Helper = 5  // bpf_ktime_get_ns() → CLOCK_MONOTONIC in ns
	HelperSkbVLANPush   Helper = 18 // bpf_skb_vlan_push(skb, proto, tci) → 0 or a negative errno
	HelperRedirectMap   Helper = 51 // bpf_redirect_map(map, key, flags) → XDP_REDIRECT, or the action in flags' low bits if key has no entry
	HelperSkbECNSetCE   Helper = 97 // bpf_skb_ecn_set_ce(skb) → 1 if the packet leaves CE, 0 if not ECN-capable
)

// Insn is one eBPF instruction (struct bpf_insn). The 64-bit immediate
// load takes two: the second carries the upper half in its Imm.
type Insn struct {
	Op  uint8
	Dst Reg
	Src Reg
	Off int16
	Imm int32
}

// InsnSize is the encoded size of one instruction.
const InsnSize = 8

// Append appends i's eight-byte encoding (RFC 9669 §3.1, little-endian
// host: the destination register in the low nibble of byte 1).
func (i Insn) Append(b []byte) []byte {
	b = append(b, i.Op, uint8(i.Dst&0xf)|uint8(i.Src&0xf)<<4)
	b = binary.LittleEndian.AppendUint16(b, uint16(i.Off))
	return binary.LittleEndian.AppendUint32(b, uint32(i.Imm))
}

// Encode returns the encoding of prog.
func Encode(prog []Insn) []byte {
	b := make([]byte, 0, len(prog)*InsnSize)
	for _, i := range prog {
		b = i.Append(b)
	}
	return b
}

// ErrAssemble reports a program the assembler cannot build: a jump to an
// unknown label, a label defined twice, a jump too far for its 16-bit
// offset.
var ErrAssemble = errors.New("ebpf: cannot assemble")

// Asm builds a program one instruction at a time. Jumps name labels, which
// Assemble resolves; the first error is kept and returned by Assemble.
// The zero value is ready to use.
type Asm struct {
	prog   []Insn
	labels map[string]int
	jumps  []jumpFix
	err    error
}

type jumpFix struct {
	at    int
	label string
}

func (a *Asm) emit(i Insn) { a.prog = append(a.prog, i) }

func (a *Asm) fail(format string, args ...any) {
	if a.err == nil {
		a.err = fmt.Errorf("%w: "+format, append([]any{ErrAssemble}, args...)...)
	}
}

// Len returns the number of instruction slots emitted so far.
func (a *Asm) Len() int { return len(a.prog) }

// Label names the next instruction.
func (a *Asm) Label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	if _, dup := a.labels[name]; dup {
		a.fail("label %q defined twice", name)
	}
	a.labels[name] = len(a.prog)
}

// ALU64 emits dst = dst op imm on 64 bits (imm sign-extended).
func (a *Asm) ALU64(op ALUOp, dst Reg, imm int32) {
	a.emit(Insn{Op: classALU64 | srcK | uint8(op), Dst: dst, Imm: imm})
}

// ALU64Reg emits dst = dst op src on 64 bits.
func (a *Asm) ALU64Reg(op ALUOp, dst, src Reg) {
	a.emit(Insn{Op: classALU64 | srcX | uint8(op), Dst: dst, Src: src})
}

// ALU32 emits dst = dst op imm on the low 32 bits, zeroing the upper half.
func (a *Asm) ALU32(op ALUOp, dst Reg, imm int32) {
	a.emit(Insn{Op: classALU | srcK | uint8(op), Dst: dst, Imm: imm})
}

// Mov emits dst = imm (sign-extended to 64 bits).
func (a *Asm) Mov(dst Reg, imm int32) { a.ALU64(Mov, dst, imm) }

// MovReg emits dst = src.
func (a *Asm) MovReg(dst, src Reg) { a.ALU64Reg(Mov, dst, src) }

// LoadImm64 emits dst = v, a two-slot instruction.
func (a *Asm) LoadImm64(dst Reg, v uint64) {
	a.emit(Insn{Op: classLD | modeIMM | uint8(DW), Dst: dst, Imm: int32(uint32(v))})
	a.emit(Insn{Imm: int32(uint32(v >> 32))})
}

// LoadMapFD emits dst = the address of the map with file descriptor fd,
// a two-slot instruction the kernel rewrites when it loads the program.
func (a *Asm) LoadMapFD(dst Reg, fd int) {
	a.emit(Insn{Op: classLD | modeIMM | uint8(DW), Dst: dst, Src: PseudoMapFD, Imm: int32(fd)})
	a.emit(Insn{})
}

// Load emits dst = *(size *)(src + off), zero-extended.
func (a *Asm) Load(sz Size, dst, src Reg, off int16) {
	a.emit(Insn{Op: classLDX | modeMEM | uint8(sz), Dst: dst, Src: src, Off: off})
}

// Store emits *(size *)(dst + off) = src.
func (a *Asm) Store(sz Size, dst Reg, off int16, src Reg) {
	a.emit(Insn{Op: classSTX | modeMEM | uint8(sz), Dst: dst, Src: src, Off: off})
}

// StoreImm emits *(size *)(dst + off) = imm.
func (a *Asm) StoreImm(sz Size, dst Reg, off int16, imm int32) {
	a.emit(Insn{Op: classST | modeMEM | uint8(sz), Dst: dst, Off: off, Imm: imm})
}

// AtomicAdd emits the atomic *(size *)(dst + off) += src; sz is W or DW.
func (a *Asm) AtomicAdd(sz Size, dst Reg, off int16, src Reg) {
	a.atomic(sz, dst, off, src, atomicAdd)
}

// AtomicFetchAdd emits src = atomic_fetch_add((size *)(dst + off), src):
// the add, with the old value returned in src.
func (a *Asm) AtomicFetchAdd(sz Size, dst Reg, off int16, src Reg) {
	a.atomic(sz, dst, off, src, atomicAdd|atomicFetch)
}

// AtomicCmpXchg emits R0 = atomic_cmpxchg((size *)(dst + off), R0, src):
// if the memory holds R0 it becomes src; either way R0 gets the old
// value.
func (a *Asm) AtomicCmpXchg(sz Size, dst Reg, off int16, src Reg) {
	a.atomic(sz, dst, off, src, atomicCmpXchg)
}

func (a *Asm) atomic(sz Size, dst Reg, off int16, src Reg, op int32) {
	if sz != W && sz != DW {
		a.fail("atomic operations are 4 or 8 bytes wide")
	}
	a.emit(Insn{Op: classSTX | modeATOMIC | uint8(sz), Dst: dst, Src: src, Off: off, Imm: op})
}

// Jump emits "if dst op imm goto label" on 64 bits.
func (a *Asm) Jump(op JumpOp, dst Reg, imm int32, label string) {
	a.jump(Insn{Op: classJMP | srcK | uint8(op), Dst: dst, Imm: imm}, label)
}

// JumpReg emits "if dst op src goto label" on 64 bits.
func (a *Asm) JumpReg(op JumpOp, dst, src Reg, label string) {
	a.jump(Insn{Op: classJMP | srcX | uint8(op), Dst: dst, Src: src}, label)
}

// Jump32 emits "if dst op imm goto label" on the low 32 bits.
func (a *Asm) Jump32(op JumpOp, dst Reg, imm int32, label string) {
	a.jump(Insn{Op: classJMP32 | srcK | uint8(op), Dst: dst, Imm: imm}, label)
}

// Goto emits an unconditional jump to label.
func (a *Asm) Goto(label string) { a.jump(Insn{Op: classJMP | uint8(JA)}, label) }

func (a *Asm) jump(i Insn, label string) {
	a.jumps = append(a.jumps, jumpFix{at: len(a.prog), label: label})
	a.emit(i)
}

// Call emits a call of helper h: arguments in R1–R5, the result in R0.
func (a *Asm) Call(h Helper) { a.emit(Insn{Op: classJMP | opCall, Imm: int32(h)}) }

// Exit emits the return of R0.
func (a *Asm) Exit() { a.emit(Insn{Op: classJMP | opExit}) }

// Assemble resolves the jumps and returns the program.
func (a *Asm) Assemble() ([]Insn, error) {
	if a.err != nil {
		return nil, a.err
	}
	prog := append([]Insn(nil), a.prog...)
	for _, j := range a.jumps {
		to, ok := a.labels[j.label]
		if !ok {
			return nil, fmt.Errorf("%w: jump to undefined label %q", ErrAssemble, j.label)
		}
		d := to - j.at - 1 // relative to the next instruction
		if d < -1<<15 || d >= 1<<15 {
			return nil, fmt.Errorf("%w: jump to %q is %d instructions away", ErrAssemble, j.label, d)
		}
		prog[j.at].Off = int16(d)
	}
	return prog, nil
}
