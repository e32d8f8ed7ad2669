package cm

import "fmt"

// RejectReason is the REJ reason code (IBA 12.6.7.2, table 112;
// enum ib_cm_rej_reason). rdma_cm reports it as the status of
// RDMA_CM_EVENT_REJECTED.
type RejectReason uint16

// Reject reasons. rdma_reject sends RejectConsumerDefined; a REQ for a
// service nobody listens on gets RejectInvalidServiceID; a REQ for a
// QP that is still connected gets RejectStaleConnection; a timed-out REP
// or REQ on the passive side may be answered with RejectTimeout.
const (
	RejectNoQP                     RejectReason = 1
	RejectNoEEC                    RejectReason = 2
	RejectNoResources              RejectReason = 3
	RejectTimeout                  RejectReason = 4
	RejectUnsupported              RejectReason = 5
	RejectInvalidCommID            RejectReason = 6
	RejectInvalidCommInstance      RejectReason = 7
	RejectInvalidServiceID         RejectReason = 8
	RejectInvalidTransportType     RejectReason = 9
	RejectStaleConnection          RejectReason = 10
	RejectRDCNotExist              RejectReason = 11
	RejectInvalidGID               RejectReason = 12
	RejectInvalidLID               RejectReason = 13
	RejectInvalidSL                RejectReason = 14
	RejectInvalidTrafficClass      RejectReason = 15
	RejectInvalidHopLimit          RejectReason = 16
	RejectInvalidPacketRate        RejectReason = 17
	RejectInvalidAltGID            RejectReason = 18
	RejectInvalidAltLID            RejectReason = 19
	RejectInvalidAltSL             RejectReason = 20
	RejectInvalidAltTrafficClass   RejectReason = 21
	RejectInvalidAltHopLimit       RejectReason = 22
	RejectInvalidAltPacketRate     RejectReason = 23
	RejectPortCMRedirect           RejectReason = 24
	RejectPortRedirect             RejectReason = 25
	RejectInvalidMTU               RejectReason = 26
	RejectInsufficientRespResource RejectReason = 27
	RejectConsumerDefined          RejectReason = 28
	RejectInvalidRNRRetry          RejectReason = 29
	RejectDuplicateLocalCommID     RejectReason = 30
	RejectInvalidClassVersion      RejectReason = 31
	RejectInvalidFlowLabel         RejectReason = 32
	RejectInvalidAltFlowLabel      RejectReason = 33
	RejectVendorOptionUnsupported  RejectReason = 35
)

var reasonNames = [...]string{
	RejectNoQP: "NoQP", RejectNoEEC: "NoEEC", RejectNoResources: "NoResources",
	RejectTimeout: "Timeout", RejectUnsupported: "Unsupported",
	RejectInvalidCommID: "InvalidCommID", RejectInvalidCommInstance: "InvalidCommInstance",
	RejectInvalidServiceID: "InvalidServiceID", RejectInvalidTransportType: "InvalidTransportType",
	RejectStaleConnection: "StaleConnection", RejectRDCNotExist: "RDCNotExist",
	RejectInvalidGID: "InvalidGID", RejectInvalidLID: "InvalidLID", RejectInvalidSL: "InvalidSL",
	RejectInvalidTrafficClass: "InvalidTrafficClass", RejectInvalidHopLimit: "InvalidHopLimit",
	RejectInvalidPacketRate: "InvalidPacketRate", RejectInvalidAltGID: "InvalidAltGID",
	RejectInvalidAltLID: "InvalidAltLID", RejectInvalidAltSL: "InvalidAltSL",
	RejectInvalidAltTrafficClass: "InvalidAltTrafficClass", RejectInvalidAltHopLimit: "InvalidAltHopLimit",
	RejectInvalidAltPacketRate: "InvalidAltPacketRate", RejectPortCMRedirect: "PortCMRedirect",
	RejectPortRedirect: "PortRedirect", RejectInvalidMTU: "InvalidMTU",
	RejectInsufficientRespResource: "InsufficientRespResources", RejectConsumerDefined: "ConsumerDefined",
	RejectInvalidRNRRetry: "InvalidRNRRetry", RejectDuplicateLocalCommID: "DuplicateLocalCommID",
	RejectInvalidClassVersion: "InvalidClassVersion", RejectInvalidFlowLabel: "InvalidFlowLabel",
	RejectInvalidAltFlowLabel: "InvalidAltFlowLabel", RejectVendorOptionUnsupported: "VendorOptionUnsupported",
}

// String returns the reason's name ("InvalidServiceID").
func (r RejectReason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return fmt.Sprintf("RejectReason(%d)", uint16(r))
}

// MsgType says which message an MRA acknowledges or a REJ refuses (the
// 2-bit MsgMRAed / MsgRejected field, IBA 12.6.6 and 12.6.7).
type MsgType uint8

// MsgType values.
const (
	MsgTypeREQ   MsgType = 0
	MsgTypeREP   MsgType = 1
	MsgTypeOther MsgType = 2 // LAP for MRA; "no message" for REJ
)

// String returns "REQ", "REP", "Other" or MsgType(n).
func (t MsgType) String() string {
	switch t {
	case MsgTypeREQ:
		return "REQ"
	case MsgTypeREP:
		return "REP"
	case MsgTypeOther:
		return "Other"
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}

// TransportType is a REQ's transport service type (IBA 12.6.5).
type TransportType uint8

// Transport types.
const (
	TransportRC TransportType = 0
	TransportUC TransportType = 1
	TransportRD TransportType = 2
)

// String returns "RC", "UC", "RD" or TransportType(n).
func (t TransportType) String() string {
	switch t {
	case TransportRC:
		return "RC"
	case TransportUC:
		return "UC"
	case TransportRD:
		return "RD"
	}
	return fmt.Sprintf("TransportType(%d)", uint8(t))
}
