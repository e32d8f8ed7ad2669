package qp

import (
	"strconv"
	"strings"
	"sync/atomic"
)

// Counter names one of a QP's packet and error counters. The counters of
// rxe carry the names of its hw_counters (rxe_hw_counters.c,
// rxe_counter_name); the rest are this project's. String returns the name.
//
// A counter is added in one place: a constant here and its name in
// counterNames beside it. Counters, Snapshot and every printer follow.
type Counter uint8

// The counters.
const (
	CounterSentPkts            Counter = iota // packets sent (rxe sent_pkts)
	CounterRcvdPkts                           // packets received (rxe rcvd_pkts)
	CounterDuplicateRequest                   // requests behind the ePSN (rxe duplicate_request)
	CounterOutOfSeqRequest                    // requests ahead of the ePSN (rxe out_of_seq_request)
	CounterRcvdRNRErr                         // RNR NAKs received (rxe rcvd_rnr_err)
	CounterSendRNRErr                         // RNR NAKs sent (rxe send_rnr_err)
	CounterRcvdSeqErr                         // NAK PSN sequence errors received (rxe rcvd_seq_err)
	CounterAckDeferred                        // ACKs coalesced into a later one (rxe ack_deferred)
	CounterRetryExceededErr                   // WQEs failed with RETRY_EXC_ERR (rxe retry_exceeded_err)
	CounterRetryRNRExceededErr                // WQEs failed with RNR_RETRY_EXC_ERR (rxe retry_rnr_exceeded_err)
	CounterCompleterRetryErr                  // Go-Back-N retries started (rxe completer_retry_err)
	CounterBadICRC                            // packets with a bad ICRC, counted by the device
	CounterBadHdr                             // packets that failed the intake checks
	CounterDroppedNoQP                        // packets for no QP, counted by the device
	CounterRkeyViolation                      // NAK remote access errors sent

	// Counters of this project beyond rxe's.

	CounterRetransmittedPkts // requester packets sent again by Go-Back-N
	CounterReadReplays       // duplicate READs answered from a responder resource
	CounterReplayedPkts      // READ response packets sent again for those
	CounterAtomicReplays     // duplicate atomics answered from the saved value
	CounterDroppedResponses  // responses that matched no outstanding request
	CounterOutputOverflow    // responder replies dropped because the queue was full

	// Responder errors by Reason, where rxe counts none: each fatal Reason
	// has its counter (the others count in rxe's out_of_seq_request,
	// send_rnr_err and rkey_violation).

	CounterRespOpSeqErr             // ReasonOpSequence
	CounterRespOpNotEnabledErr      // ReasonOpNotEnabled
	CounterRespUnsupportedOpcodeErr // ReasonUnsupportedOpcode
	CounterRespNoResourcesErr       // ReasonNoResources
	CounterRespLengthErr            // ReasonLength
	CounterRespRecvLengthErr        // ReasonRecvLength
	CounterRespRecvSGEErr           // ReasonRecvSGE
	CounterRespMisalignedAtomicErr  // ReasonMisalignedAtomic
	CounterRespInvalidateErr        // ReasonInvalidateRKey

	// Drops of the unreliable transports (UC, UD), where rxe counts none:
	// these requests are dropped silently (IBA 9.9.3 class D), no NAK.

	CounterQKeyViolation    // UD requests whose DETH Q_Key is not the QP's (rxe check_keys: the port attribute qkey_viol_cntr)
	CounterDroppedNoRecvWQE // UC/UD requests that needed a receive WQE and found none
	CounterUCDroppedPkts    // UC packets dropped until the next FIRST or ONLY (IBA 9.8)

	// End-to-end flow control (IBA 9.7.7.2, flow.go).

	CounterCreditWaits // times the requester held a SEND or WRITE with immediate for the responder's credits

	numCounters
)

// NumCounters is the number of counters: Counter values run from 0 to
// NumCounters-1.
const NumCounters = int(numCounters)

