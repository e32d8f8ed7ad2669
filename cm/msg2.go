package cm

import (
	"encoding/binary"

	"github.com/goroce/goroce/bth"
)

// ---- RTU ----

// RTU is a view of a ReadyToUse MAD (IBA 12.6.9):
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Local Communication ID                        |   0
//	|                 Remote Communication ID                       |   4
//	|                 Private data (224 bytes)                      |   8
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type RTU []byte

// ParseRTU returns an RTU view of b, which must be a CM MAD with AttrRTU.
func ParseRTU(b []byte) (RTU, error) { m, err := parseAs(b, AttrRTU); return RTU(m), err }

// MAD returns the view of the common header.
func (r RTU) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's communication ID.
func (r RTU) LocalCommID() CommID { return CommID(u32(r, offLocalCommID)) }

// RemoteCommID returns the receiver's communication ID.
func (r RTU) RemoteCommID() CommID { return CommID(u32(r, offRemoteCommID)) }

// PrivateData returns the 224 bytes of private data (aliases the MAD).
func (r RTU) PrivateData() []byte { return r[offRTUPrivate:MADSize:MADSize] }

// SetLocalCommID sets the local communication ID.
func (r RTU) SetLocalCommID(v CommID) { put32(r, offLocalCommID, uint32(v)) }

// SetRemoteCommID sets the remote communication ID.
func (r RTU) SetRemoteCommID(v CommID) { put32(r, offRemoteCommID, uint32(v)) }

// CommFields is an RTU or DREP in decoded form: the two communication
// IDs and the private data.
type CommFields struct {
	TID          uint64
	LocalCommID  CommID
	RemoteCommID CommID
	PrivateData  []byte // up to 224 bytes
}

// Fields returns the RTU's fields; PrivateData is a copy.
func (r RTU) Fields() CommFields {
	return CommFields{TID: r.MAD().TID(), LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID(),
		PrivateData: clone(r.PrivateData())}
}

// Encode writes a whole RTU MAD into r (MADSize bytes).
func (r RTU) Encode(f *CommFields) {
	start(r, f.TID, AttrRTU)
	r.SetLocalCommID(f.LocalCommID)
	r.SetRemoteCommID(f.RemoteCommID)
	putData(r, offRTUPrivate, PrivateDataRTU, f.PrivateData)
}

// ---- DREP ----

// DREP is a view of a DisconnectReply MAD (IBA 12.6.11); its layout is
// the RTU's:
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Local Communication ID                        |   0
//	|                 Remote Communication ID                       |   4
//	|                 Private data (224 bytes)                      |   8
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type DREP []byte

// ParseDREP returns a DREP view of b, which must be a CM MAD with AttrDREP.
func ParseDREP(b []byte) (DREP, error) { m, err := parseAs(b, AttrDREP); return DREP(m), err }

// MAD returns the view of the common header.
func (r DREP) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's communication ID.
func (r DREP) LocalCommID() CommID { return CommID(u32(r, offLocalCommID)) }

// RemoteCommID returns the receiver's communication ID.
func (r DREP) RemoteCommID() CommID { return CommID(u32(r, offRemoteCommID)) }

// PrivateData returns the 224 bytes of private data (aliases the MAD).
func (r DREP) PrivateData() []byte { return r[offDREPPrivate:MADSize:MADSize] }

// SetLocalCommID sets the local communication ID.
func (r DREP) SetLocalCommID(v CommID) { put32(r, offLocalCommID, uint32(v)) }

// SetRemoteCommID sets the remote communication ID.
func (r DREP) SetRemoteCommID(v CommID) { put32(r, offRemoteCommID, uint32(v)) }

// Fields returns the DREP's fields; PrivateData is a copy.
func (r DREP) Fields() CommFields {
	return CommFields{TID: r.MAD().TID(), LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID(),
		PrivateData: clone(r.PrivateData())}
}

// Encode writes a whole DREP MAD into r (MADSize bytes).
func (r DREP) Encode(f *CommFields) {
	start(r, f.TID, AttrDREP)
	r.SetLocalCommID(f.LocalCommID)
	r.SetRemoteCommID(f.RemoteCommID)
	putData(r, offDREPPrivate, PrivateDataDREP, f.PrivateData)
}

// ---- DREQ ----

