package rocev2

import "github.com/goroce/goroce/bth"

// FlowLabelMask keeps the 20 bits of an IPv6 / GRH flow label.
const FlowLabelMask = 0xFFFFF

// SourcePortMin is the lowest UDP source port the kernel rule produces
// (IB_ROCE_UDP_ENCAP_VALID_PORT_MIN, 0xC000): RoCEv2 Annex A17.3 leaves the
// source port to the sender for ECMP entropy, and Linux keeps it in the
// dynamic range 49152–65535.
const SourcePortMin = 0xC000

// FlowLabel returns the flow label Linux derives for a connection with no
// flow label in its address vector, rdma_calc_flow_label(lqpn, rqpn) in
// include/rdma/ib_verbs.h: the 48-bit product of the two QPNs folded to 20
// bits. It is symmetric, so both ends of a connection compute the same
// label.
func FlowLabel(lqpn, rqpn bth.QPN) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v) & FlowLabelMask
}

// SourcePort returns the UDP source port for a flow label,
// rdma_flow_label_to_udp_sport in include/rdma/ib_verbs.h: the label's low
// 14 bits XOR its high 6, in the range [SourcePortMin, 0xFFFF]. Bits above
// the 20 of a flow label are ignored.
func SourcePort(flowLabel uint32) uint16 {
	fl := flowLabel & FlowLabelMask
	return uint16(SourcePortMin | (fl&0x3FFF ^ fl>>14))
}

// ConnSourcePort returns the UDP source port of a connection as Linux
// picks it (rdma_get_udp_sport, used by rdma_rxe and mlx5): from flowLabel
// if it is non-zero, else from FlowLabel(lqpn, rqpn).
func ConnSourcePort(flowLabel uint32, lqpn, rqpn bth.QPN) uint16 {
	if flowLabel&FlowLabelMask == 0 {
		flowLabel = FlowLabel(lqpn, rqpn)
	}
	return SourcePort(flowLabel)
}
