package capfmt

// Field identifies one field of a decoded packet, named as tshark 4.0 names
// it (FieldByName("infiniband.bth.psn")). Protocol fields (ProtoIP, …) mark
// where a protocol starts in the item list; they can be tested in filters
// but carry no value.
type Field uint16

// Fields the decoder emits. The values are private to this package: compare
// with the constants and look names up with FieldByName, never store the
// numbers.
const (
	FieldNone Field = iota

	ProtoFrame
	ProtoEth
	ProtoIP
	ProtoIPv6
	ProtoUDP
	ProtoICMP
	ProtoICMPv6
	ProtoInfiniband
	ProtoVLAN
	ProtoMACC

	FrameNumber
	FrameTimeRelative
	FrameLen
	FrameCapLen

	IPSrc
	IPDst
	IPv6Src
	IPv6Dst
	IPDSFieldECN
	IPDSFieldDSCP
	UDPSrcPort
	UDPDstPort

	IBBTH
	IBOpcode
	IBSolicitedEvent
	IBMigReq
	IBPadCount
	IBTVer
	IBPKey
	IBDestQP
	IBAckReq
	IBReserved7
	IBPSN

	IBRETH
	IBVA
	IBRKey
	IBDMALen

	IBAETH
	IBSyndrome
	IBSyndromeReserved
	IBSyndromeOpcode
	IBCreditCount
	IBTimer
	IBReservedValue
	IBErrorCode
	IBMSN

	IBDETH
	IBQKey
	IBSrcQP

	IBImmDt
	IBIETH

	IBAtomicETH
	IBSwapData
	IBCompareData
	IBAtomicAckETH
	IBOrigRemData

	IBPayload
	IBInvariantCRC
	IBVariantCRC
	IBReserved
	IBVendor

	// 802.1Q tag (tshark's "vlan" protocol; an 802.1ad S-tag is
	// tshark's ieee8021ad, whose fields are not decoded).
	VLANPriority
	VLANDEI
	VLANCFI
	VLANID
	VLANEType
	VLANLen

	// MAC Control (EtherType 0x8808): 802.3x PAUSE (IEEE 802.3 Annex 31B),
	// 802.1Qbb PFC (Annex 31D, tshark's "CBFC"), and the EPON MPCP opcodes
	// 2 to 6 (IEEE 802.3 clause 64).
	MACCOpcode
	MACCPauseTime
	MACCTimestamp
	MACCRegFlags
	MACCRegReqGrants
	MACCRegGrants
	MACCRegAssignedPort
	MACCRegAckAssignedPort
	MACCRegSyncTime
	MACCRegAckSyncTime
	MACCEnbv
	MACCEnbvC0 // MACCEnbvC0+n is class n's enable bit
	MACCEnbvC1
	MACCEnbvC2
	MACCEnbvC3
	MACCEnbvC4
	MACCEnbvC5
	MACCEnbvC6
	MACCEnbvC7
	MACCPauseTimeC0 // MACCPauseTimeC0+n is class n's pause quanta
	MACCPauseTimeC1
	MACCPauseTimeC2
	MACCPauseTimeC3
	MACCPauseTimeC4
	MACCPauseTimeC5
	MACCPauseTimeC6
	MACCPauseTimeC7

	ICRCStatus
	ICRCComputed

	numFields
)

// kind says how a field's value is stored in an Item and printed.
type kind uint8

const (
	kindProto   kind = iota // no value
	kindUint                // Item.Value, decimal
	kindHex                 // Item.Value, 0x and fieldInfo.digits lowercase hex digits
	kindBool                // Item.Value 0/1, printed 0/1 (FT_BOOLEAN in -T fields)
	kindBytes               // Item.Bytes, lowercase hex without separators
	kindIPv4                // Item.Bytes (4), dotted quad
	kindIPv6                // Item.Bytes (16), RFC 5952
	kindRelTime             // Item.Value as int64 nanoseconds, [-]s.nnnnnnnnn
	kindStatus              // Item.Value 1 good / 0 bad
)

type fieldInfo struct {
	name   string
	kind   kind
	digits uint8 // kindHex: number of hex digits
	bits   uint8 // integer kinds: width of the value, for filter range checks
	// tshark reports whether tshark 4.0 knows the field (roce.* are ours).
	tshark bool
}