// DREQ is a view of a DisconnectRequest MAD (IBA 12.6.10):
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Local Communication ID                        |   0
//	|                 Remote Communication ID                       |   4
//	|                 Remote QPN/EECN               |   Reserved    |   8
//	|                 Private data (220 bytes)                      |  12
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type DREQ []byte

// ParseDREQ returns a DREQ view of b, which must be a CM MAD with AttrDREQ.
func ParseDREQ(b []byte) (DREQ, error) { m, err := parseAs(b, AttrDREQ); return DREQ(m), err }

// MAD returns the view of the common header.
func (r DREQ) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's communication ID.
func (r DREQ) LocalCommID() CommID { return CommID(u32(r, offLocalCommID)) }

// RemoteCommID returns the receiver's communication ID.
func (r DREQ) RemoteCommID() CommID { return CommID(u32(r, offRemoteCommID)) }

// RemoteQPN returns the receiver's QPN, which the receiver checks.
func (r DREQ) RemoteQPN() bth.QPN { return bth.QPN(be24(r[offDREQQPN:])) }

// PrivateData returns the 220 bytes of private data (aliases the MAD).
func (r DREQ) PrivateData() []byte { return r[offDREQPrivate:MADSize:MADSize] }

// SetLocalCommID sets the local communication ID.
func (r DREQ) SetLocalCommID(v CommID) { put32(r, offLocalCommID, uint32(v)) }

// SetRemoteCommID sets the remote communication ID.
func (r DREQ) SetRemoteCommID(v CommID) { put32(r, offRemoteCommID, uint32(v)) }

// SetRemoteQPN sets the remote QPN (masked to 24 bits).
func (r DREQ) SetRemoteQPN(v bth.QPN) { put24(r[offDREQQPN:], uint32(v)) }

// DREQFields is a DREQ in decoded form.
type DREQFields struct {
	TID          uint64
	LocalCommID  CommID
	RemoteCommID CommID
	RemoteQPN    bth.QPN
	PrivateData  []byte // up to PrivateDataDREQ bytes
}

// Fields returns the DREQ's fields; PrivateData is a copy.
func (r DREQ) Fields() DREQFields {
	return DREQFields{TID: r.MAD().TID(), LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID(),
		RemoteQPN: r.RemoteQPN(), PrivateData: clone(r.PrivateData())}
}

// Encode writes a whole DREQ MAD into r (MADSize bytes).
func (r DREQ) Encode(f *DREQFields) {
	start(r, f.TID, AttrDREQ)
	r.SetLocalCommID(f.LocalCommID)
	r.SetRemoteCommID(f.RemoteCommID)
	r.SetRemoteQPN(f.RemoteQPN)
	putData(r, offDREQPrivate, PrivateDataDREQ, f.PrivateData)
}

// ---- MRA ----

// MRA is a view of a MessageReceiptAcknowledgement MAD (IBA 12.6.6): the
// receiver needs longer than the sender's timeout to answer.
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Local Communication ID                        |   0
//	|                 Remote Communication ID                       |   4
//	|Msg|  Reserved |SvcTimeout|Rsvd|     Private data (222) ...     |   8
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type MRA []byte

// ParseMRA returns an MRA view of b, which must be a CM MAD with AttrMRA.
func ParseMRA(b []byte) (MRA, error) { m, err := parseAs(b, AttrMRA); return MRA(m), err }

// MAD returns the view of the common header.
func (r MRA) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's communication ID.
func (r MRA) LocalCommID() CommID { return CommID(u32(r, offLocalCommID)) }

// RemoteCommID returns the receiver's communication ID.
func (r MRA) RemoteCommID() CommID { return CommID(u32(r, offRemoteCommID)) }

// MsgMRAed returns which message is acknowledged.
func (r MRA) MsgMRAed() MsgType { return MsgType(getBits(r[offMRAMsg], 7, 2)) }

// ServiceTimeout returns the extra time (4.096 µs · 2^n) the sender asks for.
func (r MRA) ServiceTimeout() uint8 { return getBits(r[offMRATimeout], 7, 5) }

// PrivateData returns the 222 bytes of private data (aliases the MAD).
func (r MRA) PrivateData() []byte { return r[offMRAPrivate:MADSize:MADSize] }

// SetLocalCommID sets the local communication ID.
func (r MRA) SetLocalCommID(v CommID) { put32(r, offLocalCommID, uint32(v)) }

