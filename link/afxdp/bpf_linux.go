//go:build linux

package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link/internal/rawnet"
)

// The XDP program is assembled here by hand (about 40 instructions, 50
// with a VLAN tag) and
// loaded with the bpf(2) system call; see the package documentation for
// why it does not use github.com/cilium/ebpf.

// insn is one eBPF instruction (struct bpf_insn).
type insn struct {
	code uint8
	regs uint8 // dst | src << 4
	off  int16
	imm  int32
}

// eBPF opcodes (linux/bpf.h, linux/bpf_common.h).
const (
	opMovReg   = unix.BPF_ALU64 | unix.BPF_MOV | unix.BPF_X // 0xbf
	opMovImm   = unix.BPF_ALU64 | unix.BPF_MOV | unix.BPF_K // 0xb7
	opAddImm   = unix.BPF_ALU64 | unix.BPF_ADD | unix.BPF_K // 0x07
	opAndImm   = unix.BPF_ALU64 | unix.BPF_AND | unix.BPF_K // 0x57
	opLdxW     = unix.BPF_LDX | unix.BPF_MEM | unix.BPF_W   // 0x61
	opLdxH     = unix.BPF_LDX | unix.BPF_MEM | unix.BPF_H   // 0x69
	opLdxB     = unix.BPF_LDX | unix.BPF_MEM | unix.BPF_B   // 0x71
	opLdDW     = unix.BPF_LD | unix.BPF_IMM | unix.BPF_DW   // 0x18, two slots
	opJgtReg   = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_X   // 0x2d
	opJneImm   = unix.BPF_JMP | unix.BPF_JNE | unix.BPF_K   // 0x55
	opJne32    = 0x06 | unix.BPF_JNE | unix.BPF_K           // BPF_JMP32: compare the low 32 bits
	opCall     = unix.BPF_JMP | unix.BPF_CALL               // 0x85
	opExit     = unix.BPF_JMP | unix.BPF_EXIT               // 0x95
	xdpPass    = 2
	fnRedirMap = 51 // BPF_FUNC_redirect_map
	// struct xdp_md field offsets.
	xdpMDData       = 0
	xdpMDDataEnd    = 4
	xdpMDRxQueueIdx = 16
)

// asm assembles a program with forward jumps to labels.
type asm struct {
	p     []insn
	fixup map[int]string // instruction index → label it jumps to
	label map[string]int
}

func (a *asm) emit(code, dst, src uint8, off int16, imm int32) {
	a.p = append(a.p, insn{code: code, regs: dst | src<<4, off: off, imm: imm})
}

// jump emits a conditional jump to label (resolved in link).
func (a *asm) jump(code, dst, src uint8, imm int32, label string) {
	a.fixup[len(a.p)] = label
	a.emit(code, dst, src, 0, imm)
}

func (a *asm) mark(label string) { a.label[label] = len(a.p) }

func (a *asm) link() []insn {
	for i, l := range a.fixup {
		a.p[i].off = int16(a.label[l] - i - 1)
	}
	return a.p
}

// le16 and le32 give the value a little-endian load of the big-endian
// wire bytes of v produces (eBPF loads are in host order, x86 and arm64
// little-endian).
func le16(v uint16) int32 { return int32(v>>8 | v<<8&0xff00) }

func le32(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) }

