package cm

import (
	"encoding/binary"
	"fmt"

	"github.com/goroce/goroce/bth"
)

// CommID is a communication ID, chosen at random by each side (IBA
// 12.6.2; the kernel allocates it from an xarray with a random start).
type CommID uint32

// Private data sizes per message (IBA 12.6, ib_cm.h IB_CM_*_PRIVATE_DATA_SIZE).
const (
	PrivateDataREQ     = 92
	PrivateDataMRA     = 222
	PrivateDataREJ     = 148
	PrivateDataREP     = 196
	PrivateDataRTU     = 224
	PrivateDataDREQ    = 220
	PrivateDataDREP    = 224
	PrivateDataSIDRREQ = 216
	PrivateDataSIDRREP = 136
	ARISize            = 72 // REJ additional reject information
	ClassPortInfoSize  = 72 // SIDR_REP additional information
)

// Offsets from the start of the MAD (the CM data starts at HeaderSize).
const (
	d = HeaderSize

	offLocalCommID  = d + 0
	offRemoteCommID = d + 4

	offREQServiceID   = d + 8
	offREQCAGUID      = d + 16
	offREQQKey        = d + 28
	offREQQPN         = d + 32 // 3 bytes, then ResponderResources
	offREQLocalEECN   = d + 36 // 3 bytes, then InitiatorDepth
	offREQRemoteEECN  = d + 40 // 3 bytes, then RemoteCMRespTimeout|Transport|E2E
	offREQPSN         = d + 44 // 3 bytes, then LocalCMRespTimeout|RetryCount
	offREQPKey        = d + 48
	offREQMTU         = d + 50 // PathMTU|RDCExists|RNRRetry
	offREQMaxRetries  = d + 51 // MaxCMRetries|SRQ|ExtTransport
	offREQPrimaryPath = d + 52
	offREQAltPath     = d + 96
	offREQPrivate     = d + 140

	offMRAMsg     = d + 8
	offMRATimeout = d + 9
	offMRAPrivate = d + 10

	offREJMsg     = d + 8
	offREJInfoLen = d + 9
	offREJReason  = d + 10
	offREJARI     = d + 12
	offREJPrivate = d + 84

	offREPQKey     = d + 8
	offREPQPN      = d + 12
	offREPEECN     = d + 16
	offREPPSN      = d + 20
	offREPRespRes  = d + 24
	offREPInitDep  = d + 25
	offREPAckDelay = d + 26 // TargetACKDelay|FailoverAccepted|E2E
	offREPRNR      = d + 27 // RNRRetry|SRQ|rsvd
	offREPCAGUID   = d + 28
	offREPPrivate  = d + 36

	offRTUPrivate = d + 8

	offDREQQPN     = d + 8
	offDREQPrivate = d + 12

	offDREPPrivate = d + 8

	offSIDRReqPKey      = d + 4
	offSIDRReqServiceID = d + 8
	offSIDRReqPrivate   = d + 16

	offSIDRRepStatus    = d + 4
	offSIDRRepInfoLen   = d + 5
	offSIDRRepQPN       = d + 8
	offSIDRRepServiceID = d + 12
	offSIDRRepQKey      = d + 20
	offSIDRRepInfo      = d + 24
	offSIDRRepPrivate   = d + 96
)

// parseAs parses b as a CM MAD carrying attribute a.
func parseAs(b []byte, a AttrID) (MAD, error) {
	m, err := Parse(b)
	if err != nil {
		return nil, err
	}
	if m.AttrID() != a {
		return nil, fmt.Errorf("%w: attribute %v, want %v", ErrNotCM, m.AttrID(), a)
	}
	return m, nil
}

// start clears a MAD buffer and writes a CM Send header.
func start(b []byte, tid uint64, a AttrID) {
	clear(b[:MADSize])
	MAD(b).EncodeHeader(&HeaderFields{BaseVersion: BaseVersion, MgmtClass: MgmtClassCM,
		ClassVersion: ClassVersionCM, Method: MethodSend, TID: tid, AttrID: a})
}

