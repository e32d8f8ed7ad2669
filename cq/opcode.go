package cq

import "strconv"

// Opcode is the kind of work a completion reports. Names and numbers are
// those of enum ibv_wc_opcode in rdma-core's libibverbs/verbs.h; receive
// completions have bit 7 set (IsRecv). String returns the ibv name, for
// example "IBV_WC_RDMA_READ". IBV_WC_TSO (7) and the tag-matching opcodes
// have no use in RoCE RC and are left out.
type Opcode uint8

const (
	// OpSend reports a completed SEND, SEND with immediate or SEND with
	// invalidate.
	OpSend Opcode = 0 // IBV_WC_SEND
	// OpRDMAWrite reports a completed RDMA WRITE (with or without immediate).
	OpRDMAWrite Opcode = 1 // IBV_WC_RDMA_WRITE
	// OpRDMARead reports a completed RDMA READ.
	OpRDMARead Opcode = 2 // IBV_WC_RDMA_READ
	// OpCompSwap reports a completed ATOMIC CMP_SWAP.
	OpCompSwap Opcode = 3 // IBV_WC_COMP_SWAP
	// OpFetchAdd reports a completed ATOMIC FETCH_ADD.
	OpFetchAdd Opcode = 4 // IBV_WC_FETCH_ADD
	// OpBindMW reports a completed memory window bind.
	OpBindMW Opcode = 5 // IBV_WC_BIND_MW
	// OpLocalInv reports a completed local invalidate.
	OpLocalInv Opcode = 6 // IBV_WC_LOCAL_INV
	// OpRecv reports that a receive work request consumed an incoming SEND.
	OpRecv Opcode = 1 << 7 // IBV_WC_RECV
	// OpRecvRDMAWithImm reports that a receive work request consumed an
	// incoming RDMA WRITE with immediate.
	OpRecvRDMAWithImm Opcode = OpRecv + 1 // IBV_WC_RECV_RDMA_WITH_IMM
)

// IsRecv reports whether o is a receive-side opcode, the test
// (opcode & IBV_WC_RECV) that verbs.h provides for.
func (o Opcode) IsRecv() bool { return o&OpRecv != 0 }

// Flags are the completion flags of enum ibv_wc_flags in rdma-core's
// libibverbs/verbs.h. The tag-matching flags are left out.
type Flags uint32

const (
	// FlagGRH means that a GRH is present (always so for RoCEv2 UD receives).
	FlagGRH Flags = 1 << 0 // IBV_WC_GRH
	// FlagWithImm means that Completion.Imm holds immediate data.
	FlagWithImm Flags = 1 << 1 // IBV_WC_WITH_IMM
	// FlagIPCsumOK means that the device verified the IP checksum (raw packet
	// QPs).
	FlagIPCsumOK Flags = 1 << 2 // IBV_WC_IP_CSUM_OK
	// FlagWithInv means that Completion.InvalidatedRKey holds the rkey a SEND
	// with invalidate invalidated.
	FlagWithInv Flags = 1 << 3 // IBV_WC_WITH_INV
)

const knownFlags = FlagGRH | FlagWithImm | FlagIPCsumOK | FlagWithInv

// String returns the set flags as ibv names joined by "|", for example
// "IBV_WC_WITH_IMM|IBV_WC_WITH_INV"; no flags is "0" and unknown bits are
// shown in hex.
func (f Flags) String() string {
	if f == 0 {
		return "0"
	}
	names := [...]string{"IBV_WC_GRH", "IBV_WC_WITH_IMM", "IBV_WC_IP_CSUM_OK", "IBV_WC_WITH_INV"}
	var b []byte
	for i, n := range names {
		if f&(1<<i) == 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, '|')
		}
		b = append(b, n...)
	}
	if rest := f &^ knownFlags; rest != 0 {
		if len(b) > 0 {
			b = append(b, '|')
		}
		b = append(b, "0x"...)
		b = strconv.AppendUint(b, uint64(rest), 16)
	}
	return string(b)
}
