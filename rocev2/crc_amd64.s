//go:build amd64 && !purego

#include "textflag.h"

// FOLD folds the accumulator acc across the distance of the constants k
// and adds next: acc = acc.hi·k.hi ⊕ acc.lo·k.lo ⊕ next, per 128-bit
// lane (tmp is clobbered). Z or X registers alike.
#define FOLD(k, acc, next, tmp) \
	VPCLMULQDQ $0x11, k, acc, tmp; \
	VPCLMULQDQ $0x00, k, acc, acc; \
	VPTERNLOGD $0x96, next, tmp, acc

// Folding constants of the reflected CRC-32 (IEEE) for carry-less
// multiplication, as in Intel's "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ": for a fold across D bits, the low 64 bits
// of a 128-bit lane are multiplied by (x^(D+32) mod P) and the high 64 bits
// by (x^(D-32) mod P), both bit-reflected and shifted left by one. The
// values are derived in TestFoldConstants. Each is repeated for the four
// 128-bit lanes of a Z register.

// D = 2048: four Z registers, 256 bytes, ahead.
DATA k2048<>+0(SB)/8, $0x11542778a
DATA k2048<>+8(SB)/8, $0x1322d1430
DATA k2048<>+16(SB)/8, $0x11542778a
DATA k2048<>+24(SB)/8, $0x1322d1430
DATA k2048<>+32(SB)/8, $0x11542778a
DATA k2048<>+40(SB)/8, $0x1322d1430
DATA k2048<>+48(SB)/8, $0x11542778a
DATA k2048<>+56(SB)/8, $0x1322d1430
GLOBL k2048<>(SB), RODATA, $64

// D = 512: one Z register, 64 bytes, ahead.
DATA k512<>+0(SB)/8, $0x154442bd4
DATA k512<>+8(SB)/8, $0x1c6e41596
DATA k512<>+16(SB)/8, $0x154442bd4
DATA k512<>+24(SB)/8, $0x1c6e41596
DATA k512<>+32(SB)/8, $0x154442bd4
DATA k512<>+40(SB)/8, $0x1c6e41596
DATA k512<>+48(SB)/8, $0x154442bd4
DATA k512<>+56(SB)/8, $0x1c6e41596
GLOBL k512<>(SB), RODATA, $64

// D = 128: one 128-bit lane ahead; the high half also folds the last
// lane's low 64 bits onto its high 64.
DATA k128<>+0(SB)/8, $0x1751997d0
DATA k128<>+8(SB)/8, $0x0ccaa009e
GLOBL k128<>(SB), RODATA, $16

// The reduction of the last 64 bits to the 32-bit register: x^64 mod P
// (k5), then Barrett's with P and floor(x^64 / P), all bit-reflected
// (derived in TestReductionConstants).
DATA k5<>+0(SB)/8, $0x163cd6124
DATA k5<>+8(SB)/8, $0
GLOBL k5<>(SB), RODATA, $16
DATA barrett<>+0(SB)/8, $0x1db710641
DATA barrett<>+8(SB)/8, $0x1f7011641
GLOBL barrett<>(SB), RODATA, $16