func u32(b []byte, off int) uint32           { return binary.BigEndian.Uint32(b[off:]) }
func put32(b []byte, off int, v uint32)      { binary.BigEndian.PutUint32(b[off:], v) }
func u64(b []byte, off int) uint64           { return binary.BigEndian.Uint64(b[off:]) }
func put64(b []byte, off int, v uint64)      { binary.BigEndian.PutUint64(b[off:], v) }
func clone(b []byte) []byte                  { return append([]byte(nil), b...) }
func putData(b []byte, off, n int, p []byte) { clear(b[off : off+n]); copy(b[off:off+n], p) }

// ---- REQ ----

// REQ is a view of a ConnectRequest MAD (IBA 12.6.5). Offsets are in the
// 232-byte CM data:
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Local Communication ID                        |   0
//	|                 Reserved                                      |   4
//	|                 ServiceID (8 bytes)                           |   8
//	|                 Local CA GUID (8 bytes)                       |  16
//	|                 Reserved                                      |  24
//	|                 Local Q_Key                                   |  28
//	|                 Local QPN                     |RespResources  |  32
//	|                 Local EECN                    |InitiatorDepth |  36
//	|                 Remote EECN                   |RCMTO    |TT |E|  40
//	|                 Starting PSN                  |LCMTO    |Retry|  44
//	|          Partition Key        |MTU    |R|RNR  |MaxRt  |S|Ext  |  48
//	|                 Primary path (44 bytes)                       |  52
//	|                 Alternate path (44 bytes)                     |  96
//	|                 Private data (92 bytes)                       | 140
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type REQ []byte

// ParseREQ returns a REQ view of b, which must be a CM MAD with AttrREQ.
func ParseREQ(b []byte) (REQ, error) { m, err := parseAs(b, AttrREQ); return REQ(m), err }

// MAD returns the view of the common header.
func (r REQ) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's communication ID.
func (r REQ) LocalCommID() CommID { return CommID(u32(r, offLocalCommID)) }

// ServiceID returns the service the REQ connects to.
func (r REQ) ServiceID() ServiceID { return ServiceID(u64(r, offREQServiceID)) }

// LocalCAGUID returns the sender's CA GUID.
func (r REQ) LocalCAGUID() uint64 { return u64(r, offREQCAGUID) }

// LocalQKey returns the Q_Key (RD/UD only; 0 for RC).
func (r REQ) LocalQKey() uint32 { return u32(r, offREQQKey) }

// LocalQPN returns the sender's QP number.
func (r REQ) LocalQPN() bth.QPN { return bth.QPN(be24(r[offREQQPN:])) }

// ResponderResources returns how many RDMA READ/atomic requests the
// sender will serve at once (its max_dest_rd_atomic).
func (r REQ) ResponderResources() uint8 { return r[offREQQPN+3] }

// LocalEECN returns the local EE context number (RD only).
func (r REQ) LocalEECN() uint32 { return be24(r[offREQLocalEECN:]) }

// InitiatorDepth returns how many RDMA READ/atomic requests the sender
// will have outstanding (its max_rd_atomic).
func (r REQ) InitiatorDepth() uint8 { return r[offREQLocalEECN+3] }

// RemoteEECN returns the remote EE context number (RD only).
func (r REQ) RemoteEECN() uint32 { return be24(r[offREQRemoteEECN:]) }

// RemoteCMResponseTimeout returns how long (4.096 µs · 2^n) the sender
// expects the receiver to take to answer.
func (r REQ) RemoteCMResponseTimeout() uint8 { return getBits(r[offREQRemoteEECN+3], 7, 5) }

// TransportType returns the transport service type.
func (r REQ) TransportType() TransportType {
	return TransportType(getBits(r[offREQRemoteEECN+3], 2, 2))
}

