package cm

import "fmt"

// State is a connection's CM state (IBA 12.9.6, figure 143; the kernel's
// enum ib_cm_state).
type State uint8

// Connection states. A connection that returns to Idle is forgotten.
const (
	StateIdle State = iota
	StateREQSent
	StateREQRcvd
	StateMRAREQSent
	StateMRAREQRcvd
	StateREPSent
	StateREPRcvd
	StateMRAREPSent
	StateMRAREPRcvd
	StateEstablished
	StateDREQSent
	StateDREQRcvd
	StateTimewait
	StateSIDRREQSent
	StateSIDRREQRcvd
)

var stateNames = [...]string{
	StateIdle: "Idle", StateREQSent: "REQSent", StateREQRcvd: "REQRcvd",
	StateMRAREQSent: "MRAREQSent", StateMRAREQRcvd: "MRAREQRcvd", StateREPSent: "REPSent",
	StateREPRcvd: "REPRcvd", StateMRAREPSent: "MRAREPSent", StateMRAREPRcvd: "MRAREPRcvd",
	StateEstablished: "Established", StateDREQSent: "DREQSent", StateDREQRcvd: "DREQRcvd",
	StateTimewait: "Timewait", StateSIDRREQSent: "SIDRREQSent", StateSIDRREQRcvd: "SIDRREQRcvd",
}

// String returns the state's name.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// EventKind says what an Event reports. The names follow rdma_cm's
// RDMA_CM_EVENT_* where one exists.
type EventKind uint8

// Event kinds.
const (
	// EventConnectRequest: a REQ arrived for a listened-on service. Answer
	// with Accept, Reject or SendMRA.
	EventConnectRequest EventKind = iota + 1
	// EventEstablished: the connection is up. The active side gets it
	// when the REP arrives (the RTU goes out in the same Output, so bring
	// the QP to RTS before sending it); the passive side when the RTU
	// arrives.
	EventEstablished
	// EventRejected: the peer sent a REJ (Reason, PrivateData).
	EventRejected
	// EventUnreachable: the REQ or REP was retransmitted MaxCMRetries
	// times without an answer; the connection is gone.
	EventUnreachable
	// EventDisconnected: a DREQ arrived (the DREP is in the same Output),
	// our DREQ was answered, or our DREQ timed out (TimedOut). The
	// connection is in time-wait; move the QP to the error state.
	EventDisconnected
	// EventTimewaitExit: time-wait ended and the connection was forgotten.
	EventTimewaitExit
	// EventMRA: the peer acknowledged our REQ or REP with an MRA and the
	// retransmission timer was stretched.
	EventMRA
	// EventSIDRRequest: a SIDR_REQ arrived for a listened-on service
	// (rdma_cm's UDP port space). Answer with SIDRReply.
	EventSIDRRequest
	// EventSIDRReply: the answer to ResolveService (SIDRStatus, and on
	// success QP.RemoteQPN and QKey).
	EventSIDRReply
)

var eventNames = [...]string{
	EventConnectRequest: "ConnectRequest", EventEstablished: "Established",
	EventRejected: "Rejected", EventUnreachable: "Unreachable",
	EventDisconnected: "Disconnected", EventTimewaitExit: "TimewaitExit", EventMRA: "MRA",
	EventSIDRRequest: "SIDRRequest", EventSIDRReply: "SIDRReply",
}

// String returns the event kind's name.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}