// func fold512x4(reg uint32, head *[64]byte, p []byte) (n int, crc uint32)
//
// fold512x4 runs the CRC from the register reg over the longest prefix of
// p whose length is a multiple of 16 and returns that length and the
// register after it. len(p) must be at least 256. Four Z-register accumulators keep four
// independent carry-less multiplication chains in flight (hash/crc32 runs
// one, which leaves the multiplier waiting on its latency).
//
// A head that is not nil is a 64-byte block the CRC runs over first, from
// a zero register (reg then applies at its start: pass 0 with a head that
// already holds the initial register): it is folded 512 bits forward onto
// p's first 64 bytes, two multiplications in place of the ICRC's header
// steps (rocev2 foldHeaded).
TEXT ·fold512x4(SB), NOSPLIT, $0-52
	MOVL reg+0(FP), AX
	MOVQ head+8(FP), DX
	MOVQ p_base+16(FP), SI
	MOVQ p_len+24(FP), CX
	MOVQ CX, BX
	ANDQ $~15, BX             // bytes folded
	MOVQ BX, n+40(FP)
	SUBQ $256, BX             // left after the first 256

	VPXORQ    Z10, Z10, Z10
	VMOVD     AX, X10         // the register, in the first 4 bytes
	VMOVDQU64 0(SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	VPXORQ    Z10, Z1, Z1
	ADDQ      $256, SI

	TESTQ      DX, DX
	JZ         nohead
	VMOVDQU64  0(DX), Z9      // the head lies 64 bytes before Z1
	VMOVDQU64  k512<>(SB), Z0
	VPCLMULQDQ $0x11, Z0, Z9, Z5
	VPCLMULQDQ $0x00, Z0, Z9, Z9
	VPTERNLOGD $0x96, Z9, Z5, Z1

nohead:
	VMOVDQU64 k2048<>(SB), Z0

loop256: // four FOLDs by k2048, interleaved
	CMPQ BX, $256
	JB   fold4
	VMOVDQU64  0(SI), Z11
	VMOVDQU64  64(SI), Z12
	VMOVDQU64  128(SI), Z13
	VMOVDQU64  192(SI), Z14
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x11, Z0, Z2, Z6
	VPCLMULQDQ $0x11, Z0, Z3, Z7
	VPCLMULQDQ $0x11, Z0, Z4, Z8
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPCLMULQDQ $0x00, Z0, Z2, Z2
	VPCLMULQDQ $0x00, Z0, Z3, Z3
	VPCLMULQDQ $0x00, Z0, Z4, Z4
	VPTERNLOGD $0x96, Z11, Z5, Z1
	VPTERNLOGD $0x96, Z12, Z6, Z2
	VPTERNLOGD $0x96, Z13, Z7, Z3
	VPTERNLOGD $0x96, Z14, Z8, Z4
	ADDQ       $256, SI
	SUBQ       $256, BX
	JMP        loop256

fold4:
	// Z1 lies 64 bytes before Z2, Z2 before Z3, Z3 before Z4.
	VMOVDQU64  k512<>(SB), Z0
	FOLD(Z0, Z1, Z2, Z5)
	FOLD(Z0, Z1, Z3, Z5)
	FOLD(Z0, Z1, Z4, Z5)

loop64:
	CMPQ BX, $64
	JB   lanes
	VMOVDQU64  0(SI), Z11
	FOLD(Z0, Z1, Z11, Z5)
	ADDQ       $64, SI
	SUBQ       $64, BX
	JMP        loop64

lanes:
	// The four 128-bit lanes of Z1, each 16 bytes before the next.
	VEXTRACTI32X4 $1, Z1, X2
	VEXTRACTI32X4 $2, Z1, X3
	VEXTRACTI32X4 $3, Z1, X4
	VMOVDQU       k128<>(SB), X0
	FOLD(X0, X1, X2, X5)
	FOLD(X0, X1, X3, X5)
	FOLD(X0, X1, X4, X5)

loop16:
	CMPQ BX, $16
	JB   done
	VMOVDQU    0(SI), X11
	FOLD(X0, X1, X11, X5)
	ADDQ       $16, SI
	SUBQ       $16, BX
	JMP        loop16

done:
	// X1 to the 32-bit register, as Intel's paper ends (and hash/crc32's
	// ieeeCLMUL): fold the low 64 bits onto the high 64, reduce the 96
	// to 64 with k5, and the 64 to 32 by Barrett's reduction.
	VPCLMULQDQ $0x01, X1, X0, X5 // X0 is k128: its high half by X1's low
	VPSRLDQ    $8, X1, X1
	VPXOR      X5, X1, X1
	VPCMPEQB   X3, X3, X3
	VPSRLQ     $32, X3, X3       // the low 32 bits of each half
	VMOVDQU    k5<>(SB), X0
	VPSRLDQ    $4, X1, X2
	VPAND      X3, X1, X1
	VPCLMULQDQ $0x00, X0, X1, X1
	VPXOR      X2, X1, X1
	VMOVDQU    barrett<>(SB), X0
	VMOVDQA    X1, X2
	VPAND      X3, X1, X1
	VPCLMULQDQ $0x10, X0, X1, X1
	VPAND      X3, X1, X1
	VPCLMULQDQ $0x00, X0, X1, X1
	VPXOR      X2, X1, X1
	VPEXTRD    $1, X1, AX
	MOVL       AX, crc+48(FP)
	VZEROUPPER
	RET
