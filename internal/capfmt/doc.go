// Package capfmt decodes RoCEv2 capture files the way tshark 4.0.17 does,
// for "goroce cap": tshark's fields, display filters and output formats.
// It is the tshark emulation behind the command, not a library: programs
// read captures with the public package capture (and analyse them with
// capture/flow and capture/lint), which do not depend on it.
//
// # Pipeline
//
//	capture.Reader (pcap / pcapng / gzip)      →  capture.Frame
//	Decoder (tshark's dissectors, emulated)    →  Packet{Items, RoCE views}
//	Filter (tshark -Y syntax)                  →  match or skip
//	FieldsWriter / JSONWriter / TextWriter     →  tshark -T fields / json / text
//
// A Packet is a flat list of Items in tshark's tree order (depth first,
// with depths), which is the order tshark -T fields joins repeated fields
// in. Each Item is a Field (named by tshark: FieldByName) with an integer
// or byte-slice value. A Packet also keeps views of the outermost RoCEv2
// layer (IPHeader, UDPHeader, Transport) and the ICRC verdict, so tools can
// run goroce's own codecs (wire.Packet.Parse, rocev2.ComputeICRC) over the
// same bytes. Everything aliases the Frame's buffer: copy before the next
// Reader.Next. Decoder and the writers are single-goroutine values;
// a compiled Filter may be shared.
//
// # Fidelity
//
// -T fields output is byte-identical to tshark 4.0.17's for the fields of
// testdata/tshark/FIELDS on every capture in testdata (see FORMATS.md for
// the quirks this reproduces: the ICRC lost on short RC SENDs and on data
// that the SMC-R heuristic takes for an LLC message too long for it, "vendor"
// data for opcodes tshark does not know, duplicated ImmDt/IETH, the MAD
// path on QP 0/1, the heuristics list that reorders itself, and so on).
// The same holds for the layer-2 fields of testdata/tshark/FIELDS.l2: the
// 802.1Q tag (vlan.priority, vlan.dei, vlan.id, vlan.etype, vlan.len) and
// MAC Control (macc.opcode; 802.3x PAUSE macc.pause_time; PFC
// macc.cbfc.enbv, macc.cbfc.enbv.c0…c7, macc.cbfc.pause_time.c0…c7; the
// EPON MPCP timestamp and registration fields), plus ip.dsfield.dscp.
// tshark's behaviour is emulated down to where its dissectors throw, for
// the protocols on the way to RoCEv2: Ethernet, 802.1Q/802.1ad, Linux SLL
// and SLL2, raw IP, IPv4 (options included), IPv6 (extension headers),
// UDP, ICMP and ICMPv6 errors quoting a packet, and InfiniBand with the
// payload heuristics that change its fields (smc, smb_direct, lnet,
// RPC-over-RDMA with its SEND reassembly, EtherType encapsulation, EoIB).
//
// Known differences, all outside what RoCEv2 traffic carries:
//   - Subnet management and subnet administration MADs (classes 0x01,
//     0x81, 0x03) on QP 0/1: their attribute bodies are not decoded, so
//     the infiniband.reserved items inside them are missing. CM MADs
//     (infiniband.mad.*, infiniband.cm.*, testdata/tshark/FIELDS.cm) are
//     exact.
//   - nvme-rdma, iser and infiniband_sdp (which need a CM conversation with
//     their service IDs), fcoib, and the RPC layer behind an accepted
//     RPC-over-RDMA header are not emulated; a payload they would claim or
//     throw on can differ.
//   - IPv4 fragments are not reassembled (tshark dissects the datagram in
//     the last fragment); rxe sets DF.
//   - A UDP datagram is handed to InfiniBand when either port is 4791;
//     tshark would first try another dissector registered on a lower port.
//   - Conversations learned from CM exchanges (which change the RPC-over-RDMA
//     reassembly key) are not tracked.
//
// goroce's own fields are roce.icrc.status (good/bad) and
// roce.icrc.computed (the ICRC goroce computes, printed like
// infiniband.invariant.crc so the two compare as strings); "roce" is a
// filter alias of the "infiniband" protocol.
package capfmt