// SetRemoteCommID sets the remote communication ID.
func (r MRA) SetRemoteCommID(v CommID) { put32(r, offRemoteCommID, uint32(v)) }

// SetMsgMRAed sets the 2-bit acknowledged-message field.
func (r MRA) SetMsgMRAed(v MsgType) { setBits(&r[offMRAMsg], 7, 2, uint8(v)) }

// SetServiceTimeout sets the 5-bit service timeout.
func (r MRA) SetServiceTimeout(v uint8) { setBits(&r[offMRATimeout], 7, 5, v) }

// MRAFields is an MRA in decoded form.
type MRAFields struct {
	TID            uint64
	LocalCommID    CommID
	RemoteCommID   CommID
	MsgMRAed       MsgType
	ServiceTimeout uint8
	PrivateData    []byte // up to PrivateDataMRA bytes
}

// Fields returns the MRA's fields; PrivateData is a copy.
func (r MRA) Fields() MRAFields {
	return MRAFields{TID: r.MAD().TID(), LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID(),
		MsgMRAed: r.MsgMRAed(), ServiceTimeout: r.ServiceTimeout(), PrivateData: clone(r.PrivateData())}
}

// Encode writes a whole MRA MAD into r (MADSize bytes).
func (r MRA) Encode(f *MRAFields) {
	start(r, f.TID, AttrMRA)
	r.SetLocalCommID(f.LocalCommID)
	r.SetRemoteCommID(f.RemoteCommID)
	r.SetMsgMRAed(f.MsgMRAed)
	r.SetServiceTimeout(f.ServiceTimeout)
	putData(r, offMRAPrivate, PrivateDataMRA, f.PrivateData)
}

// ---- REJ ----

// REJ is a view of a ConnectReject MAD (IBA 12.6.7):
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Local Communication ID                        |   0
//	|                 Remote Communication ID                       |   4
//	|Msg| Reserved  |ARI Length   |R|            Reason             |   8
//	|         Additional Reject Information (72 bytes)              |  12
//	|                 Private data (148 bytes)                      |  84
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type REJ []byte

// ParseREJ returns a REJ view of b, which must be a CM MAD with AttrREJ.
func ParseREJ(b []byte) (REJ, error) { m, err := parseAs(b, AttrREJ); return REJ(m), err }

// MAD returns the view of the common header.
func (r REJ) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's communication ID (0 when the sender
// rejected a REQ without creating a connection).
func (r REJ) LocalCommID() CommID { return CommID(u32(r, offLocalCommID)) }

// RemoteCommID returns the receiver's communication ID.
func (r REJ) RemoteCommID() CommID { return CommID(u32(r, offRemoteCommID)) }

// MsgRejected returns which message is rejected.
func (r REJ) MsgRejected() MsgType { return MsgType(getBits(r[offREJMsg], 7, 2)) }

// RejectInfoLen returns the length of the ARI in bytes (7 bits).
func (r REJ) RejectInfoLen() uint8 { return getBits(r[offREJInfoLen], 7, 7) }

// Reason returns the reject reason.
func (r REJ) Reason() RejectReason {
	return RejectReason(binary.BigEndian.Uint16(r[offREJReason:]))
}

// ARI returns the 72 bytes of additional reject information (aliases the MAD).
func (r REJ) ARI() []byte { return r[offREJARI:offREJPrivate:offREJPrivate] }

// PrivateData returns the 148 bytes of private data (aliases the MAD).
func (r REJ) PrivateData() []byte { return r[offREJPrivate:MADSize:MADSize] }

// SetLocalCommID sets the local communication ID.
func (r REJ) SetLocalCommID(v CommID) { put32(r, offLocalCommID, uint32(v)) }

// SetRemoteCommID sets the remote communication ID.
func (r REJ) SetRemoteCommID(v CommID) { put32(r, offRemoteCommID, uint32(v)) }

// SetMsgRejected sets the 2-bit rejected-message field.
func (r REJ) SetMsgRejected(v MsgType) { setBits(&r[offREJMsg], 7, 2, uint8(v)) }

// SetRejectInfoLen sets the 7-bit ARI length.
func (r REJ) SetRejectInfoLen(v uint8) { setBits(&r[offREJInfoLen], 7, 7, v) }

