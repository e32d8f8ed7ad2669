package ebpf_test

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/ebpf"
)

// TestEncoding checks each instruction form the assembler emits against
// the bytes LLVM's BPF back end gives for the same instruction: the
// expected bytes are llvm-objdump's (LLVM's BPF MC tests, assembled with
// llvm-mc -triple bpfel --mcpu=v3), except the store of an immediate,
// which those tests lack and which is written out from RFC 9669 §5.1
// (class ST 0x02 | mode MEM 0x60 | size).
func TestEncoding(t *testing.T) {
	tests := []struct {
		name string
		emit func(a *ebpf.Asm)
		want string // hex, as llvm-objdump prints it
	}{
		{"r1 += 0x2a", func(a *ebpf.Asm) { a.ALU64(ebpf.Add, ebpf.R1, 42) }, "07 01 00 00 2a 00 00 00"},
		{"r1 += r2", func(a *ebpf.Asm) { a.ALU64Reg(ebpf.Add, ebpf.R1, ebpf.R2) }, "0f 21 00 00 00 00 00 00"},
		{"r1 -= r2", func(a *ebpf.Asm) { a.ALU64Reg(ebpf.Sub, ebpf.R1, ebpf.R2) }, "1f 21 00 00 00 00 00 00"},
		{"r1 *= 0x2a", func(a *ebpf.Asm) { a.ALU64(ebpf.Mul, ebpf.R1, 42) }, "27 01 00 00 2a 00 00 00"},
		{"r1 *= r2", func(a *ebpf.Asm) { a.ALU64Reg(ebpf.Mul, ebpf.R1, ebpf.R2) }, "2f 21 00 00 00 00 00 00"},
		{"r1 >>= 0x2a", func(a *ebpf.Asm) { a.ALU64(ebpf.Rsh, ebpf.R1, 42) }, "77 01 00 00 2a 00 00 00"},
		{"r1 s>>= r2", func(a *ebpf.Asm) { a.ALU64Reg(ebpf.Arsh, ebpf.R1, ebpf.R2) }, "cf 21 00 00 00 00 00 00"},
		{"r1 = 0x2a", func(a *ebpf.Asm) { a.Mov(ebpf.R1, 42) }, "b7 01 00 00 2a 00 00 00"},
		{"r1 = r2", func(a *ebpf.Asm) { a.MovReg(ebpf.R1, ebpf.R2) }, "bf 21 00 00 00 00 00 00"},
		{"w1 = 0x2a", func(a *ebpf.Asm) { a.ALU32(ebpf.Mov, ebpf.R1, 42) }, "b4 01 00 00 2a 00 00 00"},
		{"r1 = 0x2a ll", func(a *ebpf.Asm) { a.LoadImm64(ebpf.R1, 42) }, "18 01 00 00 2a 00 00 00 00 00 00 00 00 00 00 00"},
		{"r7 = 32768 ll", func(a *ebpf.Asm) { a.LoadImm64(ebpf.R7, 32768) }, "18 07 00 00 00 80 00 00 00 00 00 00 00 00 00 00"},
		{"r0 = 9151314442816847872 ll", func(a *ebpf.Asm) { a.LoadImm64(ebpf.R0, 9151314442816847872) }, "18 00 00 00 00 00 00 00 00 00 00 00 00 00 00 7f"},
		{"r1 = -1 ll", func(a *ebpf.Asm) { a.LoadImm64(ebpf.R1, ^uint64(0)) }, "18 01 00 00 ff ff ff ff 00 00 00 00 ff ff ff ff"},
		{"w1 = *(u8 *)(r2 + 0x2a)", func(a *ebpf.Asm) { a.Load(ebpf.B, ebpf.R1, ebpf.R2, 42) }, "71 21 2a 00 00 00 00 00"},
		{"w1 = *(u16 *)(r2 + 0x2a)", func(a *ebpf.Asm) { a.Load(ebpf.H, ebpf.R1, ebpf.R2, 42) }, "69 21 2a 00 00 00 00 00"},
		{"w1 = *(u32 *)(r2 + 0x2a)", func(a *ebpf.Asm) { a.Load(ebpf.W, ebpf.R1, ebpf.R2, 42) }, "61 21 2a 00 00 00 00 00"},
		{"r1 = *(u64 *)(r2 + 0x2a)", func(a *ebpf.Asm) { a.Load(ebpf.DW, ebpf.R1, ebpf.R2, 42) }, "79 21 2a 00 00 00 00 00"},
		{"r1 = *(u8 *)(r10 - 3)", func(a *ebpf.Asm) { a.Load(ebpf.B, ebpf.R1, ebpf.FP, -3) }, "71 a1 fd ff 00 00 00 00"},
		{"*(u32 *)(r2 + 0x2a) = w1", func(a *ebpf.Asm) { a.Store(ebpf.W, ebpf.R2, 42, ebpf.R1) }, "63 12 2a 00 00 00 00 00"},
		{"*(u64 *)(r2 + 0x2a) = r1", func(a *ebpf.Asm) { a.Store(ebpf.DW, ebpf.R2, 42, ebpf.R1) }, "7b 12 2a 00 00 00 00 00"},
		{"*(u32 *)(r10 - 4) = 7 (RFC 9669)", func(a *ebpf.Asm) { a.StoreImm(ebpf.W, ebpf.FP, -4, 7) }, "62 0a fc ff 07 00 00 00"},
		{"lock *(u64 *)(r1 + 0x1) += r2", func(a *ebpf.Asm) { a.AtomicAdd(ebpf.DW, ebpf.R1, 1, ebpf.R2) }, "db 21 01 00 00 00 00 00"},
		{"lock *(u32 *)(r1 + 0x1) += w2", func(a *ebpf.Asm) { a.AtomicAdd(ebpf.W, ebpf.R1, 1, ebpf.R2) }, "c3 21 01 00 00 00 00 00"},
		{"r0 = atomic_fetch_add((u64 *)(r1 + 0x0), r0)", func(a *ebpf.Asm) { a.AtomicFetchAdd(ebpf.DW, ebpf.R1, 0, ebpf.R0) }, "db 01 00 00 01 00 00 00"},
		{"r0 = cmpxchg_64(r1 + 0x0, r0, r1)", func(a *ebpf.Asm) { a.AtomicCmpXchg(ebpf.DW, ebpf.R1, 0, ebpf.R1) }, "db 11 00 00 f1 00 00 00"},
		{"call 0x2a", func(a *ebpf.Asm) { a.Call(42) }, "85 00 00 00 2a 00 00 00"},
		{"exit", func(a *ebpf.Asm) { a.Exit() }, "95 00 00 00 00 00 00 00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a ebpf.Asm
			tc.emit(&a)
			prog, err := a.Assemble()
			require.NoError(t, err)
			assert.Equal(t, strings.ReplaceAll(tc.want, " ", ""), hex.EncodeToString(ebpf.Encode(prog)))
		})
	}
}

