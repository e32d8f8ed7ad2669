package capfmt

import "encoding/binary"

// IP-CM service IDs (IBA Annex A11.2.1): tshark decodes the REQ service ID
// and private data as IP CM when the ID is 0x0000000001 | protocol | port.
const (
	ipCMSIDPrefixMask = 0xFFFFFFFFFF000000
	ipCMSIDPrefix     = 0x0000000001000000
)

// cm is parse_COM_MGT after the common header: the CM message in the 232
// data bytes b (captured whole: madCommon checked). tshark 4.0 decodes
// REQ, REP, RTU, REJ, DREQ and DREP; MRA, SIDR, LAP and APR get no items.
// The message items sit below a CM item that has no field of its own.
func (d *Decoder) cm(st *ibState, attr uint16, b []byte) {
	dep := st.depth + 1
	u8 := func(f Field, o int, mask uint8) {
		v := b[o] & mask
		for m := mask; m&1 == 0 && m != 0; m >>= 1 {
			v >>= 1
		}
		d.emit(f, dep, uint64(v), nil)
	}
	u16 := func(f Field, o int) { d.emit(f, dep, uint64(binary.BigEndian.Uint16(b[o:])), nil) }
	u24 := func(f Field, o int) { d.emit(f, dep, be24(b[o:]), nil) }
	u32 := func(f Field, o int) { d.emit(f, dep, uint64(binary.BigEndian.Uint32(b[o:])), nil) }
	u64 := func(f Field, o int) { d.emit(f, dep, binary.BigEndian.Uint64(b[o:]), nil) }
	raw := func(f Field, o, n int) { d.emit(f, dep, 0, b[o:o+n:o+n]) }
	switch attr {
	case 0x0010: // ConnectRequest
		d.cmREQ(st, b, u8, u16, u24, u32, u64, raw)
	case 0x0013: // ConnectReply
		u32(IBCMRepLocalCommID, 0)
		u32(IBCMRepRemotecommid, 4)
		u32(IBCMRepLocalqkey, 8)
		u24(IBCMRepLocalqpn, 12)
		raw(IBReserved, 15, 1)
		u24(IBCMRepLocaleecn, 16)
		raw(IBReserved, 19, 1)
		u24(IBCMRepStartpsn, 20)
		raw(IBReserved, 23, 1)
		u8(IBCMRepRespres, 24, 0xff)
		u8(IBCMRepInitdepth, 25, 0xff)
		u8(IBCMRepTgtackdelay, 26, 0xf8)
		u8(IBCMRepFailoveracc, 26, 0x06)
		u8(IBCMRepE2eflowctrl, 26, 0x01)
		u8(IBCMRepRnrretrcount, 27, 0xe0)
		u8(IBCMRepSrq, 27, 0x10)
		u8(IBCMRepReserved, 27, 0x0f)
		u64(IBCMRepLocalcaguid, 28)
		raw(IBCMRepPrivate, 36, 196)
	case 0x0014: // ReadyToUse
		u32(IBCMRtuLocalcommid, 0)
		u32(IBCMRtuRemotecommid, 4)
		raw(IBCMRtuPrivate, 8, 224)
	case 0x0012: // ConnectReject
		u32(IBCMRejLocalcommid, 0)
		u32(IBCMRejRemotecommid, 4)
		u8(IBCMRejMsgrej, 8, 0xc0)
		u8(IBCMRejReserved0, 8, 0x03)
		u8(IBCMRejRejinfolen, 9, 0xfe)
		u8(IBCMRejReserved1, 9, 0x01)
		u16(IBCMRejReason, 10)
		raw(IBCMRejAri, 12, 72)
		raw(IBCMRejPrivate, 84, 148)
	case 0x0015: // DisconnectRequest
		u32(IBCMDreqLocalcommid, 0)
		u32(IBCMDreqRemotecommid, 4)
		u24(IBCMReqRemoteqpneecn, 8)
		raw(IBReserved, 11, 1)
		raw(IBCMDreqPrivate, 12, 220)
	case 0x0016: // DisconnectReply
		u32(IBCMDrspLocalcommid, 0)
		u32(IBCMDrspRemotecommid, 4)
		raw(IBCMDrspPrivate, 8, 224)
	}
}

