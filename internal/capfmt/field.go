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

	// Management datagrams (IBA 13.4) and the CM messages (IBA 12.6) on
	// QP0/QP1, as tshark 4.0 registers them (labels in the comments).
	IBCMReqLocalCommID       // Local Communication ID
	IBCMReqServiceid         // ServiceID
	IBCMReqServiceidPrefix   // Prefix
	IBCMReqServiceidProtocol // Protocol
	IBCMReqServiceidDport    // Destination Port
	IBCMReqLocalcaguid       // Local CA GUID
	IBCMReqLocalqkey         // Local Q_Key
	IBCMReqLocalqpn          // Local QPN
	IBCMReqResponderres      // Responder Resources
	IBCMReqLocaleecn         // Local EECN
	IBCMReqInitdepth         // Initiator Depth
	IBCMReqRemoteeecn        // Remote EECN
	IBCMReqRemoteresptout    // Remote CM Response Timeout
	IBCMReqTranspsvctype     // Transport Service Type
	IBCMReqE2eflowctrl       // End-to-End Flow Control
	IBCMReqStartpsn          // Starting PSN
	IBCMReqLocalresptout     // Local CM Response Timeout
	IBCMReqRetrcount         // Retry Count
	IBCMReqPkey              // Partition Key
	IBCMReqPppmtu            // Path Packet Payload MTU
	IBCMReqRdcexist          // RDC Exists
	IBCMReqRnrretrcount      // RNR Retry Count
	IBCMReqMaxcmretr         // Max CM Retries
	IBCMReqSrq               // SRQ
	IBCMReqExtTransport      // Extended Transport
	IBCMReqPrimLocallid      // Primary Local Port LID
	IBCMReqPrimRemotelid     // Primary Remote Port LID
	IBCMReqPrimLocalgid      // Primary Local Port GID
	IBCMReqPrimRemotegid     // Primary Remote Port GID
	IBCMReqPrimLocalgidIpv4  // Primary Local Port GID
	IBCMReqPrimRemotegidIpv4 // Primary Remote Port GID
	IBCMReqPrimFlowlabel     // Primary Flow Label
	IBCMReqPrimReserved0     // Reserved
	IBCMReqPrimPktrate       // Primary Packet Rate
	IBCMReqPrimTfcclass      // Primary Traffic Class
	IBCMReqPrimHoplim        // Primary Hop Limit
	IBCMReqPrimSl            // Primary SL
	IBCMReqPrimSubnetlocal   // Primary Subnet Local
	IBCMReqPrimReserved1     // Reserved
	IBCMReqPrimLocalacktout  // Primary Local ACK Timeout
	IBCMReqPrimReserved2     // Reserved
	IBCMReqAltLocallid       // Alternate Local Port LID
	IBCMReqAltRemotelid      // Alternate Remote Port LID
	IBCMReqAltLocalgid       // Alternate Local Port GID
	IBCMReqAltRemotegid      // Alternate Remote Port GID
	IBCMReqAltFlowlabel      // Alternate Flow Label
	IBCMReqAltReserved0      // Reserved
	IBCMReqAltPktrate        // Alternate Packet Rate
	IBCMReqAltTfcclass       // Alternate Traffic Class
	IBCMReqAltHoplim         // Alternate Hop Limit
	IBCMReqAltSl             // Alternate SL
	IBCMReqAltSubnetlocal    // Alternate Subnet Local
	IBCMReqAltReserved1      // Reserved
	IBCMReqAltLocalacktout   // Alternate Local ACK Timeout
	IBCMReqPrivate           // PrivateData
	IBCMReqIPCM              // IP CM Request Msg
	IBCMReqIPCMMajv          // IP CM Major Version
	IBCMReqIPCMMinv          // IP CM Minor Version
	IBCMReqIPCMIpv           // IP CM IP Version
	IBCMReqIPCMReserved      // IP CM Reserved
	IBCMReqIPCMSport         // IP CM Source Port
	IBCMReqIPCMSip6          // IP CM Source IP
	IBCMReqIPCMDip6          // IP CM Destination IP
	IBCMReqIPCMSip4          // IP CM Source IP
	IBCMReqIPCMDip4          // IP CM Destination IP
	IBCMReqIPCMPrivate       // IP CM Consumer PrivateData
	IBCMRepLocalCommID       // Local Communication ID
	IBCMRepRemotecommid      // Remote Communication ID
	IBCMRepLocalqkey         // Local Q_Key
	IBCMRepLocalqpn          // Local QPN
	IBCMRepLocaleecn         // Local EE Context Number
	IBCMRepStartpsn          // Starting PSN
	IBCMRepRespres           // Responder Resources
	IBCMRepInitdepth         // Initiator Depth
	IBCMRepTgtackdelay       // Target ACK Delay
	IBCMRepFailoveracc       // Failover Accepted
	IBCMRepE2eflowctrl       // End-To-End Flow Control
	IBCMRepRnrretrcount      // RNR Retry Count
	IBCMRepSrq               // SRQ
	IBCMRepReserved          // Reserved
	IBCMRepLocalcaguid       // Local CA GUID
	IBCMRepPrivate           // PrivateData
	IBCMRtuLocalcommid       // Local Communication ID
	IBCMRtuRemotecommid      // Remote Communication ID
	IBCMRtuPrivate           // PrivateData
	IBCMRejLocalcommid       // Local Communication ID
	IBCMRejRemotecommid      // Remote Communication ID
	IBCMRejMsgrej            // Message REJected
	IBCMRejReserved0         // Reserved
	IBCMRejRejinfolen        // Reject Info Length
	IBCMRejReserved1         // Reserved
	IBCMRejReason            // Reason
	IBCMRejAri               // Additional Reject Information (ARI)
	IBCMRejPrivate           // PrivateData
	IBCMDreqLocalcommid      // Local Communication ID
	IBCMDreqRemotecommid     // Remote Communication ID
	IBCMReqRemoteqpneecn     // Remote QPN/EECN
	IBCMDreqPrivate          // PrivateData
	IBCMDrspLocalcommid      // Local Communication ID
	IBCMDrspRemotecommid     // Remote Communication ID
	IBCMDrspPrivate          // PrivateData
	IBSMPData                // SMP Data: tshark's item over a CM message (parse_COM_MGT)
	IBMAD                    // MAD (Management Datagram) Common Header
	IBMADBaseversion         // Base Version
	IBMADMgmtclass           // Management Class
	IBMADClassversion        // Class Version
	IBMADMethod              // Method
	IBMADStatus              // Status
	IBMADClassspecific       // Class Specific
	IBMADTransactionid       // Transaction ID
	IBMADAttributeid         // Attribute ID
	IBMADAttributemodifier   // Attribute Modifier
	IBMADData                // MAD Data Payload

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

	IBCMReqLocalCommID:       {name: "infiniband.cm.req", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMReqServiceid:         {name: "infiniband.cm.req.serviceid", kind: kindHex, digits: 16, bits: 64, tshark: true},
	IBCMReqServiceidPrefix:   {name: "infiniband.cm.req.serviceid.prefix", kind: kindBytes, tshark: true},
	IBCMReqServiceidProtocol: {name: "infiniband.cm.req.serviceid.protocol", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBCMReqServiceidDport:    {name: "infiniband.cm.req.serviceid.dport", kind: kindHex, digits: 4, bits: 16, tshark: true},
	IBCMReqLocalcaguid:       {name: "infiniband.cm.req.localcaguid", kind: kindHex, digits: 16, bits: 64, tshark: true},
	IBCMReqLocalqkey:         {name: "infiniband.cm.req.localqkey", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMReqLocalqpn:          {name: "infiniband.cm.req.localqpn", kind: kindHex, digits: 6, bits: 24, tshark: true},
	IBCMReqResponderres:      {name: "infiniband.cm.req.responderres", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBCMReqLocaleecn:         {name: "infiniband.cm.req.localeecn", kind: kindHex, digits: 6, bits: 24, tshark: true},
	IBCMReqInitdepth:         {name: "infiniband.cm.req.initdepth", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBCMReqRemoteeecn:        {name: "infiniband.cm.req.remoteeecn", kind: kindHex, digits: 6, bits: 24, tshark: true},
	IBCMReqRemoteresptout:    {name: "infiniband.cm.req.remoteresptout", kind: kindHex, digits: 2, bits: 5, tshark: true},
	IBCMReqTranspsvctype:     {name: "infiniband.cm.req.transpsvctype", kind: kindHex, digits: 2, bits: 2, tshark: true},
	IBCMReqE2eflowctrl:       {name: "infiniband.cm.req.e2eflowctrl", kind: kindHex, digits: 2, bits: 1, tshark: true},
	IBCMReqStartpsn:          {name: "infiniband.cm.req.startpsn", kind: kindHex, digits: 6, bits: 24, tshark: true},
	IBCMReqLocalresptout:     {name: "infiniband.cm.req.localresptout", kind: kindHex, digits: 2, bits: 5, tshark: true},
	IBCMReqRetrcount:         {name: "infiniband.cm.req.retrcount", kind: kindHex, digits: 2, bits: 3, tshark: true},
	IBCMReqPkey:              {name: "infiniband.cm.req.pkey", kind: kindHex, digits: 4, bits: 16, tshark: true},
	IBCMReqPppmtu:            {name: "infiniband.cm.req.pppmtu", kind: kindHex, digits: 2, bits: 4, tshark: true},
	IBCMReqRdcexist:          {name: "infiniband.cm.req.rdcexist", kind: kindHex, digits: 2, bits: 1, tshark: true},
	IBCMReqRnrretrcount:      {name: "infiniband.cm.req.rnrretrcount", kind: kindHex, digits: 2, bits: 3, tshark: true},
	IBCMReqMaxcmretr:         {name: "infiniband.cm.req.maxcmretr", kind: kindHex, digits: 2, bits: 4, tshark: true},
	IBCMReqSrq:               {name: "infiniband.cm.req.srq", kind: kindHex, digits: 2, bits: 1, tshark: true},
	IBCMReqExtTransport:      {name: "infiniband.cm.req.ext_transport", kind: kindHex, digits: 2, bits: 3, tshark: true},
	IBCMReqPrimLocallid:      {name: "infiniband.cm.req.prim_locallid", kind: kindUint, bits: 16, tshark: true},
	IBCMReqPrimRemotelid:     {name: "infiniband.cm.req.prim_remotelid", kind: kindUint, bits: 16, tshark: true},
	IBCMReqPrimLocalgid:      {name: "infiniband.cm.req.prim_localgid", kind: kindIPv6, tshark: true},
	IBCMReqPrimRemotegid:     {name: "infiniband.cm.req.prim_remotegid", kind: kindIPv6, tshark: true},
	IBCMReqPrimLocalgidIpv4:  {name: "infiniband.cm.req.prim_localgid_ipv4", kind: kindIPv4, tshark: true},
	IBCMReqPrimRemotegidIpv4: {name: "infiniband.cm.req.prim_remotegid_ipv4", kind: kindIPv4, tshark: true},
	IBCMReqPrimFlowlabel:     {name: "infiniband.cm.req.prim_flowlabel", kind: kindHex, digits: 8, bits: 20, tshark: true},
	IBCMReqPrimReserved0:     {name: "infiniband.cm.req.prim_reserved0", kind: kindHex, digits: 8, bits: 6, tshark: true},
	IBCMReqPrimPktrate:       {name: "infiniband.cm.req.prim_pktrate", kind: kindHex, digits: 8, bits: 6, tshark: true},
	IBCMReqPrimTfcclass:      {name: "infiniband.cm.req.prim_tfcclass", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBCMReqPrimHoplim:        {name: "infiniband.cm.req.prim_hoplim", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBCMReqPrimSl:            {name: "infiniband.cm.req.prim_sl", kind: kindHex, digits: 2, bits: 4, tshark: true},
	IBCMReqPrimSubnetlocal:   {name: "infiniband.cm.req.prim_subnetlocal", kind: kindHex, digits: 2, bits: 1, tshark: true},
	IBCMReqPrimReserved1:     {name: "infiniband.cm.req.prim_reserved1", kind: kindHex, digits: 2, bits: 3, tshark: true},
	IBCMReqPrimLocalacktout:  {name: "infiniband.cm.req.prim_localacktout", kind: kindHex, digits: 2, bits: 5, tshark: true},
	IBCMReqPrimReserved2:     {name: "infiniband.cm.req.prim_reserved2", kind: kindHex, digits: 2, bits: 3, tshark: true},
	IBCMReqAltLocallid:       {name: "infiniband.cm.req.alt_locallid", kind: kindUint, bits: 16, tshark: true},
	IBCMReqAltRemotelid:      {name: "infiniband.cm.req.alt_remotelid", kind: kindUint, bits: 16, tshark: true},
	IBCMReqAltLocalgid:       {name: "infiniband.cm.req.alt_localgid", kind: kindBytes, tshark: true},
	IBCMReqAltRemotegid:      {name: "infiniband.cm.req.alt_remotegid", kind: kindBytes, tshark: true},
	IBCMReqAltFlowlabel:      {name: "infiniband.cm.req.alt_flowlabel", kind: kindHex, digits: 8, bits: 20, tshark: true},
	IBCMReqAltReserved0:      {name: "infiniband.cm.req.alt_reserved0", kind: kindHex, digits: 8, bits: 6, tshark: true},
	IBCMReqAltPktrate:        {name: "infiniband.cm.req.alt_pktrate", kind: kindHex, digits: 8, bits: 6, tshark: true},
	IBCMReqAltTfcclass:       {name: "infiniband.cm.req.alt_tfcclass", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBCMReqAltHoplim:         {name: "infiniband.cm.req.alt_hoplim", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBCMReqAltSl:             {name: "infiniband.cm.req.alt_sl", kind: kindHex, digits: 2, bits: 4, tshark: true},
	IBCMReqAltSubnetlocal:    {name: "infiniband.cm.req.alt_subnetlocal", kind: kindHex, digits: 2, bits: 1, tshark: true},
	IBCMReqAltReserved1:      {name: "infiniband.cm.req.alt_reserved1", kind: kindHex, digits: 2, bits: 3, tshark: true},
	IBCMReqAltLocalacktout:   {name: "infiniband.cm.req.alt_localacktout", kind: kindHex, digits: 2, bits: 5, tshark: true},
	IBCMReqPrivate:           {name: "infiniband.cm.req.private", kind: kindBytes, tshark: true},
	IBCMReqIPCM:              {name: "infiniband.cm.req.ip_cm", kind: kindBytes, tshark: true},
	IBCMReqIPCMMajv:          {name: "infiniband.cm.req.ip_cm.majv", kind: kindHex, digits: 2, bits: 4, tshark: true},
	IBCMReqIPCMMinv:          {name: "infiniband.cm.req.ip_cm.minv", kind: kindHex, digits: 2, bits: 4, tshark: true},
	IBCMReqIPCMIpv:           {name: "infiniband.cm.req.ip_cm.ipv", kind: kindHex, digits: 2, bits: 4, tshark: true},
	IBCMReqIPCMReserved:      {name: "infiniband.cm.req.ip_cm.reserved", kind: kindHex, digits: 2, bits: 4, tshark: true},
	IBCMReqIPCMSport:         {name: "infiniband.cm.req.ip_cm.sport", kind: kindHex, digits: 4, bits: 16, tshark: true},
	IBCMReqIPCMSip6:          {name: "infiniband.cm.req.ip_cm.sip6", kind: kindIPv6, tshark: true},
	IBCMReqIPCMDip6:          {name: "infiniband.cm.req.ip_cm.dip6", kind: kindIPv6, tshark: true},
	IBCMReqIPCMSip4:          {name: "infiniband.cm.req.ip_cm.sip4", kind: kindIPv4, tshark: true},
	IBCMReqIPCMDip4:          {name: "infiniband.cm.req.ip_cm.dip4", kind: kindIPv4, tshark: true},
	IBCMReqIPCMPrivate:       {name: "infiniband.cm.req.ip_cm.private", kind: kindBytes, tshark: true},
	IBCMRepLocalCommID:       {name: "infiniband.cm.rep", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMRepRemotecommid:      {name: "infiniband.cm.rep.remotecommid", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMRepLocalqkey:         {name: "infiniband.cm.rep.localqkey", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMRepLocalqpn:          {name: "infiniband.cm.rep.localqpn", kind: kindHex, digits: 6, bits: 24, tshark: true},
	IBCMRepLocaleecn:         {name: "infiniband.cm.rep.localeecn", kind: kindHex, digits: 6, bits: 24, tshark: true},
	IBCMRepStartpsn:          {name: "infiniband.cm.rep.startpsn", kind: kindHex, digits: 6, bits: 24, tshark: true},
	IBCMRepRespres:           {name: "infiniband.cm.rep.respres", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBCMRepInitdepth:         {name: "infiniband.cm.rep.initdepth", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBCMRepTgtackdelay:       {name: "infiniband.cm.rep.tgtackdelay", kind: kindHex, digits: 2, bits: 5, tshark: true},
	IBCMRepFailoveracc:       {name: "infiniband.cm.rep.failoveracc", kind: kindHex, digits: 2, bits: 2, tshark: true},
	IBCMRepE2eflowctrl:       {name: "infiniband.cm.rep.e2eflowctrl", kind: kindHex, digits: 2, bits: 1, tshark: true},
	IBCMRepRnrretrcount:      {name: "infiniband.cm.rep.rnrretrcount", kind: kindHex, digits: 2, bits: 3, tshark: true},
	IBCMRepSrq:               {name: "infiniband.cm.rep.srq", kind: kindHex, digits: 2, bits: 1, tshark: true},
	IBCMRepReserved:          {name: "infiniband.cm.rep.reserved", kind: kindHex, digits: 2, bits: 4, tshark: true},
	IBCMRepLocalcaguid:       {name: "infiniband.cm.rep.localcaguid", kind: kindHex, digits: 16, bits: 64, tshark: true},
	IBCMRepPrivate:           {name: "infiniband.cm.rep.private", kind: kindBytes, tshark: true},
	IBCMRtuLocalcommid:       {name: "infiniband.cm.rtu.localcommid", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMRtuRemotecommid:      {name: "infiniband.cm.rtu.remotecommid", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMRtuPrivate:           {name: "infiniband.cm.rtu.private", kind: kindBytes, tshark: true},
	IBCMRejLocalcommid:       {name: "infiniband.cm.rej.localcommid", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMRejRemotecommid:      {name: "infiniband.cm.rej.remotecommid", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMRejMsgrej:            {name: "infiniband.cm.rej.msgrej", kind: kindHex, digits: 2, bits: 2, tshark: true},
	IBCMRejReserved0:         {name: "infiniband.cm.rej.reserved0", kind: kindHex, digits: 2, bits: 2, tshark: true},
	IBCMRejRejinfolen:        {name: "infiniband.cm.rej.rejinfolen", kind: kindHex, digits: 2, bits: 7, tshark: true},
	IBCMRejReserved1:         {name: "infiniband.cm.rej.reserved1", kind: kindHex, digits: 2, bits: 1, tshark: true},
	IBCMRejReason:            {name: "infiniband.cm.rej.reason", kind: kindHex, digits: 4, bits: 16, tshark: true},
	IBCMRejAri:               {name: "infiniband.cm.rej.ari", kind: kindBytes, tshark: true},
	IBCMRejPrivate:           {name: "infiniband.cm.rej.private", kind: kindBytes, tshark: true},
	IBCMDreqLocalcommid:      {name: "infiniband.cm.dreq.localcommid", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMDreqRemotecommid:     {name: "infiniband.cm.dreq.remotecommid", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMReqRemoteqpneecn:     {name: "infiniband.cm.req.remoteqpneecn", kind: kindHex, digits: 6, bits: 24, tshark: true},
	IBCMDreqPrivate:          {name: "infiniband.cm.dreq.private", kind: kindBytes, tshark: true},
	IBCMDrspLocalcommid:      {name: "infiniband.cm.drsp.localcommid", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMDrspRemotecommid:     {name: "infiniband.cm.drsp.remotecommid", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBCMDrspPrivate:          {name: "infiniband.cm.drsp.private", kind: kindBytes, tshark: true},
	IBSMPData:                {name: "infiniband.smplid.smpdata", kind: kindBytes, tshark: true},
	IBMAD:                    {name: "infiniband.mad", kind: kindBytes, tshark: true},
	IBMADBaseversion:         {name: "infiniband.mad.baseversion", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBMADMgmtclass:           {name: "infiniband.mad.mgmtclass", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBMADClassversion:        {name: "infiniband.mad.classversion", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBMADMethod:              {name: "infiniband.mad.method", kind: kindHex, digits: 2, bits: 8, tshark: true},
	IBMADStatus:              {name: "infiniband.mad.status", kind: kindHex, digits: 4, bits: 16, tshark: true},
	IBMADClassspecific:       {name: "infiniband.mad.classspecific", kind: kindHex, digits: 4, bits: 16, tshark: true},
	IBMADTransactionid:       {name: "infiniband.mad.transactionid", kind: kindHex, digits: 16, bits: 64, tshark: true},
	IBMADAttributeid:         {name: "infiniband.mad.attributeid", kind: kindHex, digits: 4, bits: 16, tshark: true},
	IBMADAttributemodifier:   {name: "infiniband.mad.attributemodifier", kind: kindHex, digits: 8, bits: 32, tshark: true},
	IBMADData:                {name: "infiniband.mad.data", kind: kindBytes, tshark: true},

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
