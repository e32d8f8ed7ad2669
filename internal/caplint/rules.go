package caplint

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
}

// Rules lists every rule in the order findings are documented. It is a
// table, like the opcode table of package bth: callers must not modify it.
var Rules = []Rule{
	{RuleTVer, "BTH TVer is 0", "IBA 9.2 (TVer); rxe_recv.c hdr_check drops tver != 0"},
	{RuleReserved, "reserved fields are 0: BTH Resv6 and Resv7, DETH byte 4, the 16 CNP bytes",
		"IBA 9.2, 9.3.2 (reserved fields transmitted as 0); RoCEv2 Annex A17.9.2 (CNP)"},
	{RulePKey, "the P_Key is valid (low 15 bits not 0) and the same on every packet of a connection",
		"IBA 10.9.3 (partition membership); rxe_recv.c check_keys / pkey_match"},
	{RuleUDPPort, "the UDP destination port is 4791", "RoCEv2 Annex A17 (IANA port 4791); rxe_net.c ROCE_V2_UDP_DPORT"},
	{RuleICRC, "the ICRC matches the packet", "IBA 7.8.1, RoCEv2 Annex A17.4.1; rxe_icrc.c rxe_icrc_check"},
	{RuleOpcode, "the opcode is defined and belongs to the QP's transport (RC, UC, UD)",
		"IBA 9.2.1 Table 38; rxe_recv.c check_type_state"},
	{RulePad, "PadCnt pads the payload to a 4-byte boundary: the UDP payload is a multiple of 4, the pad fits in the payload, and packets without payload or with a full MTU carry no pad",
		"IBA 9.2 (PadCnt); rxe_opcode.c payload_size"},
	{RuleOpSeq, "a message is FIRST, MIDDLE*, LAST (or ONLY) in consecutive PSNs, with no other message interleaved on the QP",
		"IBA 9.8.3.1; rxe_resp.c check_op_seq"},
	{RuleMTU, "payload vs path MTU: FIRST and MIDDLE carry exactly the MTU, LAST 1..MTU, ONLY at most the MTU (the MTU inferred from FIRST/MIDDLE sizes)",
		"IBA 9.7.4.1.6; rxe_resp.c check_length"},
	{RuleRETHLen, "an RDMA WRITE's RETH DMA length equals the sum of its payloads",
		"IBA 9.7.4.1.6 (C9-89..C9-92); rxe_resp.c check_rkey (resid)"},
	{RuleAckReq, "the last packet of every RC request message has AckReq set",
		"rxe_req.c init_req_packet (ack_req on the END of every message); IBA 9.7.5.1.1 (ACKs only on AckReq)"},
	{RuleAckWindow, "an ACK, NAK or response names a PSN the requester has sent",
		"IBA 9.7.5.1.1, 9.7.5.1.3 (cumulative ACK); rxe_comp.c check_psn"},
	{RuleMSN, "the AETH MSN never goes back", "IBA 9.7.5.1.2, C9-148; rxe_resp.c resp.msn"},
	{RuleSyndrome, "the AETH syndrome is not a reserved value, and READ responses and ATOMIC ACKs carry an ACK",
		"IBA 9.7.5.1 Table 46; rxe_hdr.h AETH_* and rxe_comp.c check_ack"},
	{RuleReadRespCount, "a READ of length L is answered by ceil(L/MTU) response packets (at least 1) carrying L bytes",
		"IBA 9.7.4.1.6; rxe_req.c update_wqe_psn, rxe_resp.c read_reply"},
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