// E2EFlowControl returns the end-to-end flow control bit.
func (r REQ) E2EFlowControl() bool { return getBits(r[offREQRemoteEECN+3], 0, 1) == 1 }

// StartingPSN returns the Starting PSN field: the PSN its sender expects to
// receive first (its rq_psn; the peer sends from it), as the kernel's cm.c
// reads it in cm_req_handler and cm_rep_handler.
func (r REQ) StartingPSN() bth.PSN { return bth.PSN(be24(r[offREQPSN:])) }

// LocalCMResponseTimeout returns how long (4.096 µs · 2^n) the sender
// takes to answer; the receiver retransmits its REP after it.
func (r REQ) LocalCMResponseTimeout() uint8 { return getBits(r[offREQPSN+3], 7, 5) }

// RetryCount returns the transport retry count (QP retry_cnt).
func (r REQ) RetryCount() uint8 { return getBits(r[offREQPSN+3], 2, 3) }

// PKey returns the partition key.
func (r REQ) PKey() uint16 { return binary.BigEndian.Uint16(r[offREQPKey:]) }

// PathMTU returns the path MTU code.
func (r REQ) PathMTU() MTU { return MTU(getBits(r[offREQMTU], 7, 4)) }

// RDCExists returns the RDC-exists bit (RD only).
func (r REQ) RDCExists() bool { return getBits(r[offREQMTU], 3, 1) == 1 }

// RNRRetryCount returns the RNR retry count (7 = infinite).
func (r REQ) RNRRetryCount() uint8 { return getBits(r[offREQMTU], 2, 3) }

// MaxCMRetries returns how many times the sender retransmits a CM
// message; the receiver uses it for its REP.
func (r REQ) MaxCMRetries() uint8 { return getBits(r[offREQMaxRetries], 7, 4) }

// SRQ returns whether the sender's QP uses a shared receive queue.
func (r REQ) SRQ() bool { return getBits(r[offREQMaxRetries], 3, 1) == 1 }

// ExtTransport returns the extended transport type (XRC).
func (r REQ) ExtTransport() uint8 { return getBits(r[offREQMaxRetries], 2, 3) }

// PrimaryPath returns the primary path.
func (r REQ) PrimaryPath() Path { return getPath(r[offREQPrimaryPath:]) }

// AlternatePath returns the alternate path (all zero when absent).
func (r REQ) AlternatePath() Path { return getPath(r[offREQAltPath:]) }

// PrivateData returns the 92 bytes of private data (for rdma_cm, an
// IPHeader then 56 bytes of user data). It aliases the MAD.
func (r REQ) PrivateData() []byte { return r[offREQPrivate:MADSize:MADSize] }

// SetLocalCommID sets the local communication ID.
func (r REQ) SetLocalCommID(v CommID) { put32(r, offLocalCommID, uint32(v)) }

// SetServiceID sets the service ID.
func (r REQ) SetServiceID(v ServiceID) { put64(r, offREQServiceID, uint64(v)) }

// SetLocalCAGUID sets the local CA GUID.
func (r REQ) SetLocalCAGUID(v uint64) { put64(r, offREQCAGUID, v) }

// SetLocalQKey sets the Q_Key.
func (r REQ) SetLocalQKey(v uint32) { put32(r, offREQQKey, v) }

// SetLocalQPN sets the local QPN (masked to 24 bits).
func (r REQ) SetLocalQPN(v bth.QPN) { put24(r[offREQQPN:], uint32(v)) }

// SetResponderResources sets the responder resources.
func (r REQ) SetResponderResources(v uint8) { r[offREQQPN+3] = v }

// SetLocalEECN sets the local EECN (masked to 24 bits).
func (r REQ) SetLocalEECN(v uint32) { put24(r[offREQLocalEECN:], v) }