// program returns the XDP program: frames carrying UDP to local:port
// (IPv4 without options or fragments, or IPv6 without extension headers)
// are redirected to the XSKMAP entry of their receive queue, falling back
// to XDP_PASS when the queue has no socket; every other frame (ARP,
// neighbour discovery, other traffic) passes to the kernel. The Ethernet
// frame is untagged or, with vid ≥ 0, carries one IEEE 802.1Q tag
// (EtherType 0x8100) with VLAN ID vid (any PCP and DEI); with vid < 0 the
// program is the untagged one, instruction for instruction, and tagged
// frames pass.
func program(mapFD int, local netip.Addr, port uint16, vid int) []insn {
	a := &asm{fixup: map[int]string{}, label: map[string]int{}}
	const r0, r1, r2, r3, r4, r5, r6 = 0, 1, 2, 3, 4, 5, 6
	a.emit(opMovReg, r6, r1, 0, 0)
	a.emit(opLdxW, r2, r6, xdpMDData, 0)
	a.emit(opLdxW, r3, r6, xdpMDDataEnd, 0)
	if vid >= 0 {
		// A tag with our VLAN ID: step r2 (still a packet pointer for the
		// verifier, now with a constant offset of 4) over it, so that the
		// untagged checks below read the inner EtherType at r2+12 and the
		// IP header at r2+14; their bounds check covers the tag too. A
		// frame too short for the tag is too short for the checks below.
		a.emit(opMovReg, r4, r2, 0, 0)
		a.emit(opAddImm, r4, 0, 0, rawnet.EthLen+rawnet.VLANLen)
		a.jump(opJgtReg, r4, r3, 0, "pass")
		a.emit(opLdxH, r5, r2, 12, 0)
		a.jump(opJneImm, r5, 0, le16(rawnet.EthTypeVLAN), "untagged")
		a.emit(opLdxH, r5, r2, rawnet.EthLen, 0)
		a.emit(opAndImm, r5, 0, 0, le16(0x0fff)) // the VID; PCP and DEI are the sender's
		a.jump(opJneImm, r5, 0, le16(uint16(vid)&0x0fff), "pass")
		a.emit(opAddImm, r2, 0, 0, rawnet.VLANLen)
		a.mark("untagged")
	}
	a.emit(opMovReg, r4, r2, 0, 0)
	if local.Is4() {
		a.emit(opAddImm, r4, 0, 0, rawnet.EthLen+rawnet.IPv4Len+rawnet.UDPLen)
		a.jump(opJgtReg, r4, r3, 0, "pass")
		a.emit(opLdxH, r5, r2, 12, 0)
		a.jump(opJneImm, r5, 0, le16(rawnet.EthTypeIPv4), "pass")
		a.emit(opLdxB, r5, r2, rawnet.EthLen, 0)
		a.jump(opJneImm, r5, 0, 0x45, "pass")
		a.emit(opLdxB, r5, r2, rawnet.EthLen+9, 0)
		a.jump(opJneImm, r5, 0, rawnet.ProtoUDP, "pass")
		a.emit(opLdxH, r5, r2, rawnet.EthLen+6, 0)
		a.emit(opAndImm, r5, 0, 0, le16(0x3fff)) // MF and fragment offset
		a.jump(opJneImm, r5, 0, 0, "pass")
		ip := local.As4()
		a.emit(opLdxW, r5, r2, rawnet.EthLen+16, 0)
		a.jump(opJne32, r5, 0, le32(ip[:]), "pass")
		a.emit(opLdxH, r5, r2, rawnet.EthLen+rawnet.IPv4Len+2, 0)
		a.jump(opJneImm, r5, 0, le16(port), "pass")
	} else {
		a.emit(opAddImm, r4, 0, 0, rawnet.EthLen+rawnet.IPv6Len+rawnet.UDPLen)
		a.jump(opJgtReg, r4, r3, 0, "pass")
		a.emit(opLdxH, r5, r2, 12, 0)
		a.jump(opJneImm, r5, 0, le16(rawnet.EthTypeIPv6), "pass")
		a.emit(opLdxB, r5, r2, rawnet.EthLen+6, 0)
		a.jump(opJneImm, r5, 0, rawnet.ProtoUDP, "pass")
		ip := local.As16()
		for i := 0; i < 16; i += 4 {
			a.emit(opLdxW, r5, r2, int16(rawnet.EthLen+24+i), 0)
			a.jump(opJne32, r5, 0, le32(ip[i:i+4]), "pass")
		}
		a.emit(opLdxH, r5, r2, rawnet.EthLen+rawnet.IPv6Len+2, 0)
		a.jump(opJneImm, r5, 0, le16(port), "pass")
	}
	// bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)
	a.emit(opLdxW, r2, r6, xdpMDRxQueueIdx, 0)
	a.emit(opLdDW, r1, unix.BPF_PSEUDO_MAP_FD, 0, int32(mapFD))
	a.emit(0, 0, 0, 0, 0)
	a.emit(opMovImm, r3, 0, 0, xdpPass)
	a.emit(opCall, 0, 0, 0, fnRedirMap)
	a.emit(opExit, 0, 0, 0, 0)
	a.mark("pass")
	a.emit(opMovImm, r0, 0, 0, xdpPass)
	a.emit(opExit, 0, 0, 0, 0)
	return a.link()
}

// bpfAttr is a union bpf_attr buffer (the commands used here fit in 128
// bytes); fields are written at their offsets.
type bpfAttr [16]uint64

func (a *bpfAttr) u32(off int, v uint32) {
	binary.NativeEndian.PutUint32((*[128]byte)(unsafe.Pointer(a))[off:], v)
}

func (a *bpfAttr) u64(off int, v uint64) {
	binary.NativeEndian.PutUint64((*[128]byte)(unsafe.Pointer(a))[off:], v)
}

// heapCopy returns a copy of b's bytes on the heap: the only memory whose
// address a bpfAttr may carry. The address is kept as an integer, and a
// variable on a goroutine's stack (a key, a small literal) can move when
// the stack grows before the kernel reads it (bpfCall's prologue); the
// runtime corrects pointers, not integers, and heap objects do not move.
// Not inlined, so the result is always the heap's (it is returned).
//
//go:noinline
func heapCopy(b []byte) []byte { return append(make([]byte, 0, len(b)), b...) }

// addr is the address of b's first byte, for a bpfAttr; b from heapCopy.
func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

