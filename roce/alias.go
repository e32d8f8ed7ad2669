package roce

import (
	"net/netip"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// The names a verbs program touches, so that it imports roce alone (as
// quic-go re-exports its internals). They are aliases and re-declared
// constants of the packages that define them (qp, mr, cq, bth, cm): a
// roce.SendWR is a qp.SendWR, and values pass between the two without
// conversion. The sentinel errors are in errors.go.

// QPN is a queue pair number (24 bits), bth.QPN.
type QPN = bth.QPN

// PSN is a packet sequence number (24 bits, compared modulo 2^24),
// bth.PSN.
type PSN = bth.PSN

// SendWR is a send work request (ibv_send_wr), qp.SendWR.
type SendWR = qp.SendWR

// RecvWR is a receive work request (ibv_recv_wr), qp.RecvWR.
type RecvWR = qp.RecvWR

// SGE is a scatter/gather element (ibv_sge), mr.SGE; MR.SGE builds one.
type SGE = mr.SGE

// WROpcode is a send work request opcode (ibv_wr_opcode), qp.WROpcode.
type WROpcode = qp.WROpcode

// Send work request opcodes.
const (
	WRRDMAWrite        = qp.WRRDMAWrite        // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm = qp.WRRDMAWriteWithImm // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend             = qp.WRSend             // IBV_WR_SEND
	WRSendWithImm      = qp.WRSendWithImm      // IBV_WR_SEND_WITH_IMM
	WRRDMARead         = qp.WRRDMARead         // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp  = qp.WRAtomicCmpAndSwp  // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAdd   = qp.WRAtomicFetchAdd   // IBV_WR_ATOMIC_FETCH_AND_ADD
	WRLocalInv         = qp.WRLocalInv         // IBV_WR_LOCAL_INV: invalidate SendWR.InvalidateRKey here
	WRBindMW           = qp.WRBindMW           // IBV_WR_BIND_MW: bind SendWR.BindMW's window
	WRSendWithInv      = qp.WRSendWithInv      // IBV_WR_SEND_WITH_INV: the peer invalidates SendWR.InvalidateRKey
)

// SendFlags are the flags of a send work request (ibv_send_flags),
// qp.SendFlags.
type SendFlags = qp.SendFlags

// Send flags.
const (
	SendFence     = qp.SendFence     // IBV_SEND_FENCE
	SendSignaled  = qp.SendSignaled  // IBV_SEND_SIGNALED: complete with a CQE on success
	SendSolicited = qp.SendSolicited // IBV_SEND_SOLICITED: set the BTH SE bit
	SendInline    = qp.SendInline    // IBV_SEND_INLINE: data copied at post time
)

// MTU is a path MTU (ibv_mtu), qp.MTU.
type MTU = qp.MTU

// Path MTUs (IBA 9.6.1.2).
const (
	MTU256  = qp.MTU256
	MTU512  = qp.MTU512
	MTU1024 = qp.MTU1024
	MTU2048 = qp.MTU2048
	MTU4096 = qp.MTU4096
)

// MR is a registered memory region, mr.Region.
type MR = mr.Region

// PD is a protection domain, mr.PD.
type PD = mr.PD

// Key is a memory key (an lkey or rkey), mr.Key.
type Key = mr.Key

// AccessFlags is a set of access rights on a memory region
// (ibv_access_flags), mr.AccessFlags.
type AccessFlags = mr.AccessFlags

// Access rights.
const (
	LocalWrite   = mr.LocalWrite   // IBV_ACCESS_LOCAL_WRITE
	RemoteWrite  = mr.RemoteWrite  // IBV_ACCESS_REMOTE_WRITE
	RemoteRead   = mr.RemoteRead   // IBV_ACCESS_REMOTE_READ
	RemoteAtomic = mr.RemoteAtomic // IBV_ACCESS_REMOTE_ATOMIC
	MWBind       = mr.MWBind       // IBV_ACCESS_MW_BIND: memory windows may be bound to the region
)

// MRConfig configures a memory region for Device.RegisterMRConfig
// (mr.RegisterConfig): its buffer, access, IOVA, and whether LOCAL_INV or
// a peer's SEND with invalidate may invalidate it.
type MRConfig = mr.RegisterConfig

// MW is a memory window (ibv_mw), mr.Window: Device.AllocMW makes one.
type MW = mr.Window

// MWType is a memory window's type (ibv_mw_type), mr.WindowType.
type MWType = mr.WindowType

// Memory window types (IBA 10.6.7).
const (
	MWType1 = mr.WindowType1 // IBV_MW_TYPE_1: bound with QP.BindMW, usable by every QP of the PD
	MWType2 = mr.WindowType2 // IBV_MW_TYPE_2: bound with a WRBindMW request, usable by that QP alone
)

// MWState is a memory window's state, mr.WindowState.
type MWState = mr.WindowState

// Memory window states.
const (
	MWInvalid = mr.WindowInvalid // deallocated
	MWFree    = mr.WindowFree    // a type 2 window not bound
	MWValid   = mr.WindowValid   // a type 1 window, or a bound type 2 window
)

// MWBindConfig describes a memory window bind (ibv_mw_bind_info),
// mr.BindConfig: the region, range and rights the window gives.
type MWBindConfig = mr.BindConfig

// BindMW is the bind of a WRBindMW send work request (ibv_send_wr.bind_mw),
// qp.BindMW: the window and an MWBindConfig.
type BindMW = qp.BindMW

// CQ is a completion queue, cq.CQ.
type CQ = cq.CQ

// Completion is a work completion (ibv_wc), cq.Completion.
type Completion = cq.Completion

// WCOpcode is the kind of work a completion reports (ibv_wc_opcode),
// cq.Opcode.
type WCOpcode = cq.Opcode

// Completion opcodes.
const (
	WCSend            = cq.OpSend            // IBV_WC_SEND
	WCRDMAWrite       = cq.OpRDMAWrite       // IBV_WC_RDMA_WRITE
	WCRDMARead        = cq.OpRDMARead        // IBV_WC_RDMA_READ
	WCCompSwap        = cq.OpCompSwap        // IBV_WC_COMP_SWAP
	WCFetchAdd        = cq.OpFetchAdd        // IBV_WC_FETCH_ADD
	WCRecv            = cq.OpRecv            // IBV_WC_RECV
	WCBindMW          = cq.OpBindMW          // IBV_WC_BIND_MW
	WCLocalInv        = cq.OpLocalInv        // IBV_WC_LOCAL_INV
	WCRecvRDMAWithImm = cq.OpRecvRDMAWithImm // IBV_WC_RECV_RDMA_WITH_IMM
)

// WCFlags are the flags of a completion (ibv_wc_flags), cq.Flags.
type WCFlags = cq.Flags

// Completion flags.
const (
	WCGRH      = cq.FlagGRH      // IBV_WC_GRH: the receive buffer starts with the GRH area (UD)
	WCWithImm  = cq.FlagWithImm  // IBV_WC_WITH_IMM: Completion.Imm holds immediate data
	WCIPCsumOK = cq.FlagIPCsumOK // IBV_WC_IP_CSUM_OK
	WCWithInv  = cq.FlagWithInv  // IBV_WC_WITH_INV: Completion.InvalidatedRKey is set
)

// CQStats are a CQ's counters (CQ.Stats), cq.Stats.
type CQStats = cq.Stats

// StatusError is the error of a completion that failed
// (Completion.Err, Status.Err), cq.StatusError: errors.As gives its
// status, WR ID and QPN.
type StatusError = cq.StatusError

// Status is the outcome of a work request (ibv_wc_status), cq.Status. A
// Status is an errors.Is target: errors.Is(wc.Err(), roce.StatusRemAccessErr).
type Status = cq.Status

// Completion statuses; cq.Status has their full descriptions.
const (
	StatusSuccess        = cq.StatusSuccess        // IBV_WC_SUCCESS
	StatusLocLenErr      = cq.StatusLocLenErr      // IBV_WC_LOC_LEN_ERR: a received message longer than its buffer
	StatusLocQPOpErr     = cq.StatusLocQPOpErr     // IBV_WC_LOC_QP_OP_ERR: a malformed work request
	StatusLocEECOpErr    = cq.StatusLocEECOpErr    // IBV_WC_LOC_EEC_OP_ERR (RD only)
	StatusLocProtErr     = cq.StatusLocProtErr     // IBV_WC_LOC_PROT_ERR: an SGE's lkey or range is not valid
	StatusWRFlushErr     = cq.StatusWRFlushErr     // IBV_WC_WR_FLUSH_ERR: flushed, the QP entered ERR
	StatusMWBindErr      = cq.StatusMWBindErr      // IBV_WC_MW_BIND_ERR: a memory window bind failed
	StatusBadRespErr     = cq.StatusBadRespErr     // IBV_WC_BAD_RESP_ERR: an unexpected transport opcode came back
	StatusLocAccessErr   = cq.StatusLocAccessErr   // IBV_WC_LOC_ACCESS_ERR: response data into a buffer without LocalWrite
	StatusRemInvReqErr   = cq.StatusRemInvReqErr   // IBV_WC_REM_INV_REQ_ERR: NAK Invalid Request
	StatusRemAccessErr   = cq.StatusRemAccessErr   // IBV_WC_REM_ACCESS_ERR: NAK Remote Access Error (rkey, PD, rights, range)
	StatusRemOpErr       = cq.StatusRemOpErr       // IBV_WC_REM_OP_ERR: NAK Remote Operational Error
	StatusRetryExcErr    = cq.StatusRetryExcErr    // IBV_WC_RETRY_EXC_ERR: transport retries exhausted
	StatusRNRRetryExcErr = cq.StatusRNRRetryExcErr // IBV_WC_RNR_RETRY_EXC_ERR: RNR retries exhausted
	StatusLocRDDViolErr  = cq.StatusLocRDDViolErr  // IBV_WC_LOC_RDD_VIOL_ERR (RD only)
	StatusRemInvRDReqErr = cq.StatusRemInvRDReqErr // IBV_WC_REM_INV_RD_REQ_ERR (RD only)
	StatusRemAbortErr    = cq.StatusRemAbortErr    // IBV_WC_REM_ABORT_ERR: the remote side aborted
	StatusInvEECNErr     = cq.StatusInvEECNErr     // IBV_WC_INV_EECN_ERR (RD only)
	StatusInvEECStateErr = cq.StatusInvEECStateErr // IBV_WC_INV_EEC_STATE_ERR (RD only)
	StatusFatalErr       = cq.StatusFatalErr       // IBV_WC_FATAL_ERR
	StatusRespTimeoutErr = cq.StatusRespTimeoutErr // IBV_WC_RESP_TIMEOUT_ERR
	StatusGeneralErr     = cq.StatusGeneralErr     // IBV_WC_GENERAL_ERR
)

// NoRemoteAccess is a ConnectOptions.Access that grants the peer no remote
// operation (WRITE, READ or atomic): a QP that only sends, or only receives
// SENDs. It is LocalWrite, which a QP's access flags ignore (they enable
// only remote operations, as ibv_modify_qp's qp_access_flags), because the
// zero Access grants all.
const NoRemoteAccess = LocalWrite

// SRQAttr are the attributes of a shared receive queue (ibv_srq_attr),
// qp.SRQAttr.
type SRQAttr = qp.SRQAttr

// EventType is the type of an asynchronous event (ibv_event_type),
// qp.EventType.
type EventType = qp.EventType

// Asynchronous event types.
const (
	// EventSRQLimitReached is IBV_EVENT_SRQ_LIMIT_REACHED: an SRQ's WQE
	// count fell below its armed limit; the limit is now disarmed.
	EventSRQLimitReached = qp.EventSRQLimitReached
	// EventQPLastWQEReached is IBV_EVENT_QP_LAST_WQE_REACHED: a QP with an
	// SRQ entered ERR (Modify, an error, Destroy) and takes no more WQEs
	// from the SRQ; the one it held is flushed.
	EventQPLastWQEReached = qp.EventQPLastWQEReached
)

// QPState is a QP's state (ibv_qp_state), qp.State.
type QPState = qp.State

// QP states (IBA 10.3.1).
const (
	StateReset = qp.StateReset // IBV_QPS_RESET
	StateInit  = qp.StateInit  // IBV_QPS_INIT
	StateRTR   = qp.StateRTR   // IBV_QPS_RTR: ready to receive
	StateRTS   = qp.StateRTS   // IBV_QPS_RTS: ready to send
	StateSQD   = qp.StateSQD   // IBV_QPS_SQD: send queue drained
	StateSQE   = qp.StateSQE   // IBV_QPS_SQE: send queue error (UC, UD)
	StateErr   = qp.StateErr   // IBV_QPS_ERR
)

// QPAttr are the attributes QP.Modify sets (ibv_qp_attr), qp.Attr.
type QPAttr = qp.Attr

// QPAttrMask says which QPAttr fields QP.Modify sets (ibv_qp_attr_mask),
// qp.AttrMask.
type QPAttrMask = qp.AttrMask

// QP attribute mask bits.
const (
	AttrState           = qp.AttrState           // IBV_QP_STATE
	AttrCurState        = qp.AttrCurState        // IBV_QP_CUR_STATE
	AttrEnSQDAsyncNtfy  = qp.AttrEnSQDAsyncNtfy  // IBV_QP_EN_SQD_ASYNC_NOTIFY
	AttrAccessFlags     = qp.AttrAccessFlags     // IBV_QP_ACCESS_FLAGS
	AttrPKeyIndex       = qp.AttrPKeyIndex       // IBV_QP_PKEY_INDEX
	AttrPort            = qp.AttrPort            // IBV_QP_PORT
	AttrQKey            = qp.AttrQKey            // IBV_QP_QKEY
	AttrAV              = qp.AttrAV              // IBV_QP_AV
	AttrPathMTU         = qp.AttrPathMTU         // IBV_QP_PATH_MTU
	AttrTimeout         = qp.AttrTimeout         // IBV_QP_TIMEOUT
	AttrRetryCnt        = qp.AttrRetryCnt        // IBV_QP_RETRY_CNT
	AttrRNRRetry        = qp.AttrRNRRetry        // IBV_QP_RNR_RETRY
	AttrRQPSN           = qp.AttrRQPSN           // IBV_QP_RQ_PSN
	AttrMaxQPRdAtomic   = qp.AttrMaxQPRdAtomic   // IBV_QP_MAX_QP_RD_ATOMIC
	AttrAltPath         = qp.AttrAltPath         // IBV_QP_ALT_PATH
	AttrMinRNRTimer     = qp.AttrMinRNRTimer     // IBV_QP_MIN_RNR_TIMER
	AttrSQPSN           = qp.AttrSQPSN           // IBV_QP_SQ_PSN
	AttrMaxDestRdAtomic = qp.AttrMaxDestRdAtomic // IBV_QP_MAX_DEST_RD_ATOMIC
	AttrPathMigState    = qp.AttrPathMigState    // IBV_QP_PATH_MIG_STATE
	AttrCap             = qp.AttrCap             // IBV_QP_CAP
	AttrDestQPN         = qp.AttrDestQPN         // IBV_QP_DEST_QPN
)

// AddressVector is the path to a peer (ibv_ah_attr): its IP address,
// traffic class, hop limit and flow label; qp.AddressVector.
type AddressVector = qp.AddressVector

// UDDest is the destination of a send on a UD QP (ibv_send_wr.wr.ud),
// qp.UDDest; AH.Dest makes one.
type UDDest = qp.UDDest

// ControlledQKey is the bit that, set in a UD destination's Q_Key, sends
// the local QP's own Q_Key instead (IBA 10.2.5), qp.ControlledQKey.
const ControlledQKey = qp.ControlledQKey

// GRHLen is the size of the GRH area at the start of every UD receive
// buffer (IBA 11.4, Post Receive): the message starts GRHLen bytes in,
// qp.GRHLen.
const GRHLen = qp.GRHLen

// GRHSource returns the source address of the GRH area grh (the first
// GRHLen bytes of a UD receive buffer), as qp.GRHSource: false for an area
// that holds no IPv4 or IPv6 header.
func GRHSource(grh []byte) (netip.Addr, bool) { return qp.GRHSource(grh) }

// Counter names one of a QP's counters, with rxe's hw_counters names
// (Counter.String), qp.Counter.
type Counter = qp.Counter

// Counters are a QP's counters, atomic and readable at any time
// (QP.Counters), qp.Counters.
type Counters = qp.Counters

// CounterSnapshot is a copy of a QP's counters, indexed by Counter,
// qp.Snapshot.
type CounterSnapshot = qp.Snapshot

// NumCounters is the number of Counters.
const NumCounters = qp.NumCounters

// The QP counters; qp.Counter's documentation says what each counts.
const (
	CounterSentPkts                 = qp.CounterSentPkts
	CounterRcvdPkts                 = qp.CounterRcvdPkts
	CounterDuplicateRequest         = qp.CounterDuplicateRequest
	CounterOutOfSeqRequest          = qp.CounterOutOfSeqRequest
	CounterRcvdRNRErr               = qp.CounterRcvdRNRErr
	CounterSendRNRErr               = qp.CounterSendRNRErr
	CounterRcvdSeqErr               = qp.CounterRcvdSeqErr
	CounterAckDeferred              = qp.CounterAckDeferred
	CounterRetryExceededErr         = qp.CounterRetryExceededErr
	CounterRetryRNRExceededErr      = qp.CounterRetryRNRExceededErr
	CounterCompleterRetryErr        = qp.CounterCompleterRetryErr
	CounterBadICRC                  = qp.CounterBadICRC
	CounterBadHdr                   = qp.CounterBadHdr
	CounterDroppedNoQP              = qp.CounterDroppedNoQP
	CounterRkeyViolation            = qp.CounterRkeyViolation
	CounterRetransmittedPkts        = qp.CounterRetransmittedPkts
	CounterReadReplays              = qp.CounterReadReplays
	CounterReplayedPkts             = qp.CounterReplayedPkts
	CounterAtomicReplays            = qp.CounterAtomicReplays
	CounterDroppedResponses         = qp.CounterDroppedResponses
	CounterOutputOverflow           = qp.CounterOutputOverflow
	CounterRespOpSeqErr             = qp.CounterRespOpSeqErr
	CounterRespOpNotEnabledErr      = qp.CounterRespOpNotEnabledErr
	CounterRespUnsupportedOpcodeErr = qp.CounterRespUnsupportedOpcodeErr
	CounterRespNoResourcesErr       = qp.CounterRespNoResourcesErr
	CounterRespLengthErr            = qp.CounterRespLengthErr
	CounterRespRecvLengthErr        = qp.CounterRespRecvLengthErr
	CounterRespRecvSGEErr           = qp.CounterRespRecvSGEErr
	CounterRespMisalignedAtomicErr  = qp.CounterRespMisalignedAtomicErr
	CounterRespInvalidateErr        = qp.CounterRespInvalidateErr
	CounterQKeyViolation            = qp.CounterQKeyViolation
	CounterDroppedNoRecvWQE         = qp.CounterDroppedNoRecvWQE
	CounterUCDroppedPkts            = qp.CounterUCDroppedPkts
)

// CMConfig configures the connection manager of Listen and Dial
// (Config.CM), cm.Config.
type CMConfig = cm.Config

// CMStats counts what the connection manager did (Device.CMStats),
// cm.Stats.
type CMStats = cm.Stats

// UDPQKey is the Q_Key of the UD QPs of rdma_cm's UDP port space
// (ListenUD, DialUD; RDMA_UDP_QKEY), cm.UDPQKey.
const UDPQKey = cm.UDPQKey

// GUID is a node or CA GUID (IBA 4.1.1), cm.GUID: the Local CA GUID
// of the CM messages (Device.NodeGUID).
type GUID = cm.GUID

// RejectReason is a REJ's reason code (IBA 12.6.7.2, table 112;
// rdma_cm's RDMA_CM_EVENT_REJECTED status), cm.RejectReason.
type RejectReason = cm.RejectReason

// REJ reasons (enum ib_cm_rej_reason).
const (
	RejectNoQP                     = cm.RejectNoQP
	RejectNoEEC                    = cm.RejectNoEEC
	RejectNoResources              = cm.RejectNoResources
	RejectTimeout                  = cm.RejectTimeout
	RejectUnsupported              = cm.RejectUnsupported
	RejectInvalidCommID            = cm.RejectInvalidCommID
	RejectInvalidCommInstance      = cm.RejectInvalidCommInstance
	RejectInvalidServiceID         = cm.RejectInvalidServiceID
	RejectInvalidTransportType     = cm.RejectInvalidTransportType
	RejectStaleConnection          = cm.RejectStaleConnection
	RejectRDCNotExist              = cm.RejectRDCNotExist
	RejectInvalidGID               = cm.RejectInvalidGID
	RejectInvalidLID               = cm.RejectInvalidLID
	RejectInvalidSL                = cm.RejectInvalidSL
	RejectInvalidTrafficClass      = cm.RejectInvalidTrafficClass
	RejectInvalidHopLimit          = cm.RejectInvalidHopLimit
	RejectInvalidPacketRate        = cm.RejectInvalidPacketRate
	RejectInvalidAltGID            = cm.RejectInvalidAltGID
	RejectInvalidAltLID            = cm.RejectInvalidAltLID
	RejectInvalidAltSL             = cm.RejectInvalidAltSL
	RejectInvalidAltTrafficClass   = cm.RejectInvalidAltTrafficClass
	RejectInvalidAltHopLimit       = cm.RejectInvalidAltHopLimit
	RejectInvalidAltPacketRate     = cm.RejectInvalidAltPacketRate
	RejectPortCMRedirect           = cm.RejectPortCMRedirect
	RejectPortRedirect             = cm.RejectPortRedirect
	RejectInvalidMTU               = cm.RejectInvalidMTU
	RejectInsufficientRespResource = cm.RejectInsufficientRespResource
	RejectConsumerDefined          = cm.RejectConsumerDefined
	RejectInvalidRNRRetry          = cm.RejectInvalidRNRRetry
	RejectDuplicateLocalCommID     = cm.RejectDuplicateLocalCommID
	RejectInvalidClassVersion      = cm.RejectInvalidClassVersion
	RejectInvalidFlowLabel         = cm.RejectInvalidFlowLabel
	RejectInvalidAltFlowLabel      = cm.RejectInvalidAltFlowLabel
	RejectVendorOptionUnsupported  = cm.RejectVendorOptionUnsupported
)

// SIDRStatus is a SIDR_REP's status (IBA 12.11.2; enum
// ib_cm_sidr_status), cm.SIDRStatus.
type SIDRStatus = cm.SIDRStatus

// SIDR_REP statuses.
const (
	SIDRSuccess          = cm.SIDRSuccess          // the QP is valid
	SIDRUnsupported      = cm.SIDRUnsupported      // service ID not supported (nobody listens)
	SIDRReject           = cm.SIDRReject           // the service provider rejected the request
	SIDRNoQP             = cm.SIDRNoQP             // no QP available
	SIDRRedirect         = cm.SIDRRedirect         // redirected (not sent by goroce)
	SIDRUnsupportedVersn = cm.SIDRUnsupportedVersn // unsupported class version
)
