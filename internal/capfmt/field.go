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

	FrameNumber
	FrameTimeRelative
	FrameLen
	FrameCapLen

	IPSrc
	IPDst
	IPv6Src
	IPv6Dst
	IPDSFieldECN
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

	FrameNumber:       {name: "frame.number", kind: kindUint, bits: 32, tshark: true},
	FrameTimeRelative: {name: "frame.time_relative", kind: kindRelTime, bits: 64, tshark: true},
	FrameLen:          {name: "frame.len", kind: kindUint, bits: 32, tshark: true},
	FrameCapLen:       {name: "frame.cap_len", kind: kindUint, bits: 32, tshark: true},

	IPSrc:        {name: "ip.src", kind: kindIPv4, tshark: true},
	IPDst:        {name: "ip.dst", kind: kindIPv4, tshark: true},
	IPv6Src:      {name: "ipv6.src", kind: kindIPv6, tshark: true},
	IPv6Dst:      {name: "ipv6.dst", kind: kindIPv6, tshark: true},
	IPDSFieldECN: {name: "ip.dsfield.ecn", kind: kindUint, bits: 2, tshark: true},
	UDPSrcPort:   {name: "udp.srcport", kind: kindUint, bits: 16, tshark: true},
	UDPDstPort:   {name: "udp.dstport", kind: kindUint, bits: 16, tshark: true},

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