func bpfCall(cmd int, a *bpfAttr) (int, error) {
	r, _, e := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(unsafe.Pointer(a)), unsafe.Sizeof(*a))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// bpfError maps a bpf(2) failure: missing privileges and missing kernel
// support match link.ErrNotSupported.
func bpfError(what string, err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return &rawnet.NotSupportedError{What: "afxdp: " + what, Need: "CAP_BPF and CAP_NET_ADMIN (or CAP_SYS_ADMIN)", Err: err}
	case errors.Is(err, unix.ENOSYS):
		return &rawnet.NotSupportedError{What: "afxdp: " + what, Need: "a kernel with CONFIG_BPF_SYSCALL", Err: err}
	case errors.Is(err, unix.EINVAL) && what == "create XSKMAP":
		return &rawnet.NotSupportedError{What: "afxdp: " + what, Need: "a kernel with CONFIG_XDP_SOCKETS (BPF_MAP_TYPE_XSKMAP)", Err: err}
	}
	return fmt.Errorf("afxdp: %s: %w", what, err)
}

// createXSKMap creates a BPF_MAP_TYPE_XSKMAP of n entries.
func createXSKMap(n int) (int, error) {
	var a bpfAttr
	a.u32(0, unix.BPF_MAP_TYPE_XSKMAP)
	a.u32(4, 4) // key: queue index
	a.u32(8, 4) // value: socket fd
	a.u32(12, uint32(n))
	copy((*[128]byte)(unsafe.Pointer(&a))[28:44], "goroce_xsks")
	fd, err := bpfCall(unix.BPF_MAP_CREATE, &a)
	if err != nil {
		return -1, bpfError("create XSKMAP", err)
	}
	return fd, nil
}

// mapUpdate sets map[key] = value.
func mapUpdate(mapFD int, key, value uint32) error {
	var kv [8]byte
	binary.NativeEndian.PutUint32(kv[:], key)
	binary.NativeEndian.PutUint32(kv[4:], value)
	h := heapCopy(kv[:])
	var a bpfAttr
	a.u32(0, uint32(mapFD))
	a.u64(8, addr(h))
	a.u64(16, addr(h[4:]))
	_, err := bpfCall(unix.BPF_MAP_UPDATE_ELEM, &a)
	runtime.KeepAlive(h)
	if err != nil {
		return fmt.Errorf("afxdp: XSKMAP update: %w", err)
	}
	return nil
}

// loadProgram loads prog as an XDP program that may see multi-buffer
// frames (BPF_F_XDP_HAS_FRAGS; the program only reads the first buffer).
// On a verifier error it retries with the log and returns it.
func loadProgram(prog []insn, frags bool) (int, error) {
	license := heapCopy([]byte("Dual MIT/GPL\x00"))
	code := heapCopy(unsafe.Slice((*byte)(unsafe.Pointer(&prog[0])), len(prog)*int(unsafe.Sizeof(prog[0]))))
	load := func(logBuf []byte) (int, error) {
		var a bpfAttr
		a.u32(0, unix.BPF_PROG_TYPE_XDP)
		a.u32(4, uint32(len(prog)))
		a.u64(8, addr(code))
		a.u64(16, addr(license))
		if logBuf != nil {
			a.u32(24, 1)
			a.u32(28, uint32(len(logBuf)))
			a.u64(32, addr(logBuf))
		}
		if frags {
			a.u32(44, unix.BPF_F_XDP_HAS_FRAGS)
		}
		copy((*[128]byte)(unsafe.Pointer(&a))[48:64], "goroce_xsk")
		a.u32(68, unix.BPF_XDP) // expected_attach_type
		fd, err := bpfCall(unix.BPF_PROG_LOAD, &a)
		runtime.KeepAlive(code)
		runtime.KeepAlive(license)
		runtime.KeepAlive(logBuf)
		return fd, err
	}
	fd, err := load(nil)
	if err == nil {
		return fd, nil
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EACCES) {
		logBuf := heapCopy(make([]byte, 64<<10))
		if _, lerr := load(logBuf); lerr != nil {
			n := 0
			for n < len(logBuf) && logBuf[n] != 0 {
				n++
			}
			if n > 0 {
				return -1, fmt.Errorf("afxdp: load XDP program: %w\nverifier log:\n%s", err, logBuf[:n])
			}
		}
	}
	return -1, bpfError("load XDP program", err)
}

// attachXDP attaches prog to the interface through a BPF link
// (BPF_LINK_CREATE, Linux 5.9): the program is detached when the returned
// fd is closed — also when the process dies — so it never outlives the
// socket it feeds.
func attachXDP(progFD, ifindex int, flags uint32) (int, error) {
	var a bpfAttr
	a.u32(0, uint32(progFD))
	a.u32(4, uint32(ifindex))
	a.u32(8, unix.BPF_XDP)
	a.u32(12, flags)
	fd, err := bpfCall(unix.BPF_LINK_CREATE, &a)
	if err != nil {
		return -1, err
	}
	return fd, nil
}
