//go:build linux

package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/internal/ebpf"
	"github.com/goroce/goroce/link/internal/rawnet"
)

// The XDP program is assembled here (about 40 instructions, 50 with a
// VLAN tag) with internal/ebpf, which also loads it with the bpf(2)
// system call; see the package documentation for why it does not use
// github.com/cilium/ebpf.

// struct xdp_md field offsets.
const (
	xdpMDData       = 0
	xdpMDDataEnd    = 4
	xdpMDRxQueueIdx = 16
)

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
func program(mapFD int, local netip.Addr, port uint16, vid int) ([]ebpf.Insn, error) {
	var a ebpf.Asm
	const (
		r0, r1, r2, r3, r4, r5 = ebpf.R0, ebpf.R1, ebpf.R2, ebpf.R3, ebpf.R4, ebpf.R5
		ctx                    = ebpf.R6 // struct xdp_md *
	)
	a.MovReg(ctx, r1)
	a.Load(ebpf.W, r2, ctx, xdpMDData)
	a.Load(ebpf.W, r3, ctx, xdpMDDataEnd)
	if vid >= 0 {
		// A tag with our VLAN ID: step r2 (still a packet pointer for the
		// verifier, now with a constant offset of 4) over it, so that the
		// untagged checks below read the inner EtherType at r2+12 and the
		// IP header at r2+14; their bounds check covers the tag too. A
		// frame too short for the tag is too short for the checks below.
		a.MovReg(r4, r2)
		a.ALU64(ebpf.Add, r4, rawnet.EthLen+rawnet.VLANLen)
		a.JumpReg(ebpf.JGT, r4, r3, "pass")
		a.Load(ebpf.H, r5, r2, 12)
		a.Jump(ebpf.JNE, r5, le16(rawnet.EthTypeVLAN), "untagged")
		a.Load(ebpf.H, r5, r2, rawnet.EthLen)
		a.ALU64(ebpf.And, r5, le16(0x0fff)) // the VID; PCP and DEI are the sender's
		a.Jump(ebpf.JNE, r5, le16(uint16(vid)&0x0fff), "pass")
		a.ALU64(ebpf.Add, r2, rawnet.VLANLen)
		a.Label("untagged")
	}
	a.MovReg(r4, r2)
	if local.Is4() {
		a.ALU64(ebpf.Add, r4, rawnet.EthLen+rawnet.IPv4Len+rawnet.UDPLen)
		a.JumpReg(ebpf.JGT, r4, r3, "pass")
		a.Load(ebpf.H, r5, r2, 12)
		a.Jump(ebpf.JNE, r5, le16(rawnet.EthTypeIPv4), "pass")
		a.Load(ebpf.B, r5, r2, rawnet.EthLen)
		a.Jump(ebpf.JNE, r5, 0x45, "pass")
		a.Load(ebpf.B, r5, r2, rawnet.EthLen+9)
		a.Jump(ebpf.JNE, r5, rawnet.ProtoUDP, "pass")
		a.Load(ebpf.H, r5, r2, rawnet.EthLen+6)
		a.ALU64(ebpf.And, r5, le16(0x3fff)) // MF and fragment offset
		a.Jump(ebpf.JNE, r5, 0, "pass")
		ip := local.As4()
		a.Load(ebpf.W, r5, r2, rawnet.EthLen+16)
		a.Jump32(ebpf.JNE, r5, le32(ip[:]), "pass")
		a.Load(ebpf.H, r5, r2, rawnet.EthLen+rawnet.IPv4Len+2)
		a.Jump(ebpf.JNE, r5, le16(port), "pass")
	} else {
		a.ALU64(ebpf.Add, r4, rawnet.EthLen+rawnet.IPv6Len+rawnet.UDPLen)
		a.JumpReg(ebpf.JGT, r4, r3, "pass")
		a.Load(ebpf.H, r5, r2, 12)
		a.Jump(ebpf.JNE, r5, le16(rawnet.EthTypeIPv6), "pass")
		a.Load(ebpf.B, r5, r2, rawnet.EthLen+6)
		a.Jump(ebpf.JNE, r5, rawnet.ProtoUDP, "pass")
		ip := local.As16()
		for i := 0; i < 16; i += 4 {
			a.Load(ebpf.W, r5, r2, int16(rawnet.EthLen+24+i))
			a.Jump32(ebpf.JNE, r5, le32(ip[i:i+4]), "pass")
		}
		a.Load(ebpf.H, r5, r2, rawnet.EthLen+rawnet.IPv6Len+2)
		a.Jump(ebpf.JNE, r5, le16(port), "pass")
	}
	// bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)
	a.Load(ebpf.W, r2, ctx, xdpMDRxQueueIdx)
	a.LoadMapFD(r1, mapFD)
	a.Mov(r3, ebpf.XDPPass)
	a.Call(ebpf.HelperRedirectMap)
	a.Exit()
	a.Label("pass")
	a.Mov(r0, ebpf.XDPPass)
	a.Exit()
	return a.Assemble()
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

// createXSKMap creates an XSKMAP of n entries: socket file descriptors by
// receive queue index.
func createXSKMap(n int) (*ebpf.Map, error) {
	m, err := ebpf.CreateMap(ebpf.XSKMap, "goroce_xsks", 4, n)
	if err != nil {
		return nil, bpfError("create XSKMAP", err)
	}
	return m, nil
}

// setSocket makes the XSKMAP entry of receive queue q the socket fd.
func setSocket(m *ebpf.Map, q int, fd int) error {
	var v [4]byte
	binary.NativeEndian.PutUint32(v[:], uint32(fd))
	if err := m.Update(uint32(q), v[:]); err != nil {
		return fmt.Errorf("afxdp: XSKMAP update: %w", err)
	}
	return nil
}

// loadProgram loads prog as an XDP program that may see multi-buffer
// frames (BPF_F_XDP_HAS_FRAGS; the program only reads the first buffer).
// A verifier error comes with its log.
func loadProgram(prog []ebpf.Insn, frags bool) (*ebpf.Program, error) {
	spec := ebpf.ProgramSpec{Type: ebpf.XDP, Name: "goroce_xsk", License: "Dual MIT/GPL", Insns: prog,
		AttachType: ebpf.AttachXDP}
	if frags {
		spec.Flags = unix.BPF_F_XDP_HAS_FRAGS
	}
	p, err := ebpf.Load(spec)
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("afxdp: load XDP program: %w", err)
		}
		return nil, bpfError("load XDP program", err)
	}
	return p, nil
}