// SetInitiatorDepth sets the initiator depth.
func (r REQ) SetInitiatorDepth(v uint8) { r[offREQLocalEECN+3] = v }

// SetRemoteEECN sets the remote EECN (masked to 24 bits).
func (r REQ) SetRemoteEECN(v uint32) { put24(r[offREQRemoteEECN:], v) }

// SetRemoteCMResponseTimeout sets the 5-bit remote CM response timeout.
func (r REQ) SetRemoteCMResponseTimeout(v uint8) { setBits(&r[offREQRemoteEECN+3], 7, 5, v) }

// SetTransportType sets the 2-bit transport service type.
func (r REQ) SetTransportType(v TransportType) { setBits(&r[offREQRemoteEECN+3], 2, 2, uint8(v)) }

// SetE2EFlowControl sets the end-to-end flow control bit.
func (r REQ) SetE2EFlowControl(v bool) { setBits(&r[offREQRemoteEECN+3], 0, 1, b2u(v)) }

// SetStartingPSN sets the starting PSN (masked to 24 bits).
func (r REQ) SetStartingPSN(v bth.PSN) { put24(r[offREQPSN:], uint32(v)) }

// SetLocalCMResponseTimeout sets the 5-bit local CM response timeout.
func (r REQ) SetLocalCMResponseTimeout(v uint8) { setBits(&r[offREQPSN+3], 7, 5, v) }

// SetRetryCount sets the 3-bit retry count.
func (r REQ) SetRetryCount(v uint8) { setBits(&r[offREQPSN+3], 2, 3, v) }

// SetPKey sets the partition key.
func (r REQ) SetPKey(v uint16) { binary.BigEndian.PutUint16(r[offREQPKey:], v) }

// SetPathMTU sets the 4-bit path MTU code.
func (r REQ) SetPathMTU(v MTU) { setBits(&r[offREQMTU], 7, 4, uint8(v)) }

// SetRDCExists sets the RDC-exists bit.
func (r REQ) SetRDCExists(v bool) { setBits(&r[offREQMTU], 3, 1, b2u(v)) }

// SetRNRRetryCount sets the 3-bit RNR retry count.
func (r REQ) SetRNRRetryCount(v uint8) { setBits(&r[offREQMTU], 2, 3, v) }

// SetMaxCMRetries sets the 4-bit maximum CM retries.
func (r REQ) SetMaxCMRetries(v uint8) { setBits(&r[offREQMaxRetries], 7, 4, v) }

// SetSRQ sets the SRQ bit.
func (r REQ) SetSRQ(v bool) { setBits(&r[offREQMaxRetries], 3, 1, b2u(v)) }

// SetExtTransport sets the 3-bit extended transport type.
func (r REQ) SetExtTransport(v uint8) { setBits(&r[offREQMaxRetries], 2, 3, v) }

// SetPrimaryPath sets the primary path.
func (r REQ) SetPrimaryPath(p *Path) { putPath(r[offREQPrimaryPath:], p) }

// SetAlternatePath sets the alternate path.
func (r REQ) SetAlternatePath(p *Path) { putPath(r[offREQAltPath:], p) }

// REQFields is a REQ in decoded form.
type REQFields struct {
	TID                     uint64
	LocalCommID             CommID
	ServiceID               ServiceID
	LocalCAGUID             uint64
	LocalQKey               uint32
	LocalQPN                bth.QPN
	ResponderResources      uint8
	LocalEECN               uint32
	InitiatorDepth          uint8
	RemoteEECN              uint32
	RemoteCMResponseTimeout uint8
	TransportType           TransportType
	E2EFlowControl          bool
	StartingPSN             bth.PSN
	LocalCMResponseTimeout  uint8
	RetryCount              uint8
	PKey                    uint16
	PathMTU                 MTU
	RDCExists               bool
	RNRRetryCount           uint8
	MaxCMRetries            uint8
	SRQ                     bool
	ExtTransport            uint8
	PrimaryPath             Path
	AlternatePath           Path
	PrivateData             []byte // up to PrivateDataREQ bytes; the rest is zero
}