// counterNames is the one name table, indexed by Counter.
var counterNames = [NumCounters]string{
	CounterSentPkts:            "sent_pkts",
	CounterRcvdPkts:            "rcvd_pkts",
	CounterDuplicateRequest:    "duplicate_request",
	CounterOutOfSeqRequest:     "out_of_seq_request",
	CounterRcvdRNRErr:          "rcvd_rnr_err",
	CounterSendRNRErr:          "send_rnr_err",
	CounterRcvdSeqErr:          "rcvd_seq_err",
	CounterAckDeferred:         "ack_deferred",
	CounterRetryExceededErr:    "retry_exceeded_err",
	CounterRetryRNRExceededErr: "retry_rnr_exceeded_err",
	CounterCompleterRetryErr:   "completer_retry_err",
	CounterBadICRC:             "bad_icrc",
	CounterBadHdr:              "bad_hdr",
	CounterDroppedNoQP:         "dropped_no_qp",
	CounterRkeyViolation:       "rkey_violation",
	CounterRetransmittedPkts:   "retransmitted_pkts",
	CounterReadReplays:         "read_replays",
	CounterReplayedPkts:        "replayed_pkts",
	CounterAtomicReplays:       "atomic_replays",
	CounterDroppedResponses:    "dropped_responses",
	CounterOutputOverflow:      "output_overflow",

	CounterRespOpSeqErr:             "resp_op_seq_err",
	CounterRespOpNotEnabledErr:      "resp_op_not_enabled_err",
	CounterRespUnsupportedOpcodeErr: "resp_unsupported_opcode_err",
	CounterRespNoResourcesErr:       "resp_no_resources_err",
	CounterRespLengthErr:            "resp_length_err",
	CounterRespRecvLengthErr:        "resp_recv_length_err",
	CounterRespRecvSGEErr:           "resp_recv_sge_err",
	CounterRespMisalignedAtomicErr:  "resp_misaligned_atomic_err",
	CounterRespInvalidateErr:        "resp_invalidate_err",

	CounterQKeyViolation:    "qkey_viol_cntr",
	CounterDroppedNoRecvWQE: "dropped_no_recv_wqe",
	CounterUCDroppedPkts:    "uc_dropped_pkts",

	CounterCreditWaits: "credit_waits",
}

// String returns the counter's name: rxe's hw_counters name where rxe has
// the counter ("sent_pkts"), a name in the same style otherwise.
func (c Counter) String() string {
	if int(c) < NumCounters {
		return counterNames[c]
	}
	return "Counter(" + strconv.Itoa(int(c)) + ")"
}

// Counters are a QP's packet and error counters, indexed by Counter. They
// are updated by the QP's owner goroutine and may be read from any
// goroutine. The zero value is ready.
type Counters struct {
	c [NumCounters]atomic.Uint64
}

// Add adds n to counter k. It does not allocate. k must be a Counter
// constant: an out-of-range k is a programmer error and panics.
func (c *Counters) Add(k Counter, n uint64) { c.c[k].Add(n) }

// Load returns the value of counter k.
func (c *Counters) Load(k Counter) uint64 { return c.c[k].Load() }

// Snapshot copies the counters. Each is read atomically, the set is not:
// counters updated meanwhile may be read before or after the update.
func (c *Counters) Snapshot() Snapshot {
	var s Snapshot
	for i := range c.c {
		s[i] = c.c[i].Load()
	}
	return s
}

// Snapshot is a plain copy of Counters, indexed by Counter (s[k]), for
// printing and comparison.
type Snapshot [NumCounters]uint64

// Sub returns s - o counter by counter: what happened between snapshot o
// and the later s.
func (s Snapshot) Sub(o Snapshot) Snapshot {
	for i := range s {
		s[i] -= o[i]
	}
	return s
}

// String lists the counters that are not zero as "{name:value …}", in
// Counter order, so %v and %+v print them by their names.
func (s Snapshot) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range s {
		if v == 0 {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(' ')
		}
		b.WriteString(counterNames[i])
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(v, 10))
	}
	b.WriteByte('}')
	return b.String()
}