var fieldInfos = [numFields]fieldInfo{
	FieldNone: {name: ""},

	ProtoFrame:      {name: "frame", kind: kindProto, tshark: true},
	ProtoEth:        {name: "eth", kind: kindProto, tshark: true},
	ProtoIP:         {name: "ip", kind: kindProto, tshark: true},
	ProtoIPv6:       {name: "ipv6", kind: kindProto, tshark: true},
	ProtoUDP:        {name: "udp", kind: kindProto, tshark: true},
	ProtoICMP:       {name: "icmp", kind: kindProto, tshark: true},
	ProtoICMPv6:     {name: "icmpv6", kind: kindProto, tshark: true},
	ProtoInfiniband: {name: "infiniband", kind: kindProto, tshark: true},
	ProtoVLAN:       {name: "vlan", kind: kindProto, tshark: true},
	ProtoMACC:       {name: "macc", kind: kindProto, tshark: true},

	FrameNumber:       {name: "frame.number", kind: kindUint, bits: 32, tshark: true},
	FrameTimeRelative: {name: "frame.time_relative", kind: kindRelTime, bits: 64, tshark: true},
	FrameLen:          {name: "frame.len", kind: kindUint, bits: 32, tshark: true},
	FrameCapLen:       {name: "frame.cap_len", kind: kindUint, bits: 32, tshark: true},

	IPSrc:         {name: "ip.src", kind: kindIPv4, tshark: true},
	IPDst:         {name: "ip.dst", kind: kindIPv4, tshark: true},
	IPv6Src:       {name: "ipv6.src", kind: kindIPv6, tshark: true},
	IPv6Dst:       {name: "ipv6.dst", kind: kindIPv6, tshark: true},
	IPDSFieldECN:  {name: "ip.dsfield.ecn", kind: kindUint, bits: 2, tshark: true},
	IPDSFieldDSCP: {name: "ip.dsfield.dscp", kind: kindUint, bits: 8, tshark: true},
	UDPSrcPort:    {name: "udp.srcport", kind: kindUint, bits: 16, tshark: true},
	UDPDstPort:    {name: "udp.dstport", kind: kindUint, bits: 16, tshark: true},

	IBBTH:            {name: "infiniband.bth", kind: kindBytes, tshark: true},
	IBOpcode:         {name: "infiniband.bth.opcode", kind: kindUint, bits: 8, tshark: true},
	IBSolicitedEvent: {name: "infiniband.bth.se", kind: kindBool, bits: 1, tshark: true},
	IBMigReq:         {name: "infiniband.bth.m", kind: kindBool, bits: 1, tshark: true},
	IBPadCount:       {name: "infiniband.bth.padcnt", kind: kindUint, bits: 2, tshark: true},
	IBTVer:           {name: "infiniband.bth.tver", kind: kindUint, bits: 4, tshark: true},
	IBPKey:           {name: "infiniband.bth.p_key", kind: kindUint, bits: 16, tshark: true},
	IBDestQP:         {name: "infiniband.bth.destqp", kind: kindHex, digits: 6, bits: 24, tshark: true},
	IBAckReq:         {name: "infiniband.bth.a", kind: kindBool, bits: 1, tshark: true},
	IBReserved7:      {name: "infiniband.bth.reserved7", kind: kindUint, bits: 7, tshark: true},
	IBPSN:            {name: "infiniband.bth.psn", kind: kindUint, bits: 24, tshark: true},

	IBRETH:   {name: "infiniband.reth", kind: kindBytes, tshark: true},
	IBVA:     {name: "infiniband.reth.va", kind: kindHex, digits: 16, bits: 64, tshark: true},
	IBRKey:   {name: "infiniband.reth.r_key", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBDMALen: {name: "infiniband.reth.dmalen", kind: kindUint, bits: 32, tshark: true},

	IBAETH:             {name: "infiniband.aeth", kind: kindBytes, tshark: true},
	IBSyndrome:         {name: "infiniband.aeth.syndrome", kind: kindUint, bits: 8, tshark: true},
	IBSyndromeReserved: {name: "infiniband.aeth.syndrome.reserved", kind: kindUint, bits: 1, tshark: true},
	IBSyndromeOpcode:   {name: "infiniband.aeth.syndrome.opcode", kind: kindUint, bits: 2, tshark: true},
	IBCreditCount:      {name: "infiniband.aeth.syndrome.credit_count", kind: kindUint, bits: 5, tshark: true},
	IBTimer:            {name: "infiniband.aeth.syndrome.timer", kind: kindUint, bits: 5, tshark: true},
	IBReservedValue:    {name: "infiniband.aeth.syndrome.reserved_value", kind: kindUint, bits: 5, tshark: true},
	IBErrorCode:        {name: "infiniband.aeth.syndrome.error_code", kind: kindUint, bits: 5, tshark: true},
	IBMSN:              {name: "infiniband.aeth.msn", kind: kindUint, bits: 24, tshark: true},

	IBDETH:  {name: "infiniband.deth", kind: kindBytes, tshark: true},
	IBQKey:  {name: "infiniband.deth.q_key", kind: kindHex, digits: 16, bits: 64, tshark: true},
	IBSrcQP: {name: "infiniband.deth.srcqp", kind: kindHex, digits: 8, bits: 32, tshark: true},

	IBImmDt: {name: "infiniband.immdt", kind: kindBytes, tshark: true},
	IBIETH:  {name: "infiniband.ieth", kind: kindBytes, tshark: true},

	IBAtomicETH:    {name: "infiniband.atomiceth", kind: kindBytes, tshark: true},
	IBSwapData:     {name: "infiniband.atomiceth.swapdt", kind: kindUint, bits: 64, tshark: true},
	IBCompareData:  {name: "infiniband.atomiceth.cmpdt", kind: kindUint, bits: 64, tshark: true},
	IBAtomicAckETH: {name: "infiniband.atomicacketh", kind: kindBytes, tshark: true},
	IBOrigRemData:  {name: "infiniband.atomicacketh.origremdt", kind: kindUint, bits: 64, tshark: true},

	IBPayload:      {name: "infiniband.payload", kind: kindBytes, tshark: true},
	IBInvariantCRC: {name: "infiniband.invariant.crc", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBVariantCRC:   {name: "infiniband.variant.crc", kind: kindHex, digits: 4, bits: 16, tshark: true},
	IBReserved:     {name: "infiniband.reserved", kind: kindBytes, tshark: true},
	IBVendor:       {name: "infiniband.vendor", kind: kindBytes, tshark: true},

	VLANPriority: {name: "vlan.priority", kind: kindUint, bits: 16, tshark: true},
	VLANDEI:      {name: "vlan.dei", kind: kindBool, bits: 1, tshark: true},
	// vlan.cfi is registered by tshark 4.0 but only added when its
	// "Treat bit as CFI" preference is on (off by default): it is known
	// to filters and never present.
	VLANCFI:   {name: "vlan.cfi", kind: kindBool, bits: 1, tshark: true},
	VLANID:    {name: "vlan.id", kind: kindUint, bits: 16, tshark: true},
	VLANEType: {name: "vlan.etype", kind: kindHex, digits: 4, bits: 16, tshark: true},
	VLANLen:   {name: "vlan.len", kind: kindUint, bits: 16, tshark: true},

	MACCOpcode:             {name: "macc.opcode", kind: kindHex, digits: 4, bits: 16, tshark: true},
	MACCPauseTime:          {name: "macc.pause_time", kind: kindUint, bits: 16, tshark: true},
	MACCTimestamp:          {name: "macc.timestamp", kind: kindUint, bits: 32, tshark: true},
	MACCRegFlags:           {name: "macc.reg.flags", kind: kindHex, digits: 2, bits: 8, tshark: true},
	MACCRegReqGrants:       {name: "macc.regreq.grants", kind: kindUint, bits: 8, tshark: true},
	MACCRegGrants:          {name: "macc.reg.grants", kind: kindUint, bits: 8, tshark: true},
	MACCRegAssignedPort:    {name: "macc.reg.assignedport", kind: kindUint, bits: 16, tshark: true},
	MACCRegAckAssignedPort: {name: "macc.regack.assignedport", kind: kindUint, bits: 16, tshark: true},
	MACCRegSyncTime:        {name: "macc.reg.synctime", kind: kindUint, bits: 16, tshark: true},
	MACCRegAckSyncTime:     {name: "macc.regack.synctime", kind: kindUint, bits: 16, tshark: true},
	MACCEnbv:               {name: "macc.cbfc.enbv", kind: kindHex, digits: 4, bits: 16, tshark: true},
	MACCEnbvC0:             {name: "macc.cbfc.enbv.c0", kind: kindBool, bits: 1, tshark: true},
	MACCEnbvC1:             {name: "macc.cbfc.enbv.c1", kind: kindBool, bits: 1, tshark: true},
	MACCEnbvC2:             {name: "macc.cbfc.enbv.c2", kind: kindBool, bits: 1, tshark: true},
	MACCEnbvC3:             {name: "macc.cbfc.enbv.c3", kind: kindBool, bits: 1, tshark: true},
	MACCEnbvC4:             {name: "macc.cbfc.enbv.c4", kind: kindBool, bits: 1, tshark: true},
	MACCEnbvC5:             {name: "macc.cbfc.enbv.c5", kind: kindBool, bits: 1, tshark: true},
	MACCEnbvC6:             {name: "macc.cbfc.enbv.c6", kind: kindBool, bits: 1, tshark: true},
	MACCEnbvC7:             {name: "macc.cbfc.enbv.c7", kind: kindBool, bits: 1, tshark: true},
	MACCPauseTimeC0:        {name: "macc.cbfc.pause_time.c0", kind: kindUint, bits: 16, tshark: true},
	MACCPauseTimeC1:        {name: "macc.cbfc.pause_time.c1", kind: kindUint, bits: 16, tshark: true},
	MACCPauseTimeC2:        {name: "macc.cbfc.pause_time.c2", kind: kindUint, bits: 16, tshark: true},
	MACCPauseTimeC3:        {name: "macc.cbfc.pause_time.c3", kind: kindUint, bits: 16, tshark: true},
	MACCPauseTimeC4:        {name: "macc.cbfc.pause_time.c4", kind: kindUint, bits: 16, tshark: true},
	MACCPauseTimeC5:        {name: "macc.cbfc.pause_time.c5", kind: kindUint, bits: 16, tshark: true},
	MACCPauseTimeC6:        {name: "macc.cbfc.pause_time.c6", kind: kindUint, bits: 16, tshark: true},
	MACCPauseTimeC7:        {name: "macc.cbfc.pause_time.c7", kind: kindUint, bits: 16, tshark: true},

	ICRCStatus:   {name: "roce.icrc.status", kind: kindStatus},
	ICRCComputed: {name: "roce.icrc.computed", kind: kindHex, digits: 8, bits: 32},
}

// fieldsByName maps names to fields; built once from fieldInfos (a pure
// function of constant data, never written afterwards).
var fieldsByName = func() map[string]Field {
	m := make(map[string]Field, numFields)
	for f := Field(1); f < numFields; f++ {
		m[fieldInfos[f].name] = f
	}
	return m
}()

// FieldByName returns the field with the given tshark name (or one of
// goroce's own roce.* names), and false when there is none.
func FieldByName(name string) (Field, bool) {
	f, ok := fieldsByName[name]
	return f, ok
}

// String returns the field's tshark name.
func (f Field) String() string {
	if f < numFields {
		return fieldInfos[f].name
	}
	return "Field(?)"
}

// IsProtocol reports whether f is a protocol (it has no value).
func (f Field) IsProtocol() bool { return f < numFields && fieldInfos[f].kind == kindProto }

// InTshark reports whether tshark 4.0 has a field of this name; the roce.*
// fields are goroce's own.
func (f Field) InTshark() bool { return f < numFields && fieldInfos[f].tshark }

// Fields returns every field the decoder knows, protocols first, in a
// stable order. It allocates; it is meant for help output and tests.
func Fields() []Field {
	out := make([]Field, 0, numFields-1)
	for f := Field(1); f < numFields; f++ {
		out = append(out, f)
	}
	return out
}