// Fields returns the REQ's fields; PrivateData is a copy.
func (r REQ) Fields() REQFields {
	return REQFields{
		TID: r.MAD().TID(), LocalCommID: r.LocalCommID(), ServiceID: r.ServiceID(),
		LocalCAGUID: r.LocalCAGUID(), LocalQKey: r.LocalQKey(), LocalQPN: r.LocalQPN(),
		ResponderResources: r.ResponderResources(), LocalEECN: r.LocalEECN(),
		InitiatorDepth: r.InitiatorDepth(), RemoteEECN: r.RemoteEECN(),
		RemoteCMResponseTimeout: r.RemoteCMResponseTimeout(), TransportType: r.TransportType(),
		E2EFlowControl: r.E2EFlowControl(), StartingPSN: r.StartingPSN(),
		LocalCMResponseTimeout: r.LocalCMResponseTimeout(), RetryCount: r.RetryCount(),
		PKey: r.PKey(), PathMTU: r.PathMTU(), RDCExists: r.RDCExists(),
		RNRRetryCount: r.RNRRetryCount(), MaxCMRetries: r.MaxCMRetries(), SRQ: r.SRQ(),
		ExtTransport: r.ExtTransport(), PrimaryPath: r.PrimaryPath(), AlternatePath: r.AlternatePath(),
		PrivateData: clone(r.PrivateData()),
	}
}

// Encode writes a whole REQ MAD (header included; reserved bytes zero)
// into r, which must hold MADSize bytes. Private data beyond
// PrivateDataREQ bytes is dropped; builders check the length first.
func (r REQ) Encode(f *REQFields) {
	start(r, f.TID, AttrREQ)
	r.SetLocalCommID(f.LocalCommID)
	r.SetServiceID(f.ServiceID)
	r.SetLocalCAGUID(f.LocalCAGUID)
	r.SetLocalQKey(f.LocalQKey)
	r.SetLocalQPN(f.LocalQPN)
	r.SetResponderResources(f.ResponderResources)
	r.SetLocalEECN(f.LocalEECN)
	r.SetInitiatorDepth(f.InitiatorDepth)
	r.SetRemoteEECN(f.RemoteEECN)
	r.SetRemoteCMResponseTimeout(f.RemoteCMResponseTimeout)
	r.SetTransportType(f.TransportType)
	r.SetE2EFlowControl(f.E2EFlowControl)
	r.SetStartingPSN(f.StartingPSN)
	r.SetLocalCMResponseTimeout(f.LocalCMResponseTimeout)
	r.SetRetryCount(f.RetryCount)
	r.SetPKey(f.PKey)
	r.SetPathMTU(f.PathMTU)
	r.SetRDCExists(f.RDCExists)
	r.SetRNRRetryCount(f.RNRRetryCount)
	r.SetMaxCMRetries(f.MaxCMRetries)
	r.SetSRQ(f.SRQ)
	r.SetExtTransport(f.ExtTransport)
	r.SetPrimaryPath(&f.PrimaryPath)
	r.SetAlternatePath(&f.AlternatePath)
	putData(r, offREQPrivate, PrivateDataREQ, f.PrivateData)
}

// ---- REP ----

// REP is a view of a ConnectReply MAD (IBA 12.6.8). Offsets are in the
// CM data:
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Local Communication ID                        |   0
//	|                 Remote Communication ID                       |   4
//	|                 Local Q_Key                                   |   8
//	|                 Local QPN                     |   Reserved    |  12
//	|                 Local EE Context Number       |   Reserved    |  16
//	|                 Starting PSN                  |   Reserved    |  20
//	| RespResources |InitiatorDepth |TgtAckDly|FO |E|RNR  |S| Rsvd  |  24
//	|                 Local CA GUID (8 bytes)                       |  28
//	|                 Private data (196 bytes)                      |  36
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type REP []byte

