package fabric

import (
	"cmp"
	"net/netip"
	"slices"

	"golang.org/x/net/bpf"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
)

// FlowSample is what a FlowSampler saw of one flow: the RoCEv2 packets
// of one 5-tuple to one destination QP, leaving leaf Leaf towards spine
// Spine.
type FlowSample struct {
	Src, Dst    netip.AddrPort
	DestQP      bth.QPN
	Leaf, Spine int
	// Packets and Bytes count the sampled packets and their lengths (the
	// Ethernet frames; a GSO super-packet that a veth passes whole counts
	// once, with its whole length). Multiply by the sampler's Every for an
	// estimate of the flow's traffic.
	Packets, Bytes uint64
}

// flowKey identifies a flow's sample: where it left its leaf, and the
// packet's addresses and destination QP.
type flowKey struct {
	src, dst    netip.AddrPort
	qpn         bth.QPN
	leaf, spine int
}

// sortSamples returns the samples of m ordered by source, destination,
// QP and spine.
func sortSamples(m map[flowKey]*FlowSample) []FlowSample {
	out := make([]FlowSample, 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b FlowSample) int {
		return cmp.Or(a.Src.Compare(b.Src), a.Dst.Compare(b.Dst), cmp.Compare(a.DestQP, b.DestQP),
			cmp.Compare(a.Leaf, b.Leaf), cmp.Compare(a.Spine, b.Spine))
	})
	return out
}

// packetOutgoing is the kernel's PACKET_OUTGOING (linux/if_packet.h): the
// packet type an AF_PACKET socket gives a frame the interface sends.
const packetOutgoing = 4

// flowFilter returns the classic BPF program of a FlowSampler's socket:
// it keeps, truncated to snap bytes, IPv4 UDP datagrams to port 4791
// (first fragments, any IHL) that the interface sends (with outgoing,
// the packet type ancillary field SKF_AD_PKTTYPE), one in every of them
// at random (SKF_AD_RANDOM, when every > 1), and drops everything else
// in the kernel, so that a sampled socket costs one filter run per frame.
func flowFilter(snap, every uint32, outgoing bool) []bpf.Instruction {
	var p []bpf.Instruction
	const drop = 0xFF // patched below
	if outgoing {
		p = append(p,
			bpf.LoadExtension{Num: bpf.ExtType},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: packetOutgoing, SkipTrue: drop})
	}
	p = append(p,
		bpf.LoadAbsolute{Off: 12, Size: 2}, // EtherType
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x0800, SkipTrue: drop},
		bpf.LoadAbsolute{Off: 14 + 9, Size: 1}, // IPv4 protocol
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 17, SkipTrue: drop},
		bpf.LoadAbsolute{Off: 14 + 6, Size: 2}, // fragment offset
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: drop},
		bpf.LoadMemShift{Off: 14},
		bpf.LoadIndirect{Off: 14 + 2, Size: 2}, // UDP destination port
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: rocev2.UDPPort, SkipTrue: drop})
	if every > 1 {
		p = append(p,
			bpf.LoadExtension{Num: bpf.ExtRand},
			bpf.ALUOpConstant{Op: bpf.ALUOpMod, Val: every},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: drop})
	}
	p = append(p, bpf.RetConstant{Val: snap}, bpf.RetConstant{Val: 0})
	// Every drop jumps to the last instruction.
	for i, in := range p {
		if j, ok := in.(bpf.JumpIf); ok && j.SkipTrue == drop {
			j.SkipTrue = uint8(len(p) - 1 - i - 1)
			p[i] = j
		}
	}
	return p
}
