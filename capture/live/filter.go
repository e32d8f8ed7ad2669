package live

import (
	"golang.org/x/net/bpf"

	"github.com/goroce/goroce/rocev2"
)

// Link-layer constants of the filter (IEEE 802.3, 802.1Q, RFC 791, RFC 8200).
const (
	ethHeaderLen   = 14
	vlanTagLen     = 4
	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86dd
	etherTypeVLAN  = 0x8100 // IEEE 802.1Q
	etherTypeMACCt = 0x8808 // IEEE 802.3 Annex 31B MAC Control: PAUSE, PFC
	protoUDP       = 17
)

// FilterExpr is the tcpdump spelling of the program Filter returns; it
// goes into a pcapng interface block as the capture filter.
const FilterExpr = "udp port 4791 or (vlan and udp port 4791) or ether proto 0x8808"

// Filter returns the classic BPF program the capture attaches to its
// socket: it accepts, truncated to snap bytes, Ethernet frames that carry
// a UDP datagram from or to port 4791 over IPv4 (first fragments only,
// any IHL) or IPv6 (UDP as the first next header), untagged or with one
// 802.1Q tag in the frame, and MAC Control frames (EtherType 0x8808:
// PAUSE and priority flow control); it drops everything else in the
// kernel. A tag the NIC stripped into packet metadata needs no rule: the
// filter then sees the frame untagged, as tcpdump's does.
//
// The program reads only absolute offsets and never the ancillary
// (SKF_AD_*) data, so it runs unchanged in golang.org/x/net/bpf's VM.
func Filter(snap uint32) []bpf.Instruction {
	var p prog
	// Untagged: EtherType at 12, IP at 14.
	p.ins(bpf.LoadAbsolute{Off: 12, Size: 2})
	p.jeq(etherTypeMACCt, "accept")
	p.jeq(etherTypeVLAN, "vlan")
	p.jeq(etherTypeIPv4, "ip4@14")
	p.jeq(etherTypeIPv6, "ip6@14")
	p.jump("drop")
	// One 802.1Q tag: the inner EtherType at 16, IP at 18.
	p.label("vlan")
	p.ins(bpf.LoadAbsolute{Off: 16, Size: 2})
	p.jeq(etherTypeIPv4, "ip4@18")
	p.jeq(etherTypeIPv6, "ip6@18")
	p.jump("drop")
	for _, l3 := range []uint32{ethHeaderLen, ethHeaderLen + vlanTagLen} {
		ip4, ip6 := "ip4@14", "ip6@14"
		if l3 != ethHeaderLen {
			ip4, ip6 = "ip4@18", "ip6@18"
		}
		// IPv4 (RFC 791): protocol at 9, fragment offset in the low 13
		// bits at 6 (only a first fragment has the UDP header), header
		// length from the IHL nibble.
		p.label(ip4)
		p.ins(bpf.LoadAbsolute{Off: l3 + 9, Size: 1})
		p.jne(protoUDP, "drop")
		p.ins(bpf.LoadAbsolute{Off: l3 + 6, Size: 2})
		p.jset(0x1fff, "drop")
		p.ins(bpf.LoadMemShift{Off: l3})
		p.ins(bpf.LoadIndirect{Off: l3, Size: 2}) // UDP source port
		p.jeq(rocev2.UDPPort, "accept")
		p.ins(bpf.LoadIndirect{Off: l3 + 2, Size: 2}) // UDP destination port
		p.jeq(rocev2.UDPPort, "accept")
		p.jump("drop")
		// IPv6 (RFC 8200): next header at 6, UDP after the 40-byte header.
		p.label(ip6)
		p.ins(bpf.LoadAbsolute{Off: l3 + 6, Size: 1})
		p.jne(protoUDP, "drop")
		p.ins(bpf.LoadAbsolute{Off: l3 + 40, Size: 2})
		p.jeq(rocev2.UDPPort, "accept")
		p.ins(bpf.LoadAbsolute{Off: l3 + 42, Size: 2})
		p.jeq(rocev2.UDPPort, "accept")
		p.jump("drop")
	}
	p.label("accept")
	p.ins(bpf.RetConstant{Val: snap})
	p.label("drop")
	p.ins(bpf.RetConstant{Val: 0})
	return p.resolve()
}

// prog assembles a program with forward jumps to named labels.
type prog struct {
	code   []bpf.Instruction
	labels map[string]int
	fix    []fixup
}

// fixup is a jump whose targets are labels: t when the condition holds,
// f otherwise; an empty name means the next instruction.
type fixup struct {
	at   int
	t, f string
}

func (p *prog) ins(i bpf.Instruction) { p.code = append(p.code, i) }

func (p *prog) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.code)
}

func (p *prog) cond(c bpf.JumpTest, k uint32, t, f string) {
	p.fix = append(p.fix, fixup{at: len(p.code), t: t, f: f})
	p.ins(bpf.JumpIf{Cond: c, Val: k})
}

// jeq jumps to label when A == k and falls through otherwise.
func (p *prog) jeq(k uint32, label string) { p.cond(bpf.JumpEqual, k, label, "") }

// jne jumps to label when A != k and falls through otherwise.
func (p *prog) jne(k uint32, label string) { p.cond(bpf.JumpEqual, k, "", label) }

// jset jumps to label when A & k != 0 and falls through otherwise.
func (p *prog) jset(k uint32, label string) { p.cond(bpf.JumpBitsSet, k, label, "") }

// jump jumps to label unconditionally.
func (p *prog) jump(label string) {
	p.fix = append(p.fix, fixup{at: len(p.code), t: label})
	p.ins(bpf.Jump{})
}

// resolve fills in the jump offsets. Every jump of Filter is forward and
// within 255 instructions; a violation is a bug in Filter, caught by the
// tests, so it panics.
func (p *prog) resolve() []bpf.Instruction {
	off := func(at int, name string) uint32 {
		if name == "" {
			return 0
		}
		to, ok := p.labels[name]
		if !ok || to <= at || to-at-1 > 255 {
			panic("live: bad filter jump to " + name)
		}
		return uint32(to - at - 1)
	}
	for _, f := range p.fix {
		switch j := p.code[f.at].(type) {
		case bpf.Jump:
			j.Skip = off(f.at, f.t)
			p.code[f.at] = j
		case bpf.JumpIf:
			j.SkipTrue, j.SkipFalse = uint8(off(f.at, f.t)), uint8(off(f.at, f.f))
			p.code[f.at] = j
		}
	}
	return p.code
}