// ParseREP returns a REP view of b, which must be a CM MAD with AttrREP.
func ParseREP(b []byte) (REP, error) { m, err := parseAs(b, AttrREP); return REP(m), err }

// MAD returns the view of the common header.
func (r REP) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's (passive side's) communication ID.
func (r REP) LocalCommID() CommID { return CommID(u32(r, offLocalCommID)) }

// RemoteCommID returns the REQ sender's communication ID.
func (r REP) RemoteCommID() CommID { return CommID(u32(r, offRemoteCommID)) }

// LocalQKey returns the Q_Key.
func (r REP) LocalQKey() uint32 { return u32(r, offREPQKey) }

// LocalQPN returns the sender's QP number.
func (r REP) LocalQPN() bth.QPN { return bth.QPN(be24(r[offREPQPN:])) }

// LocalEECN returns the local EE context number.
func (r REP) LocalEECN() uint32 { return be24(r[offREPEECN:]) }

// StartingPSN returns the Starting PSN field: the PSN its sender expects to
// receive first (its rq_psn; the peer sends from it), as the kernel's cm.c
// reads it in cm_req_handler and cm_rep_handler.
func (r REP) StartingPSN() bth.PSN { return bth.PSN(be24(r[offREPPSN:])) }

// ResponderResources returns the sender's responder resources.
func (r REP) ResponderResources() uint8 { return r[offREPRespRes] }

// InitiatorDepth returns the sender's initiator depth.
func (r REP) InitiatorDepth() uint8 { return r[offREPInitDep] }

// TargetACKDelay returns the sender's CA ACK delay (4.096 µs · 2^n).
func (r REP) TargetACKDelay() uint8 { return getBits(r[offREPAckDelay], 7, 5) }

// FailoverAccepted returns the 2-bit failover-accepted field.
func (r REP) FailoverAccepted() uint8 { return getBits(r[offREPAckDelay], 2, 2) }

// E2EFlowControl returns the end-to-end flow control bit.
func (r REP) E2EFlowControl() bool { return getBits(r[offREPAckDelay], 0, 1) == 1 }

// RNRRetryCount returns the RNR retry count for the REQ sender's QP.
func (r REP) RNRRetryCount() uint8 { return getBits(r[offREPRNR], 7, 3) }

// SRQ returns whether the sender's QP uses a shared receive queue.
func (r REP) SRQ() bool { return getBits(r[offREPRNR], 4, 1) == 1 }

// LocalCAGUID returns the sender's CA GUID.
func (r REP) LocalCAGUID() uint64 { return u64(r, offREPCAGUID) }

// PrivateData returns the 196 bytes of private data (aliases the MAD).
func (r REP) PrivateData() []byte { return r[offREPPrivate:MADSize:MADSize] }

// SetLocalCommID sets the local communication ID.
func (r REP) SetLocalCommID(v CommID) { put32(r, offLocalCommID, uint32(v)) }

// SetRemoteCommID sets the remote communication ID.
func (r REP) SetRemoteCommID(v CommID) { put32(r, offRemoteCommID, uint32(v)) }

// SetLocalQKey sets the Q_Key.
func (r REP) SetLocalQKey(v uint32) { put32(r, offREPQKey, v) }

// SetLocalQPN sets the QPN (masked to 24 bits).
func (r REP) SetLocalQPN(v bth.QPN) { put24(r[offREPQPN:], uint32(v)) }

// SetLocalEECN sets the EECN (masked to 24 bits).
func (r REP) SetLocalEECN(v uint32) { put24(r[offREPEECN:], v) }

// SetStartingPSN sets the starting PSN (masked to 24 bits).
func (r REP) SetStartingPSN(v bth.PSN) { put24(r[offREPPSN:], uint32(v)) }