// cmREQ is parse_CM_Req. Its quirks are tshark's: the GIDs are decoded as
// IPv4 (the last 4 bytes) when the packet's own IP header is IPv4; the
// flow label is a 3-byte read under a 32-bit mask (so only its upper 12
// bits show), and the reserved and packet-rate fields are 1-byte reads of
// the same first byte; the alternate path's second reserved field reuses
// the first one's name.
func (d *Decoder) cmREQ(st *ibState, b []byte, u8 func(Field, int, uint8), u16, u24, u32, u64 func(Field, int),
	raw func(Field, int, int)) {
	dep := st.depth + 1
	u32(IBCMReqLocalCommID, 0)
	raw(IBReserved, 4, 4)
	sid := binary.BigEndian.Uint64(b[8:])
	ipcm := sid&ipCMSIDPrefixMask == ipCMSIDPrefix
	if ipcm {
		u64(IBCMReqServiceid, 8)
		d.emit(IBCMReqServiceidPrefix, dep+1, 0, b[8:13:13])
		d.emit(IBCMReqServiceidProtocol, dep+1, uint64(b[13]), nil)
		d.emit(IBCMReqServiceidDport, dep+1, uint64(binary.BigEndian.Uint16(b[14:])), nil)
	} else {
		u64(IBCMReqServiceid, 8)
	}
	u64(IBCMReqLocalcaguid, 16)
	raw(IBReserved, 24, 4)
	u32(IBCMReqLocalqkey, 28)
	u24(IBCMReqLocalqpn, 32)
	u8(IBCMReqResponderres, 35, 0xff)
	u24(IBCMReqLocaleecn, 36)
	u8(IBCMReqInitdepth, 39, 0xff)
	u24(IBCMReqRemoteeecn, 40)
	u8(IBCMReqRemoteresptout, 43, 0xf8)
	u8(IBCMReqTranspsvctype, 43, 0x06)
	u8(IBCMReqE2eflowctrl, 43, 0x01)
	u24(IBCMReqStartpsn, 44)
	u8(IBCMReqLocalresptout, 47, 0xf8)
	u8(IBCMReqRetrcount, 47, 0x07)
	u16(IBCMReqPkey, 48)
	u8(IBCMReqPppmtu, 50, 0xf0)
	u8(IBCMReqRdcexist, 50, 0x08)
	u8(IBCMReqRnrretrcount, 50, 0x07)
	u8(IBCMReqMaxcmretr, 51, 0xf0)
	u8(IBCMReqSrq, 51, 0x08)
	u8(IBCMReqExtTransport, 51, 0x07)
	// Primary path.
	u16(IBCMReqPrimLocallid, 52)
	u16(IBCMReqPrimRemotelid, 54)
	if len(st.ipHdr) > 0 && st.ipHdr[0]>>4 == 4 {
		d.emit(IBCMReqPrimLocalgidIpv4, dep, 0, b[68:72:72])
		d.emit(IBCMReqPrimRemotegidIpv4, dep, 0, b[84:88:88])
	} else {
		d.emit(IBCMReqPrimLocalgid, dep, 0, b[56:72:72])
		d.emit(IBCMReqPrimRemotegid, dep, 0, b[72:88:88])
	}
	d.cmFlow(dep, b[88:], IBCMReqPrimFlowlabel, IBCMReqPrimReserved0, IBCMReqPrimPktrate)
	u8(IBCMReqPrimTfcclass, 92, 0xff)
	u8(IBCMReqPrimHoplim, 93, 0xff)
	u8(IBCMReqPrimSl, 94, 0xf0)
	u8(IBCMReqPrimSubnetlocal, 94, 0x08)
	u8(IBCMReqPrimReserved1, 94, 0x07)
	u8(IBCMReqPrimLocalacktout, 95, 0xf8)
	u8(IBCMReqPrimReserved2, 95, 0x07)
	// Alternate path.
	u16(IBCMReqAltLocallid, 96)
	u16(IBCMReqAltRemotelid, 98)
	raw(IBCMReqAltLocalgid, 100, 16)
	raw(IBCMReqAltRemotegid, 116, 16)
	d.cmFlow(dep, b[132:], IBCMReqAltFlowlabel, IBCMReqAltReserved0, IBCMReqAltPktrate)
	u8(IBCMReqAltTfcclass, 136, 0xff)
	u8(IBCMReqAltHoplim, 137, 0xff)
	u8(IBCMReqAltSl, 138, 0xf0)
	u8(IBCMReqAltSubnetlocal, 138, 0x08)
	u8(IBCMReqAltReserved1, 138, 0x07)
	u8(IBCMReqAltLocalacktout, 139, 0xf8)
	u8(IBCMReqAltReserved1, 139, 0x07)
	// Private data (92 bytes at 140).
	if !ipcm {
		raw(IBCMReqPrivate, 140, 92)
		return
	}
	p := b[140:232:232]
	d.emit(IBCMReqIPCM, dep, 0, p)
	d.emit(IBCMReqIPCMMajv, dep+1, uint64(p[0]>>4), nil)
	d.emit(IBCMReqIPCMMinv, dep+1, uint64(p[0]&0xf), nil)
	d.emit(IBCMReqIPCMIpv, dep+1, uint64(p[1]>>4), nil)
	d.emit(IBCMReqIPCMReserved, dep+1, uint64(p[1]&0xf), nil)
	d.emit(IBCMReqIPCMSport, dep+1, uint64(binary.BigEndian.Uint16(p[2:])), nil)
	if p[1]>>4 == 4 {
		d.emit(IBCMReqIPCMSip4, dep+1, 0, p[16:20:20])
		d.emit(IBCMReqIPCMDip4, dep+1, 0, p[32:36:36])
	} else {
		d.emit(IBCMReqIPCMSip6, dep+1, 0, p[4:20:20])
		d.emit(IBCMReqIPCMDip6, dep+1, 0, p[20:36:36])
	}
	d.emit(IBCMReqIPCMPrivate, dep+1, 0, p[36:92:92])
}

// cmFlow adds a path's flow label, reserved bits and packet rate as tshark
// reads them: a 3-byte item under mask 0xfffff000, and two 1-byte items
// under masks 0xfc0 and 0x3f, all starting at the same byte.
func (d *Decoder) cmFlow(dep int, b []byte, flow, resv, rate Field) {
	d.emit(flow, dep, be24(b)&0xfffff000>>12, nil)
	d.emit(resv, dep, uint64(b[0])&0xfc0>>6, nil)
	d.emit(rate, dep, uint64(b[0])&0x3f, nil)
}
