// Package rocelayers is an opt-in gopacket adapter for RoCEv2: gopacket
// LayerTypes and DecodingLayers for the InfiniBand Base Transport Header,
// each extension header (RETH, AETH, ImmDt, IETH, DETH, AtomicETH,
// AtomicAckETH, FETH, the CNP's reserved bytes) and the payload with its pad
// and ICRC.
//
// Nothing is registered with gopacket until Register is called (no global
// registration at init): Register names the layer types, installs their decoders and binds
// UDP port 4791 to LayerTypeBTH, so gopacket.NewPacket and a
// DecodingLayerParser that starts at Ethernet or IP reach the BTH.
//
// Unlike most protocols, the headers after the BTH do not say what follows
// them: the BTH opcode does (IBA 9.3, the opcode table in package bth). The
// layers of one packet are therefore decoded together, as a Transport whose
// extension-header layers are linked to its BTH:
//
//	rocelayers.Register()
//	var (
//		eth layers.Ethernet
//		ip4 layers.IPv4
//		udp layers.UDP
//		t   rocelayers.Transport
//	)
//	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
//		append([]gopacket.DecodingLayer{&eth, &ip4, &udp}, t.DecodingLayers()...)...)
//
// The layers hold views into the decoded buffer, as gopacket's own layers
// do. They do not check the ICRC, which needs the IP and UDP headers; use
// rocev2.ComputeICRC with BTH.Transport, or parse with rocev2.Packet, which the
// adapter follows for every validity rule.
package rocelayers
