// Package ebpf assembles small eBPF programs in Go and loads them with the
// bpf(2) system call, so that goroce needs no C compiler and no eBPF
// library at build time.
//
// The assembler (Asm) covers the instructions goroce's programs use: 64-
// and 32-bit ALU operations with an immediate or a register, loads and
// stores of 1, 2, 4 and 8 bytes, the two-slot 64-bit immediate load (also
// for a map's file descriptor), atomic add, fetch-and-add and
// compare-and-exchange, conditional and unconditional jumps to named
// labels, helper calls and exit. The encoding is the one of RFC 9669 (BPF
// Instruction Set Architecture): eight bytes per instruction, opcode,
// destination and source register nibbles, a signed 16-bit offset and a
// signed 32-bit immediate, in the host's byte order (goroce builds for
// little-endian hosts, where the destination register is the low nibble).
//
// On Linux, CreateMap (CreateArrayMap), Load (LoadProgram), MapFromID and
// the Map, Program and Link methods wrap the bpf(2) commands that create
// a map (an array, or an XSKMAP of AF_XDP sockets), load and verify a
// program (returning the verifier's log in a *VerifierError when it
// refuses one), look up and update map elements, find a map by its ID
// from another process, attach a program to an interface through a BPF
// link (XDP, tcx) and run a program on a test packet
// (BPF_PROG_TEST_RUN). Missing privileges and kernel support match
// ErrNotSupported.
package ebpf