// SetReason sets the reject reason.
func (r REJ) SetReason(v RejectReason) { binary.BigEndian.PutUint16(r[offREJReason:], uint16(v)) }

// REJFields is a REJ in decoded form.
type REJFields struct {
	TID           uint64
	LocalCommID   CommID
	RemoteCommID  CommID
	MsgRejected   MsgType
	RejectInfoLen uint8
	Reason        RejectReason
	ARI           []byte // up to ARISize bytes
	PrivateData   []byte // up to PrivateDataREJ bytes
}

// Fields returns the REJ's fields; ARI and PrivateData are copies.
func (r REJ) Fields() REJFields {
	return REJFields{TID: r.MAD().TID(), LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID(),
		MsgRejected: r.MsgRejected(), RejectInfoLen: r.RejectInfoLen(), Reason: r.Reason(),
		ARI: clone(r.ARI()), PrivateData: clone(r.PrivateData())}
}

// Encode writes a whole REJ MAD into r (MADSize bytes).
func (r REJ) Encode(f *REJFields) {
	start(r, f.TID, AttrREJ)
	r.SetLocalCommID(f.LocalCommID)
	r.SetRemoteCommID(f.RemoteCommID)
	r.SetMsgRejected(f.MsgRejected)
	r.SetRejectInfoLen(f.RejectInfoLen)
	r.SetReason(f.Reason)
	putData(r, offREJARI, ARISize, f.ARI)
	putData(r, offREJPrivate, PrivateDataREJ, f.PrivateData)
}

// ---- SIDR ----

// SIDRREQ is a view of a ServiceIDResolutionRequest MAD (IBA 12.11.1),
// which rdma_cm's UDP port space uses to find a UD QP:
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Request ID                            |   0
//	|         Partition Key         |           Reserved            |   4
//	|                      ServiceID (8 bytes)                      |   8
//	|                 Private data (216 bytes)                      |  16
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type SIDRREQ []byte

// ParseSIDRREQ returns a SIDRREQ view of b (a CM MAD with AttrSIDRREQ).
func ParseSIDRREQ(b []byte) (SIDRREQ, error) {
	m, err := parseAs(b, AttrSIDRREQ)
	return SIDRREQ(m), err
}

// MAD returns the view of the common header.
func (r SIDRREQ) MAD() MAD { return MAD(r) }

// RequestID returns the requester's ID.
func (r SIDRREQ) RequestID() CommID { return CommID(u32(r, offLocalCommID)) }

// PKey returns the partition key.
func (r SIDRREQ) PKey() uint16 { return binary.BigEndian.Uint16(r[offSIDRReqPKey:]) }

// ServiceID returns the service to resolve.
func (r SIDRREQ) ServiceID() ServiceID { return ServiceID(u64(r, offSIDRReqServiceID)) }

// PrivateData returns the 216 bytes of private data (aliases the MAD).
func (r SIDRREQ) PrivateData() []byte { return r[offSIDRReqPrivate:MADSize:MADSize] }

// SIDRREQFields is a SIDR_REQ in decoded form.
type SIDRREQFields struct {
	TID         uint64
	RequestID   CommID
	PKey        uint16
	ServiceID   ServiceID
	PrivateData []byte // up to PrivateDataSIDRREQ bytes
}

// Fields returns the SIDR_REQ's fields; PrivateData is a copy.
func (r SIDRREQ) Fields() SIDRREQFields {
	return SIDRREQFields{TID: r.MAD().TID(), RequestID: r.RequestID(), PKey: r.PKey(),
		ServiceID: r.ServiceID(), PrivateData: clone(r.PrivateData())}
}

// Encode writes a whole SIDR_REQ MAD into r (MADSize bytes).
func (r SIDRREQ) Encode(f *SIDRREQFields) {
	start(r, f.TID, AttrSIDRREQ)
	put32(r, offLocalCommID, uint32(f.RequestID))
	binary.BigEndian.PutUint16(r[offSIDRReqPKey:], f.PKey)
	put64(r, offSIDRReqServiceID, uint64(f.ServiceID))
	putData(r, offSIDRReqPrivate, PrivateDataSIDRREQ, f.PrivateData)
}

// SIDRStatus is a SIDR_REP status (IBA 12.11.2; enum ib_cm_sidr_status).
type SIDRStatus uint8