// SetResponderResources sets the responder resources.
func (r REP) SetResponderResources(v uint8) { r[offREPRespRes] = v }

// SetInitiatorDepth sets the initiator depth.
func (r REP) SetInitiatorDepth(v uint8) { r[offREPInitDep] = v }

// SetTargetACKDelay sets the 5-bit target ACK delay.
func (r REP) SetTargetACKDelay(v uint8) { setBits(&r[offREPAckDelay], 7, 5, v) }

// SetFailoverAccepted sets the 2-bit failover-accepted field.
func (r REP) SetFailoverAccepted(v uint8) { setBits(&r[offREPAckDelay], 2, 2, v) }

// SetE2EFlowControl sets the end-to-end flow control bit.
func (r REP) SetE2EFlowControl(v bool) { setBits(&r[offREPAckDelay], 0, 1, b2u(v)) }

// SetRNRRetryCount sets the 3-bit RNR retry count.
func (r REP) SetRNRRetryCount(v uint8) { setBits(&r[offREPRNR], 7, 3, v) }

// SetSRQ sets the SRQ bit.
func (r REP) SetSRQ(v bool) { setBits(&r[offREPRNR], 4, 1, b2u(v)) }

// SetLocalCAGUID sets the CA GUID.
func (r REP) SetLocalCAGUID(v uint64) { put64(r, offREPCAGUID, v) }

// REPFields is a REP in decoded form.
type REPFields struct {
	TID                uint64
	LocalCommID        CommID
	RemoteCommID       CommID
	LocalQKey          uint32
	LocalQPN           bth.QPN
	LocalEECN          uint32
	StartingPSN        bth.PSN
	ResponderResources uint8
	InitiatorDepth     uint8
	TargetACKDelay     uint8
	FailoverAccepted   uint8
	E2EFlowControl     bool
	RNRRetryCount      uint8
	SRQ                bool
	LocalCAGUID        uint64
	PrivateData        []byte // up to PrivateDataREP bytes
}

// Fields returns the REP's fields; PrivateData is a copy.
func (r REP) Fields() REPFields {
	return REPFields{
		TID: r.MAD().TID(), LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID(),
		LocalQKey: r.LocalQKey(), LocalQPN: r.LocalQPN(), LocalEECN: r.LocalEECN(),
		StartingPSN: r.StartingPSN(), ResponderResources: r.ResponderResources(),
		InitiatorDepth: r.InitiatorDepth(), TargetACKDelay: r.TargetACKDelay(),
		FailoverAccepted: r.FailoverAccepted(), E2EFlowControl: r.E2EFlowControl(),
		RNRRetryCount: r.RNRRetryCount(), SRQ: r.SRQ(), LocalCAGUID: r.LocalCAGUID(),
		PrivateData: clone(r.PrivateData()),
	}
}

// Encode writes a whole REP MAD into r (MADSize bytes).
func (r REP) Encode(f *REPFields) {
	start(r, f.TID, AttrREP)
	r.SetLocalCommID(f.LocalCommID)
	r.SetRemoteCommID(f.RemoteCommID)
	r.SetLocalQKey(f.LocalQKey)
	r.SetLocalQPN(f.LocalQPN)
	r.SetLocalEECN(f.LocalEECN)
	r.SetStartingPSN(f.StartingPSN)
	r.SetResponderResources(f.ResponderResources)
	r.SetInitiatorDepth(f.InitiatorDepth)
	r.SetTargetACKDelay(f.TargetACKDelay)
	r.SetFailoverAccepted(f.FailoverAccepted)
	r.SetE2EFlowControl(f.E2EFlowControl)
	r.SetRNRRetryCount(f.RNRRetryCount)
	r.SetSRQ(f.SRQ)
	r.SetLocalCAGUID(f.LocalCAGUID)
	putData(r, offREPPrivate, PrivateDataREP, f.PrivateData)
}
