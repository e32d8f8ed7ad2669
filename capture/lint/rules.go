package lint

// RuleID names a rule; it is what a finding reports and what tests match.
type RuleID string

// The rules. Each one is described in Rules.
const (
	RuleTVer          RuleID = "BTH-TVER"
	RuleReserved      RuleID = "RESERVED"
	RulePKey          RuleID = "PKEY"
	RuleUDPPort       RuleID = "UDP-DPORT"
	RuleICRC          RuleID = "ICRC"
	RuleOpcode        RuleID = "OPCODE"
	RulePad           RuleID = "PAD"
	RuleOpSeq         RuleID = "OPCODE-SEQ"
	RuleMTU           RuleID = "MTU"
	RuleRETHLen       RuleID = "RETH-LEN"
	RuleAckReq        RuleID = "ACKREQ"
	RuleAckWindow     RuleID = "ACK-WINDOW"
	RuleMSN           RuleID = "MSN"
	RuleSyndrome      RuleID = "AETH-SYNDROME"
	RuleReadRespCount RuleID = "READ-RESP-COUNT"

	// Fabric rules: what a leaf-spine network does to the traffic (ECMP,
	// traffic classes, PFC), checked from what the capture shows.
	RuleSharedTuple RuleID = "ECMP-SHARED-TUPLE"
	RuleCNPDSCP     RuleID = "CNP-DSCP"
	RulePFCPriority RuleID = "PFC-PRIORITY"
)

// Severity grades a rule: an error breaks the IBA or RoCEv2 rules that
// rxe enforces; a warning is a fabric configuration that works on one
// link but hurts on a real network (every QP on one ECMP path, CNPs queued
// behind data, RoCE on a lossy priority).
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Rule describes one transport-rule check.
type Rule struct {
	ID RuleID `json:"id"`
	// Summary says in one line what the rule requires.
	Summary string `json:"summary"`
	// Cite names the IBA clause and the rxe code that implement the rule
	// (doc/rxe.md is the project's note on them, with the rxe function
	// names).
	Cite string `json:"cite"`
	// Severity is error or warning.
	Severity Severity `json:"severity"`
}

// Rules lists every rule in the order findings are documented. It is a
// table, like the opcode table of package bth: callers must not modify it.
var Rules = []Rule{
	{RuleTVer, "BTH TVer is 0", "IBA 9.2 (TVer); rxe_recv.c hdr_check drops tver != 0", SeverityError},
	{RuleReserved, "reserved fields are 0: BTH Resv6 and Resv7, DETH byte 4, the 16 CNP bytes",
		"IBA 9.2, 9.3.2 (reserved fields transmitted as 0); RoCEv2 Annex A17.9.2 (CNP)", SeverityError},
	{RulePKey, "the P_Key is valid (low 15 bits not 0) and the same on every packet of a connection",
		"IBA 10.9.3 (partition membership); rxe_recv.c check_keys / pkey_match", SeverityError},
	{RuleUDPPort, "the UDP destination port is 4791", "RoCEv2 Annex A17 (IANA port 4791); rxe_net.c ROCE_V2_UDP_DPORT", SeverityError},
	{RuleICRC, "the ICRC matches the packet", "IBA 7.8.1, RoCEv2 Annex A17.4.1; rxe_icrc.c rxe_icrc_check", SeverityError},
	{RuleOpcode, "the opcode is defined and belongs to the QP's transport (RC, UC, UD)",
		"IBA 9.2.1 Table 38; rxe_recv.c check_type_state", SeverityError},
	{RulePad, "PadCnt pads the payload to a 4-byte boundary: the UDP payload is a multiple of 4, the pad fits in the payload, and packets without payload or with a full MTU carry no pad",
		"IBA 9.2 (PadCnt); rxe_opcode.c payload_size", SeverityError},
	{RuleOpSeq, "a message is FIRST, MIDDLE*, LAST (or ONLY) in consecutive PSNs, with no other message interleaved on the QP",
		"IBA 9.8.3.1; rxe_resp.c check_op_seq", SeverityError},
	{RuleMTU, "payload vs path MTU: FIRST and MIDDLE carry exactly the MTU, LAST 1..MTU, ONLY at most the MTU (the MTU inferred from FIRST/MIDDLE sizes)",
		"IBA 9.7.4.1.6; rxe_resp.c check_length", SeverityError},
	{RuleRETHLen, "an RDMA WRITE's RETH DMA length equals the sum of its payloads",
		"IBA 9.7.4.1.6 (C9-89..C9-92); rxe_resp.c check_rkey (resid)", SeverityError},
	{RuleAckReq, "the last packet of every RC request message has AckReq set",
		"rxe_req.c init_req_packet (ack_req on the END of every message); IBA 9.7.5.1.1 (ACKs only on AckReq)", SeverityError},
	{RuleAckWindow, "an ACK, NAK or response names a PSN the requester has sent",
		"IBA 9.7.5.1.1, 9.7.5.1.3 (cumulative ACK); rxe_comp.c check_psn", SeverityError},
	{RuleMSN, "the AETH MSN never goes back", "IBA 9.7.5.1.2, C9-148; rxe_resp.c resp.msn", SeverityError},
	{RuleSyndrome, "the AETH syndrome is not a reserved value, and READ responses and ATOMIC ACKs carry an ACK",
		"IBA 9.7.5.1 Table 46; rxe_hdr.h AETH_* and rxe_comp.c check_ack", SeverityError},
	{RuleReadRespCount, "a READ of length L is answered by ceil(L/MTU) response packets (at least 1) carrying L bytes",
		"IBA 9.7.4.1.6; rxe_req.c update_wqe_psn, rxe_resp.c read_reply", SeverityError},
	{RuleSharedTuple, "QPs of one host pair do not share a 5-tuple: no two RC directions from the same source to the same destination IP (different destination QPNs) send every packet from one and the same UDP source port; ECMP hashes such QPs onto one path (one finding per host pair and port, at the first packet of the second QP)",
		"RoCEv2 Annex A17 (the UDP source port is the flow's entropy, the destination port is 4791); Linux rdma_get_udp_sport (ib_verbs.h): a per-QP port 0xC000 | hash of the flow label or of the QPN pair (rdma_calc_flow_label)", SeverityWarning},
	{RuleCNPDSCP, "a CNP does not carry the DSCP of the data it notifies: its IP DSCP differs from that of the last non-CNP packet (before it) of the direction it throttles, the reverse of the CNP's own direction (the CNP goes to the sender's QP); one finding per CNP direction",
		"RoCEv2 Annex A17.9 (CNP); DCQCN (Zhu et al., SIGCOMM 2015) sends CNPs on a high-priority class; mlx5 cnp_dscp (default 48) and cnp_802p_prio (6)", SeverityWarning},
	{RulePFCPriority, "when the capture holds PFC frames (MAC Control opcode 0x0101) whose class-enable vectors name some priorities, every 802.1Q-tagged RoCEv2 packet other than a CNP has a PCP among those priorities: data on a priority no PFC frame enabled is not lossless; untagged packets are not checked (their priority comes from a DSCP map the capture does not show); one finding per priority, at its first packet",
		"IEEE 802.1Qbb (PFC), 802.3 Annex 31D (class-enable vector); RoCEv2 Annex A17 (RoCE relies on a lossless fabric or on its own retransmission); NVIDIA RoCE configuration: PFC on the RoCE priority (commonly 3) only", SeverityWarning},
}

// ruleByID returns the rule with the given ID.
func ruleByID(id RuleID) *Rule {
	for i := range Rules {
		if Rules[i].ID == id {
			return &Rules[i]
		}
	}
	return nil
}