// SIDR_REP statuses.
const (
	SIDRSuccess          SIDRStatus = 0
	SIDRUnsupported      SIDRStatus = 1
	SIDRReject           SIDRStatus = 2
	SIDRNoQP             SIDRStatus = 3
	SIDRRedirect         SIDRStatus = 4
	SIDRUnsupportedVersn SIDRStatus = 5
)

// SIDRREP is a view of a ServiceIDResolutionResponse MAD (IBA 12.11.2):
//
//	 0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Request ID                            |   0
//	|    Status     | AddInfoLength |           Reserved            |   4
//	|                     QPN                       |   Reserved    |   8
//	|                      ServiceID (8 bytes)                      |  12
//	|                            Q_Key                              |  20
//	|             Additional information (72 bytes)                 |  24
//	|                 Private data (136 bytes)                      |  96
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type SIDRREP []byte

// ParseSIDRREP returns a SIDRREP view of b (a CM MAD with AttrSIDRREP).
func ParseSIDRREP(b []byte) (SIDRREP, error) {
	m, err := parseAs(b, AttrSIDRREP)
	return SIDRREP(m), err
}

// MAD returns the view of the common header.
func (r SIDRREP) MAD() MAD { return MAD(r) }

// RequestID returns the requester's ID, echoed.
func (r SIDRREP) RequestID() CommID { return CommID(u32(r, offLocalCommID)) }

// Status returns the resolution status.
func (r SIDRREP) Status() SIDRStatus { return SIDRStatus(r[offSIDRRepStatus]) }

// AddInfoLen returns the length of the additional information.
func (r SIDRREP) AddInfoLen() uint8 { return r[offSIDRRepInfoLen] }

// QPN returns the resolved UD QP number.
func (r SIDRREP) QPN() bth.QPN { return bth.QPN(be24(r[offSIDRRepQPN:])) }

// ServiceID returns the resolved service.
func (r SIDRREP) ServiceID() ServiceID { return ServiceID(u64(r, offSIDRRepServiceID)) }

// QKey returns the Q_Key of the resolved QP.
func (r SIDRREP) QKey() uint32 { return u32(r, offSIDRRepQKey) }

// AddInfo returns the 72 bytes of additional information (aliases the MAD).
func (r SIDRREP) AddInfo() []byte {
	return r[offSIDRRepInfo:offSIDRRepPrivate:offSIDRRepPrivate]
}

// PrivateData returns the 136 bytes of private data (aliases the MAD).
func (r SIDRREP) PrivateData() []byte { return r[offSIDRRepPrivate:MADSize:MADSize] }

// SIDRREPFields is a SIDR_REP in decoded form.
type SIDRREPFields struct {
	TID         uint64
	RequestID   CommID
	Status      SIDRStatus
	AddInfoLen  uint8
	QPN         bth.QPN
	ServiceID   ServiceID
	QKey        uint32
	AddInfo     []byte // up to ClassPortInfoSize bytes
	PrivateData []byte // up to PrivateDataSIDRREP bytes
}

// Fields returns the SIDR_REP's fields; AddInfo and PrivateData are copies.
func (r SIDRREP) Fields() SIDRREPFields {
	return SIDRREPFields{TID: r.MAD().TID(), RequestID: r.RequestID(), Status: r.Status(),
		AddInfoLen: r.AddInfoLen(), QPN: r.QPN(), ServiceID: r.ServiceID(), QKey: r.QKey(),
		AddInfo: clone(r.AddInfo()), PrivateData: clone(r.PrivateData())}
}

// Encode writes a whole SIDR_REP MAD into r (MADSize bytes).
func (r SIDRREP) Encode(f *SIDRREPFields) {
	start(r, f.TID, AttrSIDRREP)
	put32(r, offLocalCommID, uint32(f.RequestID))
	r[offSIDRRepStatus] = uint8(f.Status)
	r[offSIDRRepInfoLen] = f.AddInfoLen
	put24(r[offSIDRRepQPN:], uint32(f.QPN))
	put64(r, offSIDRRepServiceID, uint64(f.ServiceID))
	put32(r, offSIDRRepQKey, f.QKey)
	putData(r, offSIDRRepInfo, ClassPortInfoSize, f.AddInfo)
	putData(r, offSIDRRepPrivate, PrivateDataSIDRREP, f.PrivateData)
}
