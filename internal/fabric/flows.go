package fabric

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
)

// Packet is what the multipath checks need of one RoCEv2 packet.
type Packet struct {
	Src, Dst netip.AddrPort
	Opcode   bth.Opcode
	DestQP   bth.QPN
	PSN      bth.PSN
}

// ParseFrame decodes an Ethernet/IPv4/UDP frame to port 4791 and its BTH,
// and reports false for anything else (ARP, TCP, truncated frames).
func ParseFrame(b []byte) (Packet, bool) {
	if len(b) < 14 || binary.BigEndian.Uint16(b[12:]) != 0x0800 {
		return Packet{}, false
	}
	ip := b[14:]
	if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != 17 {
		return Packet{}, false
	}
	ihl := int(ip[0]&0xF) * 4
	if len(ip) < ihl+8 {
		return Packet{}, false
	}
	u := ip[ihl:]
	if binary.BigEndian.Uint16(u[2:]) != rocev2.UDPPort {
		return Packet{}, false
	}
	h, err := bth.Parse(u[8:])
	if err != nil {
		return Packet{}, false
	}
	src, _ := netip.AddrFromSlice(ip[12:16])
	dst, _ := netip.AddrFromSlice(ip[16:20])
	return Packet{
		Src:    netip.AddrPortFrom(src, binary.BigEndian.Uint16(u[0:])),
		Dst:    netip.AddrPortFrom(dst, binary.BigEndian.Uint16(u[2:])),
		Opcode: h.Opcode(), DestQP: h.DestQP(), PSN: h.PSN(),
	}, true
}

// Conn is one RC connection seen in a capture: the requester's packets
// (requests) and the responder's (ACKs and READ responses), paired by PSN.
type Conn struct {
	Requester, Responder netip.Addr
	ReqQPN, RespQPN      bth.QPN // the requester's and the responder's QP
	// ReqPorts and RespPorts are the UDP source ports each side sent
	// from, sorted (one each when the side has one port per QP).
	ReqPorts, RespPorts []uint16
	Requests, Responses int
}

// KernelPort is the port both sides use by the kernel rule
// (rdma_get_udp_sport with no flow label).
func (c Conn) KernelPort() uint16 { return rocev2.ConnSourcePort(0, c.ReqQPN, c.RespQPN) }

type side struct {
	addr netip.Addr
	qpn  bth.QPN
}

// Conns groups packets into connections. A request is a packet whose
// opcode has MaskRequest; each responder QP is paired with the requester
// QP whose requests carried the PSNs its responses acknowledge (the most
// common match, so a stray collision of random start PSNs does not
// matter). Responses that match no request are ignored; so are requests
// with no response (the connection's requester QPN is then unknown).
func Conns(pkts []Packet) []Conn {
	type psnKey struct {
		from, to netip.Addr
		psn      bth.PSN
	}
	// reqTo[requester→responder, PSN] = the responder's QP it was sent to.
	reqTo := map[psnKey]bth.QPN{}
	reqPorts := map[side]map[uint16]int{} // by the responder's QP
	for _, p := range pkts {
		if !p.Opcode.Mask().Has(bth.MaskRequest) {
			continue
		}
		reqTo[psnKey{p.Src.Addr(), p.Dst.Addr(), p.PSN}] = p.DestQP
		s := side{p.Dst.Addr(), p.DestQP}
		if reqPorts[s] == nil {
			reqPorts[s] = map[uint16]int{}
		}
		reqPorts[s][p.Src.Port()]++
	}
	// votes[responder side][requester side] counts PSN matches.
	type pair struct{ req, resp side }
	votes := map[pair]int{}
	respPorts := map[side]map[uint16]int{} // by the requester's QP
	for _, p := range pkts {
		if !p.Opcode.Mask().Has(bth.MaskResponse) {
			continue
		}
		rq, ok := reqTo[psnKey{p.Dst.Addr(), p.Src.Addr(), p.PSN}]
		if !ok {
			continue
		}
		votes[pair{side{p.Dst.Addr(), p.DestQP}, side{p.Src.Addr(), rq}}]++
		s := side{p.Dst.Addr(), p.DestQP}
		if respPorts[s] == nil {
			respPorts[s] = map[uint16]int{}
		}
		respPorts[s][p.Src.Port()]++
	}
	best := map[side]pair{} // by the responder's QP
	for pr, n := range votes {
		if b, ok := best[pr.resp]; !ok || n > votes[b] {
			best[pr.resp] = pr
		}
	}
	var out []Conn
	for _, pr := range best {
		c := Conn{Requester: pr.req.addr, Responder: pr.resp.addr, ReqQPN: pr.req.qpn, RespQPN: pr.resp.qpn}
		c.ReqPorts, c.Requests = ports(reqPorts[pr.resp])
		c.RespPorts, c.Responses = ports(respPorts[pr.req])
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Conn) int {
		if c := a.Requester.Compare(b.Requester); c != 0 {
			return c
		}
		return int(a.ReqQPN) - int(b.ReqQPN)
	})
	return out
}

// ports returns the sorted keys of m and the sum of its counts.
func ports(m map[uint16]int) ([]uint16, int) {
	var ps []uint16
	n := 0
	for p, k := range m {
		ps = append(ps, p)
		n += k
	}
	slices.Sort(ps)
	return ps, n
}

// SourcePorts returns the distinct UDP source ports of the packets sent
// from addr, sorted.
func SourcePorts(pkts []Packet, from netip.Addr) []uint16 {
	m := map[uint16]int{}
	for _, p := range pkts {
		if p.Src.Addr() == from {
			m[p.Src.Port()]++
		}
	}
	ps, _ := ports(m)
	return ps
}

// PerSpine counts, spine by spine, the packets of perSpine that keep
// reports true for.
func PerSpine(perSpine [][]Packet, keep func(Packet) bool) []uint64 {
	n := make([]uint64, len(perSpine))
	for k, pkts := range perSpine {
		for _, p := range pkts {
			if keep(p) {
				n[k]++
			}
		}
	}
	return n
}

// Spines returns the spines that carried c's requests (to the responder
// QP), in order; a flow that sticks to its path has one.
func (c Conn) Spines(perSpine [][]Packet) []int {
	var out []int
	for k, pkts := range perSpine {
		for _, p := range pkts {
			if p.Dst.Addr() == c.Responder && p.DestQP == c.RespQPN && p.Opcode.Mask().Has(bth.MaskRequest) {
				out = append(out, k)
				break
			}
		}
	}
	return out
}