// TestJumpEncoding checks the jumps (LLVM's bytes, offset +0: the label is
// the next instruction) and that offsets count from the next instruction,
// over two-slot loads, backwards too.
func TestJumpEncoding(t *testing.T) {
	tests := []struct {
		name string
		emit func(a *ebpf.Asm)
		want string
	}{
		{"goto +0x0", func(a *ebpf.Asm) { a.Goto("l") }, "05 00 00 00 00 00 00 00"},
		{"if r1 == 0x2a goto +0x0", func(a *ebpf.Asm) { a.Jump(ebpf.JEq, ebpf.R1, 42, "l") }, "15 01 00 00 2a 00 00 00"},
		{"if r1 != r2 goto +0x0", func(a *ebpf.Asm) { a.JumpReg(ebpf.JNE, ebpf.R1, ebpf.R2, "l") }, "5d 21 00 00 00 00 00 00"},
		{"if r1 > r2 goto +0x0", func(a *ebpf.Asm) { a.JumpReg(ebpf.JGT, ebpf.R1, ebpf.R2, "l") }, "2d 21 00 00 00 00 00 00"},
		{"if r1 s> 0x2a goto +0x0", func(a *ebpf.Asm) { a.Jump(ebpf.JSGT, ebpf.R1, 42, "l") }, "65 01 00 00 2a 00 00 00"},
		{"if r1 s> r2 goto +0x0", func(a *ebpf.Asm) { a.JumpReg(ebpf.JSGT, ebpf.R1, ebpf.R2, "l") }, "6d 21 00 00 00 00 00 00"},
		{"if r1 s<= 0x2a goto +0x0", func(a *ebpf.Asm) { a.Jump(ebpf.JSLE, ebpf.R1, 42, "l") }, "d5 01 00 00 2a 00 00 00"},
		{"if r1 s< r2 goto +0x0", func(a *ebpf.Asm) { a.JumpReg(ebpf.JSLT, ebpf.R1, ebpf.R2, "l") }, "cd 21 00 00 00 00 00 00"},
		{"if w1 != 0x2a goto +0x0", func(a *ebpf.Asm) { a.Jump32(ebpf.JNE, ebpf.R1, 42, "l") }, "56 01 00 00 2a 00 00 00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a ebpf.Asm
			tc.emit(&a)
			a.Label("l")
			prog, err := a.Assemble()
			require.NoError(t, err)
			assert.Equal(t, strings.ReplaceAll(tc.want, " ", ""), hex.EncodeToString(ebpf.Encode(prog)))
		})
	}

	var a ebpf.Asm
	a.Label("top")
	a.Jump(ebpf.JEq, ebpf.R0, 0, "end") // 0 → 4: +3
	a.LoadImm64(ebpf.R1, 1<<40)         // 1, 2
	a.Goto("top")                       // 3 → 0: -4
	a.Label("end")
	a.Exit() // 4
	prog, err := a.Assemble()
	require.NoError(t, err)
	require.Len(t, prog, 5)
	assert.Equal(t, int16(3), prog[0].Off)
	assert.Equal(t, int16(-4), prog[3].Off)
	assert.Equal(t, int32(1<<8), prog[2].Imm, "the upper half of the 64-bit immediate")
}

func TestAssembleErrors(t *testing.T) {
	tests := []struct {
		name string
		emit func(a *ebpf.Asm)
	}{
		{"undefined label", func(a *ebpf.Asm) { a.Goto("nowhere"); a.Exit() }},
		{"label twice", func(a *ebpf.Asm) { a.Label("x"); a.Exit(); a.Label("x") }},
		{"byte-wide atomic", func(a *ebpf.Asm) { a.AtomicAdd(ebpf.B, ebpf.R1, 0, ebpf.R2) }},
		{"jump too far", func(a *ebpf.Asm) {
			a.Goto("far")
			for range 1 << 15 {
				a.Mov(ebpf.R0, 0)
			}
			a.Label("far")
			a.Exit()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a ebpf.Asm
			tc.emit(&a)
			_, err := a.Assemble()
			assert.True(t, errors.Is(err, ebpf.ErrAssemble), "got %v", err)
		})
	}
}
